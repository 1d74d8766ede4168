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
backend exists yet; psijax's entry points (the CLI, ``train``, ``evaluate``, ``load``)
call it first. It affects only the CPU backend, not GPUs.
"""

from __future__ import annotations

import os

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


def _backends_exist() -> bool:
    from jax._src import xla_bridge

    initialized = getattr(xla_bridge, "backends_are_initialized", None)
    if initialized is not None:
        return bool(initialized())
    return bool(getattr(xla_bridge, "_backends", None))  # older JAX: the backends dict
