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
wavefunction's angular content. The networks' orbitals depend on every electron, so moving
one electron changes the whole orbital matrix and a determinant-lemma update does not
apply; every point is a full evaluation of psi, one ECP nucleus' points in one batch.

Cutoff: V_l,A vanishes a few bohr from its nucleus. Beyond the radius where every
(2l + 1)|V_l,A| is below ``TOLERANCE`` (1e-7 Ha; 1.6 bohr for carbon's ccECP, 2.4 for
chlorine's) an electron's projection is taken as zero, and only the ``neighbours`` electrons
nearest each ECP nucleus are moved onto its sphere: A x K x Q evaluations of psi per walker
instead of A x N x Q. K is fixed when the term is built (shapes are static under jit):
by default twice the electrons of the atoms within the cutoff plus 1 bohr of the nucleus,
plus 4 (``default_neighbours``), at most N; every electron for single atoms and small
molecules, fewer where a molecule is large. Were more than K electrons ever inside one
cutoff sphere, the farthest of them (where V_l is smallest) would be left out;
docs/ecp.md has the measured counts.
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
TOLERANCE = 1e-7  # Hartree: |V_l| (2l + 1) below this counts as zero (the cutoff radius)
REACH = 1.0  # bohr: atoms this far beyond a cutoff sphere count towards its neighbours


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
    docstring. ``n_points`` picks the quadrature rule; each nucleus moves its ``neighbours``
    nearest electrons, those within its ``cutoffs`` radius counting."""

    centers: np.ndarray  # [A, 3] bohr
    terms: np.ndarray  # [A, L, K, 3]: channel l of every center (zero where it has none)
    cutoffs: np.ndarray  # [A] bohr: beyond, every (2l + 1)|V_l| < TOLERANCE
    neighbours: int  # electrons moved onto each center's sphere (the nearest)
    n_points: int = DEFAULT_POINTS
    components: tuple[str, ...] = ("ecp_nonlocal",)
    needs_key: bool = True

    @classmethod
    def of(
        cls, molecule: Molecule, n_points: int = DEFAULT_POINTS, neighbours: int | None = None
    ) -> EcpNonlocal | None:
        """The term, or ``None`` if no ECP has projectors; ``neighbours``: None picks
        ``default_neighbours``, 0 (or anything >= N) moves every electron."""
        centers, ecps = _ecp_atoms(molecule)
        n_l = max(ecp.max_l for ecp in ecps) + 1
        if n_l == 0:
            return None
        rows = [[dict(ecp.channels).get(ell, ()) for ell in range(n_l)] for ecp in ecps]
        quadrature.rule(n_points)  # an unknown rule fails here
        cutoffs = np.array([cutoff_radius(ecp) for ecp in ecps])
        n = molecule.n_electrons
        if neighbours is None:
            neighbours = default_neighbours(molecule, centers, cutoffs)
        return cls(centers, _pad(rows), cutoffs, min(neighbours or n, n), n_points)

    def __call__(self, walker: Walker, key: Array | None = None) -> dict[str, Array]:
        if key is None:
            raise ValueError("the ECP's nonlocal term needs a key (its quadrature's rotations)")
        r, dtype = walker.r, walker.r.dtype
        n_centers, n_l = self.terms.shape[:2]
        n = r.shape[0]
        points, weights = (jnp.asarray(x, dtype) for x in quadrature.rule(self.n_points))
        centers = jnp.asarray(self.centers, dtype)
        keys = jax.random.split(key, n_centers * n)  # one rotation per nucleus and electron
        rotations = jax.vmap(lambda k: quadrature.random_rotation(k, dtype))(keys)
        rotations = rotations.reshape(n_centers, n, 3, 3)
        x = r[None] - centers[:, None]  # [A, N, 3]
        near = jnp.broadcast_to(jnp.arange(n), (n_centers, n))  # [A, K]: the moved electrons
        if self.neighbours < n:
            _, near = jax.lax.top_k(-jnp.sum(x * x, axis=-1), self.neighbours)
            x = jnp.take_along_axis(x, near[..., None], axis=1)
            rotations = jnp.take_along_axis(rotations, near[..., None, None], axis=1)
        distance = jnp.linalg.norm(x, axis=-1)  # [A, K]
        directions = jnp.einsum("akij,qj->akqi", rotations, points)  # [A, K, Q, 3]
        psi = walker.psi  # outside the loop below: computed once, in this trace

        def ratios(center: Array, distance: Array, directions: Array, near: Array) -> Array:
            """psi(r')/psi(r) [K, Q, S]: each of one nucleus' K electrons moved to each
            point, for each of the S outputs of psi (1 for one wavefunction)."""
            moved = center + distance[:, None, None] * directions  # [K, Q, 3]
            one_hot = (near[:, None] == jnp.arange(n))[:, None, :, None]  # [K, 1, N, 1]
            configs = jnp.where(one_hot, moved[:, :, None, :], r)  # [K, Q, N, 3]
            moved_psi = jax.vmap(lambda c: walker.wf.apply(walker.params, c))(
                configs.reshape(-1, n, 3)
            )
            ratio = (moved_psi.sign * psi.sign) * jnp.exp(moved_psi.log_abs - psi.log_abs)
            return ratio.reshape(*directions.shape[:2], -1)

        # one nucleus at a time: K x Q evaluations of psi alive at once, not A x K x Q
        ratio = jax.lax.map(lambda a: ratios(*a), (centers, distance, directions, near))
        cosine = jnp.einsum("akqi,aki->akq", directions, x / distance[..., None])
        terms = jnp.asarray(self.terms, dtype)  # [A, L, T, 3]
        radial = _radial(terms[:, :, None], distance[:, None, :])  # [A, L, K]
        inside = distance < jnp.asarray(self.cutoffs, dtype)[:, None]  # [A, K]
        total = jnp.zeros(ratio.shape[-1:], dtype)
        for ell in range(n_l):
            projector = (2 * ell + 1) * jnp.einsum(
                "q,akq,akqs->aks", weights, quadrature.legendre(ell, cosine), ratio
            )  # [A, K, S]
            weighted = jnp.where(inside[..., None], radial[:, ell, :, None] * projector, 0.0)
            total = total + jnp.sum(weighted, axis=(0, 1))
        return {"ecp_nonlocal": total.reshape(psi.log_abs.shape)}


def cutoff_radius(ecp: tables.Ecp) -> float:
    """The radius (bohr) beyond which every (2l + 1)|V_l| of ``ecp`` is below TOLERANCE."""
    r = np.linspace(1e-3, 30.0, 30_000)
    step = r[1] - r[0]
    largest = np.zeros_like(r)
    for ell, radial in ecp.channels:
        value = sum(c * r ** (n - 2) * np.exp(-a * r * r) for n, a, c in radial)
        largest = np.maximum(largest, (2 * ell + 1) * np.abs(value))
    above = np.nonzero(largest >= TOLERANCE)[0]
    return float(r[above[-1]] + step) if above.size else 0.0


def default_neighbours(molecule: Molecule, centers: np.ndarray, cutoffs: np.ndarray) -> int:
    """How many electrons each ECP nucleus moves onto its sphere: for the nucleus that needs
    most, twice the (valence) electrons of the atoms within its cutoff plus REACH, plus 4;
    at most every electron."""
    positions = molecule.nuclear_positions
    electrons = molecule.nuclear_charges  # effective charges: the neutral atoms' electrons
    need = 0.0
    for center, radius in zip(centers, cutoffs, strict=True):
        within = np.linalg.norm(positions - center, axis=-1) < radius + REACH
        need = max(need, 2 * float(np.sum(electrons[within])) + 4)
    return min(molecule.n_electrons, int(np.ceil(need)))


def local_from_config(molecule: Molecule, config) -> EcpLocal | None:
    return EcpLocal.of(molecule) if molecule.ecp else None


def nonlocal_from_config(molecule: Molecule, config) -> EcpNonlocal | None:
    if not molecule.ecp:
        return None
    return EcpNonlocal.of(
        molecule,
        getattr(config, "ecp_quadrature", DEFAULT_POINTS),
        getattr(config, "ecp_neighbours", None),
    )
