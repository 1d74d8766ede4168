"""The Hamiltonian: the local energy of one walker as a sum of terms (``base``), with the
kinetic energy (``kinetic``) and the Coulomb energies (``coulomb``). The terms of a run's
Hamiltonian are listed in ``psijax.registry.HAMILTONIAN``."""

from psijax import registry
from psijax.config import Config
from psijax.hamiltonian.base import (
    Hamiltonian,
    LocalEnergy,
    PsiFunctions,
    Term,
    Walker,
    psi_functions,
)
from psijax.hamiltonian.coulomb import Coulomb, Potential, coulomb_parts
from psijax.hamiltonian.kinetic import Kinetic, kinetic_energy
from psijax.laplacian import LaplacianOperator


def for_config(molecule, config, laplacian: LaplacianOperator | None = None) -> Hamiltonian:
    """The Hamiltonian of a run: every term of ``psijax.registry.HAMILTONIAN`` that applies
    to ``molecule`` under ``config``, with the Laplacian operator ``config.laplacian`` (or
    ``laplacian``)."""
    op = laplacian or registry.laplacian(config.laplacian, molecule.n_electrons)
    return Hamiltonian(registry.hamiltonian_terms(molecule, config), op)


def molecular(molecule, laplacian: LaplacianOperator) -> Hamiltonian:
    """The Hamiltonian of ``molecule`` under the default config, with ``laplacian``."""
    return for_config(molecule, Config(), laplacian)


__all__ = [
    "Coulomb", "Hamiltonian", "Kinetic", "LocalEnergy", "Potential", "PsiFunctions", "Term",
    "Walker", "coulomb_parts", "for_config", "kinetic_energy", "molecular", "psi_functions",
]  # fmt: skip
