"""Analytic local energies (the hydrogen ground state, a Gaussian in a harmonic well) and
the local energy as a sum of terms, including a random nonlocal one."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from psijax import hamiltonian, laplacian, mcmc, optim, parallel
from psijax.ansatz import FermiNet
from psijax.batching import map_walkers
from psijax.hamiltonian import coulomb_potential, make_local_energy
from psijax.loss import make_energy_loss
from psijax.run.loop import run_steps
from psijax.run.state import train_state
from psijax.run.step import StepConfig, make_step
from psijax.system import from_atom_string, preset

OPS = [laplacian.Hessian(), laplacian.Loop(), laplacian.Forward(), laplacian.ForwardSparse(0.6)]


@pytest.fixture(autouse=True, scope="module")
def _x64():
    with jax.enable_x64(True):
        yield


@pytest.mark.parametrize("op", OPS, ids=lambda op: type(op).__name__)
def test_hydrogen_ground_state_has_constant_local_energy(op):
    """psi = exp(-|r|) is the exact H ground state: E_L = -1/2 Ha everywhere."""
    local_energy = make_local_energy(
        lambda params, r: -jnp.linalg.norm(r[0]), coulomb_potential(preset("H")), op
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
    potential = lambda r: 0.5 * w**2 * jnp.sum(r**2)
    local_energy = make_local_energy(lambda a_, r: -0.5 * a_ * jnp.sum(r**2), potential, op)
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
    np.testing.assert_allclose(coulomb_potential(mol)(r), expected, rtol=1e-12)


# ------------------------------------------------------------------------------- terms
@dataclasses.dataclass(frozen=True)
class _NonlocalProbe:
    """A made-up nonlocal term: psi(r with electron 0 moved by a random step) / psi(r),
    the shape of a pseudopotential's quadrature (random rotation, psi at moved electrons)."""

    needs_key: bool = True

    def __call__(self, psi, params, r, key):
        step = jax.random.normal(key, (3,), r.dtype) * 0.1
        moved, here = psi.apply(params, r.at[0].add(step)), psi.apply(params, r)
        return moved.sign * here.sign * jnp.exp(moved.log_abs - here.log_abs)


def test_local_energy_is_the_sum_of_its_terms():
    mol = preset("LiH")
    net = FermiNet(2, 2, mol.coords, layers=((8, 4),), n_determinants=2)
    params = net.init(jax.random.PRNGKey(0), jnp.float64)
    r = jax.random.normal(jax.random.PRNGKey(1), (4, 3), jnp.float64)
    op = laplacian.Forward()
    terms = hamiltonian.molecular_terms(mol, op)
    parts = jax.jit(
        lambda p, x: (
            hamiltonian.local_energy(net, terms)(p, x),
            hamiltonian.kinetic_energy(op, net.log_abs, p, x) + coulomb_potential(mol)(x),
        )
    )
    total, by_hand = parts(params, r)
    np.testing.assert_allclose(total, by_hand, rtol=1e-12)
    assert not hamiltonian.local_energy(net, terms).needs_key
    with pytest.raises(ValueError, match="at least one term"):
        hamiltonian.local_energy(net, ())


def test_a_term_that_draws_gets_one_key_per_walker_in_the_training_step():
    """A random nonlocal term: the step hands each walker its own key (values differ
    between walkers, repeat for the same key), on 1 and 4 devices alike, and the
    step compiles once."""
    mol = preset("LiH")
    net = FermiNet(2, 2, mol.coords, layers=((8, 4),), n_determinants=2)
    probe = hamiltonian.local_energy(net, (_NonlocalProbe(),))
    assert probe.needs_key
    params = net.init(jax.random.PRNGKey(0), jnp.float32)
    walkers = mcmc.init_walkers(jax.random.PRNGKey(1), mol, 8)
    loss = make_energy_loss(net.log_abs, probe, clip_scale=None)
    with pytest.raises(ValueError, match="give the loss a key"):
        loss(params, walkers)
    energies = {n: _draws_on(n, net, probe, params, walkers, loss) for n in (1, 4)}
    np.testing.assert_allclose(energies[1], energies[4], rtol=1e-5)


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
    step = make_step(net.log_abs, probe, opt, StepConfig(n_moves=1), mesh, state)
    _, rows = run_steps(step, state, 3)
    assert all(np.isfinite(m["energy"]) for m in rows)
    assert step._cache_size() == 1
    return [m["energy"] for m in rows]
