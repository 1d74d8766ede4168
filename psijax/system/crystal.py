"""Crystals: atoms in a periodic cell, repeated over all space.

A ``Crystal`` is a ``Molecule`` (its atoms are the cell's, in bohr) with a ``Lattice``:
every nucleus and every electron repeats over the lattice vectors, and the energy is per
cell, its Coulomb part the Ewald sum of all charges (``psijax.hamiltonian.ewald``). The
wavefunction is solved at the Gamma point (psi real and periodic in every electron), as
in a supercell calculation; finite-size effects are those of the cell given.

What a run asks of a molecule, a crystal answers for the cell: ``to_pyscf`` builds a
``pyscf.pbc`` ``Cell`` (Hartree-Fock at Gamma for pretraining, ``psijax.system.scf``),
distances between nuclei are taken over their images, and the nuclei's energy is their
Ewald sum (the Hamiltonian's ``PeriodicCoulomb``), not a pair sum. Refused with one line:
effective core potentials (no periodic form of their nonlocal term here), a charged
cell, and two nuclei on top of each other's images.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import warnings
from typing import Any

import numpy as np

from psijax.errors import InputError
from psijax.system.lattice import Lattice, parse_lattice
from psijax.system.molecule import Molecule


@dataclasses.dataclass(frozen=True)
class Crystal(Molecule):
    """The atoms of one cell (a ``Molecule``'s fields, bohr) repeated over ``lattice``."""

    lattice: Lattice | None = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if not isinstance(self.lattice, Lattice):
            raise InputError(
                f"a crystal needs its cell, got lattice={self.lattice!r}; give three lattice "
                "vectors, e.g. --lattice '0 3.8 3.8; 3.8 0 3.8; 3.8 3.8 0'"
            )
        super().__post_init__()
        if self.ecp:
            raise InputError(
                "effective core potentials are not built for periodic cells; leave --ecp out "
                "(all-electron)"
            )
        if self.charge:
            raise InputError(
                f"charge {self.charge:+d}: a crystal's cell must be neutral; give --charge 0"
            )

    @classmethod
    def of(cls, molecule: Molecule, lattice: Lattice) -> Crystal:
        """``molecule``'s atoms, charge and spin in the cell ``lattice``."""
        fields = {f.name: getattr(molecule, f.name) for f in dataclasses.fields(Molecule)}
        return cls(**fields, lattice=lattice)

    def _distances(self) -> np.ndarray:
        """Distances between nuclei over their images (bohr): the shortest |R_i - R_j + L|."""
        pos = self.nuclear_positions
        d = self.lattice.minimum_image(pos[:, None, :] - pos[None, :, :])
        dist = np.linalg.norm(d, axis=-1)
        np.fill_diagonal(dist, 0.0)
        return dist

    @property
    def nuclear_repulsion(self) -> float:
        """Not a pair sum in a cell: the nuclei's energy per cell is their Ewald sum,
        ``psijax.hamiltonian.ewald.PeriodicCoulomb.of(crystal).nucleus_nucleus``."""
        raise AttributeError(
            "a crystal's nuclear repulsion is an Ewald sum: use "
            "psijax.hamiltonian.ewald.PeriodicCoulomb.of(crystal).nucleus_nucleus"
        )

    @property
    def exact_energy(self) -> None:
        return None

    @property
    def rs(self) -> float:
        """The electrons' Wigner-Seitz radius (bohr)."""
        return self.lattice.wigner_seitz_radius(self.n_electrons)

    def lattice_string(self) -> str:
        """The lattice vectors in bohr as ``--lattice`` reads them (exact round trip)."""
        return "; ".join(" ".join(repr(x) for x in v) for v in self.lattice.vectors)

    def to_pyscf(self, basis: str = "sto-6g") -> Any:
        """A built ``pyscf.pbc.gto.Cell`` in bohr: the molecule's atoms, basis, charge and
        spin in this cell (an unknown basis raises ``InputError`` as for a molecule)."""
        from pyscf.pbc import gto

        mol = Molecule.to_pyscf(self, basis)  # checks the basis covers every element
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            cell = gto.Cell(atom=mol.atom, basis=mol.basis, unit="Bohr", a=self.lattice.matrix,
                            spin=self.spin, charge=self.charge, verbose=0)  # fmt: skip
            return cell.build()

    def fingerprint(self) -> str:
        """Short stable hex id of the atoms (as ``Molecule``'s) and the lattice vectors."""
        vectors = [[round(x, 6) + 0.0 for x in v] for v in self.lattice.vectors]
        payload = json.dumps([Molecule.fingerprint(self), vectors])
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def describe(self) -> list[str]:
        """The dry run's lines: the cell, its volume and density and the Madelung constant."""
        lattice, n = self.lattice, self.n_electrons
        vectors = "; ".join(" ".join(f"{x:.6g}" for x in v) for v in lattice.vectors)
        return [
            f"system         crystal: {self.n_atoms} atoms ({' '.join(self.symbols)}) and {n} "
            f"electrons ({self.n_up} up, {self.n_down} down) per cell, Gamma point",
            f"cell           vectors {vectors} bohr; volume {lattice.volume:.6f} bohr^3, "
            f"rs = {self.rs:.6g} bohr",
            f"madelung       xi = {lattice.madelung():.10f} Ha (the cell's Madelung constant)",
        ]


def from_config(molecule: Molecule, config: Any) -> Crystal:
    """The crystal of a run's config: its molecule (atoms, charge, spin) in the cell of
    ``config.lattice`` (three vectors in ``config.unit``)."""
    if config.states != 1:
        raise InputError(
            f"states={config.states}: a crystal is solved for its ground state only; give "
            "--states 1"
        )
    if config.init_from is not None:
        raise InputError("--init-from is not built for crystals; leave it out (pretraining starts)")
    return Crystal.of(molecule, parse_lattice(config.lattice, unit=config.unit))
