"""Periodic cells: three lattice vectors in bohr, validated once.

A ``Lattice`` holds the vectors a_1, a_2, a_3 (the rows of ``matrix``). Its reciprocal
vectors b_i (the rows of ``reciprocal``) satisfy b_i . a_j = 2 pi delta_ij; a point r has
fractional coordinates f with r = f @ matrix. The lattice points within a radius, the
reciprocal points within a radius and the Madelung constant (the potential a unit point
charge feels from its own periodic images and their neutralising background) are what
Ewald sums are built from (``psijax.hamiltonian.ewald``).

Bad input raises ``InputError`` with one line naming the problem and the fix.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

import jax.numpy as jnp
import numpy as np
from scipy.special import erfc

from psijax.errors import InputError
from psijax.system.molecule import BOHR_PER_ANGSTROM

Vector = tuple[float, float, float]

# |a1 . (a2 x a3)| below this fraction of |a1| |a2| |a3| is a flat (singular) cell
FLAT = 1e-8
# the exponent x^2 of the Gaussian factors exp(-x^2) at an Ewald sum's cut-offs
EWALD_EXPONENT = 36.0


@dataclasses.dataclass(frozen=True)
class Lattice:
    """Three lattice vectors (bohr), the rows of ``matrix``; any handedness.

    The volume is |a_1 . (a_2 x a_3)|; three vectors that span (nearly) no volume raise
    ``InputError``. Equality and hashing go by the vectors.
    """

    vectors: tuple[Vector, Vector, Vector]

    def __post_init__(self) -> None:
        vectors = tuple(_vector(v, i) for i, v in enumerate(_rows(self.vectors), start=1))
        object.__setattr__(self, "vectors", vectors)
        lengths = np.linalg.norm(self.matrix, axis=1)
        if not np.all(lengths > 0.0):
            i = int(np.argmin(lengths)) + 1
            raise InputError(f"lattice vector a{i} is zero; give three nonzero vectors")
        if self.volume <= FLAT * float(np.prod(lengths)):
            raise InputError(
                f"the lattice vectors span a cell of volume {self.volume:.3g} bohr^3 (they are "
                "coplanar); give three linearly independent vectors"
            )

    @classmethod
    def from_angstrom(cls, vectors: Any) -> Lattice:
        """A lattice from vectors in angstrom."""
        rows = [_vector(v, i) for i, v in enumerate(_rows(vectors), start=1)]
        return cls(tuple(tuple(x * BOHR_PER_ANGSTROM for x in v) for v in rows))

    @classmethod
    def cubic(cls, length: float) -> Lattice:
        """The simple cubic lattice of side ``length`` (bohr)."""
        if not (isinstance(length, int | float) and math.isfinite(length) and length > 0):
            raise InputError(f"cube side {length!r} is not a positive length; give it in bohr")
        return cls(((length, 0.0, 0.0), (0.0, length, 0.0), (0.0, 0.0, length)))

    @property
    def matrix(self) -> np.ndarray:
        """Float array [3, 3], row i the vector a_i (bohr)."""
        return np.asarray(self.vectors, dtype=np.float64)

    @property
    def volume(self) -> float:
        """The cell's volume (bohr^3)."""
        return abs(float(np.linalg.det(self.matrix)))

    @property
    def reciprocal(self) -> np.ndarray:
        """Float array [3, 3], row i the vector b_i (1/bohr): b_i . a_j = 2 pi delta_ij."""
        return 2.0 * np.pi * np.linalg.inv(self.matrix).T

    def wigner_seitz_radius(self, n_particles: int) -> float:
        """r_s (bohr): the radius of the sphere whose volume is the cell's per particle."""
        if isinstance(n_particles, bool) or not isinstance(n_particles, int) or n_particles < 1:
            raise InputError(f"{n_particles!r} particles: give a whole number of at least 1")
        return (3.0 * self.volume / (4.0 * np.pi * n_particles)) ** (1.0 / 3.0)

    @property
    def reach(self) -> float:
        """The longest displacement |f @ matrix| with every fractional |f_i| <= 1/2 (bohr):
        how far a displacement folded by ``minimum_image``'s first step can be."""
        corners = np.array(np.meshgrid(*[[-0.5, 0.5]] * 3, indexing="ij")).reshape(3, -1).T
        return float(np.max(np.linalg.norm(corners @ self.matrix, axis=1)))

    def wrap(self, r: Any) -> Any:
        """Positions ``r`` [..., 3] (bohr) moved by lattice vectors into the cell (fractional
        coordinates in [0, 1)); a JAX or NumPy array in, the same kind out."""
        xp = _namespace(r)
        matrix = xp.asarray(self.matrix, dtype=r.dtype)
        frac = r @ xp.asarray(np.linalg.inv(self.matrix), dtype=r.dtype)
        return r - xp.floor(frac) @ matrix

    def minimum_image(self, d: Any) -> Any:
        """The shortest of the displacements ``d + L`` over lattice vectors L, for each
        displacement of ``d`` [..., 3] (bohr); a JAX or NumPy array in, the same kind out.

        ``d`` is first folded to fractional coordinates in [-1/2, 1/2], then the 27 folds
        that differ by at most one vector along each axis are compared. That finds the
        shortest image whenever the cell's vectors are reduced (no vector longer than it
        need be, as in a Niggli-reduced cell); a strongly skewed cell should be reduced first.
        """
        xp = _namespace(d)
        matrix = xp.asarray(self.matrix, dtype=d.dtype)
        frac = d @ xp.asarray(np.linalg.inv(self.matrix), dtype=d.dtype)
        folded = d - xp.round(frac) @ matrix
        shifts = np.array(np.meshgrid(*[[-1, 0, 1]] * 3, indexing="ij")).reshape(3, -1).T
        images = folded[..., None, :] + xp.asarray(shifts @ self.matrix, dtype=d.dtype)
        best = xp.argmin(xp.sum(images * images, axis=-1), axis=-1)
        return xp.take_along_axis(images, best[..., None, None], axis=-2)[..., 0, :]

    def points(self, radius: float) -> np.ndarray:
        """Every lattice vector L with |L| <= ``radius`` (bohr), L = 0 included, as a float
        array [n, 3] sorted by length."""
        return _within(self.matrix, self.reciprocal, radius)

    def reciprocal_points(self, radius: float) -> np.ndarray:
        """Every reciprocal vector G with |G| <= ``radius`` (1/bohr), G = 0 included, as a
        float array [n, 3] sorted by length."""
        return _within(self.reciprocal, self.matrix, radius)

    def madelung(self, alpha: float | None = None) -> float:
        """The Madelung constant xi (Hartree per unit charge squared): the potential at a
        unit point charge from its own images and their neutralising background,

            xi = sum_{L != 0} erfc(a |L|) / |L| + (4 pi / V) sum_{G != 0} exp(-G^2 / 4a^2) / G^2
                 - pi / (V a^2) - 2 a / sqrt(pi)

        for any splitting parameter a > 0 (1/bohr; by default sqrt(pi) / V^(1/3)). Both sums
        stop where their Gaussian factor falls below exp(-36) (|L| a = 6, |G| / 2a = 6).
        A simple cubic lattice of side L has xi = -2.8372974794806 / L; the energy of one
        point charge q per cell in its background is q^2 xi / 2.
        """
        volume = self.volume
        a = math.sqrt(math.pi) / volume ** (1.0 / 3.0) if alpha is None else float(alpha)
        x = math.sqrt(EWALD_EXPONENT)
        lengths = np.linalg.norm(self.points(x / a)[1:], axis=1)
        g2 = np.sum(self.reciprocal_points(2.0 * a * x)[1:] ** 2, axis=1)
        real = np.sum(erfc(a * lengths) / lengths)
        reciprocal = 4.0 * np.pi / volume * np.sum(np.exp(-g2 / (4.0 * a * a)) / g2)
        return float(real + reciprocal - np.pi / (volume * a * a) - 2.0 * a / math.sqrt(np.pi))


