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
