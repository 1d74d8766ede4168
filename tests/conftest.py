"""Test configuration: four fake CPU devices, set before JAX is first used."""

import os

os.environ.setdefault("XLA_FLAGS", "")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 4)
