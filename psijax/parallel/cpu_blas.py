"""The BLAS behind jaxlib's CPU LAPACK kernels, on one thread.

jaxlib's CPU LU, triangular solves and Cholesky call scipy's LAPACK, whose BLAS (OpenBLAS in
scipy's wheels) keeps its own worker threads, one per core. After each call OpenBLAS's
workers spin for a while before they sleep, and every training step makes dozens of such
calls from inside XLA's programs: the spinning workers took cores from XLA's own pool
threads all through the step. On the 2-core CPU the LiH step took 104-109 ms with them and
65-71 ms with scipy's BLAS on one thread; XLA's two threads were busy 85-89% of the step's
wall time instead of 80-83% (docs/benchmarks.md, "LAPACK's own threads").

``one_thread`` (``psijax.configure()`` calls it) sets the BLAS libraries that scipy's LAPACK can
call to one thread, through ``threadpoolctl``. numpy's private OpenBLAS (numpy's wheels
bundle their own copy, for numpy's products on the host: Hartree-Fock) keeps its threads.
Where numpy and scipy share one BLAS library (conda, Linux distributions) that library is
set to one thread, since jaxlib calls it. A thread count the user chose for the library
(``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``, ``BLIS_NUM_THREADS``) is kept.
"""

from __future__ import annotations

import os
import warnings

# The environment variables by which a user chooses a BLAS library's threads.
ENV = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


def lapack_threads() -> list[int]:
    """The thread counts of the BLAS libraries scipy's LAPACK can call (for benchmarks'
    headers; empty where none can be read)."""
    return [c.num_threads for c in _lapack_controllers()]


def one_thread() -> dict[str, int]:
    """Set the BLAS libraries behind scipy's LAPACK to one thread unless the user chose a
    count; each library set (its file) with the threads it had, for ``restore``."""
    if any(name in os.environ for name in ENV):
        return {}
    before = {}
    for controller in _lapack_controllers():
        before[controller.filepath] = controller.num_threads
        controller.set_num_threads(1)
    return before


def restore(threads: dict[str, int]) -> None:
    """Give each library of ``threads`` (what ``one_thread`` returned) its count again."""
    for controller in _lapack_controllers():
        if controller.filepath in threads:
            controller.set_num_threads(threads[controller.filepath])


def _lapack_controllers() -> list:
    """threadpoolctl's controllers of the BLAS libraries loaded, numpy's private copy aside."""
    try:
        import scipy.linalg.cython_lapack  # noqa: F401  (loads the library jaxlib calls)
        import threadpoolctl
    except ImportError:
        return []
    with warnings.catch_warnings():  # threadpoolctl warns about unrelated OpenMP runtimes
        warnings.simplefilter("ignore")
        controllers = threadpoolctl.ThreadpoolController().lib_controllers
    return [c for c in controllers if c.user_api == "blas" and not _numpy_private(c.filepath)]


def _numpy_private(path: str) -> bool:
    """Whether ``path`` is a library numpy's wheel bundles for numpy alone (under
    site-packages' ``numpy/`` or ``numpy.libs/``)."""
    import numpy

    site = os.path.dirname(os.path.dirname(os.path.abspath(numpy.__file__)))
    try:
        relative = os.path.relpath(os.path.abspath(path), site)
    except ValueError:  # another drive (Windows)
        return False
    return relative.split(os.sep)[0] in ("numpy", "numpy.libs")
