"""SPRING against its formula, written out densely in float64 with numpy."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from psijax import optim


def reference(jacobian, centered, previous, *, lr, damping, momentum, max_norm):
    n = jacobian.shape[0]
    o = (jacobian - jacobian.mean(axis=0)) / np.sqrt(n)
    eps = -centered / np.sqrt(n)
    zeta = eps - momentum * o @ previous
    gram = o @ o.T + damping * np.eye(n) + 1.0 / n
    phi = o.T @ np.linalg.solve(gram, zeta) + momentum * previous
    step = lr * phi
    return step * min(1.0, max_norm / np.linalg.norm(step)), phi


@pytest.mark.parametrize("max_norm", [1e3, 1e-3])  # the cap inactive, then active
def test_update_matches_the_formula(max_norm):
    rng = np.random.default_rng(0)
    n, p = 12, 30
    params = {"a": jnp.zeros((5, 4)), "b": jnp.zeros((10,))}
    # A large common mean in the jacobian: centering must not lose it to rounding.
    jacobian = rng.normal(size=(n, p)) + 3.0
    centered = rng.normal(size=n)
    centered -= centered.mean()
    opt = optim.spring(learning_rate=0.1, damping=1e-3, momentum=0.9, max_norm=max_norm)
    state = opt.init(params)
    previous = np.zeros(p)
    for _ in range(2):  # the second step exercises the momentum term
        updates, state = opt.update(
            params, state, params,
            jacobian=jnp.asarray(jacobian, jnp.float32),
            centered_energies=jnp.asarray(centered, jnp.float32),
        )  # fmt: skip
        want, previous = reference(
            jacobian, centered, previous, lr=0.1, damping=1e-3, momentum=0.9, max_norm=max_norm
        )
        got = jax.flatten_util.ravel_pytree(updates)[0]
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=1e-6 * np.abs(want).max())
        np.testing.assert_allclose(state.previous, previous, rtol=2e-3, atol=1e-5)


@pytest.mark.parametrize("n", [5, 32, 100, 256])  # unblocked, one block, uneven and even splits
def test_cholesky_solve_matches_numpy(n):
    from psijax.optim.spring import _cholesky, _solve_spd

    rng = np.random.default_rng(n)
    a = rng.normal(size=(n, 2 * n))
    matrix = a @ a.T / (2 * n) + 1e-3 * np.eye(n)
    rhs = rng.normal(size=n)
    lower = jax.jit(_cholesky)(jnp.asarray(matrix, jnp.float32))
    np.testing.assert_allclose(lower, np.linalg.cholesky(matrix), atol=2e-4)
    x = jax.jit(_solve_spd)(jnp.asarray(matrix, jnp.float32), jnp.asarray(rhs, jnp.float32))
    want = np.linalg.solve(matrix, rhs)
    np.testing.assert_allclose(x, want, rtol=0, atol=1e-3 * np.abs(want).max())
    not_pd = jax.jit(_solve_spd)(-jnp.eye(n), jnp.ones(n))
    assert not np.all(np.isfinite(not_pd))


@pytest.mark.parametrize("platform,potrf,loop", [("cpu", False, True), ("cuda", True, False)])
def test_the_factor_is_the_devices_own_on_a_gpu(platform, potrf, loop):
    """On a CPU the factor is XLA's loop (LAPACK's competes with XLA's pool); on a GPU
    cuSOLVER's, whose one call replaces a kernel launch per column. Checked on the program
    lowered for each platform, which needs no GPU."""
    import re

    from psijax.optim.spring import _solve_spd

    shapes = (jax.ShapeDtypeStruct((64, 64), jnp.float32), jax.ShapeDtypeStruct((64,), jnp.float32))
    text = jax.export.export(jax.jit(_solve_spd), platforms=[platform])(*shapes).mlir_module()
    calls = set(re.findall(r"custom_call @(\w+)", text))
    assert any("potrf" in c for c in calls) == potrf, calls
    assert ("stablehlo.while" in text) == loop


def test_the_factor_keeps_full_float32_under_a_reduced_precision():
    """SPRING forms its Gram matrix under ``gram_precision``; a GPU's TensorFloat-32 there
    must not reach the factor's own products (the Gram matrix is then no longer factored:
    NaN), emulated here by rounding every product that asks for less than full float32."""
    import sys
    from pathlib import Path

    from psijax import precision
    from psijax.optim.spring import _cholesky, _solve_spd

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from tf32_emulation import tf32

    n = 256  # blocks of 32: the factor's products at three depths
    rng = np.random.default_rng(0)
    a = rng.normal(size=(n, n // 4)) * 10  # more walkers than directions, as in SPRING
    matrix = jnp.asarray(a @ a.T / (n // 4) + 1e-3 * np.eye(n), jnp.float32)  # condition ~1e5
    rhs = jnp.asarray(rng.normal(size=n), jnp.float32)
    rounded = jax.jit(tf32(_solve_spd))(matrix, rhs)  # NaN when the factor's products round
    np.testing.assert_array_equal(rounded, jax.jit(_solve_spd)(matrix, rhs))
    found = precision.products(jax.make_jaxpr(_cholesky)(jnp.eye(n)))
    assert found and all(p == (jax.lax.Precision.HIGHEST,) * 2 for p in found), found
