"""Analytic local energies (the hydrogen ground state, a Gaussian in a harmonic well) and
the local energy as a sum of terms, including a random nonlocal one."""

import csv
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import psijax
from psijax import hamiltonian, laplacian, optim, parallel, registry, sampling
from psijax.ansatz import FermiNet
from psijax.hamiltonian import Coulomb, Hamiltonian, Kinetic, Potential
from psijax.optim.gradient import make_energy_loss
from psijax.parallel.batching import map_walkers
from psijax.run.loop import run_steps
from psijax.system import from_atom_string, preset
from psijax.training.state import train_state
from psijax.training.step import StepConfig, make_step

from close import assert_energies_close, column

OPS = [laplacian.Hessian(), laplacian.Loop(), laplacian.Forward(), laplacian.ForwardSparse(0.6)]


@pytest.fixture(autouse=True, scope="module")
def _x64():
    with jax.enable_x64(True):
        yield


@pytest.mark.parametrize("op", OPS, ids=lambda op: type(op).__name__)
def test_hydrogen_ground_state_has_constant_local_energy(op):
    """psi = exp(-|r|) is the exact H ground state: E_L = -1/2 Ha everywhere."""
    local_energy = hamiltonian.molecular(preset("H"), op).local_energy(
        lambda params, r: -jnp.linalg.norm(r[0])
    )
    walkers = jax.random.normal(jax.random.PRNGKey(0), (64, 1, 3), jnp.float64) * 2.0
    e = jax.jit(jax.vmap(lambda r: local_energy(None, r)))(walkers)
    np.testing.assert_allclose(e, -0.5, atol=1e-10)


@pytest.mark.parametrize("op", OPS, ids=lambda op: type(op).__name__)
def test_gaussian_in_harmonic_well(op):
    """log psi = -a |r|^2 / 2 per electron in V = w^2 |r|^2 / 2 per electron.

    E_L = sum_i [3a/2 + (w^2 - a^2) |r_i|^2 / 2]: exact only for a = w, and the
    r-dependence checks both the Laplacian and the gradient term.
    """
    a, w = 0.7, 1.3
    well = Potential(lambda r: 0.5 * w**2 * jnp.sum(r**2), "harmonic")
    local_energy = Hamiltonian((Kinetic(), well), op).local_energy(
        lambda a_, r: -0.5 * a_ * jnp.sum(r**2)
    )
    walkers = jax.random.normal(jax.random.PRNGKey(1), (32, 3, 3), jnp.float64)
    e = jax.jit(jax.vmap(lambda r: local_energy(a, r)))(walkers)
    expected = 3 * 1.5 * a + 0.5 * (w**2 - a**2) * jnp.sum(walkers**2, axis=(1, 2))
    np.testing.assert_allclose(e, expected, rtol=1e-10)


def test_coulomb_potential_by_hand():
    """H2+ like check: two protons 1.4 bohr apart, two electrons at known places."""
    mol = from_atom_string("H 0 0 0; H 0 0 1.4")
    r = jnp.array([[0.0, 0.0, 0.7], [1.0, 0.0, 0.0]])
    r_en = [0.7, 0.7, 1.0, np.hypot(1.0, 1.4)]
    expected = -sum(1.0 / d for d in r_en) + 1.0 / np.hypot(1.0, 0.7) + 1.0 / 1.4
    parts = Coulomb(mol)(hamiltonian.Walker(None, None, r, laplacian.Forward()))
    np.testing.assert_allclose(sum(parts.values()), expected, rtol=1e-12)
    assert float(parts["nucleus_nucleus"]) == pytest.approx(1 / 1.4)


# ------------------------------------------------------------------------------- terms
@dataclasses.dataclass(frozen=True)
class _NonlocalProbe:
    """A made-up nonlocal term: psi(r with electron 0 moved by a random step) / psi(r),
    the shape of a pseudopotential's quadrature (random rotation, psi at moved electrons)."""

    components: tuple[str, ...] = ("probe",)
    needs_key: bool = True

    def __call__(self, walker, key):
        r = walker.r
        step = jax.random.normal(key, (3,), r.dtype) * 0.1
        moved, here = walker.wf.apply(walker.params, r.at[0].add(step)), walker.psi
        return {"probe": moved.sign * here.sign * jnp.exp(moved.log_abs - here.log_abs)}


def test_local_energy_is_the_sum_of_its_terms():
    mol = preset("LiH")
    net = FermiNet(2, 2, mol.coords, layers=((8, 4),), n_determinants=2)
    params = net.init(jax.random.PRNGKey(0), jnp.float64)
    r = jax.random.normal(jax.random.PRNGKey(1), (4, 3), jnp.float64)
    op = laplacian.Forward()
    molecular = hamiltonian.molecular(mol, op)
    assert molecular.columns == (
        "energy", "kinetic", "electron_nucleus", "electron_electron", "nucleus_nucleus"
    )  # fmt: skip
    parts, by_hand = jax.jit(
        lambda p, x: (
            molecular.local_energy(net).parts(p, x),
            hamiltonian.kinetic_energy(op, net.log_abs, p, x),
        )
    )(params, r)
    np.testing.assert_allclose(parts["kinetic"], by_hand, rtol=1e-12)
    np.testing.assert_allclose(
        parts["energy"], sum(v for k, v in parts.items() if k != "energy"), rtol=1e-12
    )
    assert not molecular.needs_key
    with pytest.raises(ValueError, match="at least one term"):
        Hamiltonian((), op)
    with pytest.raises(ValueError, match="must be distinct"):
        Hamiltonian((Kinetic(), Kinetic()), op)


