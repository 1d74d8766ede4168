"""Hartree-Fock's orbitals in a canonical gauge: the same orbitals from every launch."""

import subprocess
import sys

import numpy as np
import pytest
from pyscf import scf

from psijax.system import preset
from psijax.system.scf import canonical_orbitals, hartree_fock


def _uhf(name):
    mf = scf.UHF(preset(name).to_pyscf("sto-6g"))
    mf.verbose, mf.init_guess = 0, "minao"
    mf.kernel()
    return mf


def _scramble(coeff, energies, rng):
    """Flip every column's sign at random and rotate each degenerate level at random."""
    coeff = coeff * rng.choice([-1.0, 1.0], size=coeff.shape[1])
    start = 0
    for stop in range(1, len(energies) + 1):
        if stop < len(energies) and energies[stop] - energies[stop - 1] < 1e-6:
            continue
        q, _ = np.linalg.qr(rng.normal(size=(stop - start, stop - start)))
        coeff[:, start:stop] = coeff[:, start:stop] @ q
        start = stop
    return coeff


@pytest.mark.parametrize("name", ["N2", "C", "Ne", "LiH"])
def test_the_gauge_does_not_depend_on_the_eigensolvers_choice(name):
    """N2's pi pair, carbon's p level, neon's filled p shell, LiH's empty pi pair: any
    rotation within a level and any signs give back the same orbitals, which still span
    each level, stay orthonormal and diagonalise the Fock matrix."""
    mf, rng = _uhf(name), np.random.default_rng(0)
    overlap = mf.get_ovlp()
    for coeff, energies, fock in zip(mf.mo_coeff, mf.mo_energy, mf.get_fock(), strict=True):
        canonical = canonical_orbitals(coeff, energies)
        for _ in range(3):
            again = canonical_orbitals(_scramble(coeff, energies, rng), energies)
            np.testing.assert_allclose(again, canonical, atol=1e-10)
        identity = np.eye(len(energies))
        np.testing.assert_allclose(canonical.T @ overlap @ canonical, identity, atol=1e-10)
        np.testing.assert_allclose(canonical.T @ fock @ canonical, np.diag(energies), atol=1e-5)
        # the same space: the density matrix of every level is unchanged
        np.testing.assert_allclose(canonical @ canonical.T, coeff @ coeff.T, atol=1e-10)
    assert (np.diff(mf.mo_energy[0]) < 1e-6).any()  # each case has a degenerate level


def test_a_lone_orbital_only_has_its_sign_fixed():
    coeff = np.array([[0.0, 0.6], [-0.8, 0.8]])
    out = canonical_orbitals(coeff, np.array([-1.0, 0.5]))
    np.testing.assert_array_equal(out, [[0.0, 0.6], [0.8, 0.8]])


_DUMP = """
import sys, numpy as np
from psijax.system import preset
from psijax.system.scf import hartree_fock
hf = hartree_fock(preset("N2"))
np.save(sys.argv[1], np.concatenate([hf.coeff_up, hf.coeff_down, hf.spectrum[0].virtual_coeff], 1))
"""


def test_two_processes_get_the_same_n2_orbitals(tmp_path):
    """pyscf returns N2's degenerate pi orbitals rotated differently from process to
    process; pretraining fits orbitals one by one, so launches with one seed differed."""
    runs = []
    for i in range(2):
        subprocess.run([sys.executable, "-c", _DUMP, str(tmp_path / f"{i}.npy")], check=True)
        runs.append(np.load(tmp_path / f"{i}.npy"))
    np.testing.assert_allclose(runs[0], runs[1], atol=1e-9)
    here = hartree_fock(preset("N2"))
    np.testing.assert_allclose(here.coeff_up, runs[0][:, : here.n_up], atol=1e-9)
