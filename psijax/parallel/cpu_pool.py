"""XLA's CPU thread pool: one thread, so that batched LAPACK calls cannot deadlock.

jaxlib's LAPACK kernels (the LU behind ``slogdet``, ``solve`` and ``inv``, the triangular
solves) split a batch of matrices over XLA's CPU intra-op pool once the batch holds more
than about 2e5 flop (``batch * n**3``: e.g. 512 matrices of 8 x 8), and the calling pool
thread then blocks until the pieces are done. XLA runs independent operations of one
program at the same time on that same pool, so two such calls can occupy every pool
thread (two on a 2-core machine), each waiting for pieces that no thread is left to run:
the program never finishes and the process sits idle (docs/compatibility.md #10). A pool
of one thread makes every LAPACK call run its batch inline and cannot deadlock; it costs
4-11% of a step on a 2-core CPU (docs/benchmarks.md, "XLA's CPU pool").

The pool's size is read once, when JAX creates its CPU backend, from ``PJRT_NPROC`` (or
``NPROC``). ``one_thread`` sets it unless the user has set either, and only while no JAX
backend exists yet: ``import psijax`` calls it, and so do the CLI and every mesh psijax
makes. A process that ran JAX before importing psijax keeps its pool; ``make_mesh`` then
warns once. It affects only the CPU backend, not GPUs.
"""

from __future__ import annotations

import os
import warnings

ENV = ("PJRT_NPROC", "NPROC")


def one_thread() -> bool:
    """Ask for a one-thread XLA CPU pool if nobody chose a size and JAX has no backend
    yet; whether the pool will have one thread (False: too late, or the user's choice)."""
    chosen = next((os.environ[name] for name in ENV if name in os.environ), None)
    if chosen is not None:
        return chosen.strip() == "1"
    if _backends_exist():
        return False
    os.environ["PJRT_NPROC"] = "1"
    return True


_warned = False


def one_thread_or_warn() -> None:
    """``one_thread``, and one warning per process if the CPU pool may have several threads
    because JAX started before psijax could set it."""
    global _warned
    if one_thread() or _warned or any(name in os.environ for name in ENV):
        return
    import jax

    if jax.default_backend() == "cpu" and cores() > 1:
        _warned = True
        warnings.warn(
            "psijax: JAX started before psijax was imported, so XLA's CPU thread pool has "
            "one thread per core, where concurrent batched LAPACK calls can deadlock "
            "(docs/compatibility.md #10); import psijax first or set PJRT_NPROC=1",
            RuntimeWarning,
            stacklevel=3,
        )


def cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _backends_exist() -> bool:
    from jax._src import xla_bridge

    initialized = getattr(xla_bridge, "backends_are_initialized", None)
    if initialized is not None:
        return bool(initialized())
    return bool(getattr(xla_bridge, "_backends", None))  # older JAX: the backends dict
