"""The two terms of an effective core potential (``psijax.system.ecp``), per walker.

Local part: ``ecp_local = sum_A sum_i V_loc,A(|r_i - R_A|)``, a multiplicative potential.

Nonlocal part: the projector sum_l V_l(r) sum_m |lm><lm| acting on psi gives, for
electron i and ECP nucleus A (x_i = r_i - R_A),

    ecp_nonlocal = sum_A sum_i sum_l V_l,A(|x_i|) (2l + 1)/(4 pi)
                   int dOmega' P_l(x_i^ . x'^) psi(..., R_A + |x_i| x'^, ...) / psi(r),

the integral over the sphere of radius |x_i| around R_A on which electron i is moved.
It is estimated with a quadrature rule (``psijax.hamiltonian.quadrature``; 12 points by
default) rotated by a fresh uniformly random rotation for every electron, nucleus and
step (drawn from the term's key), so the estimate is unbiased whatever the
wavefunction's angular content. psi is evaluated at every quadrature point in one
batch: A x N x Q evaluations per walker. The networks' orbitals depend on every electron,
so moving one electron changes the whole orbital matrix and a determinant-lemma update
does not apply; every point is a full evaluation.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from psijax.hamiltonian import quadrature
from psijax.hamiltonian.base import Walker
from psijax.system import Molecule
from psijax.system import ecp as tables
from psijax.types import Array

DEFAULT_POINTS = 12


def _pad(radials: list[list[tables.Radial]]) -> np.ndarray:
    """Radial terms [center][channel] as one float64 array [center, channel, term, 3]."""
    width = max((len(r) for row in radials for r in row), default=0) or 1
    out = np.zeros((len(radials), max(len(row) for row in radials), width, 3))
    out[..., 0] = 2.0  # padding: power r^0, exponent 0, coefficient 0
    for a, row in enumerate(radials):
        for c, radial in enumerate(row):
            for k, term in enumerate(radial):
                out[a, c, k] = term
    return out


def _radial(terms: Array, distance: Array) -> Array:
    """sum_k c_k r^(n_k - 2) exp(-a_k r^2) for terms [..., K, 3] and distance [...] -> [...]."""
    power, exponent, coeff = (terms[..., k] for k in range(3))
    r = distance[..., None]
    return jnp.sum(coeff * r ** (power - 2) * jnp.exp(-exponent * r**2), axis=-1)


def _ecp_atoms(molecule: Molecule) -> tuple[np.ndarray, list[tables.Ecp]]:
    centers, ecps = [], []
    for symbol, name, position in zip(
        molecule.symbols, molecule.ecp, molecule.nuclear_positions, strict=True
    ):
        ecp = None if name is None else tables.load(name, symbol)
        if ecp is not None:
            centers.append(position)
            ecps.append(ecp)
    return np.asarray(centers, dtype=np.float64).reshape(-1, 3), ecps


@dataclasses.dataclass(frozen=True, eq=False)
class EcpLocal:
    """The local (radial) part of the ECPs of a molecule, in Hartree."""

    centers: np.ndarray  # [A, 3] bohr
    terms: np.ndarray  # [A, 1, K, 3]
    components: tuple[str, ...] = ("ecp_local",)
    needs_key: bool = False

    @classmethod
    def of(cls, molecule: Molecule) -> EcpLocal:
        centers, ecps = _ecp_atoms(molecule)
        return cls(centers, _pad([[ecp.local] for ecp in ecps]))

    def __call__(self, walker: Walker, key: Array | None = None) -> dict[str, Array]:
        r = walker.r
        distance = jnp.linalg.norm(r[None] - jnp.asarray(self.centers, r.dtype)[:, None], axis=-1)
        terms = jnp.asarray(self.terms[:, 0], r.dtype)[:, None]  # [A, 1, K, 3]
        return {"ecp_local": jnp.sum(_radial(terms, distance))}


@dataclasses.dataclass(frozen=True, eq=False)
class EcpNonlocal:
    """The nonlocal (projector) part of the ECPs of a molecule, in Hartree; see the module
    docstring. ``n_points`` picks the quadrature rule."""

    centers: np.ndarray  # [A, 3] bohr
    terms: np.ndarray  # [A, L, K, 3]: channel l of every center (zero where it has none)
    n_points: int = DEFAULT_POINTS
    components: tuple[str, ...] = ("ecp_nonlocal",)
    needs_key: bool = True

    @classmethod
    def of(cls, molecule: Molecule, n_points: int = DEFAULT_POINTS) -> EcpNonlocal | None:
        centers, ecps = _ecp_atoms(molecule)
        n_l = max(ecp.max_l for ecp in ecps) + 1
        if n_l == 0:
            return None
        rows = [[dict(ecp.channels).get(ell, ()) for ell in range(n_l)] for ecp in ecps]
        quadrature.rule(n_points)  # an unknown rule fails here
        return cls(centers, _pad(rows), n_points)

    def __call__(self, walker: Walker, key: Array | None = None) -> dict[str, Array]:
        if key is None:
            raise ValueError("the ECP's nonlocal term needs a key (its quadrature's rotations)")
        r, dtype = walker.r, walker.r.dtype
        n_centers, n_l = self.terms.shape[:2]
        n = r.shape[0]
        points, weights = (jnp.asarray(x, dtype) for x in quadrature.rule(self.n_points))
        centers = jnp.asarray(self.centers, dtype)
        x = r[None] - centers[:, None]  # [A, N, 3]
        distance = jnp.linalg.norm(x, axis=-1)  # [A, N]
        keys = jax.random.split(key, n_centers * n)
        rotations = jax.vmap(lambda k: quadrature.random_rotation(k, dtype))(keys)
        rotations = rotations.reshape(n_centers, n, 3, 3)
        directions = jnp.einsum("anij,qj->anqi", rotations, points)  # [A, N, Q, 3]
        moved = centers[:, None, None] + distance[..., None, None] * directions
        # every configuration with electron i moved to a quadrature point: [A, N, Q, N, 3]
        one_hot = jnp.eye(n, dtype=bool)[None, :, None, :, None]
        configs = jnp.where(one_hot, moved[:, :, :, None, :], r)
        flat = configs.reshape(-1, n, 3)
        moved_psi = jax.vmap(lambda c: walker.wf.apply(walker.params, c))(flat)
        psi = walker.psi
        ratio = (moved_psi.sign * psi.sign) * jnp.exp(moved_psi.log_abs - psi.log_abs)
        ratio = ratio.reshape(n_centers, n, -1)  # [A, N, Q]
        cosine = jnp.einsum("anqi,ani->anq", directions, x / distance[..., None])
        terms = jnp.asarray(self.terms, dtype)  # [A, L, K, 3]
        radial = _radial(terms[:, :, None], distance[:, None, :])  # [A, L, N]
        total = jnp.zeros((), dtype)
        for ell in range(n_l):
            projector = (2 * ell + 1) * jnp.sum(
                weights * quadrature.legendre(ell, cosine) * ratio, axis=-1
            )  # [A, N]
            total = total + jnp.sum(radial[:, ell] * projector)
        return {"ecp_nonlocal": total}


def local_from_config(molecule: Molecule, config) -> EcpLocal | None:
    return EcpLocal.of(molecule) if molecule.ecp else None


def nonlocal_from_config(molecule: Molecule, config) -> EcpNonlocal | None:
    if not molecule.ecp:
        return None
    return EcpNonlocal.of(molecule, getattr(config, "ecp_quadrature", DEFAULT_POINTS))
