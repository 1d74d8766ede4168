"""psijax relax: the noise-aware optimiser on model surfaces (exact and noisy forces), the
relaxation's cycles with stand-in training and evaluation (stopping, resume, outputs), one
real relaxation of H2 with a tiny network, and bad input."""

from __future__ import annotations

import csv
import dataclasses
import json
import zlib
from pathlib import Path

import numpy as np
import pytest

from psijax import curves
from psijax.cli.main import main
from psijax.curves import geometry, model_hessian, structure
from psijax.curves.relax import RelaxSettings
from psijax.errors import InputError
from psijax.system import parse
from psijax.training.job import make_config

# --- model surfaces ------------------------------------------------------------------------


def morse(coords: np.ndarray, depth=0.17, width=1.0, length=1.4) -> float:
    r = np.linalg.norm(coords[1] - coords[0])
    return depth * (1 - np.exp(-width * (r - length))) ** 2


WATER_ANGLE = np.deg2rad(104.5)


def water(coords: np.ndarray, length=1.81, angle=WATER_ANGLE) -> float:
    """Two Morse O-H bonds and a harmonic bend."""
    u, v = coords[1] - coords[0], coords[2] - coords[0]
    theta = np.arccos(u @ v / np.linalg.norm(u) / np.linalg.norm(v))
    return (morse(coords[[0, 1]], 0.2, 1.2, length) + morse(coords[[0, 2]], 0.2, 1.2, length)
            + 0.5 * 0.16 * (theta - angle) ** 2)  # fmt: skip


def forces_of(energy, coords: np.ndarray, h: float = 1e-5) -> np.ndarray:
    flat = coords.reshape(-1)
    out = np.zeros_like(flat)
    for i in range(flat.size):
        plus, minus = flat.copy(), flat.copy()
        plus[i] += h
        minus[i] -= h
        change = energy(plus.reshape(coords.shape)) - energy(minus.reshape(coords.shape))
        out[i] = -change / (2 * h)
    return out.reshape(coords.shape)


def measured(energy, coords, noise: float, rng) -> geometry.Forces:
    """Forces with Gaussian noise of ``noise`` per component, as 400 'steps'."""
    steps = forces_of(energy, coords) + rng.normal(0, noise * 20, (400, *coords.shape))
    return geometry.project(coords, steps)


def test_rigid_modes_and_projection():
    line = np.array([[0, 0, 0], [0, 0, 1.4], [0, 0, 3.0]], float)
    bent = np.array([[0, 0, 0], [1.8, 0, 0], [-0.45, 1.75, 0]])
    assert len(geometry.rigid_modes(line)) == 5 and geometry.internal_dimension(line) == 4
    assert len(geometry.rigid_modes(bent)) == 6 and geometry.internal_dimension(bent) == 3
    p = geometry.projector(bent)
    np.testing.assert_allclose(p @ p, p, atol=1e-12)
    push = np.tile([0.3, -0.2, 0.1], 3)  # a pure translation has no internal part
    np.testing.assert_allclose(p @ push, 0, atol=1e-12)
    # the forces of a rotation-invariant energy are already internal
    f = forces_of(water, bent).reshape(-1)
    np.testing.assert_allclose(p @ f, f, atol=1e-8)


