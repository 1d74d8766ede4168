"""The space-warp estimator of forces on ECP nuclei, and its combination with the direct one."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from psijax import hamiltonian, laplacian, registry, system
from psijax.config import Config
from psijax.estimators import forces as forces_lib
from psijax.estimators import observables, space_warp
from psijax.types import Psi


def slater_1s(rng, n: int, zeta: float, center) -> np.ndarray:
    """n points from |exp(-zeta |r - center|)|^2: radius ~ Gamma(3, 1 / (2 zeta))."""
    radius = rng.gamma(3.0, 1.0 / (2.0 * zeta), n)
    direction = rng.normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    return np.asarray(center) + radius[:, None] * direction


def per_walker(molecule, psi, observed, walkers, params=None):
    ham = hamiltonian.Hamiltonian(
        hamiltonian.for_config(molecule, Config(ecp="ccecp")).terms, laplacian.Forward()
    )
    local = observables.local_values(ham, psi, observed)
    keys = jax.random.split(jax.random.PRNGKey(5), len(walkers))
    values = jax.jit(jax.vmap(lambda r, k: local(params, r, k)))(jnp.asarray(walkers), keys)
    return {k: np.asarray(v, np.float64) for k, v in values.items()}


def test_weights_sum_to_one_and_follow_the_nearest_nucleus():
    nuclei = jnp.asarray([[0.0, 0.0, 0.0], [0.0, 0.0, 2.0]])
    r = jnp.asarray([[0.0, 0.0, 0.0], [0.0, 0.0, 0.1], [0.0, 0.0, 1.0], [0.3, 0.0, 1.9]])
    w = np.asarray(space_warp.weights(r, nuclei))
    np.testing.assert_allclose(w.sum(1), 1.0, rtol=1e-6)
    assert w[0, 0] == pytest.approx(1.0) and w[1, 0] > 0.999 and w[3, 1] > 0.99
    assert w[2, 0] == pytest.approx(0.5)  # the midpoint: shared equally


def test_the_warp_estimator_of_a_lone_ecp_atom_is_zero_walker_by_walker():
    """A single atom: the warp moves every electron with the nucleus, a translation, which
    changes neither E_L (kinetic, Coulomb, both ECP terms with their rotated quadrature)
    nor log|psi| of a network of electron-nucleus differences: D E_L = 0 and the warped
    log-derivative is 0 for every walker, while the direct Hellmann-Feynman part is not."""
    with jax.enable_x64(True):
        carbon = system.resolve("C 0.1 -0.2 0.3", spin=2, ecp="ccecp")
        config = Config(system="C", ecp="ccecp", spin=2, layers=((8, 4),), determinants=2)
        net = registry.ansatz(carbon, config)
        params = net.init(jax.random.PRNGKey(0), jnp.float64)
        observed = (forces_lib.from_config(carbon, net),)
        assert observed[0].warp_atoms == (0,)
        rng = np.random.default_rng(3)
        walkers = np.asarray(carbon.nuclear_positions[0]) + rng.normal(size=(16, 4, 3))
        values = per_walker(carbon, net, observed, walkers, params)
        for c in "xyz":
            assert np.max(np.abs(values[f"_warp_de_0_{c}"])) < 1e-8
            assert np.max(np.abs(values[f"_warp_dlog_0_{c}"])) < 1e-8
            assert np.std(values[f"force_hf_0_{c}"]) > 0.1


def test_warp_and_direct_estimators_agree_on_a_molecule_with_an_ecp_atom():
    """LiH with ccECP on Li (two electrons), psi = 1s(r1 - R_Li - d) 1s(r2 - R_H) moving
    with the nuclei, sampled exactly (float64): the space-warp and the direct total force
    estimate the same derivative, walker pairs agreeing in the mean within four error bars
    of their difference, on a force that is far from zero; the least-variance combination
    keeps the mean."""
    with jax.enable_x64(True):
        _check_agreement()


def _check_agreement():
    n, bond = 6000, 1.8
    zetas, d = jnp.asarray([0.6, 1.0]), jnp.asarray([[0.2, -0.1, 0.4], [0.0, 0.0, 0.0]])
    lih = system.resolve(f"Li 0 0 0; H 0 0 {bond}", ecp="Li:ccecp")

    def apply_at(params, r, nuclei):
        log_abs = -jnp.sum(zetas * jnp.linalg.norm(r - nuclei - d, axis=-1))
        return Psi(jnp.ones((), r.dtype), log_abs)

    nuclei = jnp.asarray(lih.nuclear_positions)
    apply = lambda p, r: apply_at(p, r, nuclei)
    psi = hamiltonian.PsiFunctions(lambda p, r: apply(p, r).log_abs, apply)
    observed = (forces_lib.Forces(lih, apply_at, ecp_terms=forces_lib.ecp_terms(lih)),)
    assert observed[0].warp_atoms == (0,)
    centers = np.asarray(nuclei + d)
    rng = np.random.default_rng(11)
    walkers = np.stack([slater_1s(rng, n, 0.6, centers[0]), slater_1s(rng, n, 1.0, centers[1])], 1)
    v = per_walker(lih, psi, observed, walkers)
    e = v["energy"] - v["energy"].mean()
    for c in "xyz":
        dlog, wlog = v[f"_dlog_0_{c}"], v[f"_warp_dlog_0_{c}"]
        direct = v[f"force_hf_0_{c}"] - 2 * e * (dlog - dlog.mean())
        warp = -v[f"_warp_de_0_{c}"] - 2 * e * (wlog - wlog.mean())
        gap = direct - warp
        error = gap.std(ddof=1) / np.sqrt(n)
        assert abs(gap.mean()) < 4 * error
        if c == "z":
            assert abs(direct.mean()) > 10 * direct.std(ddof=1) / np.sqrt(n)
        combined, _ = forces_lib.control_variate(direct, warp)
        assert combined.std() <= min(direct.std(), warp.std()) * (1 + 1e-9)
        assert abs(combined.mean() - direct.mean()) < 4 * error


def test_control_variate_weights_the_quieter_estimator_and_keeps_nan_steps():
    noise = np.random.default_rng(2).normal(size=(3, 4000))
    direct = 1.0 + 3.0 * noise[0] + 0.5 * noise[1]
    warp = 1.0 + 3.0 * noise[0] + 2.0 * noise[2]  # the shared noise cancels in the mix
    combined, weight = forces_lib.control_variate(direct, warp)
    assert weight == pytest.approx(0.25 / (0.25 + 4.0), abs=0.03)
    assert combined.std() < direct.std() and combined.std() < warp.std()
    assert combined.mean() == pytest.approx(1.0, abs=4 * combined.std() / np.sqrt(4000))
    direct[5] = np.nan
    combined, _ = forces_lib.control_variate(direct, warp)
    assert len(combined) == 4000 and np.isnan(combined[5]) and np.isfinite(combined[6])
    few, weight = forces_lib.control_variate(np.arange(4.0), np.zeros(4))
    assert weight == 0.5 and np.allclose(few, np.arange(4.0) / 2)


def test_a_relaxation_steps_on_the_combined_force_of_an_ecp_nucleus():
    """The relaxation's step series: an ECP nucleus' force (with ``force_warp_*`` columns)
    is its least-variance combination, the others' are the direct force as written."""
    from psijax.curves.relax import _series

    noise = np.random.default_rng(4).normal(size=(3, 400))
    rows = []
    for k in range(400):
        row = {f"force_{a}_{c}": 0.1 * noise[2, k] for a in (0, 1) for c in "xyz"}
        for c in "xyz":
            row[f"force_0_{c}"] = 2.0 + 5.0 * noise[0, k]
            row[f"force_warp_0_{c}"] = 2.0 - 5.0 * noise[0, k] + 0.2 * noise[1, k]
        rows.append(row)
    series = _series(rows, 2)
    assert series.shape == (400, 2, 3)
    assert series[:, 0, 0].std() < 0.2  # against 5 for either alone
    assert series[:, 0, 0].mean() == pytest.approx(2.0, abs=0.05)
    np.testing.assert_array_equal(series[:, 1, 2], [r["force_1_z"] for r in rows])


