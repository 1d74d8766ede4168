"""Gaussian basis functions in JAX: one shell's values, and its Bloch sum in a cell.

A shell of angular momentum l is the cartesian functions x^i y^j z^k (i + j + k = l)
times sum_p c_pc exp(-a_p |r - C|^2) for each contraction c. In a periodic cell, at the
Gamma point, each function is summed over the lattice, sum_L g(r - L): pyscf.pbc's basis
functions, what its Hartree-Fock orbitals are made of.

The sum converges in real space for a tight primitive (few images of it reach the cell)
and in reciprocal space for a diffuse one (Poisson's formula: sum_L g(r - L) =
(1/V) sum_G g^(G) exp(i G . r), with g^ the Fourier transform, which for x^n exp(-a x^2)
is sqrt(pi / a) (-i / 2 sqrt(a))^n H_n(G / 2 sqrt(a)) exp(-G^2 / 4a) along each axis, H_n
Hermite's polynomial). Each primitive goes where it takes fewer terms; both sums are cut
where the terms left out are below exp(-CUT_EXPONENT) of the largest.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax.numpy as jnp
import numpy as np
from numpy.polynomial import hermite

from psijax.system.lattice import Lattice
from psijax.types import Array

# terms below exp(-CUT_EXPONENT) (1e-8) of the largest are left out: under float32's
# resolution of orbital values of order 1
CUT_EXPONENT = 18.4

Powers = list[tuple[int, int, int]]


def shell(
    center: np.ndarray, exponents: np.ndarray, coeffs: np.ndarray, powers: Powers,
    cell: Lattice | None = None,
) -> Callable[[Array], Array]:  # fmt: skip
    """``values(r)``: the shell's functions at positions ``r`` [..., 3] (bohr), as
    ``[..., contraction, len(powers)]``; in ``cell`` their Bloch sums at Gamma, for
    positions inside the cell (``Lattice.wrap``)."""
    center, exponents = np.asarray(center, np.float64), np.asarray(exponents, np.float64)
    coeffs = np.asarray(coeffs, np.float64)
    if cell is None:
        return lambda r: _real_space(r, center[None], exponents, coeffs, powers)
    ang = sum(powers[0])
    reciprocal = np.array([_reciprocal_cheaper(cell, a, ang) for a in exponents], bool)
    parts = []
    if not reciprocal.all():
        tight, c = exponents[~reciprocal], coeffs[~reciprocal]
        reach = 2.0 * cell.reach + math.sqrt((CUT_EXPONENT + 2 * ang) / tight.min())
        images = center + cell.points(reach)
        parts.append(lambda r: _real_space(r, images, tight, c, powers))
    if reciprocal.any():
        table, g = _fourier_table(cell, center, exponents[reciprocal], coeffs[reciprocal], powers)
        parts.append(lambda r: _reciprocal_space(r, g, table))
    return lambda r: sum(part(r) for part in parts)


def _real_space(r: Array, centers: np.ndarray, exponents, coeffs, powers: Powers) -> Array:
    """sum over ``centers`` [L, 3] of the shell's functions at ``r`` [..., 3]."""
    dtype = r.dtype
    d = r[..., None, :] - jnp.asarray(centers, dtype)  # [..., L, 3]
    r2 = jnp.sum(d**2, axis=-1, keepdims=True)
    radial = jnp.exp(-r2 * jnp.asarray(exponents, dtype)) @ jnp.asarray(coeffs, dtype)
    # integer powers of x, y, z (python ints: no float pow, nothing to constant-fold)
    angular = jnp.stack([d[..., 0] ** i * d[..., 1] ** j * d[..., 2] ** k
                         for i, j, k in powers], axis=-1)  # fmt: skip
    return jnp.sum(radial[..., :, None] * angular[..., None, :], axis=-3)


def _reciprocal_space(r: Array, g: np.ndarray, table: tuple[np.ndarray, np.ndarray]) -> Array:
    """(1/V) sum_G Re[T(G) exp(i G . r)] for the table T [G, contraction, powers].

    Products and sums, not matrix products: with ``cos(G . r) @ Re T`` as a dot of the
    constant table, pretraining's loop (these orbitals at its walkers, then inside the
    sampler's own loop at the proposals) computed the first orbitals as garbage (1e30 or
    NaN where they are of order 1) for a crystal at 512 and 1024 walkers on jaxlib 0.10.2's
    CPU backend, whatever the compile options; at 256 walkers, or outside the loop, the
    dot was right. The reciprocal vectors are few (tens), so the sums cost little."""
    dtype = r.dtype
    phase = jnp.sum(r[..., None, :] * jnp.asarray(g, dtype), axis=-1)  # [..., G]
    real, imag = (jnp.asarray(t.reshape(len(g), -1), dtype) for t in table)  # [G, K]
    values = jnp.cos(phase)[..., None] * real - jnp.sin(phase)[..., None] * imag
    return jnp.sum(values, axis=-2).reshape(*r.shape[:-1], *table[0].shape[1:])


def _fourier_table(cell: Lattice, center, exponents, coeffs, powers: Powers):
    """(Re, Im) of T(G) = (1/V) sum_p c_pc g^_p(G) exp(-i G . C), [G, contraction, powers],
    and the reciprocal vectors G [G, 3] it needs."""
    ang = sum(powers[0])
    g = cell.reciprocal_points(math.sqrt(4.0 * exponents.max() * (CUT_EXPONENT + 2 * ang)))
    table = np.zeros((len(g), coeffs.shape[1], len(powers)), np.complex128)
    for a, c in zip(exponents, coeffs, strict=True):
        u = g / (2.0 * math.sqrt(a))  # [G, 3]
        gauss = (math.pi / a) ** 1.5 * np.exp(-np.sum(u * u, axis=1))
        for k, power in enumerate(powers):
            factor = gauss.astype(np.complex128)
            for axis, n in enumerate(power):
                h = hermite.hermval(u[:, axis], [0] * n + [1])
                factor = factor * (-1j / (2.0 * math.sqrt(a))) ** n * h
            table[:, :, k] += np.outer(factor, c)
    table *= np.exp(-1j * (g @ center))[:, None, None] / cell.volume
    return (table.real, table.imag), g


def _reciprocal_cheaper(cell: Lattice, exponent: float, ang: int) -> bool:
    """Whether the primitive of ``exponent`` takes fewer reciprocal than real-space terms."""
    cut = CUT_EXPONENT + 2 * ang
    n_real = (2.0 * cell.reach + math.sqrt(cut / exponent)) ** 3 / cell.volume
    n_reciprocal = math.sqrt(4.0 * exponent * cut) ** 3 * cell.volume / (2.0 * math.pi) ** 3
    return n_reciprocal < n_real
