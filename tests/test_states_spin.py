"""<S^2> of several states: the S^2 matrix of hand-built spin eigenfunctions, its
resolution into the states by the energy's eigenbasis, and an evaluation end to end."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from psijax import hamiltonian, laplacian
from psijax.ansatz.states import States
from psijax.estimators import observables
from psijax.estimators.states import StatesObserved, spin_matrix
from psijax.hamiltonian.states import local_energy
from psijax.statistics import states as state_stats
from psijax.statistics.states import matrix_names
from psijax.system import preset
from psijax.types import Psi


@pytest.fixture(autouse=True, scope="module")
def _x64():
    with jax.enable_x64(True):
        yield


def _orbitals(x):
    """Three distinct one-electron functions at ``x`` ([3]), without common symmetry."""
    d = jnp.sqrt(jnp.sum(x**2))
    return (
        jnp.exp(-d),
        (x[2] + 0.3) * jnp.exp(-0.5 * d),
        (x[0] - 0.2 * x[1] + 0.1) * jnp.exp(-0.7 * d),
    )


@dataclasses.dataclass(frozen=True)
class SpinPair:
    """psi = c_0 phi_0 + c_1 phi_1 over two exact S^2 eigenfunctions with the spin-up
    electrons first. Two electrons (1 up, 1 down): phi_0 = a(1) b(2) + b(1) a(2), a singlet
    (S^2 = 0), phi_1 = a(1) b(2) - b(1) a(2), the M_s = 0 triplet (S^2 = 2). Three (2 up,
    1 down): phi_0 = [a(1) b(2) - b(1) a(2)] a(3), a doublet (3/4), phi_1 = det[a, b, c],
    the M_s = 1/2 quartet (15/4)."""

    n_up: int = 1
    n_down: int = 1

    @property
    def exact(self) -> np.ndarray:
        return np.array([0.0, 2.0]) if self.n_up == 1 else np.array([0.75, 3.75])

    def init(self, key, dtype=jnp.float64):
        return {"c": jax.random.normal(key, (2,), dtype)}

    def basis(self, r):
        o = [_orbitals(x) for x in r]  # o[electron][orbital]
        if self.n_up == 1:
            a1b2, b1a2 = o[0][0] * o[1][1], o[0][1] * o[1][0]
            return jnp.stack([a1b2 + b1a2, a1b2 - b1a2])
        doublet = (o[0][0] * o[1][1] - o[0][1] * o[1][0]) * o[2][0]
        quartet = jnp.linalg.det(jnp.stack([jnp.stack(row) for row in o]))
        return jnp.stack([doublet, quartet])

    def apply(self, params, r):
        value = params["c"] @ self.basis(r)
        return Psi(jnp.sign(value), jnp.log(jnp.abs(value)))

    def log_abs(self, params, r):
        return self.apply(params, r).log_abs

    def describe(self):
        return "spin eigenfunctions"


SYSTEMS = {"two electrons": SpinPair(1, 1), "three electrons": SpinPair(2, 1)}


def _mixing(seed: int) -> np.ndarray:
    """A random invertible, non-orthogonal 2 x 2 mixing of the two states."""
    rng = np.random.default_rng(seed)
    while True:
        c = rng.normal(size=(2, 2))
        if abs(np.linalg.det(c)) > 0.3 and abs(c[0] @ c[1]) > 0.1:
            return c


def _walkers(base, n, seed=0):
    k, electrons = 2, base.n_up + base.n_down
    return jnp.asarray(1.5 * np.random.default_rng(seed).normal(size=(n, k * electrons, 3)))


@pytest.mark.parametrize("base", SYSTEMS.values(), ids=SYSTEMS.keys())
@pytest.mark.parametrize("seed", [None, 1, 2, 3])
def test_spin_eigenfunctions_give_the_same_spin_matrix_at_every_walker(base, seed):
    """States mixing two S^2 eigenfunctions by C (the identity, or a random non-orthogonal
    C): the S^2 matrix is C diag(s) C^-1 at every walker, zero variance."""
    c = np.eye(2) if seed is None else _mixing(seed)
    net = States(base, 2)
    walkers = _walkers(base, 64)
    got = np.asarray(jax.vmap(spin_matrix, in_axes=(None, None, 0))(net, {"c": c}, walkers))
    want = c @ np.diag(base.exact) @ np.linalg.inv(c)
    np.testing.assert_allclose(got, np.broadcast_to(want, got.shape), atol=1e-10)


@pytest.mark.parametrize("base", SYSTEMS.values(), ids=SYSTEMS.keys())
@pytest.mark.parametrize("lower", [0, 1], ids=["low-spin-first", "high-spin-first"])
def test_each_state_gets_its_s2_whatever_the_mixing(base, lower):
    """The mean S^2 matrix in the eigenbasis of the mean energy matrix: each state's S^2,
    ordered by energy, the same for every non-orthogonal mixing of the states (the energy
    matrix C diag(E) C^-1 of exact states mixed by C, either state the lower)."""
    net = States(base, 2)
    walkers = _walkers(base, 16, seed=1)
    energies = np.array([-1.0, -0.7]) if lower == 0 else np.array([-0.7, -1.0])
    found = []
    for seed in range(1, 6):
        c = _mixing(seed)
        s2 = np.mean(jax.vmap(spin_matrix, in_axes=(None, None, 0))(net, {"c": c}, walkers), 0)
        means = {"energy": c @ np.diag(energies) @ np.linalg.inv(c), "s2": s2}
        found.append(state_stats.spectrum(means, spin="s2"))
    order = np.argsort(energies)
    for out in found:
        np.testing.assert_allclose(out[:2], energies[order], atol=1e-12)
        np.testing.assert_allclose(out[3:], base.exact[order], atol=1e-10)


def test_one_state_spin_matrix_is_the_one_state_estimator():
    """For K = 1 the S^2 matrix is the ordinary local <S^2> at every walker, here of a
    spin-contaminated state (no spin eigenfunction): a singlet plus a triplet."""
    base = SpinPair(2, 1)
    params = {"c": jnp.array([1.0, 0.6])}
    walkers = _walkers(base, 32, seed=2)[:, :3]
    molecule = preset("Li")  # 2 up, 1 down
    observed = observables.build(("energy", "spin"), molecule)
    psi = hamiltonian.PsiFunctions(base.log_abs, base.apply)
    local = observables.local_values(
        hamiltonian.molecular(molecule, laplacian.Forward()), psi, observed
    )
    one = jax.jit(jax.vmap(functools.partial(local, params)))(walkers)["s2"]
    spins = jax.jit(jax.vmap(functools.partial(spin_matrix, States(base, 1)), in_axes=(None, 0)))
    got = spins({"c": params["c"][None]}, walkers)
    assert got.shape == (32, 1, 1)
    np.testing.assert_allclose(got[:, 0, 0], one, rtol=1e-10, atol=1e-10)
    assert np.ptp(np.asarray(one)) > 0.1  # not a spin eigenfunction: the check has teeth


def test_the_evaluation_columns_hold_the_spin_matrix():
    """StatesObserved with the spin: s2_matrix_{i}_{j} per walker are the S^2 matrix, beside
    the energy's columns."""
    base = SpinPair(1, 1)
    net = States(base, 2)
    c = _mixing(4)
    energy = local_energy(hamiltonian.molecular(preset("He"), laplacian.Forward()), net)
    observed = StatesObserved(2, preset("He"), False, energy, spin=True)
    assert set(matrix_names("s2", 2)) <= set(observed.columns)
    walker = _walkers(base, 1, seed=3)[0]
    values = observed.local({"c": jnp.asarray(c)}, walker)
    got = np.array([float(values[n]) for n in matrix_names("s2", 2)]).reshape(2, 2)
    np.testing.assert_allclose(got, c @ np.diag(base.exact) @ np.linalg.inv(c), atol=1e-10)
    assert "energy_matrix_0_1" in values


