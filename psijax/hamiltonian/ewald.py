"""Coulomb energies of point charges in a periodic cell by Ewald summation (Hartree, bohr).

Charges q_i at r_i in a cell of volume V, repeated over the lattice vectors L, with a
uniform background that cancels the cell's net charge Q = sum_i q_i, have the energy per
cell

    E = 1/2 sum_L sum_ij' q_i q_j erfc(a |r_ij + L|) / |r_ij + L|     (r_ij = r_i - r_j; the
                                                                      ' skips i = j at L = 0)
      + (2 pi / V) sum_{G != 0} exp(-G^2 / 4a^2) / G^2 |S(G)|^2,   S(G) = sum_i q_i exp(i G.r_i)
      - a / sqrt(pi) sum_i q_i^2 - pi / (2 V a^2) Q^2

for every splitting parameter a > 0 (1/bohr): the last term is the charges' interaction
with the background and the background's with itself. A point charge's interaction with
its own images (the Madelung term) is the i = j part of the first two sums.

How it converges: a pair's displacement is first folded to fractional coordinates in
[-1/2, 1/2] (no longer than the cell's ``reach``); the real-space sum then takes every L
with |L| <= 6 / a + reach, and the reciprocal sum every G with |G| <= 12 a. Every term
left out carries a factor below erfc(6) ~ 2e-17 or exp(-36) ~ 2e-16 of its size, so the
sums are converged to float64 rounding (1e-10 relative with a wide margin) for any a and
any cell; a skewed cell only costs more terms. The default a minimises the number of
terms one evaluation computes: pairs x real-space vectors + charges x reciprocal
vectors, estimated from the volumes of the two cut-off spheres.

A walker's energy (``PeriodicCoulomb``) is split three ways, each independent of a:
electron-electron, the Ewald energy of the electrons alone in their own background;
nucleus-nucleus, that of the nuclei alone in theirs (a constant); and electron-nucleus,
the rest of the energy of all charges together (the cross terms, the backgrounds' cross
term included). For a neutral cell the backgrounds cancel in the sum; an electron gas
has electron-electron only.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax.numpy as jnp
import jax.scipy.special
import numpy as np
import scipy.special

from psijax.errors import InputError
from psijax.hamiltonian.base import Walker
from psijax.system.lattice import EWALD_EXPONENT, Lattice
from psijax.types import Array

CUTOFF = math.sqrt(EWALD_EXPONENT)  # a |L| and |G| / 2a at the cut-offs
COMPONENTS = ("electron_nucleus", "electron_electron", "nucleus_nucleus")
Vector = tuple[float, float, float]


@dataclasses.dataclass(frozen=True, eq=False)
class EwaldSum:
    """What an Ewald sum over ``lattice`` with splitting parameter ``alpha`` (1/bohr) needs:
    the lattice vectors of the real-space sum [n_L, 3], one of each pair +-G of the
    reciprocal sum [n_G, 3] with its weight (4 pi / V) exp(-G^2 / 4a^2) / G^2, and the
    constants per sum_i q_i^2 (``self_term``: the images' real-space part and -a / sqrt(pi))
    and per Q^2 (``background``: -pi / (2 V a^2))."""

    lattice: Lattice
    alpha: float
    real: np.ndarray
    reciprocal: np.ndarray
    weights: np.ndarray
    self_term: float
    background: float


def ewald_sum(lattice: Lattice, n_charges: int = 1, alpha: float | None = None) -> EwaldSum:
    """The Ewald sum over ``lattice`` for ``n_charges`` charges at a time; ``alpha`` (1/bohr)
    by default the one that makes the fewest terms (module docstring)."""
    a = splitting_parameter(lattice, n_charges) if alpha is None else float(alpha)
    if not (math.isfinite(a) and a > 0):
        raise InputError(f"splitting parameter {alpha!r} must be positive; give it in 1/bohr")
    volume = lattice.volume
    images = lattice.points(CUTOFF / a + lattice.reach)
    g = lattice.reciprocal_points(2.0 * a * CUTOFF)[1:]
    g = g[_half_space(np.rint(g @ lattice.matrix.T / (2.0 * np.pi)))]
    g2 = np.sum(g * g, axis=1)
    lengths = np.linalg.norm(lattice.points(CUTOFF / a)[1:], axis=1)
    images_self = 0.5 * np.sum(scipy.special.erfc(a * lengths) / lengths)
    return EwaldSum(
        lattice=lattice,
        alpha=a,
        real=images,
        reciprocal=g,
        weights=4.0 * np.pi / volume * np.exp(-g2 / (4.0 * a * a)) / g2,
        self_term=float(images_self - a / math.sqrt(math.pi)),
        background=-math.pi / (2.0 * volume * a * a),
    )


def splitting_parameter(lattice: Lattice, n_charges: int) -> float:
    """The a (1/bohr) that minimises pairs x |{L}| + charges x |{G}| for ``n_charges``."""
    volume, n = lattice.volume, max(int(n_charges), 1)
    pairs = max(n * (n - 1) // 2, 1)
    alphas = math.sqrt(math.pi) / volume ** (1.0 / 3.0) * np.geomspace(0.2, 5.0, 97)
    sphere = 4.0 * np.pi / 3.0
    n_real = sphere * (CUTOFF / alphas + lattice.reach) ** 3 / volume
    n_reciprocal = sphere * (2.0 * alphas * CUTOFF) ** 3 * volume / (2.0 * np.pi) ** 3 / 2
    return float(alphas[np.argmin(pairs * n_real + n * n_reciprocal)])


def point_charge_energy(
    lattice: Lattice, charges: Any, positions: Any, alpha: float | None = None
) -> float:
    """The Ewald energy per cell (Hartree) of point ``charges`` at ``positions`` [n, 3]
    (bohr) in their neutralising background, in float64 (NumPy)."""
    q = np.asarray(charges, np.float64).reshape(-1)
    r = np.asarray(positions, np.float64).reshape(-1, 3)
    if q.shape[0] != r.shape[0]:
        raise InputError(f"{q.shape[0]} charges at {r.shape[0]} positions; give one position each")
    if q.shape[0] == 0:
        return 0.0
    _check_apart(lattice, r)
    return float(_energy(np, scipy.special.erfc, ewald_sum(lattice, q.shape[0], alpha), q, r))


def electron_electron(ewald: EwaldSum, r: Array) -> Array:
    """The Ewald energy (Hartree) of the electrons ``r`` [electron, 3] (bohr) alone in their
    neutralising background, for one walker (JAX)."""
    q = -jnp.ones(r.shape[0], r.dtype)
    return _energy(jnp, jax.scipy.special.erfc, ewald, q, r)


def electron_nucleus(ewald: EwaldSum, r: Array, charges: Any, positions: Any) -> Array:
    """The cross energy (Hartree) of the electrons ``r`` [electron, 3] and the nuclei:
    E(all) - E(electrons) - E(nuclei), each in its own background, for one walker (JAX)."""
    q = -jnp.ones(r.shape[0], r.dtype)
    return _cross(jnp, jax.scipy.special.erfc, ewald, q, r,
                  jnp.asarray(charges, r.dtype), jnp.asarray(positions, r.dtype))  # fmt: skip


@dataclasses.dataclass(frozen=True)
class PeriodicCoulomb:
    """Electron-nucleus, electron-electron and nucleus-nucleus energies per cell (Hartree)
    of electrons and nuclei (``nuclear_charges`` at ``nuclear_positions``, bohr) repeated
    over ``lattice`` in a neutralising background; the same components as ``Coulomb``.
    ``of(system)`` takes them from anything with a lattice and nuclei (an ``ElectronGas``)."""

    lattice: Lattice
    nuclear_charges: tuple[float, ...] = ()
    nuclear_positions: tuple[Vector, ...] = ()
    components: tuple[str, ...] = COMPONENTS
    needs_key: bool = False

    def __post_init__(self) -> None:
        charges = tuple(float(z) for z in np.asarray(self.nuclear_charges, np.float64).reshape(-1))
        positions = np.asarray(self.nuclear_positions, np.float64).reshape(-1, 3)
        if len(charges) != positions.shape[0]:
            raise InputError(
                f"{len(charges)} nuclear charges at {positions.shape[0]} positions; give one "
                "position (x y z, bohr) per nucleus"
            )
        if not (np.all(np.isfinite(charges)) and np.all(np.isfinite(positions))):
            raise InputError("a nuclear charge or position is not finite; give real numbers")
        _check_apart(self.lattice, positions)
        object.__setattr__(self, "nuclear_charges", charges)
        object.__setattr__(self, "nuclear_positions", tuple(map(tuple, positions.tolist())))

    @classmethod
    def of(cls, system: Any) -> PeriodicCoulomb:
        return cls(system.lattice, tuple(system.nuclear_charges), tuple(system.nuclear_positions))

    @functools.cached_property
    def nucleus_nucleus(self) -> float:
        """The nuclei's Ewald energy in their own background (Hartree), computed once."""
        return point_charge_energy(self.lattice, self.nuclear_charges, self.nuclear_positions)

    def parts(self, r: Array) -> tuple[Array, Array, Array]:
        """(electron-nucleus, electron-electron, nucleus-nucleus) of one walker ``r``
        [electron, 3] (bohr), in Hartree."""
        ewald = _ewald_for(self.lattice, r.shape[0] + len(self.nuclear_charges))
        v_ee = electron_electron(ewald, r)
        v_en = jnp.zeros((), r.dtype)
        if self.nuclear_charges:
            v_en = electron_nucleus(ewald, r, self.nuclear_charges, self.nuclear_positions)
        return v_en, v_ee, jnp.asarray(self.nucleus_nucleus, r.dtype)

    def __call__(self, walker: Walker, key: Array | None = None) -> dict[str, Array]:
        return dict(zip(self.components, self.parts(walker.r), strict=True))


def from_config(system: Any, config: Any) -> PeriodicCoulomb | None:
    """The Ewald-summed Coulomb term of a periodic system (one with a ``lattice``: the
    electron gas); none for a molecule."""
    return None if system.lattice is None else PeriodicCoulomb.of(system)


@functools.lru_cache(maxsize=32)
def _ewald_for(lattice: Lattice, n_charges: int) -> EwaldSum:
    return ewald_sum(lattice, n_charges)


def _half_space(n: np.ndarray) -> np.ndarray:
    """Which integer vectors n [k, 3] (none zero) have their first nonzero entry > 0."""
    first = np.argmax(n != 0, axis=1)
    return n[np.arange(n.shape[0]), first] > 0


def _check_apart(lattice: Lattice, r: np.ndarray) -> None:
    """Two charges on top of each other (or of each other's images) have no finite energy."""
    i, j = np.triu_indices(r.shape[0], k=1)
    if i.size:
        d = np.linalg.norm(lattice.minimum_image(r[i] - r[j]), axis=-1)
        if np.min(d) < 1e-3:
            k = int(np.argmin(d))
            raise InputError(
                f"charges {i[k] + 1} and {j[k] + 1} are {d[k]:.2g} bohr apart (images included); "
                "move them at least 1e-3 bohr apart"
            )


def _real_sum(xp, erfc, ewald: EwaldSum, d):
    """sum_L erfc(a |d + L|) / |d + L| for each displacement of ``d`` [..., 3]."""
    matrix = xp.asarray(ewald.lattice.matrix, d.dtype)
    d = d - xp.round(d @ xp.asarray(np.linalg.inv(ewald.lattice.matrix), d.dtype)) @ matrix
    x = d[..., None, :] + xp.asarray(ewald.real, d.dtype)
    dist = xp.sqrt(xp.sum(x * x, axis=-1))
    return xp.sum(erfc(ewald.alpha * dist) / dist, axis=-1)


def _structure_factor(xp, ewald: EwaldSum, q, r):
    """(Re, Im) of S(G) = sum_i q_i exp(i G . r_i) for the reciprocal vectors [n_G]."""
    phase = ewald.lattice.wrap(r) @ xp.asarray(ewald.reciprocal.T, r.dtype)
    return q @ xp.cos(phase), q @ xp.sin(phase)


def _energy(xp, erfc, ewald: EwaldSum, q, r):
    i, j = np.triu_indices(q.shape[0], k=1)
    real = xp.sum(q[i] * q[j] * _real_sum(xp, erfc, ewald, r[i] - r[j]))
    c, s = _structure_factor(xp, ewald, q, r)
    reciprocal = xp.sum(xp.asarray(ewald.weights, r.dtype) * (c * c + s * s))
    total = xp.sum(q)
    return real + reciprocal + ewald.self_term * xp.sum(q * q) + ewald.background * total * total


def _cross(xp, erfc, ewald: EwaldSum, q1, r1, q2, r2):
    real = xp.sum(q1[:, None] * q2[None, :] * _real_sum(xp, erfc, ewald, r1[:, None] - r2[None]))
    c1, s1 = _structure_factor(xp, ewald, q1, r1)
    c2, s2 = _structure_factor(xp, ewald, q2, r2)
    reciprocal = 2.0 * xp.sum(xp.asarray(ewald.weights, r1.dtype) * (c1 * c2 + s1 * s2))
    return real + reciprocal + 2.0 * ewald.background * xp.sum(q1) * xp.sum(q2)
