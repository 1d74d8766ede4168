"""Batched LAPACK calls that XLA's CPU thread pool cannot deadlock on.

jaxlib 0.10 and 0.11 split a batched LAPACK kernel (the LU behind ``slogdet``, ``solve``
and ``inv``; the triangular solves) over XLA's CPU intra-op pool once its batch holds 2e5
flop, and block the calling pool thread until the pieces are done. XLA runs independent
operations of one program at the same time on that same pool, so two such calls can
occupy every pool thread, each waiting for pieces that no thread is left to run: the
program never finishes (docs/compatibility.md, "jaxlib CPU: concurrent batched LAPACK
calls deadlock XLA's CPU thread pool"). jaxlib 0.12 and later never split.

``install`` wraps the CPU lowering of LU and of triangular solves: where the pool may
split the kernel (more than one thread and a batch at or above the threshold), the batch
goes to LAPACK in pieces, one after the other, each of one matrix or below the
threshold, which LAPACK runs inline on the calling thread. The results are LAPACK's; the
loop costs time (one core: LU 1.1-1.5x, solve 1.4-2.2x, on batches from 64 matrices of
64 x 64 to 16,384 of 14 x 14), and it lets the pool keep one thread per core, which
makes the LiH step 1.1x faster than a one-thread pool (docs/benchmarks.md). This is the
one place psijax uses JAX's internals (the lowering rules, through ``jax._src``), on the
two jaxlib releases that split, and only when ``psijax.configure()`` asks for it.

Where the wrapper cannot be installed on a splitting jaxlib (JAX's internals not as
expected), ``one_thread_pool`` asks for a pool of one thread (``PJRT_NPROC=1``), which
cannot deadlock with one CPU device. The pool's size is read once, when JAX creates its
CPU backend; a size the user chose (``PJRT_NPROC`` or ``NPROC``) is always kept. None of
this touches GPUs.
"""

from __future__ import annotations

import math
import os
import warnings

# jaxlib releases whose LAPACK kernels split batches over the pool: [first, end).
SPLITTING = ((0, 10, 0), (0, 12, 0))
# The batch cost (flop, as jaxlib estimates it) from which a kernel may split.
THRESHOLD = 200_000
# The environment variables XLA reads its CPU pool's size from.
POOL_ENV = ("PJRT_NPROC", "NPROC")

_original: dict = {}  # primitive -> JAX's own CPU lowering rule, while ours is installed


def splitting_jaxlib(version: str | None = None) -> bool:
    """Whether this jaxlib (or ``version``) splits LAPACK batches over XLA's CPU pool."""
    if version is None:
        import jaxlib

        version = jaxlib.__version__
    release = tuple(int(p) for p in version.split(".")[:3] if p.isdigit())
    return SPLITTING[0] <= release < SPLITTING[1]


def cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def pool_threads() -> int:
    """Threads of XLA's CPU pool in this process: the size asked for (``PJRT_NPROC`` or
    ``NPROC``, else one per core), at least one per local CPU device."""
    import jax

    chosen = next((os.environ[name] for name in POOL_ENV if name in os.environ), None)
    asked = int(chosen) if chosen and chosen.strip().isdigit() else cores()
    try:
        devices = len(jax.local_devices(backend="cpu"))
    except RuntimeError:  # no CPU backend
        devices = 1
    return max(asked, devices)


def may_split(batch: int, cost_per_matrix: int) -> bool:
    """Whether a LAPACK kernel over ``batch`` matrices of ``cost_per_matrix`` flop each
    may be split over this process's pool."""
    return batch * cost_per_matrix >= THRESHOLD and pool_threads() > 1


def installed() -> bool:
    return bool(_original)


