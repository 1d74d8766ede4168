"""The electron gas at a twist: complex psi end to end. The twisted shells and Hartree-Fock
energy, the Bloch condition and antisymmetry of the determinant and the network, the
complex local energy (exact for the plane-wave determinant, its imaginary part zero), the
VMC gradient of a complex psi against the derivative of the energy computed by quadrature,
the step's jacobian rows against that gradient, and a run that trains, resumes, evaluates
and loads."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import psijax
from psijax import config as config_lib
from psijax import laplacian, registry
from psijax.errors import InputError
from psijax.hamiltonian import Hamiltonian, Kinetic
from psijax.hamiltonian.ewald import PeriodicCoulomb
from psijax.optim import jacobian as jacobian_lib
from psijax.optim.gradient import (
    energy_stats,
    make_energy_loss,
    vmc_weights,
    vmc_weights_imaginary,
)
from psijax.system import ElectronGas, closed_shells
from psijax.system.electron_gas import parse_twist
from psijax.types import IMAGINARY

from close import assert_energies_close, column

TWIST = (0.25, 0.1, -0.05)
GAS = ElectronGas(7, 7, 5.0, TWIST)
TINY = dict(layers=[[16, 4]], determinants=2)
GRID = 14  # points a side of the quadrature's grid (test_complex_gradient_is_...)


@pytest.fixture(autouse=True, scope="module")
def _x64():
    with jax.enable_x64(True):
        yield


def test_twisted_shells_and_hartree_fock():
    assert closed_shells(12, (0.2137, 0.0931, -0.0419)) == tuple(range(1, 13))  # all unlike
    assert 7 in closed_shells(12, TWIST)
    assert closed_shells(12, (0.5, 0.0, 0.0)) == (2, 10)  # +-1/2 along x, then 8 more
    part = ElectronGas(7, 7, 5.0, (0.5, 0.0, 0.0))  # 7 of 10: a part-filled shell
    k = part.wavevectors(7) * part.length / (2 * math.pi)
    np.testing.assert_allclose(np.sort(np.sum(k**2, axis=1)), [0.25] * 2 + [1.25] * 5)
    assert np.isfinite(part.hartree_fock_energy()) and not part.is_real
    assert parse_twist("0.75 -0.5 1") == (-0.25, 0.5, 0.0) and parse_twist(None) == (0, 0, 0)
    k = GAS.wavevectors(7) * GAS.length / (2 * math.pi) - np.asarray(TWIST)
    np.testing.assert_allclose(k, np.rint(k), atol=1e-12)  # k = 2 pi (n + t) / L
    # the Hartree-Fock energy of the twisted plane waves, summed here directly
    kinetic = exchange = 0.0
    for n in (7, 7):
        q = GAS.wavevectors(n)
        kinetic += 0.5 * np.sum(q**2)
        d2 = np.sum((q[:, None] - q[None]) ** 2, axis=-1)
        exchange -= 2 * math.pi / GAS.length**3 * np.sum(1 / d2[~np.eye(n, dtype=bool)])
    expected = kinetic + GAS.madelung_energy() + exchange
    assert GAS.hartree_fock_energy() == pytest.approx(expected, rel=1e-13)
    gamma = ElectronGas(7, 7, 5.0)
    assert GAS.kinetic_energy() > gamma.kinetic_energy() and not GAS.is_real and gamma.is_real
    same_as_gamma = ElectronGas(7, 7, 5.0, (0, 0, 1))  # t and t + 1 are one twist
    assert GAS.fingerprint() != gamma.fingerprint() == same_as_gamma.fingerprint()
    assert "twist (0.25, 0.1, -0.05) (complex psi)" in GAS.describe()[0]


def walkers(n: int, gas: ElectronGas = GAS) -> jax.Array:
    return jax.random.uniform(jax.random.PRNGKey(1), (n, gas.n_electrons, 3)) * gas.length


def test_determinant_is_bloch_periodic_antisymmetric_and_exact():
    det = GAS.determinant()
    log_psi = jax.jit(jax.vmap(lambda r: det.log_psi(None, r)))
    r = walkers(6)
    base = log_psi(r)
    for axis in range(3):
        moved = log_psi(r.at[:, 3, axis].add(2 * GAS.length))  # two cells along the axis
        bloch = np.exp(1j * 2 * 2 * math.pi * TWIST[axis])
        np.testing.assert_allclose(np.exp(moved - base), bloch, rtol=1e-10)
    swapped = log_psi(r.at[:, [8, 12]].set(r[:, [12, 8]]))  # two down electrons
    np.testing.assert_allclose(np.exp(swapped - base), -1.0, atol=1e-10)
    # plane waves are eigenfunctions of the kinetic energy: E_L = sum |k|^2 / 2, real
    hamiltonian = Hamiltonian((Kinetic(), PeriodicCoulomb.of(GAS)), laplacian.Forward())
    local = hamiltonian.local_energy(det)
    energy, aux = jax.jit(jax.vmap(lambda x: local.with_aux(None, x)))(r)
    parts = jax.jit(jax.vmap(lambda x: local.parts(None, x)))(r)
    np.testing.assert_allclose(parts["kinetic"], GAS.kinetic_energy(), rtol=1e-10)
    np.testing.assert_allclose(aux[IMAGINARY], 0.0, atol=1e-10 * GAS.kinetic_energy())
    np.testing.assert_allclose(energy, parts["energy"], rtol=1e-14)


def network(gas: ElectronGas, scale: float = 30.0):
    """The periodic FermiNet of ``gas`` with its orbital projections ``scale`` times their
    start (far from the plane-wave determinant: a phase that moves)."""
    config = config_lib.from_dict({"system": "heg", "electrons": gas.n_electrons,
                                   "rs": gas.rs, "twist": " ".join(map(str, gas.twist)),
                                   "spin": gas.spin, **TINY})  # fmt: skip
    net = registry.ansatz(gas, config)
    params = net.init(jax.random.PRNGKey(3), jnp.float64)
    params["orbitals"] = jax.tree.map(lambda w: scale * w, params["orbitals"])
    return net, params


def test_network_is_complex_bloch_periodic_and_antisymmetric():
    net, params = network(GAS)
    assert net.is_complex and "complex at twist" in net.describe()
    log_psi = jax.jit(jax.vmap(lambda r: net.log_psi(params, r)))
    r = walkers(4)
    base = log_psi(r)
    assert np.ptp(np.imag(base)) > 0.1  # a phase that varies between walkers
    moved = log_psi(r.at[:, 0, 1].add(GAS.length))
    np.testing.assert_allclose(np.exp(moved - base), np.exp(2j * math.pi * TWIST[1]), rtol=1e-9)
    swapped = log_psi(r.at[:, [1, 5]].set(r[:, [5, 1]]))
    np.testing.assert_allclose(np.exp(swapped - base), -1.0, atol=1e-9)
    phase = jax.vmap(lambda x: net.phase(params, x))(r)
    np.testing.assert_allclose(np.exp(1j * phase), np.exp(1j * np.imag(base)), atol=1e-12)


def test_complex_gradient_is_the_energy_derivative():
    """One electron at a twist (its energy the kinetic energy plus the Madelung constant):
    E(theta) by the trapezoidal rule on a grid of the cell (exact for this smooth periodic
    integrand), differentiated by JAX through the Laplacian, against the VMC estimator
    2 < (e - E) d log|psi| + (e' - <e'>) d arg psi > with the grid's weights |psi|^2."""
    gas = ElectronGas(1, 0, 2.0, (0.3, 0.1, 0.2))
    net, params = network(gas)
    hamiltonian = Hamiltonian((Kinetic(), PeriodicCoulomb.of(gas)), laplacian.Forward())
    local = hamiltonian.local_energy(net)
    axis = (np.arange(GRID) + 0.5) / GRID * gas.length
    grid = jnp.asarray(np.stack(np.meshgrid(axis, axis, axis, indexing="ij"), -1).reshape(-1, 1, 3))

    # the grid is the program's argument: as a constant of the jitted program, XLA's CPU
    # returns NaN for blocks of grid points in some calls (docs/compatibility.md, "a
    # jitted complex local energy returns NaN")
    def energy(p, grid):
        e, aux = jax.vmap(lambda r: local.with_aux(p, r))(grid)
        w = jnp.exp(2 * jax.vmap(lambda r: net.log_abs(p, r))(grid))
        return jnp.sum(w * e) / jnp.sum(w), (w / jnp.sum(w), e, aux[IMAGINARY])

    gradient = jax.jit(jax.value_and_grad(energy, has_aux=True))
    (e_mean, (p, e, e_im)), exact = gradient(params, grid)
    # <Im E_L> = 0 under |psi|^2 (to the quadrature's error: 8, 10 and 14 points a side gave
    # 4e-5, 2e-6 and 3e-9 of the largest |Im E_L|, the gradient below 4e-3, 2e-4, 2.5e-6)
    assert abs(float(jnp.sum(p * e_im))) < 1e-7 * float(jnp.max(jnp.abs(e_im)))
    d_log = jax.vmap(lambda r: jax.grad(net.log_abs)(params, r))(grid)
    d_phase = jax.vmap(lambda r: jax.grad(net.phase)(params, r))(grid)
    weigh = lambda w, d: jax.tree.map(lambda g: jnp.tensordot(w, g, axes=1), d)
    estimate = jax.tree.map(jnp.add, weigh(2 * p * (e - e_mean), d_log),
                            weigh(2 * p * (e_im - jnp.sum(p * e_im)), d_phase))  # fmt: skip
    flat = lambda t: np.concatenate([np.ravel(x) for x in jax.tree.leaves(t)])
    assert np.linalg.norm(flat(exact)) > 1e-3  # the test moves the energy
    np.testing.assert_allclose(flat(estimate), flat(exact), atol=2e-5 * np.abs(flat(exact)).max())
    # the imaginary part's term matters: without it the estimate is off
    real_only = flat(weigh(2 * p * (e - e_mean), d_log))
    assert np.abs(real_only - flat(exact)).max() > 1e-2 * np.abs(flat(exact)).max()


