"""SPRING: MinSR natural gradient with Kaczmarz-style momentum (Goldshlager et al. 2024).

With O the per-walker gradients of log|psi|, centered and scaled by 1/sqrt(W),
and eps = -(E_L - E) / sqrt(W), each step solves the walkers x walkers system

    phi = O^T (O O^T + damping I + 1/W) ^-1 (eps - momentum O phi_prev) + momentum phi_prev

and moves the parameters by lr * phi, capped at ``max_norm``. The Gram matrix is
assembled with whatever collectives the walker sharding needs (under ``jit``
GSPMD inserts them) and solved in float64 when x64 is enabled.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree

from psijax.optim.schedules import inverse_decay
from psijax.types import Array


class SpringState(NamedTuple):
    previous: Array  # phi of the previous step, flat [n_params]
    count: Array


def spring(
    learning_rate: float = 0.02,
    decay_steps: float = 1000.0,
    damping: float = 1e-3,
    momentum: float = 0.99,
    max_norm: float = 0.1,
) -> optax.GradientTransformationExtraArgs:
    """SPRING as an optax transformation.

    ``update(grads, state, params, *, jacobian, centered_energies)`` where
    ``jacobian`` is ``[walkers, n_params]`` (d log|psi| / d params per walker,
    flattened like ``ravel_pytree(params)``) and ``centered_energies`` is
    ``[walkers]`` (clipped E_L minus its mean, 0 for dropped walkers, whose
    jacobian rows must be 0 too).
    """
    schedule = inverse_decay(learning_rate, decay_steps)

    def init(params) -> SpringState:
        flat, _ = ravel_pytree(params)
        return SpringState(jnp.zeros_like(flat), jnp.zeros((), jnp.int32))

    def update(grads, state, params=None, *, jacobian, centered_energies, **extra):
        del params, extra
        _, unravel = ravel_pytree(grads)
        n = jacobian.shape[0]
        dtype = jacobian.dtype
        scale = 1.0 / jnp.sqrt(jnp.asarray(n, dtype))
        # The walker mean as a matrix-vector product, and every product with O as
        # x @ O rather than O.T @ x: on XLA CPU a reduction or a transposed product
        # over the walker axis of the [walkers, params] jacobian is ~10-50x slower
        # than the equivalent row-major matrix-vector product (benchmarks/vmc_step.py).
        mean = jnp.full((n,), 1.0 / n, dtype) @ jacobian
        o = (jacobian - mean) * scale
        eps = -centered_energies * scale
        zeta = eps - momentum * (o @ state.previous)
        solve_dtype = jnp.float64 if jax.config.jax_enable_x64 else dtype
        o_wide = o.astype(solve_dtype)
        gram = o_wide @ o_wide.T + damping * jnp.eye(n, dtype=solve_dtype) + 1.0 / n
        x = _solve_spd(gram, zeta.astype(solve_dtype)).astype(dtype)
        phi = x @ o + momentum * state.previous
        step = schedule(state.count) * phi
        norm = jnp.linalg.norm(step)
        step = step * jnp.minimum(1.0, max_norm / jnp.maximum(norm, 1e-30))
        return unravel(step), SpringState(phi, state.count + 1)

    return optax.GradientTransformationExtraArgs(init, update)


def _solve_spd(matrix: Array, rhs: Array) -> Array:
    """``matrix^-1 rhs`` for a symmetric positive definite ``matrix`` (NaN if it is not)."""
    lower = _cholesky(matrix)
    solve = jax.lax.linalg.triangular_solve
    y = solve(lower, rhs[:, None], left_side=True, lower=True)
    return solve(lower, y, left_side=True, lower=True, transpose_a=True)[:, 0]


# Below this size the factor is computed in XLA (recursive blocks of _BLOCK columns).
# LAPACK's potrf runs on OpenBLAS' own threads, which compete with XLA's thread pool:
# on the 2-core CPU it took 0.4 ms alone but 20-210 ms inside the training step and
# under load, against ~1 ms for this version (benchmarks/vmc_step.py, jax.profiler).
_MAX_XLA_CHOLESKY = 1024
_BLOCK = 32


def _cholesky(a: Array) -> Array:
    """Lower Cholesky factor of a symmetric positive definite ``a``."""
    n = a.shape[0]
    if n > _MAX_XLA_CHOLESKY:
        return jnp.linalg.cholesky(a)
    if n <= _BLOCK:
        return _cholesky_unblocked(a)
    h = max(n // 2 // _BLOCK, 1) * _BLOCK
    l11 = _cholesky(a[:h, :h])
    l21 = jax.lax.linalg.triangular_solve(
        l11, a[h:, :h], left_side=False, lower=True, transpose_a=True
    )
    l22 = _cholesky(a[h:, h:] - l21 @ l21.T)
    top = jnp.concatenate([l11, jnp.zeros((h, n - h), a.dtype)], axis=1)
    return jnp.concatenate([top, jnp.concatenate([l21, l22], axis=1)], axis=0)


def _cholesky_unblocked(a: Array) -> Array:
    """Outer-product Cholesky, one column per iteration (for small blocks)."""
    n = a.shape[0]
    rows = jnp.arange(n)

    def column(j, carry):
        a, lower = carry
        col = a[:, j] / jnp.sqrt(a[j, j])
        col = jnp.where(rows >= j, col, 0.0)
        return a - col[:, None] * col[None, :], lower.at[:, j].set(col)

    return jax.lax.fori_loop(0, n, column, (a, jnp.zeros_like(a)))[1]
