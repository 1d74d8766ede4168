"""Test configuration: four fake CPU devices, set before JAX is first used."""

import os
from importlib.metadata import version


def _jaxlib_version() -> tuple[int, ...]:
    return tuple(int(p) for p in version("jaxlib").split(".")[:2])


# Tests compile hundreds of small programs; XLA's backend optimisations and its CPU fusion
# emitters (MLIR) cost more compile time than they save at run time here: without them a
# Laplacian cell compiles in 0.35-0.4x the time and the suite runs in 0.68x. psijax's own
# programs use the elemental emitters too (psijax.parallel.cpu_codegen). The pair
# miscompiles one generated network that no test draws (docs/compatibility.md #8): a test
# that gives NaN is checked again with XLA_FLAGS=--xla_cpu_use_fusion_emitters=true, which
# this keeps. Benchmarks do not import this.
_TEST_XLA_FLAGS = {"xla_backend_optimization_level": "0"}
if _jaxlib_version() < (0, 12):  # 0.12 has no such flag, and XLA aborts on an unknown one
    _TEST_XLA_FLAGS["xla_cpu_use_fusion_emitters"] = "false"
_flags = os.environ.get("XLA_FLAGS", "")
for _name, _value in _TEST_XLA_FLAGS.items():
    if _name not in _flags:
        _flags += f" --{_name}={_value}"
os.environ["XLA_FLAGS"] = _flags

# XLA's CPU pool with one thread for every worker and CLI subprocess alike (the suite runs
# two workers on two cores; psijax itself leaves the pool at one thread per core).
os.environ.setdefault("PJRT_NPROC", "1")

# Compiled programs are shared by the workers and the CLI subprocesses of one test
# session, in a temporary directory: the suite never writes to ~/.cache/psijax.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    import atexit
    import shutil
    import tempfile

    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="psijax-test-xla-")
    # the process that made it (the xdist controller, which outlives its workers) removes it
    atexit.register(shutil.rmtree, os.environ["JAX_COMPILATION_CACHE_DIR"], True)

import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 4)

import psijax  # noqa: E402

# The tests drive psijax's parts (steps, Laplacians, samplers) as a program of its own
# would: after the process-wide set-up (batched LAPACK in pieces on four CPU devices).
psijax.configure()


import sys  # noqa: E402

import pytest  # noqa: E402


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    """Drop orbax's benign leftovers after it fails to read a damaged checkpoint (the
    bad-input tests do that on purpose; see runs.orbax_read_noise). Every other unraisable
    exception still fails."""
    hook = sys.unraisablehook

    from runs import orbax_read_noise

    def filtered(unraisable):
        if not orbax_read_noise(unraisable):
            hook(unraisable)

    sys.unraisablehook = filtered
