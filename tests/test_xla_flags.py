"""psijax turns XLA CPU's single-threaded YNNPACK fusions off (psijax/xla_flags.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jaxlib
import pytest

from psijax import xla_flags

pytestmark = pytest.mark.compat


def _fuses_with_ynnpack() -> bool:
    x = jnp.ones((64, 256), jnp.float32)
    return "ynn_fusion" in jax.jit(lambda x: jnp.tanh(x @ x.T)).lower(x).compile().as_text()


def test_psijax_programs_run_without_ynnpack_fusions():
    # psijax is imported (conftest) before JAX's backend starts, so its flag is in effect
    # on every jaxlib of KNOWN; on a newer jaxlib that fuses by default this fails until
    # KNOWN is widened (after checking the flag still exists and still pays).
    assert jax.default_backend() == "cpu"
    assert not _fuses_with_ynnpack(), (
        f"jaxlib {jaxlib.__version__} compiles a product into a YNNPACK fusion: "
        f"extend psijax.xla_flags.KNOWN = {xla_flags.KNOWN} if the flag still exists"
    )


def test_the_users_own_setting_wins_and_nothing_is_set_twice():
    env = {"XLA_FLAGS": "--xla_cpu_experimental_ynn_fusion_type=+LIBRARY_FUSION_TYPE_DOT"}
    assert not xla_flags.apply(env)
    assert env["XLA_FLAGS"] == "--xla_cpu_experimental_ynn_fusion_type=+LIBRARY_FUSION_TYPE_DOT"


def test_nothing_is_set_once_the_backend_has_started():
    jax.devices()  # the backend has read XLA_FLAGS: a change now would be a lie
    env = {"XLA_FLAGS": "--xla_backend_optimization_level=0"}
    assert not xla_flags.apply(env)
    assert env == {"XLA_FLAGS": "--xla_backend_optimization_level=0"}
