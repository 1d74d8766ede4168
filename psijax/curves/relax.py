"""A geometry optimisation: cycles of training, force evaluation and a step of the nuclei,
until the forces vanish within their error bars.

Cycle 0 trains as a single run would (the defaults sized from the molecule; from another
run's wavefunction with ``init_from``, as briefly as a later cycle). Every later cycle
starts from the wavefunction of the cycle before with the nuclei moved
(``psijax.training.warm``) and trains ``cycle_steps`` (a fifth of a single run's steps by
default) times the share of the trust radius its nuclei moved, at least ``MIN_CYCLE_STEPS``:
the nuclei move little from one cycle to the next, and less as the relaxation converges.
Each cycle then evaluates the forces (the zero-variance Hellmann-Feynman estimator plus the
Pulay term, on an ECP nucleus combined with the space warp: ``psijax.estimators.forces``)
with frozen parameters, projected on the internal space (``psijax.curves.geometry``), until
they are measured well enough (``enough``): to ``force_tolerance`` near the minimum, to a
fifth of their size far from it. The relaxation stops when every internal force component is
within two error bars of zero with error bars at most ``force_tolerance``, or after
``max_cycles``; otherwise the nuclei take the noise-aware BFGS step of
``psijax.curves.geometry``.

Each cycle is a run directory (``OUT/cycle-NN`` with its evaluation in ``eval/``), so a
relaxation that stopped resumes cycle by cycle: the steps are replayed from the files and
the first unfinished cycle continues. ``OUT/relax.csv``, ``OUT/trajectory.xyz`` (extended
XYZ: geometry, energy and forces per cycle), ``OUT/relax.png`` and ``OUT/final.xyz`` (the
last geometry, which ``--system`` reads) hold the result.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from psijax import config as config_lib
from psijax import registry, system
from psijax.curves import geometry, points, structure
from psijax.curves.claim import claim, write_rows
from psijax.curves.points import ANGSTROM
from psijax.errors import InputError
from psijax.estimators.forces import control_variate
from psijax.rundir.eval_files import read_rows
from psijax.rundir.train_files import atomic_write
from psijax.statistics import Estimate
from psijax.system import sizing
from psijax.training import warm

MANIFEST = "relax.json"
CYCLE_SHARE = 5  # later cycles train a single run's steps / CYCLE_SHARE
MIN_CYCLE_STEPS = 100
MIN_EVAL_STEPS = 100  # a force evaluation's first check (``enough``)
MAX_EVAL_STEPS = 4000  # and its most steps
MEASURED_SHARE = 0.2  # error bars this share of the largest force suffice for a step


@dataclasses.dataclass(frozen=True)
class RelaxSettings:
    """What a relaxation does beyond training (module docstring)."""

    max_cycles: int = 12
    force_tolerance: float = 1e-3  # Ha/bohr: the error bar at which "zero" is believed
    trust_radius: float = geometry.TRUST_RADIUS  # bohr: the most a nucleus moves per cycle
    cycle_steps: int | None = None  # None: a single run's steps / CYCLE_SHARE

    def __post_init__(self) -> None:
        for name, example in (("force_tolerance", 1e-3), ("trust_radius", 0.2)):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not (math.isfinite(value) and value > 0)
            ):
                raise InputError(f"{name}={value!r} must be a positive number; give e.g. {example}")
        for name, low, example in (("max_cycles", 1, 12), ("cycle_steps", 2, 300)):
            value = getattr(self, name)
            if value is None and name == "cycle_steps":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InputError(
                    f"{name}={value!r} must be a whole number >= {low}; give e.g. {example}"
                )


@dataclasses.dataclass(frozen=True)
class Cycle:
    index: int
    molecule: system.Molecule
    energy: Estimate  # the evaluation's, with frozen parameters
    forces: geometry.Forces
    train_steps: int
    eval_steps: int
    seconds: float  # wall time of its training and evaluation
    run: Path


@dataclasses.dataclass(frozen=True)
class RelaxResult:
    cycles: list[Cycle]
    out: Path
    converged: bool  # the forces vanished within their error bars

    @property
    def molecule(self) -> system.Molecule:
        return self.cycles[-1].molecule

    @property
    def energy(self) -> Estimate:
        return self.cycles[-1].energy

    @property
    def steps(self) -> int:
        return sum(c.train_steps + c.eval_steps for c in self.cycles)

    @property
    def structure(self) -> dict[str, tuple[float, float]]:
        """The last geometry's bond lengths (angstrom) and angles (degrees), each with its
        error bar (``psijax.curves.structure``)."""
        history = [c.forces for c in self.cycles]
        return structure.with_errors(history, self.molecule.symbols)

    @property
    def seconds(self) -> float:
        return sum(c.seconds for c in self.cycles)


def check(molecule: system.Molecule, config: config_lib.Config) -> None:
    """``InputError`` for what cannot be relaxed, before anything is written."""
    if getattr(molecule, "lattice", None) is not None and not molecule.n_atoms:
        raise InputError(
            "a relaxation moves nuclei and the electron gas has none; train it with psijax train"
        )
    if getattr(molecule, "lattice", None) is not None:
        raise InputError(
            "a crystal's forces are not built, so it cannot be relaxed; train it at each "
            "geometry with psijax train"
        )
    if molecule.n_atoms < 2:
        raise InputError(
            f"{molecule.symbols[0]} is a single atom: it has no geometry to relax; give a "
            "molecule of two or more atoms"
        )
    points.check_apart(np.asarray(molecule.coords), molecule.symbols, "the molecule")
    if config.states != 1:
        raise InputError(
            "a relaxation follows the ground state's forces; drop --states (forces of "
            "several states are not evaluated)"
        )
    registry.eigenstates(config).check(molecule, config)
    if config.init_from:
        warm.check(config.init_from, molecule, sizing.sized(config, molecule))


def relax(
    config: config_lib.Config,
    out: str | Path,
    settings: RelaxSettings | None = None,
    *,
    progress: bool = True,
    force: bool = False,
    train: Callable | None = None,
    evaluate: Callable | None = None,
) -> RelaxResult:
    """Relax ``config``'s molecule (module docstring). ``force`` starts over in ``out``;
    otherwise a relaxation there with the same start and settings continues, anything
    else is refused."""
    if train is None:
        from psijax.training.job import train
    if evaluate is None:
        from psijax.evaluation.job import evaluate
    settings = settings or RelaxSettings()
    molecule = system.for_config(config)
    check(molecule, config)
    out = Path(out)
    single_steps = sizing.sized(config, molecule).steps
    cycle_steps = settings.cycle_steps or max(MIN_CYCLE_STEPS, single_steps // CYCLE_SHARE)
    manifest = {
        "start": molecule.atom_string(),
        "config": config_lib.to_dict(dataclasses.replace(config, out=str(out))),
        "settings": dataclasses.asdict(settings),
    }
    claim(out, MANIFEST, manifest, force, "relaxation")
    coords = np.asarray(molecule.coords, np.float64)
    cycles: list[Cycle] = []
    history: list[geometry.Forces] = []
    moved = settings.trust_radius
    for k in range(settings.max_cycles):
        run = out / f"cycle-{k:02d}"
        here = dataclasses.replace(molecule, coords=tuple(map(tuple, coords)))
        point = points.config_at(config, here, run)
        if k or config.init_from:
            before = str(out / f"cycle-{k - 1:02d}") if k else config.init_from
            share = moved / settings.trust_radius if k else 1.0
            steps = max(MIN_CYCLE_STEPS, math.ceil(cycle_steps * min(share, 1.0)))
            point = dataclasses.replace(point, init_from=before, steps=steps,
                                        eval_fraction=0.5, target_error=None)  # fmt: skip
        started = time.perf_counter()
        if not (run / "summary.json").is_file():
            train(point, progress=progress, resume=(run / "config.json").is_file())
        forces, n = _evaluate(run, coords, settings.force_tolerance, evaluate, progress)
        cycles.append(_cycle(k, here, forces, run, n, time.perf_counter() - started))
        _write(out, cycles, settings)
        converged = forces.zero_within_errors(settings.force_tolerance)
        if progress:
            largest, error = forces.largest
            print(f"relax: cycle {k}: energy {cycles[-1].energy}, largest force "
                  f"{largest:.4f} +- {error:.4f} Ha/bohr", flush=True)  # fmt: skip
        if converged:
            return RelaxResult(cycles, out, True)
        history.append(forces)
        previous = coords
        coords = geometry.next_geometry(history, molecule.symbols, trust=settings.trust_radius)
        moved = float(np.max(np.linalg.norm(coords - previous, axis=-1)))
    return RelaxResult(cycles, out, False)


def _evaluate(run: Path, coords, tolerance: float, evaluate, progress: bool):
    """The forces of ``run``'s wavefunction, evaluated until ``enough`` (an evaluation
    there that stopped is continued, a finished one read), and the steps taken."""
    summary = run / "eval" / "summary.json"
    done = json.loads(summary.read_text()) if summary.is_file() else None
    if done is None or done.get("status") != "finished":
        resume = done is not None and "forces" in done.get("observables", ())
        evaluate(run, steps=MAX_EVAL_STEPS, observables="forces", burn_in=0, resume=resume,
                 force=not resume, progress=progress,
                 until=lambda rows: enough(coords, rows, tolerance))  # fmt: skip
    rows = read_rows(run / "eval" / "metrics.csv")
    return geometry.project(coords, _series(rows, len(coords))), len(rows)


def enough(coords, rows: list[dict], tolerance: float) -> str | None:
    """Why the forces of ``rows`` (evaluation steps) are measured well enough for the
    relaxation's next move, or None: every internal component's error bar at most
    ``tolerance`` (enough to call them zero), or at most ``MEASURED_SHARE`` of the largest
    force (enough to step on; more steps would not change where)."""
    if len(rows) < MIN_EVAL_STEPS:
        return None
    forces = geometry.project(coords, _series(rows, len(coords)))
    widest = float(np.max(forces.errors))
    if widest <= tolerance:
        return f"every force's error bar is below {tolerance:g} Ha/bohr"
    if widest <= MEASURED_SHARE * float(np.max(np.abs(forces.values))):
        return f"the forces are measured to {MEASURED_SHARE:.0%} of the largest"
    return None


def _series(rows: list[dict], n_atoms: int) -> np.ndarray:
    """``[steps, atoms, 3]``: each step's mean force on every nucleus; on a nucleus with
    an ECP, the least-variance combination with its space-warp estimate."""
    series = np.array([[[r[f"force_{a}_{c}"] for c in "xyz"] for a in range(n_atoms)]
                       for r in rows], np.float64)  # fmt: skip
    for a in range(n_atoms):
        for k, c in enumerate("xyz"):
            if rows and f"force_warp_{a}_{c}" in rows[0]:
                warp = np.array([r[f"force_warp_{a}_{c}"] for r in rows], np.float64)
                series[:, a, k] = control_variate(series[:, a, k], warp)[0]
    return series


def _cycle(k: int, molecule, forces, run: Path, eval_steps: int, seconds: float) -> Cycle:
    trained = json.loads((run / "summary.json").read_text())
    evaluated = json.loads((run / "eval" / "summary.json").read_text())
    e = evaluated["estimates"]["energy"]
    energy = Estimate(e["mean"], e["error"], e["n_samples"], e["block_size"],
                      max(e["n_samples"] // max(e["block_size"], 1), 1),
                      e["autocorrelation_time"])  # fmt: skip
    times = run / "cycle.json"  # the wall time of its first session (a resumed one adds)
    if times.is_file():
        seconds = json.loads(times.read_text())["seconds"]
    else:
        seconds = max(seconds, trained["seconds"] + evaluated["seconds"])
        atomic_write(times, json.dumps({"seconds": seconds}))
    return Cycle(k, molecule, energy, forces, int(trained["steps_run"]), eval_steps, seconds, run)


def _write(out: Path, cycles: list[Cycle], settings: RelaxSettings) -> None:
    """relax.csv, trajectory.xyz, final.xyz and relax.png."""
    rows = []
    for c in cycles:
        largest, error = c.forces.largest
        previous = cycles[c.index - 1].forces.coords if c.index else c.forces.coords
        moved = float(np.max(np.linalg.norm(c.forces.coords - previous, axis=-1)))
        rows.append({
            "cycle": c.index, "energy": c.energy.mean, "error": c.energy.error,
            "max_force": largest, "max_force_error": error, "moved": moved,
            "train_steps": c.train_steps, "eval_steps": c.eval_steps,
            "seconds": round(c.seconds, 2), "run": c.run.name,
        })  # fmt: skip
    write_rows(out / "relax.csv", rows)
    atomic_write(out / "trajectory.xyz", "".join(_frame(c) for c in cycles))
    last = cycles[-1]
    atomic_write(out / "final.xyz", xyz(last.molecule, f"psijax relax: cycle {last.index}, "
                                        f"energy {last.energy} Ha"))  # fmt: skip
    plot(out / "relax.png", cycles, settings.force_tolerance)


def xyz(molecule: system.Molecule, comment: str) -> str:
    """A standard .xyz frame (angstrom)."""
    lines = [str(molecule.n_atoms), comment.replace("\n", " ")]
    for symbol, at in zip(molecule.symbols, molecule.coords, strict=True):
        lines.append(f"{symbol:2s} " + " ".join(f"{x / ANGSTROM:14.8f}" for x in at))
    return "\n".join(lines) + "\n"


def _frame(c: Cycle) -> str:
    """One extended-XYZ frame: positions in angstrom, forces in Ha/bohr, energy in Ha."""
    comment = (
        f'Properties=species:S:1:pos:R:3:forces:R:3 energy={c.energy.mean:.8f} '
        f'energy_error={c.energy.error:.2e} cycle={c.index} '
        f'units="positions angstrom, energy Ha, forces Ha/bohr"'
    )  # fmt: skip
    lines = [str(c.molecule.n_atoms), comment]
    for symbol, at, f in zip(c.molecule.symbols, c.molecule.coords, c.forces.values,
                             strict=True):  # fmt: skip
        pos = " ".join(f"{x / ANGSTROM:14.8f}" for x in at)
        lines.append(f"{symbol:2s} {pos} " + " ".join(f"{x:12.6f}" for x in f))
    return "\n".join(lines) + "\n"


def plot(path: Path, cycles: list[Cycle], tolerance: float) -> None:
    """The energy and the largest force against the cycle, with error bars."""
    from psijax.rundir.plots import new_figure

    x = [c.index for c in cycles]
    fig, (top, bottom) = new_figure((6.5, 5.6), 2, sharex=True)
    top.errorbar(x, [c.energy.mean for c in cycles], yerr=[c.energy.error for c in cycles],
                 marker="o", ms=4, capsize=3, lw=1)  # fmt: skip
    top.set_ylabel("energy (Ha)")
    largest = [c.forces.largest for c in cycles]
    bottom.errorbar(x, [f for f, _ in largest], yerr=[e for _, e in largest], marker="o",
                    ms=4, capsize=3, lw=1, label="largest force")  # fmt: skip
    bottom.axhline(2 * tolerance, color="k", lw=0.8, ls="--", label="2 x force tolerance")
    bottom.set_yscale("symlog", linthresh=tolerance)
    bottom.set_ylabel("force (Ha/bohr)")
    bottom.set_xlabel("cycle")
    bottom.legend(fontsize=8)
    top.set_title(f"{len(cycles)} cycles, "
                  f"{sum(c.train_steps + c.eval_steps for c in cycles)} steps")  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)
