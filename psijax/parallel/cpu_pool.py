"""XLA's CPU thread pool: one thread where batched LAPACK calls could deadlock it.

jaxlib 0.10 and 0.11 split a batched LAPACK kernel (the LU behind ``slogdet``, ``solve``
and ``inv``, the triangular solves) over XLA's CPU intra-op pool once the batch holds more
than about 2e5 flop, and the calling pool thread then blocks until the pieces are done.
XLA runs independent operations of one program at the same time on that same pool, so two
such calls can occupy every pool thread, each waiting for pieces that no thread is left to
run: the program never finishes and the process sits idle (docs/compatibility.md #10).

``psijax.parallel.cpu_lapack`` hands such batches to LAPACK in pieces it cannot split, so
the pool keeps XLA's size (one thread per core), which makes the LiH step 1.1x faster than
a one-thread pool (docs/benchmarks.md, "XLA's CPU pool"). Only where that cannot be
installed on a splitting jaxlib does ``one_thread`` ask for a pool of one thread, which
cannot deadlock. The pool's size is read once, when JAX creates its CPU backend, from
``PJRT_NPROC`` (or ``NPROC``); a size the user chose is always kept. It affects only the
CPU backend, not GPUs.
"""

from __future__ import annotations

import os
import warnings

ENV = ("PJRT_NPROC", "NPROC")


def needed() -> bool:
    """Whether the pool must have one thread: this jaxlib splits LAPACK batches over it and
    psijax could not hand them over in pieces (``psijax.parallel.cpu_lapack``)."""
    from psijax.parallel import cpu_lapack

    return cpu_lapack.splitting_jaxlib() and not cpu_lapack.install()


def one_thread() -> bool:
    """Ask for a one-thread XLA CPU pool where it is ``needed``, if nobody chose a size and
    JAX has no backend yet; whether the pool will have one thread (False: not needed, too
    late, or the user's choice)."""
    if not needed():
        return False
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
    if not needed() or one_thread() or _warned or any(name in os.environ for name in ENV):
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
