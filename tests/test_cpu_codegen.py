"""XLA's CPU code generation for psijax's programs: the elemental emitters, asked per
program, where the backend and jaxlib allow it and the user has not chosen."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from psijax import laplacian
from psijax.ansatz import FermiNet
from psijax.hamiltonian import kinetic_energy
from psijax.parallel import cpu_codegen


@pytest.fixture
def fresh(monkeypatch):
    cpu_codegen.compiler_options.cache_clear()
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    yield monkeypatch
    cpu_codegen.compiler_options.cache_clear()


def fusion_emitters() -> dict[str, bool]:
    """The options that compile with XLA's MLIR fusion emitters ({} where it has no other)."""
    try:
        jax.jit(lambda x: x * 2).lower(1.0).compile({cpu_codegen.OPTION: True})
    except jax.errors.JaxRuntimeError:
        return {}
    return {cpu_codegen.OPTION: True}


def test_the_elemental_emitters_on_a_cpu_whose_jaxlib_has_them(fresh):
    """jaxlib 0.8-0.11 know the option; 0.12 refuses it by name ("No such compile option")."""
    assert jax.default_backend() == "cpu"
    try:
        jax.jit(lambda x: x * 2).lower(1.0).compile({cpu_codegen.OPTION: False})
        known = True
    except jax.errors.JaxRuntimeError:
        known = False
    assert known or jax.__version_info__ >= (0, 12)
    assert cpu_codegen.compiler_options() == ({cpu_codegen.OPTION: False} if known else {})


def test_programs_run_a_few_times_are_optimised_less(fresh):
    brief = cpu_codegen.compiler_options(brief=True)
    assert brief == {**cpu_codegen.compiler_options(), cpu_codegen.LEVEL: cpu_codegen.BRIEF_LEVEL}


def test_the_users_xla_flags_are_kept(fresh):
    fresh.setenv("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=true")
    assert cpu_codegen.compiler_options() == {}
    fresh.setenv("XLA_FLAGS", "--xla_backend_optimization_level=3")
    assert cpu_codegen.LEVEL not in cpu_codegen.compiler_options(brief=True)


def test_an_option_this_jaxlib_lacks_is_left_out(fresh):
    fresh.setattr(cpu_codegen, "OPTION", "xla_cpu_no_such_option")
    assert cpu_codegen.compiler_options() == {}
    fresh.setattr(cpu_codegen, "LEVEL", "xla_no_such_level")
    assert cpu_codegen.compiler_options(brief=True) == {}


@pytest.mark.parametrize("brief", [False, True])
def test_no_option_off_the_cpu(fresh, brief):
    fresh.setattr(jax, "default_backend", lambda: "gpu")
    assert cpu_codegen.compiler_options(brief) == {}


@pytest.mark.parametrize("brief", [False, True])
def test_the_kinetic_energy_agrees_with_the_fusion_emitters(fresh, brief):
    """The two code generators (and LLVM's two optimisation levels) give the forward
    Laplacian's float32 kinetic energy to float32 rounding (the accuracy near nodes with
    psijax's choice: tests/test_laplacian_accuracy.py)."""
    net = FermiNet(2, 1, ((0.0, 0.0, 0.0), (0.0, 0.0, 1.5)), layers=((16, 4),))
    params = net.init(jax.random.PRNGKey(0), jnp.float32)
    walkers = jax.random.normal(jax.random.PRNGKey(1), (16, 3, 3), jnp.float32)
    kinetic = jax.vmap(functools.partial(kinetic_energy, laplacian.Forward(), net.log_abs, params))
    lowered = jax.jit(kinetic).lower(walkers)
    # the fusion emitters asked for by name: the suite's XLA_FLAGS turn them off (conftest.py)
    default = np.asarray(lowered.compile(fusion_emitters())(walkers))
    elemental = np.asarray(lowered.compile(cpu_codegen.compiler_options(brief))(walkers))
    assert np.all(np.isfinite(default))
    np.testing.assert_allclose(elemental, default, rtol=1e-4, atol=1e-5)
