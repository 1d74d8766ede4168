"""Effective core potentials: the quadrature, the two terms against pyscf's integrals, the
molecule's valence electrons, and a run with an ECP from training to evaluation.

The terms are checked against pyscf, not against psijax: for every occupied Hartree-Fock
orbital phi_k (pyscf's own SCF with the same ECP and basis), psijax's local + nonlocal
ECP terms applied to phi_k and integrated over pyscf's Becke grid give <phi_k|V_ECP|phi_k>;
their sum must equal tr(D V) from libcint's ECP integrals (``ECPscalar``). Atoms with
projectors up to l = 0 (C), 1 (Cl) and 2 (Ga).
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import psijax
from psijax import laplacian, system
from psijax.config import Config
from psijax.errors import InputError
from psijax.hamiltonian import base, quadrature
from psijax.hamiltonian import ecp as ecp_terms
from psijax.system import scf
from psijax.types import Psi

from runs import TINY


@pytest.fixture(autouse=True)
def _x64():
    with jax.enable_x64(True):
        yield


def _legendre(ell, x):
    return np.asarray(quadrature.legendre(ell, jnp.asarray(x, jnp.float64)))


def _unit(rng):
    v = rng.normal(size=3)
    return v / np.linalg.norm(v)


@pytest.mark.parametrize("n_points", sorted(quadrature.DEGREE))
def test_each_rule_integrates_projector_products_exactly(n_points):
    """(1/4 pi) int P_l(u.a) P_l'(u.b) dOmega = delta_ll' P_l(a.b) / (2l + 1), exact for every
    l + l' up to the rule's degree, in any orientation; the degree above fails somewhere."""
    points, weights = quadrature.rule(n_points)
    assert weights.sum() == pytest.approx(1.0, abs=1e-15)
    rng = np.random.default_rng(n_points)
    degree = quadrature.DEGREE[n_points]
    for ell in range(degree + 1):
        for ell2 in range(degree + 1 - ell):
            a, b = _unit(rng), _unit(rng)
            got = np.sum(weights * _legendre(ell, points @ a) * _legendre(ell2, points @ b))
            want = _legendre(ell, a @ b) / (2 * ell + 1) if ell == ell2 else 0.0
            assert got == pytest.approx(want, abs=1e-13), (ell, ell2)
    worst = 0.0
    for _ in range(20):
        a, b = _unit(rng), _unit(rng)
        ell = (degree + 2) // 2
        got = np.sum(weights * _legendre(ell, points @ a) * _legendre(degree + 1 - ell, points @ b))
        want = _legendre(ell, a @ b) / (2 * ell + 1) if ell == degree + 1 - ell else 0.0
        worst = max(worst, abs(got - want))
    assert worst > 1e-3


@pytest.mark.parametrize("ell", [0, 2, 4])
def test_randomly_rotated_rule_is_unbiased_beyond_its_degree(ell):
    """Averaged over random rotations the 12-point rule integrates P_l(u.a) P_l(u.b) with
    l + l = 8 > 5 correctly: the mean is within 4 standard errors of the exact value."""
    points, weights = quadrature.rule(12)
    rng = np.random.default_rng(ell)
    a, b = _unit(rng), _unit(rng)
    keys = jax.random.split(jax.random.PRNGKey(ell), 4000)
    rotations = np.asarray(jax.vmap(lambda k: quadrature.random_rotation(k, jnp.float64))(keys))
    rotated = np.einsum("kij,qj->kqi", rotations, points)
    values = np.sum(weights * _legendre(ell, rotated @ a) * _legendre(ell, rotated @ b), axis=1)
    want = _legendre(ell, a @ b) / (2 * ell + 1)
    assert abs(values.mean() - want) < 4 * values.std() / np.sqrt(values.size) + 1e-12
    assert np.allclose(np.einsum("kij,kil->kjl", rotations, rotations), np.eye(3), atol=1e-12)
    assert np.allclose(np.linalg.det(rotations), 1.0)


ATOMS = [("C 0 0 0", 2, 0), ("Cl 0 0 0", 1, 1), ("Ga 0 0 0", 1, 2)]  # (atom, spin, max l)


def _hartree_fock(atom: str, spin: int):
    molecule = system.resolve(atom, spin=spin, ecp="ccecp")
    return molecule, scf.hartree_fock(molecule)


def _one_orbital(orbitals, column):
    """psi(r) = phi(r) for one electron r [1, 3]: one column of MO coefficients."""

    def apply(params, r):
        up, _ = orbitals(r[None], (column, column[:, :0]))
        value = up[0, 0, 0]
        return Psi(jnp.sign(value), jnp.log(jnp.abs(value)))

    return base.PsiFunctions(lambda p, r: apply(p, r).log_abs, apply)


@pytest.mark.parametrize("atom,spin,max_l", ATOMS, ids=[a[0].split()[0] for a in ATOMS])
def test_ecp_terms_match_pyscf_integrals(atom, spin, max_l):
    from pyscf import dft

    molecule, hf = _hartree_fock(atom, spin)
    assert ecp_terms.EcpNonlocal.of(molecule).terms.shape[1] == max_l + 1
    mol = hf.mol
    v_ecp = mol.intor("ECPscalar")
    want = sum(np.einsum("ij,ji", c @ c.T, v_ecp) for c in (hf.coeff_up, hf.coeff_down))
    grids = dft.gen_grid.Grids(mol)
    grids.level = 3
    grids.build()
    points, weights = jnp.asarray(grids.coords), grids.weights
    local, nonlocal_ = ecp_terms.EcpLocal.of(molecule), ecp_terms.EcpNonlocal.of(molecule)
    orbitals, _ = scf.hf_orbital_basis(hf)
    to_basis = np.eye(mol.nao_cart()) if mol.cart else mol.cart2sph_coeff()
    columns = jnp.asarray((to_basis @ np.hstack([hf.coeff_up, hf.coeff_down])).T[..., None])

    def energy(column, r, key):
        psi = _one_orbital(orbitals, column)
        walker = base.Walker(psi, None, r[None], laplacian.Forward(), key)
        value = local(walker)["ecp_local"] + nonlocal_(walker, key)["ecp_nonlocal"]
        return value, 2 * walker.psi.log_abs

    keys = jax.random.split(jax.random.PRNGKey(0), points.shape[0])
    per_point = jax.vmap(energy, in_axes=(None, 0, 0))
    e, log_density = jax.jit(jax.vmap(per_point, in_axes=(0, None, None)))(columns, points, keys)
    got = np.sum(weights * np.exp(np.asarray(log_density)) * np.asarray(e))
    assert got == pytest.approx(want, rel=1e-6, abs=1e-6)


def test_nonlocal_term_of_an_atoms_determinant_does_not_depend_on_the_rotation():
    """A Hartree-Fock determinant of one atom has angular momenta up to the basis' (d in
    ccecp-cc-pvdz) about its nucleus, so the 12-point rule is exact for its projections at
    every walker: two different rotations give the same value (float64)."""
    molecule, hf = _hartree_fock("Ga 0 0 0", 1)
    orbitals = scf.hf_orbitals(hf)

    def apply(params, r):
        up, down = orbitals(r[None])
        s_up, l_up = jnp.linalg.slogdet(up[0])
        s_down, l_down = jnp.linalg.slogdet(down[0])
        return Psi(s_up * s_down, l_up + l_down)

    psi = base.PsiFunctions(lambda p, r: apply(p, r).log_abs, apply)
    term = ecp_terms.EcpNonlocal.of(molecule)
    r = jnp.asarray(np.random.default_rng(0).normal(size=(3, molecule.n_electrons, 3)))

    def value(r, key):
        return term(base.Walker(psi, None, r, laplacian.Forward(), key), key)["ecp_nonlocal"]

    values = jax.jit(jax.vmap(value))
    first = values(r, jax.random.split(jax.random.PRNGKey(1), 3))
    second = values(r, jax.random.split(jax.random.PRNGKey(2), 3))
    assert np.all(np.abs(np.asarray(first)) > 1e-3)
    np.testing.assert_allclose(first, second, rtol=1e-9)


@pytest.mark.parametrize("basis", ["ccecp-cc-pvtz", "ccecp-cc-pvqz"])
def test_orbital_evaluator_handles_f_and_g_shells(basis):
    """psijax's JAX Gaussian-orbital evaluator against pyscf's eval_gto, with f (TZ) and g
    (QZ) shells of the ECP bases."""
    molecule = system.resolve("Ga 0 0 0; Cl 0 0 4.2", ecp="ccecp")
    hf = scf.hartree_fock(molecule, basis, max_cycle=1)
    r = np.random.default_rng(1).normal(size=(3, molecule.n_electrons, 3)) * 1.5
    want = hf.orbitals(r)
    got = scf.hf_orbitals(hf)(jnp.asarray(r))
    for w, g in zip(want, got, strict=True):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-10, atol=1e-12)


def test_molecule_with_ecp_counts_valence_electrons():
    plain = system.resolve("Na 0 0 0; Cl 0 0 4.46")
    both = system.resolve("Na 0 0 0; Cl 0 0 4.46", ecp="ccecp")
    only_cl = system.resolve("Na 0 0 0; Cl 0 0 4.46", ecp="Cl:ccecp")
    assert (plain.n_electrons, both.n_electrons, only_cl.n_electrons) == (28, 8, 18)
    assert both.core_electrons == (10, 10) and only_cl.core_electrons == (0, 10)
    assert list(both.nuclear_charges) == [1.0, 7.0]
    assert both.nuclear_repulsion == pytest.approx(7.0 / 4.46)
    assert both.exact_energy is None and both != plain
    assert both.fingerprint() != plain.fingerprint()
    assert plain.fingerprint() == system.resolve("Na 0 0 0; Cl 0 0 4.46").fingerprint()
    # H has a ccECP without a core: "ccecp" leaves it all-electron, "H:ccecp" gives it
    hcl = system.resolve("H 0 0 0; Cl 0 0 2.4", ecp="ccecp")
    assert hcl.ecp == (None, "ccecp") and hcl.n_electrons == 8
    assert system.resolve("H 0 0 0; Cl 0 0 2.4", ecp="H:ccecp Cl:ccecp").ecp == ("ccecp",) * 2
    with pytest.raises(InputError, match="mixes a table"):
        system.resolve("Cl 0 0 0", ecp="ccecp Cl:ccecp")


def test_an_unknown_table_is_one_error_without_pyscfs_install_hint():
    """pyscf warns "install basis-set-exchange" for a name it lacks; a typo in --ecp gets
    only the one-line error."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(InputError, match="unknown ECP 'ccecq'"):
            system.resolve("N 0 0 0", ecp="ccecq")
    assert not caught, [str(w.message) for w in caught]


