"""The system: molecules (nuclei, charge, spin in bohr), their parsers and presets, and
pyscf Hartree-Fock for pretraining; periodic cells (``Lattice``), crystals (``Crystal``)
and the homogeneous electron gas (``ElectronGas``)."""

from psijax.system.crystal import Crystal
from psijax.system.electron_gas import ElectronGas, PlaneWaveDeterminant, closed_shells
from psijax.system.elements import ELEMENTS
from psijax.system.lattice import Lattice, parse_lattice
from psijax.system.molecule import BOHR_PER_ANGSTROM, MIN_DISTANCE_BOHR, Molecule
from psijax.system.parse import (
    for_config,
    from_atom_string,
    from_pyscf,
    from_xyz,
    preset,
    resolve,
)
from psijax.system.presets import PRESETS

__all__ = [
    "BOHR_PER_ANGSTROM", "ELEMENTS", "MIN_DISTANCE_BOHR", "PRESETS", "Crystal", "ElectronGas",
    "Lattice", "Molecule", "PlaneWaveDeterminant", "closed_shells", "for_config",
    "from_atom_string", "from_pyscf", "from_xyz", "parse_lattice", "preset", "resolve",
]  # fmt: skip
