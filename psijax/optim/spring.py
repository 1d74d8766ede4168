"""SPRING: MinSR natural gradient with Kaczmarz-style momentum (Goldshlager et al. 2024).

With O the per-walker gradients of log|psi|, centered and scaled by 1/sqrt(W),
and eps = -(E_L - E) / sqrt(W), each step solves the walkers x walkers system

    phi = O^T (O O^T + damping I + 1/W) ^-1 (eps - momentum O phi_prev) + momentum phi_prev

and moves the parameters by lr * phi, capped at ``max_norm``. The Gram matrix is
solved in float64 when x64 is enabled.

With walkers sharded over d devices (``mesh`` given), no device holds or moves the whole
``[walkers, params]`` jacobian: each device re-lays its rows of O out as a column block
(one ``all_to_all`` of W x P / d), forms its part of O O^T from those columns and the
parts are summed (``psum`` of W x W); every device solves the small system and turns its
column block into its slice of phi. Per-device memory and traffic fall as 1/d
(benchmarks/step_scale.py; tests/test_spring_layout.py). On a device that cannot hold the
jacobian at all, the step hands SPRING a ``psijax.optim.jacobian.Blocked`` instead
(``--jacobian-blocks B``): the same products, formed in B parameter blocks.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree
from jax.sharding import Mesh, PartitionSpec

from psijax import precision, registry
from psijax.optim.base import CENTERED_ENERGIES, JACOBIAN, MESH, Optimizer
from psijax.optim.jacobian import Blocked, Dense, Leaves
from psijax.optim.schedules import inverse_decay
from psijax.types import Array


class SpringState(NamedTuple):
    previous: Array  # phi of the previous step, flat [n_params]
    count: Array


def spring(
    learning_rate: float | None = None,
    decay_steps: float = 1000.0,
    damping: float = 1e-3,
    momentum: float = 0.99,
    max_norm: float = 0.1,
    gram_precision: str | None = "high",
) -> Optimizer:
    """SPRING as an optax-style transformation that needs the per-walker jacobian; the
    learning rate defaults to its ``psijax.registry`` entry's.

    ``update(grads, state, params, *, jacobian, centered_energies)`` where
    ``jacobian`` is ``[walkers, n_params]`` (d log|psi| / d params per walker,
    flattened like ``ravel_pytree(params)``), a ``psijax.optim.jacobian.Leaves`` (the same, one
    block per parameter leaf) or a ``psijax.optim.jacobian.Blocked``, and
    ``centered_energies`` is ``[walkers]`` (clipped E_L minus its mean, 0 for dropped
    walkers, whose jacobian rows must be 0 too). With ``mesh`` and ``axis`` (the mesh axis
    the walkers are split along) the system is assembled from parameter blocks, see the
    module doc. ``gram_precision``: the float32 products with the jacobian at this
    precision (``psijax.precision``; None: JAX's setting, on a GPU TensorFloat-32). On an
    H100 ``high`` gave the direction float32's error (``highest``'s) at TensorFloat-32's
    speed, 6x ``highest``'s at FermiNet's production sizes (docs/benchmarks.md, GPU); a
    CPU computes all three in full float32.
    """
    if learning_rate is None:
        learning_rate = registry.OPTIMIZERS["spring"].learning_rate
    schedule = inverse_decay(learning_rate, decay_steps)

    def init(params) -> SpringState:
        flat, _ = ravel_pytree(params)
        return SpringState(jnp.zeros_like(flat), jnp.zeros((), jnp.int32))

    def update(
        grads, state, params=None, *, jacobian, centered_energies, mesh=None, axis=None, **extra
    ):
        del params, extra
        _, unravel = ravel_pytree(grads)
        local = isinstance(jacobian, Blocked) or mesh is None or axis is None
        if local or mesh.shape[axis] == 1:
            direction = _direction
            jacobian = jacobian if isinstance(jacobian, Blocked | Leaves) else Dense(jacobian)
        else:  # walkers split over devices: re-laid out by columns, from the whole array
            direction = functools.partial(_direction_split, mesh, axis)
            jacobian = jacobian.dense() if isinstance(jacobian, Leaves) else jacobian
        with precision.scope(gram_precision):
            phi = direction(
                jacobian, centered_energies, state.previous, damping=damping, momentum=momentum
            )
        step = schedule(state.count) * phi
        norm = jnp.linalg.norm(step)
        step = step * jnp.minimum(1.0, max_norm / jnp.maximum(norm, 1e-30))
        return unravel(step), SpringState(phi, state.count + 1)

    return Optimizer(init, update, frozenset({JACOBIAN, CENTERED_ENERGIES, MESH}))


def _direction(
    jacobian: Dense | Blocked,
    centered: Array,
    previous: Array,
    *,
    damping: float,
    momentum: float,
    axis: str | None = None,
) -> Array:
    """phi from J (all W walkers) given by its products (psijax/optim/jacobian.py).

    ``previous`` is ``[P]``; with ``axis`` (inside ``shard_map``) each device holds a block
    of columns ``Dense([W, P / d])`` and the matching block of ``previous``, and gets its
    block of phi: the products over parameters (the Gram matrix, J phi_prev) are summed
    over ``axis``, everything else is local.
    """
    n = centered.shape[0]
    dtype = jacobian.dtype
    scale = 1.0 / jnp.sqrt(jnp.asarray(n, dtype))
    total = (lambda x: x) if axis is None else functools.partial(jax.lax.psum, axis_name=axis)
    # O = C J / sqrt(n) with C = I - 1 1^T / n: O O^T = C J J^T C / n, O v = C J v / sqrt(n)
    # and x^T O = x^T C J / sqrt(n), the three products psijax/optim/jacobian.py provides.
    zeta = -centered * scale - momentum * scale * total(jacobian.centered_matvec(previous))
    solve_dtype = jnp.float64 if jax.config.jax_enable_x64 else dtype
    gram = total(jacobian.centered_gram(solve_dtype)) / n
    gram = gram + damping * jnp.eye(n, dtype=solve_dtype) + 1.0 / n
    x = _solve_spd(gram, zeta.astype(solve_dtype)).astype(dtype)
    return jacobian.centered_rmatvec(scale * x) + momentum * previous


def _direction_split(
    mesh: Mesh,
    axis: str,
    jacobian: Array,
    centered: Array,
    previous: Array,
    *,
    damping: float,
    momentum: float,
) -> Array:
    """``_direction`` for a jacobian whose rows (walkers) are split over ``axis``.

    Each device re-lays its rows as one block of columns holding every walker (one
    ``all_to_all`` of its share, W x P / d), so that no device ever holds more than two
    shares of the jacobian: its rows until they are sent, and its column block.
    """
    n_params = jacobian.shape[1]
    pad = -n_params % mesh.shape[axis]

    def body(rows: Array, centered: Array, previous: Array) -> Array:
        rows = jnp.pad(rows, ((0, 0), (0, pad)))
        columns = jax.lax.all_to_all(rows, axis, split_axis=1, concat_axis=0, tiled=True)
        centered = jax.lax.all_gather(centered, axis, tiled=True)
        return _direction(
            Dense(columns), centered, previous, damping=damping, momentum=momentum, axis=axis
        )

    spec = PartitionSpec(axis)
    blocks = jax.shard_map(body, mesh=mesh, in_specs=(spec, spec, spec), out_specs=spec)(
        jacobian, centered, jnp.pad(previous, (0, pad))
    )
    return blocks[:n_params]


def _solve_spd(matrix: Array, rhs: Array) -> Array:
    """``matrix^-1 rhs`` for a symmetric positive definite ``matrix`` (NaN if it is not)."""
    lower = _factor(matrix)
    solve = jax.lax.linalg.triangular_solve
    y = solve(lower, rhs[:, None], left_side=True, lower=True)
    return solve(lower, y, left_side=True, lower=True, transpose_a=True)[:, 0]


def _factor(matrix: Array) -> Array:
    """The lower Cholesky factor: on a CPU ``_cholesky``; elsewhere the device's own
    (cuSOLVER's on a GPU), where ``_cholesky``'s one column per loop iteration costs a kernel
    launch each: on an H100 the whole SPRING update of the LiH job took 2.5 ms of its 5.2 ms
    step with that loop (docs/benchmarks.md, GPU)."""
    return jax.lax.platform_dependent(matrix, cpu=_cholesky, default=jnp.linalg.cholesky)


# Below this size the factor is computed in XLA (recursive blocks of _BLOCK columns).
# While OpenBLAS kept its own threads, LAPACK's potrf took 0.4 ms alone but 20-210 ms inside
# the training step and under load, against ~1 ms for this version. With LAPACK's BLAS on
# one thread (psijax.parallel.cpu_blas) potrf made the LiH step 1.02-1.04x slower and its
# compile 0.3-0.9 CPU-s shorter (docs/benchmarks.md, "LAPACK's own threads"): this stays.
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
    # full float32 whatever the scope's precision: the factor of a Gram matrix formed with
    # TensorFloat-32 products stays finite only if its own products are not rounded too
    schur = jnp.matmul(l21, l21.T, precision=jax.lax.Precision.HIGHEST)
    l22 = _cholesky(a[h:, h:] - schur)
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


def from_config(config) -> Optimizer:
    return spring(
        learning_rate=registry.learning_rate(config),
        decay_steps=config.decay_steps,
        gram_precision=config.gram_precision,
    )