def test_a_noisy_atoms_force_comes_from_the_others_by_translation_invariance():
    """The forces sum to zero; with atom 0's estimator 30x noisier than the others' (an
    ECP atom beside hydrogens), the projection takes atom 0's force from theirs: the
    internal forces stay unbiased and their error bars shrink several-fold against the
    plain orthogonal projection; with equal noise it is that projection."""
    rng = np.random.default_rng(3)
    x = np.array([[0, 0, 0], [2.1, 0.1, 0], [-0.2, 1.6, 0.2]])
    exact = forces_of(water, x)
    scale = np.array([30.0, 1.0, 1.0])[None, :, None] * 0.01
    steps = exact + rng.normal(size=(2000, 3, 3)) * scale
    weighted = geometry.project(x, steps)
    p = geometry.projector(x)
    plain = steps.reshape(2000, -1) @ p
    plain_errors = plain.std(axis=0) / np.sqrt(2000)
    assert np.all(np.abs(weighted.values - exact) <= 4 * weighted.errors + 1e-12)
    assert np.max(weighted.errors) < np.max(plain_errors) / 5
    even = exact + rng.normal(size=(2000, 3, 3)) * 0.01
    np.testing.assert_allclose(
        geometry.project(x, even).values.reshape(-1), even.mean(0).reshape(-1) @ p, atol=1e-3
    )


def test_model_hessian_steps_a_stretched_bond_near_its_minimum():
    """Schlegel's anharmonic stretch constant: one Newton step with the forces psijax
    measures on H2 at 1.0 and 2.0 bohr (0.321 and -0.090 Ha/bohr along the bond, pushing
    the atoms apart and together) lands within 0.05 bohr of its 1.401."""
    for start, push in ((1.0, 0.321), (2.0, -0.090)):
        x = np.array([[0, 0, 0], [0, 0, start]])
        forces = np.array([[0, 0, -push], [0, 0, push]])
        history = [geometry.Forces(x, forces, np.full((2, 3), 1e-3))]
        new = geometry.next_geometry(history, ["H", "H"], trust=1.0)
        assert abs(np.linalg.norm(new[1] - new[0]) - 1.401) < 0.05, (start, new)
    h = model_hessian.model_hessian(["H", "H"], np.array([[0, 0, 0], [0, 0, 1.4]]))
    assert np.linalg.eigvalsh(h)[-1] == pytest.approx(2 * 1.734 / 1.644**3 + 0.02, rel=1e-6)


def test_bonds_join_fragments():
    # two H2 molecules 6 bohr apart: the bonds within each, and one joining them
    x = np.array([[0, 0, 0], [0, 0, 1.4], [6, 0, 0], [6, 0, 1.4]], float)
    assert sorted(model_hessian.bonds(["H"] * 4, x)) == [(0, 1), (0, 2), (2, 3)]


@pytest.mark.parametrize("noise", [0.0, 3e-4])
def test_optimiser_converges_on_a_triatomic(noise):
    rng = np.random.default_rng(1)
    x = np.array([[0, 0, 0], [2.1, 0.1, 0], [-0.2, 1.6, 0.2]])  # distorted water
    history = []
    for _ in range(15):
        history.append(measured(water, x, noise, rng))
        done = (
            history[-1].zero_within_errors(2e-3)
            if noise
            else (np.abs(history[-1].values).max() < 1e-6)
        )
        if done:
            break
        x = geometry.next_geometry(history, ["O", "H", "H"])
    assert len(history) <= 10
    r1, r2 = np.linalg.norm(x[1] - x[0]), np.linalg.norm(x[2] - x[0])
    angle = np.degrees(np.arccos((x[1] - x[0]) @ (x[2] - x[0]) / r1 / r2))
    tolerance = 2e-3 if noise else 1e-4
    assert abs(r1 - 1.81) < 5 * tolerance and abs(r2 - 1.81) < 5 * tolerance
    assert abs(angle - 104.5) < (1.0 if noise else 0.01)


def test_noise_gates_the_secant_update():
    """A step whose force change is buried in the error bars leaves the model alone."""
    x0 = np.array([[0, 0, 0], [0, 0, 1.40]])
    x1 = np.array([[0, 0, 0], [0, 0, 1.41]])
    exact = [geometry.Forces(x, forces_of(morse, x), np.full((2, 3), 1e-9)) for x in (x0, x1)]
    noisy = [dataclasses.replace(f, errors=np.full((2, 3), 0.05)) for f in exact]
    model = model_hessian.model_hessian(["H", "H"], x1)
    p = geometry.projector(x1)
    np.testing.assert_allclose(geometry.hessian(noisy, ["H", "H"]), p @ model @ p)
    updated = geometry.hessian(exact, ["H", "H"])
    secant = 2 * 0.17 * 2 * 1.0**2  # d2E/dR2 of the Morse curve at its minimum, x2 Cartesian
    assert np.linalg.eigvalsh(updated)[-1] == pytest.approx(secant, rel=0.05)