def test_an_evaluation_without_spin_columns_reports_its_states():
    """The spin asked for (a default) but its matrix absent from the rows (an evaluation
    written before S^2 had one): the energies still come, no <S^2>."""
    rng = np.random.default_rng(0)
    energy = np.stack([np.diag(d) for d in [-1.0, -0.5] + 0.01 * rng.normal(size=(20, 2))])
    rows = [dict(zip(matrix_names("energy", 2), m.reshape(-1), strict=True)) for m in energy]
    derived = StatesObserved(2, preset("He"), False, spin=True).derived({}, rows)
    assert {"state_0_energy", "state_1_energy", "excitation_1"} == set(derived)
    rows = [r | dict.fromkeys(matrix_names("s2", 2), 0.0) for r in rows]
    rows = [r | {"s2_matrix_1_1": 2.0} for r in rows]  # a singlet below a triplet
    derived = StatesObserved(2, preset("He"), False, spin=True).derived({}, rows)
    assert derived["state_0_s2"]["mean"] == pytest.approx(0.0, abs=1e-12)
    assert derived["state_1_s2"]["mean"] == pytest.approx(2.0, abs=1e-12)


# ------------------------------------------------------------------- a run end to end
def test_two_states_of_helium_evaluated_with_the_spin(tmp_path):
    """Two states of He, a tiny network and a few steps, evaluated with --observables
    energy,spin: summary.json has each state's <S^2> with a finite error bar (after six
    steps of training the values mean nothing yet) and the report prints each beside its
    state's energy."""
    import json

    import psijax
    from psijax.rundir.report import report

    out = tmp_path / "he"
    psijax.train(
        system="He", states=2, walkers=32, basis="cc-pvdz", pretrain_steps=5, burn_in_steps=3,
        layers=((8, 4),), determinants=1, mcmc_moves=2, steps=6, out=str(out), progress=False,
    )  # fmt: skip
    psijax.evaluate(out, steps=12, burn_in=2, observables="energy,spin", progress=False)
    summary = json.loads((out / "eval" / "summary.json").read_text())
    derived = summary["derived"]
    for i in range(2):
        s2 = derived[f"state_{i}_s2"]
        assert np.isfinite(s2["mean"]) and np.isfinite(s2["error"]) and s2["error"] > 0
    assert "transition_dipole2_0_1" not in derived  # the dipole was not asked for
    names = list(derived)
    assert names[:4] == ["state_0_energy", "state_0_s2", "state_1_energy", "state_1_s2"]
    text = report(out).splitlines()
    at = next(i for i, line in enumerate(text) if line.startswith("state_0_energy"))
    assert text[at + 1].startswith("state_0_s2") and text[at + 2].startswith("state_1_energy")