def test_pyscf_mole_with_named_ecp_round_trips():
    from pyscf import gto

    mol = gto.M(atom="Na 0 0 0; Cl 0 0 4.46", unit="Bohr", basis="ccecp-cc-pvdz",
                ecp={"Na": "ccecp", "Cl": "ccecp"}, verbose=0)  # fmt: skip
    molecule = system.resolve(mol)
    assert molecule.ecp == ("ccecp", "ccecp") and molecule.n_electrons == mol.nelectron


def test_hamiltonian_has_the_ecp_terms_only_with_an_ecp():
    config = Config(ecp="ccecp")
    with_ecp = psijax.hamiltonian.for_config(system.resolve("Cl 0 0 0", ecp="ccecp"), config)
    plain = psijax.hamiltonian.for_config(system.resolve("Cl 0 0 0"), Config())
    assert with_ecp.columns[-2:] == ("ecp_local", "ecp_nonlocal") and with_ecp.needs_key
    assert "ecp_local" not in plain.columns and not plain.needs_key
    carbon = psijax.hamiltonian.for_config(system.resolve("C 0 0 0", spin=2, ecp="ccecp"), config)
    assert carbon.terms[-1].n_points == 12
    assert Config(ecp_quadrature=26).ecp_quadrature == 26


def test_a_run_with_an_ecp_trains_evaluates_and_loads(tmp_path, capsys):
    """C with ccECP (4 valence electrons) through the public API: the header names the ECP,
    metrics carry the ECP columns, evaluation has them and the forces (the ECP nucleus' also
    by the space warp, and their combination), and
    load(...).local_energy includes them."""
    out = tmp_path / "c"
    settings = {**TINY, "system": "C 0 0 0", "spin": 2, "ecp": "ccecp", "steps": 3}
    settings |= dict(walkers=8, mcmc_moves=1, pretrain_steps=2, burn_in_steps=1)
    result = psijax.train(**settings, out=str(out), progress=False)
    assert result.molecule.n_electrons == 4 and np.isfinite(result.energy.mean)
    evaluation = psijax.evaluate(str(out), steps=3, burn_in=1, progress=False)
    assert {"ecp_local", "ecp_nonlocal"} <= set(evaluation.estimates)
    assert np.isfinite(evaluation.estimates["force_0_z"].mean)
    assert np.isfinite(evaluation.estimates["force_warp_0_z"].mean)  # the space warp's
    assert np.isfinite(evaluation.summary["derived"]["force_0_z_combined"]["warp_weight"])
    assert evaluation.estimates["ecp_nonlocal"].mean != 0.0
    wf = psijax.load(str(out))
    parts = wf.local_values(wf.walkers[:3])
    total = parts["kinetic"] + parts["electron_nucleus"] + parts["electron_electron"]
    total += parts["nucleus_nucleus"] + parts["ecp_local"] + parts["ecp_nonlocal"]
    np.testing.assert_allclose(parts["energy"], total, rtol=1e-5)
    forces = wf.local_values(wf.walkers[:3], ["energy", "forces"])
    assert np.isfinite(forces["force_hf_0_z"]).all() and np.isfinite(forces["force_hf_0_x"]).all()


