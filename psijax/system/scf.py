"""Hartree-Fock with pyscf, and its occupied orbitals evaluated in JAX.

``hartree_fock`` runs pyscf UHF once on the host; ``hf_orbital_basis`` evaluates the
occupied orbitals at walkers in JAX from the basis' Gaussian exponents and contraction
coefficients, so that pretraining can run as one compiled loop on the devices.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

from psijax.system import bloch
from psijax.system.lattice import Lattice
from psijax.system.molecule import Molecule
from psijax.types import Array, Walkers

logger = logging.getLogger(__name__)


class Spectrum(NamedTuple):
    """One spin's UHF orbital energies (Hartree) and its unoccupied orbitals."""

    occupied: np.ndarray  # [n_occupied] energies, in the order of the occupied columns
    virtual: np.ndarray  # [n_virtual] energies
    virtual_coeff: np.ndarray  # [n_ao, n_virtual]


@dataclasses.dataclass(frozen=True, eq=False)
class HartreeFock:
    """A converged (or best-effort) UHF solution.

    Attributes:
        mol: the built pyscf `gto.Mole` (bohr).
        coeff_up, coeff_down: occupied MO coefficients, [n_ao, n_up] and [n_ao, n_down].
        energy: UHF total energy in Hartree (nuclear repulsion included).
        converged: whether the SCF converged.
    """

    mol: Any
    coeff_up: np.ndarray
    coeff_down: np.ndarray
    energy: float
    converged: bool = True
    # Per spin (up, down), the orbital energies and the unoccupied orbitals: what excited
    # configurations are built from (``psijax.training.pretrain_states``).
    spectrum: tuple[Spectrum, Spectrum] | None = None

    @property
    def n_up(self) -> int:
        return self.coeff_up.shape[1]

    @property
    def n_down(self) -> int:
        return self.coeff_down.shape[1]

    def orbitals(self, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Occupied orbitals of each spin at that spin's electrons, for walkers r [W, N, 3].

        Returns ([W, n_up, n_up], [W, n_down, n_down]) in float64; rows are electrons
        (spin up first in r), columns are orbitals in order of energy.
        """
        r = np.asarray(r, dtype=np.float64)
        n = self.n_up + self.n_down
        if r.ndim != 3 or r.shape[1:] != (n, 3):
            raise ValueError(f"walkers must have shape [W, {n}, 3], got {list(r.shape)}")
        kind = "GTOval_cart" if self.mol.cart else "GTOval_sph"
        ao = self.mol.eval_gto(kind, r.reshape(-1, 3)).reshape(r.shape[0], n, -1)
        up = ao[:, : self.n_up] @ self.coeff_up
        down = ao[:, self.n_up :] @ self.coeff_down
        return up, down


def hartree_fock(molecule: Molecule, basis: str = "sto-6g", *, max_cycle: int = 100) -> HartreeFock:
    """Run pyscf UHF on `molecule` (quiet, minao guess); warns via logging if not converged.

    A solution is a function of its arguments alone, and the process keeps the last few
    (``SOLUTIONS_KEPT``): the runs of one molecule in one process (seeds in a loop, a
    crystal's cell, whose periodic UHF takes seconds to minutes) solve it once."""
    hf = _solved(molecule, basis, max_cycle)
    if not hf.converged:
        logger.warning(
            "Hartree-Fock (UHF/%s) for %s did not converge in %d cycles; pretraining on the "
            "last iterate (E = %.6f Ha)",
            basis,
            molecule.name or "".join(molecule.symbols),
            max_cycle,
            hf.energy,
        )
    return hf


SOLUTIONS_KEPT = 4  # Hartree-Fock solutions a process keeps (``hartree_fock``)


@functools.lru_cache(maxsize=SOLUTIONS_KEPT)
def _solved(molecule: Molecule, basis: str, max_cycle: int) -> HartreeFock:
    from pyscf import scf

    mol = molecule.to_pyscf(basis)
    mol.verbose = 0
    mf = _without_chkfile(scf.UHF(mol) if molecule.lattice is None else _periodic_uhf(mol))
    mf.init_guess = "minao"
    mf.max_cycle = max_cycle
    energy = float(mf.kernel())
    # Each spin's orbitals, occupied and virtual apart, in a canonical gauge (see
    # ``canonical_orbitals``): pretraining fits the network's orbitals one by one, so an
    # arbitrary rotation of N2's pi pair would make every launch a different run.
    occupied, virtual = [], []
    for c, e, o in zip(mf.mo_coeff, mf.mo_energy, mf.mo_occ, strict=True):
        c, e, o = np.real_if_close(np.asarray(c)), np.asarray(e), np.asarray(o)
        occupied.append((canonical_orbitals(c[:, o > 0], e[o > 0]), e[o > 0]))
        virtual.append((canonical_orbitals(c[:, o == 0], e[o == 0]), e[o == 0]))
    up, down = (c for c, _ in occupied)
    if (up.shape[1], down.shape[1]) != (molecule.n_up, molecule.n_down):
        raise RuntimeError(
            f"UHF occupied {up.shape[1]} up and {down.shape[1]} down orbitals, expected "
            f"{molecule.n_up} and {molecule.n_down}"
        )
    spectrum = tuple(
        Spectrum(e_occ, e_virt, c_virt)
        for (_, e_occ), (c_virt, e_virt) in zip(occupied, virtual, strict=True)
    )
    for array in (up, down, *(a for s in spectrum for a in s)):
        array.flags.writeable = False  # kept for later runs: read-only to every one of them
    return HartreeFock(mol, up, down, energy, bool(mf.converged), spectrum)


def relaxed(hf: HartreeFock, spin: int, occupied: int, virtual: int) -> HartreeFock | None:
    """The configuration of ``hf`` with occupied orbital ``occupied`` of ``spin`` (0 up,
    1 down) replaced by its virtual orbital ``virtual``, with every orbital relaxed for
    that configuration: UHF kept on it by the maximum overlap method (Gilbert, Besley and
    Gill, J. Phys. Chem. A 112, 13164 (2008)). A ground state's virtual orbitals feel all
    N electrons and, in a basis with diffuse functions, spread far out (LiH's lowest in
    aug-cc-pVDZ: <r^2> = 77 bohr^2, the relaxed excited orbital's 21). None where the SCF
    does not converge or leaves the configuration (its occupied orbitals of either spin
    overlap the unrelaxed ones' by less than a half); molecules only."""
    from pyscf import scf

    mol = hf.mol
    if hasattr(mol, "lattice_vectors") or hf.spectrum is None:
        return None
    coeffs, occupations = [], []
    for s, (c_occ, spectrum) in enumerate(
        zip((hf.coeff_up, hf.coeff_down), hf.spectrum, strict=True)
    ):
        n_occ = c_occ.shape[1]
        occ = np.concatenate([np.ones(n_occ), np.zeros(spectrum.virtual_coeff.shape[1])])
        if s == spin:
            occ[occupied], occ[n_occ + virtual] = 0.0, 1.0
        coeffs.append(np.concatenate([c_occ, spectrum.virtual_coeff], axis=1))
        occupations.append(occ)
    start, occupied_start = np.array(coeffs), np.array(occupations)
    mf = scf.addons.mom_occ(_without_chkfile(scf.UHF(mol)), start, occupied_start)
    mf.verbose, mf.max_cycle = 0, 100
    energy = float(mf.kernel(mf.make_rdm1(start, occupied_start)))
    if not mf.converged:
        return None
    overlap = mol.intor("int1e_ovlp")
    kept, spectra = [], []
    for c, occ, c_new, e_new, o_new in zip(
        coeffs, occupations, mf.mo_coeff, mf.mo_energy, mf.mo_occ, strict=True
    ):
        c_new, e_new, taken = np.asarray(c_new), np.asarray(e_new), np.asarray(o_new) > 0
        if abs(np.linalg.det(c[:, occ > 0].T @ overlap @ c_new[:, taken])) < 0.5:
            return None
        kept.append(canonical_orbitals(c_new[:, taken], e_new[taken]))
        virt = canonical_orbitals(c_new[:, ~taken], e_new[~taken])
        spectra.append(Spectrum(e_new[taken], e_new[~taken], virt))
    return HartreeFock(mol, kept[0], kept[1], energy, True, tuple(spectra))


def _without_chkfile(mf: Any) -> Any:
    """``mf`` writing no checkpoint file: pyscf opens a temporary one per SCF object, which
    psijax never reads, and a garbage collector that finalizes it before its wrapper warns
    of an unclosed file (an error under pytest's warnings as errors)."""
    chkfile = getattr(mf, "_chkfile", None)
    if chkfile is not None:
        chkfile.close()
        mf._chkfile = None
    mf.chkfile = None
    return mf


def _periodic_uhf(cell: Any) -> Any:
    """pyscf.pbc UHF at the Gamma point of a built ``Cell``, its integrals by Gaussian
    density fitting (Weigend's auxiliary basis covers H-Kr), exchange's divergence by the
    Madelung constant: the Hartree-Fock energy of the Hamiltonian psijax samples, the
    Ewald sum of every charge with each electron's images (``psijax.hamiltonian.ewald``)."""
    from pyscf.pbc import scf as pbc_scf

    mf = pbc_scf.UHF(cell).density_fit(auxbasis="weigend")
    mf.exxdiv = "ewald"
    return mf


# Orbital energies closer than this (Hartree) are one degenerate level: far above the
# SCF's noise (~1e-8 between N2's pi orbitals), far below any real splitting.
DEGENERATE = 1e-6


def canonical_orbitals(coeff: np.ndarray, energies: np.ndarray, tol: float = DEGENERATE):
    """`coeff` [n_ao, n] with what an eigensolver leaves arbitrary fixed.

    An eigenvector's sign, and the basis of a degenerate level (N2's or an atom's p
    orbitals), follow the last bits of the Fock matrix, which pyscf's threads change from
    run to run. Within each level (columns in order of energy, neighbours closer than
    `tol`), the columns are rotated so that, taking AOs in pyscf's order, the first
    AO with weight in the level carries all of the first orbital's share of it (with a
    positive coefficient), the next AO independent of it the second's, and so on: a
    Gram-Schmidt over the block's rows. The rotation is orthogonal, so orthonormality
    and the spanned space are kept; a lone orbital only has its sign fixed.
    """
    coeff = np.array(coeff, dtype=np.float64)
    energies = np.asarray(energies, dtype=np.float64)
    start = 0
    for stop in range(1, len(energies) + 1):
        if stop < len(energies) and energies[stop] - energies[stop - 1] < tol:
            continue
        block = coeff[:, start:stop]
        floor = 1e-4 * np.linalg.norm(block, axis=1).max()
        basis: list[np.ndarray] = []
        for row in block:
            v = row - sum(((row @ u) * u for u in basis), np.zeros_like(row))
            norm = np.linalg.norm(v)
            if norm > floor:
                basis.append(v / norm)
            if len(basis) == block.shape[1]:
                break
        coeff[:, start:stop] = block @ np.stack(basis, axis=1)
        start = stop
    return coeff


# ------------------------------------------------------------------- HF orbitals in JAX
# libcint's extra factor on cartesian s and p functions (1/sqrt(4 pi), sqrt(3 / (4 pi))).
_COMMON_FACTOR = {0: 0.282094791773878143, 1: 0.488602511902919921}


def hf_orbitals(hf: HartreeFock) -> Callable[[Walkers], tuple[Array, Array]]:
    """A JAX function with the values of `HartreeFock.orbitals`, in the walkers' dtype.

    Cartesian Gaussians are evaluated shell by shell from pyscf's exponents and normalised
    contraction coefficients (pyscf's AO order), and pyscf's cartesian-to-spherical map is
    folded into the MO coefficients; the result matches ``mol.eval_gto`` to rounding.
    """
    orbitals, coefficients = hf_orbital_basis(hf)
    return lambda r: orbitals(r, coefficients)


def hf_orbital_basis(hf: HartreeFock) -> tuple[Callable[..., tuple[Array, Array]], tuple]:
    """``hf_orbitals`` as ``orbitals(r, coefficients)`` and the MO ``coefficients``.

    The coefficients are an argument, not constants of the compiled program: pyscf's SCF
    gives them with run-to-run differences in the last bits, and a program holding them
    as constants would miss JAX's persistent compilation cache on every launch (4-5 s of
    compile at the default LiH job).
    """
    from pyscf.gto import gto_norm

    mol = hf.mol
    # a periodic cell's basis functions are Bloch sums at Gamma (``psijax.system.bloch``),
    # at positions folded into the cell
    cell = Lattice(np.asarray(mol.lattice_vectors())) if hasattr(mol, "lattice_vectors") else None
    shells = []
    for b in range(mol.nbas):
        ang, exponents = mol.bas_angular(b), mol.bas_exp(b)
        norm = gto_norm(ang, exponents)[:, None] * _COMMON_FACTOR.get(ang, 1.0)
        coeffs = mol.bas_ctr_coeff(b) * norm
        powers = [(x, y, ang - x - y) for x in range(ang, -1, -1) for y in range(ang - x, -1, -1)]
        shells.append(bloch.shell(mol.bas_coord(b), exponents, coeffs, powers, cell))
    to_basis = np.eye(mol.nao_cart()) if mol.cart else mol.cart2sph_coeff()
    coefficients = (to_basis @ hf.coeff_up, to_basis @ hf.coeff_down)
    n_up = hf.n_up

    def orbitals(r: Walkers, coefficients) -> tuple[Array, Array]:
        dtype = r.dtype
        coeff_up, coeff_down = coefficients
        if cell is not None:
            r = cell.wrap(r)
        # [W, N, contraction * xyz] per shell, in pyscf's AO order
        blocks = [values(r).reshape(*r.shape[:-1], -1) for values in shells]
        ao = jnp.concatenate(blocks, axis=-1)  # [W, N, n_ao_cart]
        up = ao[:, :n_up] @ jnp.asarray(coeff_up, dtype)
        down = ao[:, n_up:] @ jnp.asarray(coeff_down, dtype)
        return up, down

    return orbitals, coefficients
