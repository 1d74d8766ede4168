"""Coulomb energies of point nuclei and electrons, and local potentials in general."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax.numpy as jnp
import numpy as np

from psijax.hamiltonian.base import Walker
from psijax.system import Molecule
from psijax.types import Array


@dataclasses.dataclass(frozen=True)
class Coulomb:
    """Electron-nucleus, electron-electron and nucleus-nucleus Coulomb energies (Hartree)."""

    molecule: Molecule
    components: tuple[str, ...] = ("electron_nucleus", "electron_electron", "nucleus_nucleus")
    needs_key: bool = False

    def __call__(self, walker: Walker, key: Array | None = None) -> dict[str, Array]:
        v_en, v_ee, v_nn = coulomb_parts(self.molecule, walker.r)
        return dict(zip(self.components, (v_en, v_ee, v_nn), strict=True))


def coulomb_parts(
    molecule: Molecule, r: Array, nuclei: Array | None = None
) -> tuple[Array, Array, Array]:
    """(electron-nucleus, electron-electron, nucleus-nucleus) energies of one walker
    ``r: [electron, 3]`` (bohr), in Hartree; with the nuclei at ``nuclei`` ``[atom, 3]``
    (which may be traced: the forces' moved nuclei) instead of the molecule's."""
    charges = jnp.asarray(molecule.nuclear_charges, r.dtype)
    if nuclei is None:
        nuclei, v_nn = molecule.nuclear_positions, molecule.nuclear_repulsion
    else:
        a, b = np.triu_indices(len(charges), k=1)
        distance = jnp.linalg.norm(nuclei[a] - nuclei[b], axis=-1)
        v_nn = jnp.sum(charges[a] * charges[b] / distance)
    nuclei = jnp.asarray(nuclei, r.dtype)
    r_en = jnp.linalg.norm(r[:, None, :] - nuclei[None], axis=-1)
    v_en = -jnp.sum(charges[None] / r_en)
    n = r.shape[0]
    if n > 1:
        i, j = np.triu_indices(n, k=1)
        v_ee = jnp.sum(1.0 / jnp.linalg.norm(r[i] - r[j], axis=-1))
    else:
        v_ee = jnp.zeros((), r.dtype)
    return v_en, v_ee, jnp.asarray(v_nn, r.dtype)


@dataclasses.dataclass(frozen=True)
class Potential:
    """A local (multiplicative) potential ``potential(r)`` of one walker, as one component
    named ``name``: a model system, an external field."""

    potential: Callable[[Array], Array]
    name: str = "potential"
    needs_key: bool = False

    @property
    def components(self) -> tuple[str, ...]:
        return (self.name,)

    def __call__(self, walker: Walker, key: Array | None = None) -> dict[str, Array]:
        return {self.name: self.potential(walker.r)}


def from_config(molecule: Molecule, config) -> Coulomb | None:
    """The Coulomb term of a molecule; none for a periodic system (its Ewald sum is
    ``psijax.hamiltonian.ewald.PeriodicCoulomb``)."""
    return Coulomb(molecule) if molecule.lattice is None else None