def test_the_loss_and_the_jacobian_rows_give_the_complex_gradient():
    """On the same walkers: the loss's custom gradient, the interleaved jacobian's x^T J
    and 2 Re mean((E_L - E)^* d log psi) from JAX's complex jacobian of log psi agree."""
    net, params = network(GAS)
    hamiltonian = Hamiltonian((Kinetic(), PeriodicCoulomb.of(GAS)), laplacian.Forward())
    local = hamiltonian.local_energy(net)
    r = walkers(8)
    loss = make_energy_loss(net.log_abs, local, clip_scale=None, phase=net.phase)
    (_, stats), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(params, r)
    e, aux = jax.jit(jax.vmap(lambda x: local.with_aux(params, x)))(r)
    e_local = e + 1j * aux[IMAGINARY]
    o = jax.jit(jax.vmap(lambda x: jax.jacfwd(net.log_psi)(params, x)))(r)  # complex d log psi
    centered = jnp.conj(e_local - jnp.mean(e_local))
    direct = jax.tree.map(
        lambda g: 2 * jnp.real(jnp.tensordot(centered, g, axes=1)) / r.shape[0], o
    )
    flat = lambda t: np.concatenate([np.ravel(x) for x in jax.tree.leaves(t)])
    np.testing.assert_allclose(flat(grads), flat(direct), atol=1e-9 * np.abs(flat(direct)).max())
    stats = energy_stats(e, None, aux)
    rows = [jacobian_lib.leaves(lambda p, x, f=f: f(p, x), params, r, stats.finite)
            for f in (net.log_abs, net.phase)]  # fmt: skip
    jac = jacobian_lib.interleaved(*rows)
    weights = jnp.stack([vmc_weights(stats), vmc_weights_imaginary(stats)], 1).reshape(-1)
    np.testing.assert_allclose(flat(jac.rmatvec_like(params, weights)), flat(direct),
                               atol=1e-9 * np.abs(flat(direct)).max())  # fmt: skip
    assert jac.blocks[0].shape[0] == 2 * r.shape[0]
    np.testing.assert_allclose(np.mean(jac.dense(), axis=0), 0.0, atol=1e-12)