def install() -> bool:
    """Route CPU LU and triangular solves that the pool could split through LAPACK calls
    that cannot split; whether they are routed so (False where this jaxlib never splits,
    or its internals are not as expected). Idempotent; ``uninstall`` undoes it."""
    if not splitting_jaxlib():
        return False
    if _original:
        return True
    try:  # JAX's internals, as of jax 0.10-0.11
        from jax._src.interpreters import mlir
        from jax._src.lax import linalg

        rules = mlir._platform_specific_lowerings["cpu"]
        lapack_lu = rules[linalg.lu_p].rule
        lapack_solve = rules[linalg.triangular_solve_p].rule
    except (ImportError, AttributeError, KeyError):
        return False

    def lu(ctx, operand, **params):
        (aval,) = ctx.avals_in
        *batch, m, n = aval.shape
        pieces = _pieces(math.prod(batch), _cost(m * n * min(m, n), aval.dtype))
        if pieces == 1:
            return lapack_lu(ctx, operand, **params)
        rule = lambda x: in_pieces(linalg.lu, pieces, len(batch), x)
        return mlir.lower_fun(rule, multiple_results=True)(ctx, operand)

    def triangular_solve(ctx, a, b, *, left_side, **params):
        *batch, rows, cols = ctx.avals_in[1].shape
        cost = _cost(rows * cols * (rows if left_side else cols), ctx.avals_in[1].dtype)
        pieces = _pieces(math.prod(batch), cost)
        if pieces == 1:
            return lapack_solve(ctx, a, b, left_side=left_side, **params)
        solve = lambda a, b: linalg.triangular_solve(a, b, left_side=left_side, **params)
        rule = lambda a, b: in_pieces(solve, pieces, len(batch), a, b)
        return mlir.lower_fun(rule, multiple_results=False)(ctx, a, b)

    mlir.register_lowering(linalg.lu_p, lu, platform="cpu")
    mlir.register_lowering(linalg.triangular_solve_p, triangular_solve, platform="cpu")
    _original.update({linalg.lu_p: lapack_lu, linalg.triangular_solve_p: lapack_solve})
    return True


def uninstall() -> None:
    """JAX's own CPU lowerings of LU and triangular solves again (programs compiled
    meanwhile keep the pieces)."""
    if not _original:
        return
    from jax._src.interpreters import mlir

    for primitive, rule in _original.items():
        mlir.register_lowering(primitive, rule, platform="cpu")
    _original.clear()


def one_thread_pool() -> bool:
    """Ask for a one-thread XLA CPU pool where this jaxlib splits and the pieces are not
    installed, if nobody chose a size and JAX has no backend yet; whether psijax set
    ``PJRT_NPROC`` (warns once where the pool was made before it could)."""
    if not splitting_jaxlib() or installed():
        return False
    if any(name in os.environ for name in POOL_ENV) or _backends_exist():
        if not any(name in os.environ for name in POOL_ENV) and cores() > 1:
            warnings.warn(
                "psijax: JAX made its CPU backend before psijax.configure(), so XLA's CPU "
                "pool has one thread per core, where concurrent batched LAPACK calls can "
                "deadlock on this jaxlib; call psijax.configure() first or set PJRT_NPROC=1",
                RuntimeWarning,
                stacklevel=3,
            )
        return False
    os.environ["PJRT_NPROC"] = "1"
    return True


def _backends_exist() -> bool:
    from jax._src import xla_bridge  # no public way to ask without making one

    initialized = getattr(xla_bridge, "backends_are_initialized", None)
    if initialized is not None:
        return bool(initialized())
    return bool(getattr(xla_bridge, "_backends", None))  # older JAX: the backends dict


def _cost(flop: int, dtype) -> int:
    """jaxlib's estimate of a kernel's cost per matrix: its flop count, three times that for
    complex numbers (jaxlib's ``cost_per_matrix``)."""
    import numpy as np

    return 3 * flop if np.issubdtype(dtype, np.complexfloating) else flop


def _pieces(batch: int, cost_per_matrix: int) -> int:
    """How many LAPACK calls a batch takes so that none can split: 1 where the pool cannot
    split it, else the fewest that divide the batch into calls of one matrix or of less
    than ``THRESHOLD`` flop."""
    if not may_split(batch, cost_per_matrix):
        return 1
    most = max(1, (THRESHOLD - 1) // cost_per_matrix)  # matrices per call
    pieces = -(-batch // most)
    while batch % pieces:
        pieces += 1
    return pieces


def in_pieces(fn, pieces: int, batch_dims: int, *operands):
    """``fn(*operands)`` over the flattened leading ``batch_dims`` in ``pieces`` calls, one
    after the other (``lax.map``). Call ``t`` takes every ``pieces``-th matrix from ``t``
    on, so a batch split over devices is split the same way in every call."""
    import jax
    import jax.numpy as jnp

    batch = operands[0].shape[:batch_dims]
    size = math.prod(batch)

    def split(x):  # [*batch, ...] -> [pieces, size // pieces, ...]
        x = jnp.reshape(x, (size // pieces, pieces, *x.shape[batch_dims:]))
        return jnp.moveaxis(x, 1, 0)

    def join(x):  # the inverse of split
        x = jnp.moveaxis(x, 0, 1)
        return jnp.reshape(x, (*batch, *x.shape[2:]))

    out = jax.lax.map(lambda xs: fn(*xs), tuple(split(x) for x in operands))
    return jax.tree.map(join, out)
