"""Quadrature rules on the unit sphere, and random rotations of them.

A rule is ``(points [Q, 3], weights [Q])`` with weights summing to 1, so that
``sum_q w_q f(p_q)`` approximates the spherical average (1/4 pi) int f dOmega; it is exact
for polynomials of degree up to ``DEGREE[Q]``. Rotating the rule by a uniformly random
rotation makes the estimate unbiased for any integrand: its mean over rotations is the
exact average (the rotated points are uniformly distributed on the sphere).

The rules are the symmetric ones used for pseudopotentials in quantum Monte Carlo (Fahy,
Wang and Louie, Phys. Rev. B 42, 3503 (1990)): tetrahedron (4), octahedron (6), icosahedron
(12), octahedron plus edge midpoints (18), and that plus the cube's corners (26).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from psijax.types import Array

DEGREE = {4: 2, 6: 3, 12: 5, 18: 5, 26: 7}  # exact for polynomials up to this degree


def _normalised(points) -> np.ndarray:
    points = np.asarray(points, dtype=np.float64)
    return points / np.linalg.norm(points, axis=1, keepdims=True)


def _octahedron() -> np.ndarray:
    return np.concatenate([np.eye(3), -np.eye(3)])


def _edges() -> np.ndarray:
    """The 12 midpoints of the octahedron's edges (the cuboctahedron), normalised."""
    points = []
    for a, b in ((0, 1), (0, 2), (1, 2)):
        for sign_a in (1, -1):
            for sign_b in (1, -1):
                point = [0, 0, 0]
                point[a], point[b] = sign_a, sign_b
                points.append(point)
    return _normalised(points)


def _corners() -> np.ndarray:
    return _normalised([[x, y, z] for x in (1, -1) for y in (1, -1) for z in (1, -1)])


def _icosahedron() -> np.ndarray:
    phi = (1 + 5**0.5) / 2
    points = []
    for a in (1, -1):
        for b in (phi, -phi):
            points += [[0, a, b], [a, b, 0], [b, 0, a]]
    return _normalised(points)


@functools.cache
def rule(n_points: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``n_points`` rule as float64 (points [Q, 3], weights [Q]); Q in ``DEGREE``."""
    if n_points == 4:
        points = _normalised([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]])
        weights = np.full(4, 1 / 4)
    elif n_points == 6:
        points, weights = _octahedron(), np.full(6, 1 / 6)
    elif n_points == 12:
        points, weights = _icosahedron(), np.full(12, 1 / 12)
    elif n_points == 18:
        points = np.concatenate([_octahedron(), _edges()])
        weights = np.concatenate([np.full(6, 1 / 30), np.full(12, 1 / 15)])
    elif n_points == 26:
        points = np.concatenate([_octahedron(), _edges(), _corners()])
        weights = np.concatenate([np.full(6, 1 / 21), np.full(12, 4 / 105), np.full(8, 9 / 280)])
    else:
        raise ValueError(f"no {n_points}-point rule; choose one of {sorted(DEGREE)}")
    return points, weights


def random_rotation(key: Array, dtype=jnp.float32) -> Array:
    """A uniformly distributed rotation matrix [3, 3] (from a uniform unit quaternion)."""
    q = jax.random.normal(key, (4,), dtype)
    w, x, y, z = q / jnp.linalg.norm(q)
    return jnp.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ],
        dtype,
    )


def legendre(ell: int, x: Array) -> Array:
    """The Legendre polynomial P_ell(x) by the three-term recurrence."""
    previous, current = jnp.ones_like(x), x
    if ell == 0:
        return previous
    for k in range(1, ell):
        previous, current = current, ((2 * k + 1) * x * current - k * previous) / (k + 1)
    return current
