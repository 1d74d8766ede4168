"""psijax's process-wide set-up, done only when asked: ``psijax.configure()``.

``import psijax`` changes nothing outside psijax. The CLI, ``psijax.train``,
``psijax.evaluate`` and ``psijax.load`` call ``configure()`` first; a program that drives
psijax's parts itself (a step of its own, the Laplacian engine on a CPU) calls it once,
before its first JAX computation. It does, on a CPU only:

- on jaxlib 0.10 and 0.11, batched LU and triangular solves that XLA's CPU pool could
  split go to LAPACK in pieces, since split ones can deadlock the pool
  (``psijax.parallel.cpu_lapack``); where that cannot be installed, the pool gets one
  thread (``PJRT_NPROC=1``, only while JAX has no backend yet and the user chose no size);
- the BLAS behind jaxlib's LAPACK runs on one thread, so that its spinning workers do not
  take XLA's cores (``psijax.parallel.cpu_blas``; a count the user chose is kept).

``unconfigure()`` undoes each of them: JAX's own lowerings again (programs compiled
meanwhile keep the pieces), ``PJRT_NPROC`` as it was (a pool JAX has made keeps its
size), the BLAS libraries' thread counts as they were.
"""

from __future__ import annotations

import dataclasses
import os
import threading

from psijax.parallel import cpu_blas, cpu_lapack


@dataclasses.dataclass(frozen=True)
class Setup:
    """What ``configure()`` changed in this process."""

    lapack_in_pieces: bool  # JAX's CPU LU and triangular solves lowered in pieces
    one_thread_pool: bool  # PJRT_NPROC=1 set for XLA's CPU pool
    blas_threads: dict[str, int]  # BLAS libraries set to one thread: their former counts


_lock = threading.Lock()
_active: Setup | None = None


def configure() -> Setup:
    """Set the process up for psijax (see the module's docstring); once per process, later
    calls return what the first did."""
    global _active
    with _lock:
        if _active is None:
            pieces = cpu_lapack.install()
            pool = cpu_lapack.one_thread_pool()
            _active = Setup(pieces, pool, cpu_blas.one_thread())
        return _active


def unconfigure() -> None:
    """Undo ``configure()``: the process as it was before it, as far as JAX allows."""
    global _active
    with _lock:
        if _active is None:
            return
        cpu_lapack.uninstall()
        if _active.one_thread_pool and os.environ.get("PJRT_NPROC") == "1":
            del os.environ["PJRT_NPROC"]
        cpu_blas.restore(_active.blas_threads)
        _active = None


def configured() -> Setup | None:
    """What ``configure()`` set up, or None before it (or after ``unconfigure()``)."""
    return _active
