"""sign and log|det| of the orbital matrices, with a faster path for the samplers' values.

``jnp.linalg.slogdet`` factors a batch of matrices with LAPACK's LU, one call per matrix:
on a CPU that costs 0.4-0.5 us per 4 x 4 matrix, mostly fixed cost, and the MCMC's moves
evaluate 40,000 of them per LiH training step. Under ``values()`` (the samplers' log|psi|,
which nothing differentiates) matrices from ``SMALLEST`` to ``SMALL`` rows on a CPU are
factored instead by Gaussian elimination with partial pivoting unrolled over the columns,
LAPACK's unblocked algorithm vectorised across the batch: 0.12-0.28x LAPACK's time from
3 x 3 to 10 x 10, 0.58x at 14 x 14, 0.63-0.92x at 16 x 16 (two runs), with float32 errors
from float64 1.2-1.3x LAPACK's (docs/benchmarks.md, "The samplers' determinants").
Everything else (the local energy's Laplacian, the gradients, pretraining) keeps
``jnp.linalg.slogdet``, whose derivatives the Laplacian operators know.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import jax
import jax.numpy as jnp

from psijax.types import Array

# The sizes factored by the unrolled elimination: from 3 x 3 (JAX's slogdet has closed forms
# for 1 x 1 and 2 x 2, faster still) up to SMALL x SMALL (its program grows with n).
SMALLEST = 3
SMALL = 14

_scope = threading.local()  # set while tracing the samplers' log|psi| on this thread


@contextlib.contextmanager
def values() -> Iterator[None]:
    """Trace what runs inside as log|psi| values only (the samplers' calls)."""
    before = getattr(_scope, "values", False)
    _scope.values = True
    try:
        yield
    finally:
        _scope.values = before


def slogdet(a: Array) -> tuple[Array, Array]:
    """(sign, log|det|) of the matrices ``a`` ``[..., n, n]`` (module doc)."""
    small = SMALLEST <= a.shape[-1] <= SMALL and jax.default_backend() == "cpu"
    small = small and not jnp.iscomplexobj(a)  # the elimination is for real matrices
    if small and getattr(_scope, "values", False):
        return eliminate(a)
    return jnp.linalg.slogdet(a)


def eliminate(a: Array) -> tuple[Array, Array]:
    """(sign, log|det|) by Gaussian elimination with partial pivoting, one column at a time,
    every matrix of the batch at once."""
    n = a.shape[-1]
    sign = jnp.ones(a.shape[:-2], a.dtype)
    log_abs = jnp.zeros(a.shape[:-2], a.dtype)
    for k in range(n):
        rows = a[..., k:, :]  # the rows not yet eliminated
        pivot_at = jnp.argmax(jnp.abs(rows[..., k]), axis=-1)
        choose = jax.nn.one_hot(pivot_at, n - k, dtype=a.dtype)
        pivot_row = jnp.einsum("...i,...ij->...j", choose, rows)
        pivot = pivot_row[..., k]
        sign = sign * jnp.where(pivot_at == 0, 1.0, -1.0) * jnp.sign(pivot)
        log_abs = log_abs + jnp.log(jnp.abs(pivot))
        if k + 1 == n:
            break
        # swap the pivot row with row k, then eliminate column k below it
        rows = rows + choose[..., :, None] * (rows[..., :1, :] - pivot_row[..., None, :])
        below = rows[..., 1:, :]
        below = below - (below[..., k] / pivot[..., None])[..., None] * pivot_row[..., None, :]
        a = jnp.concatenate([a[..., :k, :], pivot_row[..., None, :], below], axis=-2)
    return sign, log_abs