def test_zero_within_errors():
    x = np.array([[0, 0, 0], [0, 0, 1.4]])
    f = lambda v, e: geometry.Forces(x, np.array(v, float), np.array(e, float))
    small = [[0, 0, 0.001], [0, 0, -0.001]]
    assert f(small, np.full((2, 3), 0.0008)).zero_within_errors(1e-3)
    assert not f(small, np.full((2, 3), 0.0004)).zero_within_errors(1e-3)  # 2.5 bars off
    assert not f(small, np.full((2, 3), 0.002)).zero_within_errors(1e-3)  # bars too wide
    assert f(small, np.full((2, 3), 0.0002)).clearly_nonzero()


def test_structure_names_bonds_and_angles():
    a = WATER_ANGLE
    x = np.array([[0, 0, 0], [1.81, 0, 0], [1.81 * np.cos(a), 1.81 * np.sin(a), 0]])
    values = structure.coordinates(["O", "H", "H"], x)
    assert list(values) == ["O1-H2", "O1-H3", "H2-O1-H3"]  # H-H is no bond
    assert values["O1-H2"] == pytest.approx(1.81 / model_hessian.BOHR_PER_ANGSTROM)
    assert values["H2-O1-H3"] == pytest.approx(104.5)


def test_structure_error_bars_follow_from_the_forces_and_the_curvature():
    """H2 with the model Hessian alone: the bond's curvature is 2k + FLOOR along the
    normalised stretch, so a force error sigma per component puts the minimum's bond length
    sqrt(2) sigma / (2k + FLOOR) bohr either way; the value is the last geometry's."""
    x = np.array([[0, 0, 0], [0, 0, 1.4]])
    sigma = 1e-3
    forces = geometry.Forces(x, np.zeros((2, 3)), np.full((2, 3), sigma))
    ((name, (value, error)),) = structure.with_errors([forces], ["H", "H"]).items()
    k = model_hessian.stretch_constant("H", "H", 1.4)
    expected = np.sqrt(2) * sigma / (2 * k + model_hessian.FLOOR)
    assert name == "H1-H2" and value == pytest.approx(1.4 / model_hessian.BOHR_PER_ANGSTROM)
    assert error * model_hessian.BOHR_PER_ANGSTROM == pytest.approx(expected, rel=0.05)
    wider = dataclasses.replace(forces, errors=forces.errors * 3)
    assert structure.with_errors([wider], ["H", "H"])["H1-H2"][1] == pytest.approx(3 * error)


# --- the relaxation's cycles, with stand-in training and evaluation -------------------------


