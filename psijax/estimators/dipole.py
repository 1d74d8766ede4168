"""The electric dipole moment sum_A Z_A R_A - sum_i r_i about the origin (origin-independent
for neutral molecules), in e*bohr and Debye."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp
import numpy as np

from psijax.hamiltonian import Walker
from psijax.system import Molecule
from psijax.types import Array

DEBYE_PER_AU = 2.541746473  # 1 e*bohr in Debye (CODATA 2018)


@dataclasses.dataclass(frozen=True)
class Dipole:
    """The electric dipole moment (e*bohr) about the origin: nuclei minus electrons."""

    molecule: Molecule
    name: str = "dipole"
    needs_derivatives: bool = False

    @property
    def columns(self) -> tuple[str, ...]:
        return ("dipole_x", "dipole_y", "dipole_z")

    def local(self, w: Walker, parts: dict[str, Array]) -> dict[str, Array]:
        nuclear = np.einsum(
            "a,ax->x", self.molecule.nuclear_charges, self.molecule.nuclear_positions
        )
        mu = jnp.asarray(nuclear, w.r.dtype) - jnp.sum(w.r, axis=0)
        return dict(zip(self.columns, mu, strict=True))

    def derived(self, means: dict[str, Any]) -> dict[str, Any]:
        """Components and magnitude in Debye (the magnitude's error by propagation)."""
        if not all(c in means for c in self.columns):
            return {}
        mu = np.array([means[c]["mean"] for c in self.columns])
        err = np.array([means[c]["error"] for c in self.columns])
        size = float(np.linalg.norm(mu))
        size_err = (
            float(np.linalg.norm(mu * err) / size) if size > 0 else float(np.linalg.norm(err))
        )
        out = {
            f"{c}_debye": {"mean": m * DEBYE_PER_AU, "error": e * DEBYE_PER_AU, "unit": "Debye"}
            for c, m, e in zip(self.columns, mu, err, strict=True)
        }
        out["dipole_magnitude"] = {"mean": size, "error": size_err, "unit": "e*bohr"}
        out["dipole_magnitude_debye"] = {
            "mean": size * DEBYE_PER_AU, "error": size_err * DEBYE_PER_AU, "unit": "Debye",
        }  # fmt: skip
        if self.molecule.charge:
            out["dipole_note"] = "charged molecule: the dipole is taken about the origin"
        return out


def from_config(molecule: Molecule, network=None) -> Dipole | None:
    """The dipole of a molecule; none in a periodic cell, where the position operator is
    not periodic."""
    return Dipole(molecule) if molecule.lattice is None else None
