"""jax.checkpoint and lax.cond inside a wavefunction get the forward Laplacian, not folx's
full-Hessian fallback, and the result equals the float64 Hessian trace."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from psijax import laplacian

N_ELECTRONS = 3


def _log_psi(x: jax.Array) -> jax.Array:
    """A small log|psi|: a rematerialised layer, a walker-dependent cond, a slogdet."""
    w = jnp.linspace(-0.7, 0.9, 9).reshape(3, 3)

    @jax.checkpoint
    def layer(h):
        return jnp.tanh(h @ w) + h

    h = layer(x)
    r = jnp.linalg.norm(x, axis=-1)
    h = jax.lax.cond(
        jnp.sum(r) > 2.5,  # depends on the walker: differs between the test walkers
        lambda h: jnp.sin(h) * 1.5,
        lambda h: h**2 - 0.3 * h,
        h,
    )
    orbitals = h @ w.T + jnp.exp(-r)[:, None] * jnp.eye(N_ELECTRONS)
    return jnp.linalg.slogdet(orbitals)[1] - jnp.sum(r)


@pytest.mark.parametrize("op", [laplacian.Forward(), laplacian.ForwardSparse(2)], ids=str)
def test_checkpoint_and_cond_get_the_forward_laplacian(op, capfd):
    with jax.enable_x64(True):
        rng = np.random.default_rng(3)
        walkers = rng.normal(size=(6, N_ELECTRONS, 3)) * np.array([[[0.5]], [[1.5]]]).repeat(
            3, axis=0
        )  # small and large walkers: both branches of the cond
        branches = {bool(np.sum(np.linalg.norm(w, axis=-1)) > 2.5) for w in walkers}
        assert branches == {True, False}
        value, grad, lap = jax.jit(jax.vmap(op(_log_psi)))(walkers)
        assert "full hessian" not in capfd.readouterr().err  # folx's fallback says so there
        reference = laplacian.Hessian()(_log_psi)
        for i, w in enumerate(walkers):
            v_ref, g_ref, l_ref = reference(jnp.asarray(w))
            np.testing.assert_allclose(value[i], v_ref, rtol=1e-12)
            np.testing.assert_allclose(grad[i], g_ref, rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(lap[i], l_ref, rtol=1e-10, atol=1e-10)
