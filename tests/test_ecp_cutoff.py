"""The ECP's nonlocal term beyond its cutoff: the radius, the electrons each nucleus moves,
and the term with fewer electrons moved equal to the term moving every one of them.

The projectors' radial functions fall as Gaussians; beyond the radius where every
(2l + 1)|V_l| is below 1e-7 Ha an electron's projection counts as zero, and each ECP
nucleus moves only its K nearest electrons onto its quadrature sphere.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from psijax import laplacian, registry, system
from psijax.config import Config
from psijax.hamiltonian import base
from psijax.hamiltonian import ecp as ecp_terms
from psijax.system import ecp as tables


def _largest(ecp: tables.Ecp, r: np.ndarray) -> np.ndarray:
    """max over channels of (2l + 1)|V_l(r)|, straight from the table's terms."""
    values = [
        (2 * ell + 1) * np.abs(sum(c * r ** (n - 2) * np.exp(-a * r * r) for n, a, c in radial))
        for ell, radial in ecp.channels
    ]
    return np.max(values, axis=0)


@pytest.mark.parametrize("symbol", ["C", "Cl", "Ga"])
def test_cutoff_radius_is_where_every_projector_falls_below_the_tolerance(symbol):
    ecp = tables.load("ccecp", symbol)
    radius = ecp_terms.cutoff_radius(ecp)
    beyond = radius + np.linspace(0.0, 10.0, 2001)
    assert np.all(_largest(ecp, beyond) < ecp_terms.TOLERANCE)
    assert _largest(ecp, np.array([radius - 0.01]))[0] >= ecp_terms.TOLERANCE
    assert 1.0 < radius < 8.0


def test_each_nucleus_moves_every_electron_of_small_systems_and_fewer_in_large_ones():
    ring = "; ".join(  # benzene: C-C 2.64 bohr, C-H 2.05 bohr
        f"{s} {d * np.cos(k * np.pi / 3):.5f} {d * np.sin(k * np.pi / 3):.5f} 0"
        for k in range(6)
        for s, d in (("C", 2.64), ("H", 4.69))
    )
    cases = [("C 0 0 0", 2, 4), ("Cl 0 0 0; Cl 0 0 3.7566", 0, 14), (ring, 0, 14)]
    for atoms, spin, want in cases:
        molecule = system.resolve(atoms, spin=spin, ecp="ccecp")
        term = ecp_terms.EcpNonlocal.of(molecule)
        assert term.neighbours == want, atoms
        assert ecp_terms.EcpNonlocal.of(molecule, neighbours=0).neighbours == molecule.n_electrons
        assert ecp_terms.EcpNonlocal.of(molecule, neighbours=99).neighbours == molecule.n_electrons
    assert system.resolve(ring, ecp="ccecp").n_electrons == 30


def test_moving_the_nearest_electrons_equals_moving_every_electron():
    """Two carbon atoms 7 bohr apart (8 valence electrons), each nucleus moving its 5
    nearest: on walkers with at most 5 electrons inside either cutoff sphere the term is the
    term that moves all 8, to rounding (same key: the same rotation per nucleus and
    electron), for a random network whose ratios are far from constant. With a sixth
    electron inside one sphere the farthest of them is left out, and the two differ."""
    with jax.enable_x64(True):
        molecule = system.resolve("C 0 0 0; C 0 0 7", ecp="ccecp")
        config = Config(layers=((8, 4),), determinants=2)
        net = registry.ansatz(molecule, config)
        params = net.init(jax.random.PRNGKey(0), jnp.float64)
        cut = ecp_terms.EcpNonlocal.of(molecule, neighbours=5)
        every = ecp_terms.EcpNonlocal.of(molecule, neighbours=0)
        assert (cut.neighbours, every.neighbours) == (5, 8)
        psi = base.PsiFunctions(net.log_abs, net.apply)

        def values(term, walkers, keys):
            def one(r, key):
                walker = base.Walker(psi, params, r, laplacian.Forward(), key)
                return term(walker, key)["ecp_nonlocal"]

            return np.asarray(jax.jit(jax.vmap(one))(walkers, keys))

        rng = np.random.default_rng(0)
        centers = molecule.nuclear_positions
        # 4 electrons within 1.2 bohr of each nucleus (the cutoff is 1.6), up/down mixed
        offsets = rng.normal(size=(16, 8, 3))
        radii = 1.2 * rng.uniform(0.2, 1.0, (16, 8, 1))
        offsets *= radii / np.linalg.norm(offsets, axis=-1, keepdims=True)
        walkers = offsets + centers[np.array([0, 1, 0, 1, 0, 1, 0, 1])]
        keys = jax.random.split(jax.random.PRNGKey(1), 16)
        got, want = values(cut, walkers, keys), values(every, walkers, keys)
        assert np.all(np.abs(want) > 1e-4)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)

        crowded = walkers.copy()
        for i in (1, 3):  # two electrons of nucleus 1 join the four of nucleus 0
            crowded[:, i] = centers[0] + offsets[:, i] * 0.5
        got, want = values(cut, crowded, keys), values(every, crowded, keys)
        assert np.all(np.abs(got - want) > 1e-8)