class StandIn:
    """``train`` and ``evaluate`` for ``relax`` on a model surface: the files they read."""

    def __init__(self, energy, noise=2e-3, fail_at: int | None = None):
        self.energy, self.noise, self.fail_at = energy, noise, fail_at
        self.trained: list[tuple[str, int]] = []
        self.evaluated: list[tuple[str, int]] = []

    def train(self, config, progress=True, resume=False):
        run = Path(config.out)
        if self.fail_at is not None and run.name == f"cycle-{self.fail_at:02d}":
            self.fail_at = None
            raise KeyboardInterrupt
        run.mkdir(parents=True, exist_ok=True)
        steps = config.steps or 1500
        (run / "config.json").write_text(json.dumps({"system": config.system}))
        (run / "summary.json").write_text(json.dumps({"steps_run": steps, "seconds": 0.5}))
        self.trained.append((run.name, steps))

    def evaluate(self, run, steps, observables, burn_in, resume, force, progress, until):
        """Steps of noisy exact forces until ``until`` says enough (checked every 10)."""
        run = Path(run)
        coords = np.asarray(parse.for_config(
            make_config(**json.loads((run / "config.json").read_text()), unit="bohr")
        ).coords)  # fmt: skip
        rng = np.random.default_rng(zlib.crc32(run.name.encode()))
        exact = forces_of(self.energy, coords).reshape(-1)
        names = [f"force_{a}_{c}" for a in range(len(coords)) for c in "xyz"]
        rows: list[dict] = []
        while len(rows) < steps:
            for value in exact + rng.normal(0, self.noise, (10, exact.size)):
                rows.append(dict(zip(names, value, strict=True)))
            if until(rows) is not None:
                break
        out = run / "eval"
        out.mkdir(exist_ok=True)
        with open(out / "metrics.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["step", *names])
            writer.writerows([[i, *row.values()] for i, row in enumerate(rows)])
        estimate = {"mean": self.energy(coords), "error": 1e-5, "n_samples": len(rows),
                    "block_size": 1, "autocorrelation_time": 0.5}  # fmt: skip
        (out / "summary.json").write_text(json.dumps({
            "status": "finished", "steps": len(rows), "observables": ["energy", observables],
            "estimates": {"energy": estimate}, "seconds": 0.25,
        }))  # fmt: skip
        self.evaluated.append((run.name, len(rows)))


def _relax(tmp_path, stand_in, start=1.0, **settings):
    config = make_config(system=f"H 0 0 0; H 0 0 {start}", out=str(tmp_path / "r"))
    return curves.relax(config, tmp_path / "r", RelaxSettings(**settings), progress=False,
                        train=stand_in.train, evaluate=stand_in.evaluate)  # fmt: skip


def test_relaxation_converges_and_writes_its_outputs(tmp_path):
    stand_in = StandIn(morse)
    result = _relax(tmp_path, stand_in)
    assert result.converged
    length = np.linalg.norm(np.subtract(*result.molecule.coords))
    assert abs(length - 1.4) < 0.005
    last = result.cycles[-1]
    assert last.forces.zero_within_errors(1e-3) and np.all(last.forces.errors <= 1e-3)
    for earlier in result.cycles[:-1]:
        assert not earlier.forces.zero_within_errors(1e-3)
    # cycle 0 trains a single run's steps, later ones fewer
    assert stand_in.trained[0][1] == 1500 and all(s <= 300 for _, s in stand_in.trained[1:])
    out = result.out
    rows = list(csv.DictReader((out / "relax.csv").read_text().splitlines()))
    assert [int(r["cycle"]) for r in rows] == list(range(len(result.cycles)))
    frames = curves.frames(out / "trajectory.xyz")  # extended XYZ that a scan reads back
    assert len(frames) == len(result.cycles)
    final = parse.from_xyz(out / "final.xyz")
    np.testing.assert_allclose(final.coords, result.molecule.coords, atol=1e-6)
    assert (out / "relax.png").stat().st_size > 0
    assert "forces:R:3" in (out / "trajectory.xyz").read_text().splitlines()[1]


def test_the_evaluation_runs_as_long_as_the_forces_need(tmp_path):
    """Near the minimum the forces are measured to the tolerance (many steps) rather than
    stepped on noise; far from it, to a fifth of their size (few steps)."""
    near = StandIn(morse, noise=0.03)
    result = _relax(tmp_path / "near", near, start=1.4)
    assert result.converged and len(result.cycles) <= 2
    assert near.evaluated[0][1] > 300  # sigma = 0.03 / sqrt(2 n) <= 1e-3 needs n >= 450
    far = StandIn(morse, noise=0.03)
    _relax(tmp_path / "far", far, start=2.2, max_cycles=1)
    assert far.evaluated[0][1] == 100  # forces of ~0.1 Ha/bohr: known to 20% at once


def test_relaxation_stops_at_the_cycle_limit(tmp_path):
    result = _relax(tmp_path, StandIn(morse), start=2.6, max_cycles=2)
    assert not result.converged and len(result.cycles) == 2


def test_relaxation_resumes_cycle_by_cycle(tmp_path):
    whole = _relax(tmp_path / "a", StandIn(morse))
    stand_in = StandIn(morse, fail_at=2)
    with pytest.raises(KeyboardInterrupt):
        _relax(tmp_path / "b", stand_in)
    assert [name for name, _ in stand_in.trained] == ["cycle-00", "cycle-01"]
    stand_in.trained.clear()
    again = _relax(tmp_path / "b", stand_in)
    assert stand_in.trained[0][0] == "cycle-02"  # the finished cycles are read, not redone
    assert [c.molecule for c in again.cycles] == [c.molecule for c in whole.cycles]
    with pytest.raises(InputError, match="holds a relaxation of other points or settings"):
        _relax(tmp_path / "b", stand_in, max_cycles=3)


def test_a_relaxation_started_before_a_config_key_existed_continues(tmp_path):
    """relax.json written by a psijax whose Config lacked a key (its default now) is the
    same relaxation."""
    first = _relax(tmp_path, StandIn(morse), max_cycles=2)
    manifest = json.loads((tmp_path / "r" / "relax.json").read_text())
    del manifest["config"]["ecp_soft_core"]  # a key with its default value
    (tmp_path / "r" / "relax.json").write_text(json.dumps(manifest))
    stand_in = StandIn(morse)
    again = _relax(tmp_path, stand_in, max_cycles=2)
    assert stand_in.trained == [] and len(again.cycles) == len(first.cycles)


# --- a real relaxation and the command ------------------------------------------------------

TINY = ["--layers", "8x4", "--determinants", "2", "--walkers", "64", "--pretrain-steps", "5",
        "--steps", "30", "--checkpoint-every", "1000"]  # fmt: skip


def test_relax_command_runs_and_resumes(tmp_path, capsys):
    out = tmp_path / "h2"
    argv = ["relax", "--system", "H 0 0 0; H 0 0 1.2", "--out", str(out), "--max-cycles", "2",
            "--cycle-steps", "10", "--force-tolerance", "0.05", "--quiet", *TINY]  # fmt: skip
    code = main(argv)
    printed = capsys.readouterr().out
    assert code in (0, 1) and "final.xyz" in printed
    assert "structure   H1-H2 " in printed and " A" in printed  # the bond with its error bar
    assert sorted(p.name for p in out.glob("cycle-*")) in (["cycle-00"], ["cycle-00", "cycle-01"])
    for name in ("relax.csv", "trajectory.xyz", "relax.png", "final.xyz", "relax.json"):
        assert (out / name).is_file(), name
    cycle = json.loads((out / "cycle-00" / "eval" / "summary.json").read_text())
    assert "forces" in cycle["observables"] and cycle["burn_in_steps"] == 0
    assert cycle["reached_target"] and cycle["steps"] < 4000  # ended by the forces' rule
    before = (out / "relax.csv").read_text()
    assert main(argv) == code  # the same command again reads every finished cycle
    assert (out / "relax.csv").read_text() == before


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--system", "He"], "single atom"),
        (["--system", "H2", "--states", "2"], "drop --states"),
        (["--system", "H 0 0 0; H 0 0 0.05"], "on top of each other"),
        (["--system", "H2", "--max-cycles", "0"], "max_cycles"),
        (["--system", "H2", "--force-tolerance", "-1"], "force_tolerance"),
        (["--from", "no-such-run"], "not a directory"),
    ],
)
def test_bad_input_is_refused_and_writes_nothing(tmp_path, capsys, argv, message):
    out = tmp_path / "r"
    assert main(["relax", *argv, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()
