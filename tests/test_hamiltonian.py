"""Analytic local energies: the hydrogen ground state and a Gaussian in a harmonic well."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from psijax import laplacian
from psijax.hamiltonian import coulomb_potential, make_local_energy
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