def test_the_warps_local_energy_is_the_hamiltonians_term_by_term():
    """D E_L must differentiate the very local energy the Hamiltonian gives: for a molecule
    with an ECP its terms are exactly kinetic, Coulomb and the two ECP terms, and
    ``local_energy_at`` at the molecule's own nuclei equals their sum walker by walker
    (float64; the nonlocal term with the walker's own key, as the warp draws it). A term
    added to the molecular Hamiltonian fails here until the warp includes it."""
    with jax.enable_x64(True):
        lih = system.resolve("Li 0 0 0; H 0.3 0 2.9", ecp="Li:ccecp")
        ham = hamiltonian.for_config(lih, Config(ecp="ccecp"))
        assert set(ham.columns) == {"energy", "kinetic", "electron_nucleus",
                                    "electron_electron", "nucleus_nucleus", "ecp_local",
                                    "ecp_nonlocal"}  # fmt: skip
        net = registry.ansatz(lih, Config(layers=((8, 4),), determinants=2))
        params = net.init(jax.random.PRNGKey(1), jnp.float64)
        apply_at = lambda p, r, nuclei: net.at(nuclei).apply(p, r)
        nuclei = jnp.asarray(lih.nuclear_positions)
        terms = forces_lib.ecp_terms(lih)

        def both(r, key):
            w = ham.walker(net, params, r, key)
            parts = ham.parts(w)
            nonlocal_here = terms[1](w, w.key)["ecp_nonlocal"]
            expected = parts["energy"] - parts["ecp_nonlocal"] + nonlocal_here
            return expected, space_warp.local_energy_at(w, apply_at, lih, terms, r, nuclei)

        rng = np.random.default_rng(8)
        r = jnp.asarray(nuclei[rng.integers(0, 2, (3, 2))] + rng.normal(size=(3, 2, 3)))
        expected, got = jax.jit(jax.vmap(both))(r, jax.random.split(jax.random.PRNGKey(0), 3))
        assert np.all(np.abs(np.asarray(expected)) > 0.1)
        np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-10)