def test_dry_run_names_the_ecp_atoms_and_their_cores(capsys, tmp_path, monkeypatch):
    from psijax.cli import main

    monkeypatch.chdir(tmp_path)  # the default --out, runs/psijax, may hold a user's run here
    code = main(["train", "--system", "Na 0 0 0; Cl 0 0 4.46", "--ecp", "ccecp", "--dry-run"])
    text = capsys.readouterr().out
    assert code in (0, None)
    assert list(tmp_path.iterdir()) == []
    assert "electrons      8: 4 up, 4 down (valence)" in text
    assert "ecp            Na1 Cl2 ccecp (10 + 10 core electrons)" in text
    assert "UHF/ccecp-cc-pvdz" in text


def test_ecp_forces_are_minus_the_derivative_of_the_potential_energy():
    """One valence electron (Li with ccECP) in a fixed 1s cloud displaced from the nucleus:
    psi does not move with the nucleus, so dE/dR = <dE_L/dR> with psi held fixed. On the
    same exactly sampled walkers (float64), the Hellmann-Feynman force (the ECP atom's
    whole potential, Coulomb and both ECP terms, differentiated) agrees with minus the
    central difference of the local energy to 0.2% of its size (the two draw their
    quadrature rotations from different keys: equal in the mean, not walker by walker);
    the bare nucleus's zero-variance estimator misses it by many error bars."""
    with jax.enable_x64(True):
        _check_ecp_forces()