def test_a_term_that_draws_gets_one_key_per_walker_in_the_training_step():
    """A random nonlocal term: the step hands each walker its own key (values differ
    between walkers, repeat for the same key), on 1 and 4 devices alike, and the
    step compiles once."""
    mol = preset("LiH")
    net = FermiNet(2, 2, mol.coords, layers=((8, 4),), n_determinants=2)
    probe = Hamiltonian((_NonlocalProbe(),), laplacian.Forward()).local_energy(net)
    assert probe.needs_key
    params = net.init(jax.random.PRNGKey(0), jnp.float32)
    walkers = sampling.init_walkers(jax.random.PRNGKey(1), mol, 8)
    loss = make_energy_loss(net.log_abs, probe, clip_scale=None)
    with pytest.raises(ValueError, match="give the loss a key"):
        loss(params, walkers)
    rows = {n: _draws_on(n, net, probe, params, walkers, loss) for n in (1, 4)}
    assert_energies_close(column(rows[4], "energy"), column(rows[1], "energy"),
                          column(rows[1], "variance"), rtol=1e-5)  # fmt: skip


def _draws_on(n_devices, net, probe, params, walkers, loss):
    """The probe's energies on ``n_devices`` and three steps of training with it."""
    mesh = parallel.make_mesh(n_devices)
    walkers = jax.device_put(walkers, parallel.walker_sharding(mesh))
    key = jax.random.PRNGKey(7)
    per_walker = lambda p, wk: probe(p, *wk)
    energies = jax.jit(lambda w, k: map_walkers(per_walker, params, (w, jax.random.split(k, 8))))(
        walkers, key
    )
    assert len(np.unique(np.asarray(energies))) == 8  # every walker its own draw
    e1, _ = jax.jit(loss)(params, walkers, key)
    e2, _ = jax.jit(loss)(params, walkers, key)
    assert float(e1) == float(e2) and np.isfinite(float(e1))
    np.testing.assert_allclose(float(e1), np.mean(np.asarray(energies)), rtol=1e-6)

    opt = optim.adam()
    state = train_state(net, opt, params, walkers, jax.random.PRNGKey(2), mesh=mesh)
    step = make_step(net.log_abs, probe, opt, StepConfig(), mesh, state, sampling.Metropolis(1))
    _, rows = run_steps(step, state, 3)
    assert all(np.isfinite(m["energy"]) for m in rows)
    assert step._cache_size() == 1
    return rows


@dataclasses.dataclass(frozen=True)
class _Field:
    """A uniform electric field along z: the electrons' energy F * sum_i z_i (Hartree)."""

    strength: float = 0.05
    components: tuple[str, ...] = ("field",)
    needs_key: bool = False

    def __call__(self, walker, key=None):
        return {"field": self.strength * jnp.sum(walker.r[:, 2])}


@pytest.mark.slow
def test_a_term_added_in_one_place_is_in_training_evaluation_and_load(tmp_path, monkeypatch):
    """One registry line adds a term: training's energy, the wavefunction's local energy
    and evaluation's energy all contain it, and evaluation writes its column."""
    monkeypatch.setitem(registry.HAMILTONIAN, "field", registry.Entry(lambda mol, c: _Field()))
    run = tmp_path / "run"
    with jax.enable_x64(False):
        trained = psijax.train(
            system="H2", layers=((8, 4),), determinants=1, walkers=16, pretrain_steps=0,
            burn_in_steps=2, mcmc_moves=2, steps=2, optimizer="adam", learning_rate=1e-12,
            out=str(run), progress=False,
        )  # fmt: skip
        wf = psijax.load(run)
        values = {k: np.asarray(v, np.float64) for k, v in wf.local_values(wf.walkers).items()}
        evaluated = psijax.evaluate(run, steps=3, burn_in=0, progress=False)
    field = 0.05 * np.sum(np.asarray(wf.walkers, np.float64)[..., 2], axis=1)
    np.testing.assert_allclose(values["field"], field, rtol=1e-5, atol=1e-6)
    coulomb = ("kinetic", "electron_nucleus", "electron_electron", "nucleus_nucleus")
    rest = sum(values[c] for c in coulomb)
    np.testing.assert_allclose(values["energy"], rest + field, rtol=1e-5, atol=1e-5)
    # The last training step's energy is the mean over the walkers it saved, under (to
    # 1e-12) the parameters it saved; without the field it would be ~0.07 Ha lower.
    assert trained.energies[-1] == pytest.approx(float(np.mean(values["energy"])), abs=2e-5)
    with open(run / "eval" / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3 and "field" in rows[0]
    for row in rows:
        parts = sum(float(row[c]) for c in (*coulomb, "field"))
        assert float(row["energy"]) == pytest.approx(parts, abs=1e-5)
        assert abs(float(row["field"])) > 1e-3
    assert evaluated.summary["estimates"]["field"]["unit"] == "Ha"