def test_one_and_two_devices_give_the_same_twisted_steps(tmp_path):
    """The jacobian's two rows a walker stay with the walker's device: walkers sharded over
    two devices take the same steps as on one (float32 sums in another order)."""
    rows = {}
    for n in (1, 2):
        out = tmp_path / f"twist-{n}"
        psijax.train(system="heg", electrons=14, rs=5.0, twist="0.25 0.1 -0.05", walkers=32,
                     out=str(out), steps=3, devices=n, burn_in_steps=5, progress=False,
                     **TINY)  # fmt: skip
        rows[n] = list(csv.DictReader((out / "metrics.csv").read_text().splitlines()))
    assert_energies_close(column(rows[2], "energy"), column(rows[1], "energy"),
                          column(rows[1], "variance"), rtol=1e-4)  # fmt: skip


def test_a_twisted_gas_trains_resumes_evaluates_and_loads(tmp_path):
    out = tmp_path / "twist"
    settings = dict(system="heg", electrons=14, rs=5.0, twist="0.25 0.1 -0.05", walkers=32,
                    out=str(out), burn_in_steps=10, checkpoint_every=2, progress=False,
                    **TINY)  # fmt: skip
    first = psijax.train(steps=4, **settings)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["energy_per"] == "cell" and np.all(np.isfinite(first.energies))
    # the first step samples the twisted plane-wave determinant (times the cusp factor)
    rows = (out / "metrics.csv").read_text().splitlines()
    energy, variance = (float(x) for x in rows[1].split(",")[1:3])
    assert abs(energy - GAS.hartree_fock_energy()) < 5 * np.sqrt(variance / 32)
    resumed = psijax.train(out=str(out), resume=True, steps=6, progress=False)
    np.testing.assert_allclose(resumed.energies[:4], first.energies, rtol=1e-6)
    evaluation = psijax.evaluate(out, steps=4, walkers=32, burn_in=2, progress=False)
    assert np.all(np.isfinite(evaluation.energies))
    wf = psijax.load(out)
    assert wf.molecule.twist == (0.25, 0.1, -0.05)
    energies = np.asarray(wf.local_energy(wf.walkers[:4]))
    shifted = np.asarray(wf.walkers[:4]) + wf.molecule.lattice.matrix[0]
    np.testing.assert_allclose(wf.local_energy(shifted), energies, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "values, problem",
    [
        (dict(system="LiH", twist="0.5 0 0"), "--twist is built for the electron gas only"),
        (dict(system="heg", electrons=14, rs=5.0, twist="0.5 0"), "is not three numbers"),
        (dict(system="heg", electrons=14, rs=5.0, twist="0.1 0 0", jacobian_blocks=2),
         "forms its jacobian whole"),
        (dict(system="heg", electrons=12, rs=5.0), "not closed shells of plane waves at the"
         " Gamma point; give each spin a closed shell (1, 7, 19, 27, 33, 57), e.g. --electrons "
         "14 --spin 0, or a --twist"),
    ],
)  # fmt: skip
def test_bad_twists_are_refused(values, problem):
    from psijax.system import for_config

    with pytest.raises(InputError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        for_config(config_lib.from_dict(values))


# ------------------------------------------------------------------ twist averaging
def test_twist_grid_classes_and_their_weights():
    from psijax.curves.twists import grid

    assert grid(1) == [((0.0, 0.0, 0.0), 1)]
    assert grid(2) == [((0.25, 0.25, 0.25), 8)]
    assert [w for _, w in grid(3)] == [1, 6, 12, 8] and [w for _, w in grid(4)] == [8, 24, 24, 8]
    for m in range(1, 6):
        assert sum(w for _, w in grid(m)) == m**3
    for bad in (0, 9, 2.5, True):
        with pytest.raises(InputError, match="whole number of twists a side"):
            grid(bad)


def test_twists_a_symmetry_joins_have_one_hartree_fock_energy():
    """Every twist of the 3-point grid has its class representative's Hartree-Fock energy
    (the cube's symmetries and time reversal map one onto the other)."""
    import itertools

    from psijax.curves.twists import grid

    energy = {t: ElectronGas(7, 7, 2.0, t).hartree_fock_energy() for t, _ in grid(3)}
    axis = (-1 / 3, 0.0, 1 / 3)
    for t in itertools.product(axis, repeat=3):
        key = tuple(sorted(round(abs(c), 12) for c in t))
        (representative,) = [r for r in energy if tuple(round(c, 12) for c in r) == key]
        assert ElectronGas(7, 7, 2.0, t).hartree_fock_energy() == pytest.approx(
            energy[representative], rel=1e-12
        )
    assert len(set(np.round(list(energy.values()), 9))) == 4  # the classes differ


def test_twist_average_trains_each_class_once_and_resumes(tmp_path):
    from psijax.curves.twists import average, twist_average

    trained = []

    def fake_train(config, progress, resume):  # each twist's energy: its Hartree-Fock - 0.3
        gas = ElectronGas(7, 7, 5.0, config.twist)
        out = Path(config.out)
        out.mkdir(parents=True)
        trained.append(config.twist)
        summary = {"energy": gas.hartree_fock_energy() - 0.3, "energy_error": 1e-3,
                   "steps_run": 10, "seconds": 1.0}  # fmt: skip
        (out / "summary.json").write_text(json.dumps(summary))

    config = config_lib.from_dict({"system": "heg", "electrons": 14, "rs": 5.0})
    result = twist_average(config, 3, tmp_path / "tabc", progress=False, train=fake_train)
    third = "0.333333333333"
    assert trained == ["0 0 0", f"0 0 {third}", f"0 {third} {third}", f"{third} {third} {third}"]
    energy, error = result.energy
    assert energy == pytest.approx(result.hartree_fock - 0.3, rel=1e-12)
    assert error == pytest.approx(1e-3 * math.sqrt(1 + 36 + 144 + 64) / 27, rel=1e-12)
    assert average([(1, 1.0, 0.0), (3, 2.0, 0.0)]) == (1.75, 0.0)
    summary = json.loads((tmp_path / "tabc" / "summary.json").read_text())
    assert summary["weights"] == 27 and summary["energy_per_electron"] == pytest.approx(energy / 14)
    rows = (tmp_path / "tabc" / "twists.csv").read_text().splitlines()
    assert len(rows) == 5 and rows[0].startswith("t1,t2,t3,weight,energy,error,hartree_fock")
    again = twist_average(config, 3, tmp_path / "tabc", progress=False, train=fake_train)
    assert len(trained) == 4 and again.energy == result.energy  # every twist read, none trained
    with pytest.raises(InputError, match="holds a twist average of other points or settings"):
        twist_average(config, 2, tmp_path / "tabc", progress=False, train=fake_train)
    with pytest.raises(InputError, match="leave --twist out"):
        twist_average(dataclasses.replace(config, twist="0.1 0 0"), 2, tmp_path / "x")
    with pytest.raises(InputError, match="twist averaging is built for the electron gas"):
        twist_average(config_lib.from_dict({"system": "LiH"}), 2, tmp_path / "y")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
    given = twist_average(config, "0.1 0.2 0.3; -0.4 0.1 0", tmp_path / "z", progress=False,
                          train=fake_train)  # fmt: skip
    assert [t.weight for t in given.twists] == [1, 1] and trained[-1] == "-0.4 0.1 0"
    for bad, problem in (("0.1 0 0; 1.1 0 0", "name one twist twice"), (" ; ", "give one")):
        with pytest.raises(InputError, match=problem):
            twist_average(config, bad, tmp_path / "w", progress=False, train=fake_train)


def test_twists_command(tmp_path, capsys):
    from psijax.cli.main import main

    out = tmp_path / "tabc"
    argv = ["twists", "--system", "heg", "--electrons", "14", "--rs", "5", "--twist-grid", "2",
            "--steps", "4", "--walkers", "16", "--layers", "16x4", "--determinants", "2",
            "--burn-in-steps", "2", "--out", str(out), "--quiet"]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "(0.2500, 0.2500, 0.2500)      8" in printed and "average" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["classes"] == 1 and np.isfinite(summary["energy"])
    assert json.loads((out / "twist-00" / "config.json").read_text())["twist"] == "0.25 0.25 0.25"
