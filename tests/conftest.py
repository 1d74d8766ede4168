"""Test configuration: four fake CPU devices, set before JAX is first used."""

import os

# Tests compile hundreds of small programs; XLA's backend optimisations cost more
# compile time than they save at run time here. Benchmarks do not import this.
_flags = os.environ.get("XLA_FLAGS", "")
if "xla_backend_optimization_level" not in _flags:
    os.environ["XLA_FLAGS"] = _flags + " --xla_backend_optimization_level=0"

import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 4)