def _check_ecp_forces():
    from psijax import hamiltonian
    from psijax.estimators import forces as forces_lib
    from psijax.estimators import observables
    from psijax.types import Psi

    rng = np.random.default_rng(7)
    n, zeta, d = 4000, 0.7, np.array([0.3, -0.2, 0.8])
    radius = rng.gamma(3.0, 1.0 / (2.0 * zeta), n)
    direction = rng.normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    walkers = jnp.asarray(d + radius[:, None] * direction)[:, None, :]
    keys = jax.random.split(jax.random.PRNGKey(3), n)
    apply = lambda p, r: Psi(jnp.ones((), r.dtype), -zeta * jnp.linalg.norm(r[0] - d))
    psi = psijax.hamiltonian.PsiFunctions(lambda p, r: apply(p, r).log_abs, apply)

    def values(z, observed=()):
        li = system.resolve(f"Li 0 0 {z}", ecp="ccecp")
        ham = hamiltonian.for_config(li, Config(ecp="ccecp"))
        local = observables.local_values(ham, psi, observed)
        return jax.jit(jax.vmap(lambda r, k: local(None, r, k)))(walkers, keys)

    li = system.resolve("Li 0 0 0", ecp="ccecp")
    with_ecp = forces_lib.Forces(li, ecp_terms=forces_lib.ecp_terms(li))
    without = forces_lib.Forces(li)  # Z_eff's zero-variance estimator only
    h = 1e-4
    slope = (values(h)["energy"] - values(-h)["energy"]) / (2 * h)  # per walker, dE_L/dz
    force = values(0.0, (with_ecp,))["force_hf_0_z"]
    gap = np.asarray(force + slope)
    error = gap.std(ddof=1) / np.sqrt(n)
    assert abs(float(np.mean(slope))) > 0.05  # a force worth testing
    assert abs(gap.mean()) < 4 * error and error < 2e-3 * abs(float(np.mean(slope)))
    assert np.median(np.abs(gap)) < 1e-3  # most walkers agree to the rotations' noise
    coulomb_only = np.asarray(values(0.0, (without,))["force_hf_0_z"] + slope)
    assert abs(coulomb_only.mean()) > 10 * coulomb_only.std(ddof=1) / np.sqrt(n)
