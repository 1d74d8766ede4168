"""FermiNet for a crystal (``psijax.system.Crystal``): nuclei in a periodic cell, Gamma point.

FermiNet's network and orbital head (``psijax.ansatz.ferminet``), with every distance
taken as a periodic one (``psijax.ansatz.periodic``): for a displacement r with phases
w_i = b_i . r over the reciprocal vectors b_i,

    d(r)^2 = sum_ij (a_i . a_j / 4 pi^2) [(1 - cos w_i)(1 - cos w_j) + sin w_i sin w_j],

which is |r| near r = 0 (the cusps), zero on every lattice vector and smooth elsewhere.

- one electron, per nucleus I with w = b . (r - R_I): 1 - cos(w_i), sin(w_i) and
  log(1 + d) (7 features per nucleus);
- two electrons: the electron gas's features (7);
- orbital j of electron i: FermiNet's projection times the envelope
  sum_I pi_jI exp(-sigma_jI d(r_i - R_I)), the periodic distance in place of |r_i - R_I|;
- the cusp Jastrow factor of the periodic electron-electron distances.

Every input is unchanged when an electron moves by a lattice vector, so psi is periodic
in each electron (Gamma point: real), and antisymmetric as FermiNet is. Pretraining fits
the orbitals to pyscf.pbc's Hartree-Fock orbitals at Gamma (``psijax.system.scf``).
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

from psijax.ansatz import features
from psijax.ansatz import jastrow as cusp
from psijax.ansatz.base import nuclei_of
from psijax.ansatz.ferminet import FermiNet
from psijax.ansatz.periodic import Vector, inputs, pair_features
from psijax.types import Array, Params


@dataclasses.dataclass(frozen=True)
class CrystalFermiNet(FermiNet):
    """FermiNet in a cell with nuclei (module docstring); all fields are static.

    Attributes (besides FermiNet's; ``soft_core`` and ``envelope_floor`` stay unset):
        lattice: the cell's three lattice vectors (bohr).
    """

    lattice: tuple[Vector, Vector, Vector] = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))

    def _input_widths(self) -> tuple[int, int]:
        return 7 * self.n_atoms, 7

    def _inputs(self, r: Array) -> tuple[Array, Array, Array]:
        """Per nucleus the periodic features of r - R ``[n, 7 * atoms]``, the pair features
        ``[n, n, 7]`` and, for the envelopes, the periodic distances to the nuclei."""
        vectors = np.asarray(self.lattice, np.float64)
        to_phase = jnp.asarray(2.0 * np.pi * np.linalg.inv(vectors), r.dtype)
        nuclei = features.nuclei_array(self.nuclei, r.dtype)
        w = (r[:, None, :] - nuclei[None, :, :]) @ to_phase  # [n, atoms, 3]
        h1, d2 = pair_features(w, vectors)
        d = jnp.sqrt(d2)  # [n, atoms]
        h1 = jnp.concatenate([h1, jnp.log1p(d)[..., None]], axis=-1).reshape(r.shape[0], -1)
        _, h2, _ = inputs(r, vectors)
        return h1, h2, d

    def _jastrow(self, params: Params, r: Array) -> Array:
        _, _, d = inputs(r, np.asarray(self.lattice, np.float64))
        return cusp.exponent_of(params["jastrow"], d, self.n_up)

    def describe(self) -> str:
        widths = ", ".join(f"({a}, {b})" for a, b in self.layers)
        kind = "full" if self.full_det else "spin-block"
        extras = " + periodic Jastrow" * self.jastrow
        return (
            f"periodic FermiNet [{widths}]{extras}, {self.n_determinants} {kind} determinants "
            f"with envelopes of periodic distances to {self.n_atoms} nuclei per cell"
        )


def from_config(crystal, config) -> CrystalFermiNet:
    """The FermiNet of a ``Crystal``: its nuclei and its cell."""
    return CrystalFermiNet(
        crystal.n_up, crystal.n_down, nuclei_of(crystal), layers=config.layers,
        n_determinants=config.determinants, full_det=config.full_det, jastrow=config.jastrow,
        matmul_precision=config.matmul_precision, lattice=crystal.lattice.vectors,
    )  # fmt: skip