def parse_lattice(text: str, unit: str = "bohr") -> Lattice:
    """A lattice from text: three vectors of three numbers, the vectors separated by ';'
    or new lines, e.g. ``"0 5 5; 5 0 5; 5 5 0"``, in ``unit`` ('bohr' or 'angstrom')."""
    if not isinstance(text, str):
        raise InputError(f"lattice {text!r} is not text; write e.g. '10 0 0; 0 10 0; 0 0 10'")
    scale = _bohr_per(unit)
    groups = [g for g in re.split(r"[;\n]", text) if g.strip()]
    if len(groups) != 3:
        raise InputError(
            f"lattice {text.strip()!r} has {len(groups)} vectors; write three, separated by ';', "
            "e.g. '10 0 0; 0 10 0; 0 0 10'"
        )
    rows = []
    for i, group in enumerate(groups, start=1):
        fields = group.replace(",", " ").split()
        numbers = [_number(f) for f in fields]
        if len(fields) != 3 or not all(math.isfinite(x) for x in numbers):
            raise InputError(
                f"lattice vector a{i} {group.strip()!r} is not 3 finite numbers; write x y z"
            )
        rows.append(tuple(x * scale for x in numbers))
    return Lattice(tuple(rows))


def _within(basis: np.ndarray, dual: np.ndarray, radius: float) -> np.ndarray:
    """Integer combinations n @ basis no longer than ``radius``; ``dual`` (2 pi inverse
    transposed) bounds each |n_i| by radius |dual_i| / 2 pi."""
    if not (math.isfinite(radius) and radius >= 0.0):
        raise ValueError(f"radius {radius!r} must be a finite length >= 0")
    reach = np.floor(radius * np.linalg.norm(dual, axis=1) / (2.0 * np.pi)).astype(int)
    axes = [np.arange(-k, k + 1) for k in reach]
    n = np.array(np.meshgrid(*axes, indexing="ij")).reshape(3, -1).T
    points = n @ basis
    lengths = np.linalg.norm(points, axis=1)
    keep = lengths <= radius
    order = np.argsort(lengths[keep], kind="stable")
    return points[keep][order]


def _bohr_per(unit: str) -> float:
    key = str(unit).strip().lower()
    if key in ("bohr", "b"):
        return 1.0
    if key in ("angstrom", "a", "ang"):
        return BOHR_PER_ANGSTROM
    raise InputError(f"unknown unit {unit!r}; use 'bohr' or 'angstrom'")


def _number(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _count(rows: Any) -> str:
    try:
        return str(len(rows))
    except TypeError:
        return repr(rows)


def _rows(vectors: Any) -> Any:
    if not isinstance(vectors, tuple | list | np.ndarray) or len(vectors) != 3:
        raise InputError(
            f"a lattice has 3 vectors, got {_count(vectors)}; give a1, a2 and a3, e.g. "
            "'10 0 0; 0 10 0; 0 0 10'"
        )
    return vectors


def _vector(v: Any, i: int) -> Vector:
    values = tuple(_number(x) for x in v) if isinstance(v, tuple | list | np.ndarray) else ()
    if len(values) != 3 or not all(math.isfinite(x) for x in values):
        raise InputError(f"lattice vector a{i} {v!r} is not 3 finite numbers; give x y z in bohr")
    return values  # type: ignore[return-value]


def _namespace(x: Any) -> Any:
    """NumPy for a NumPy array, jax.numpy otherwise."""
    return np if isinstance(x, np.ndarray) else jnp
