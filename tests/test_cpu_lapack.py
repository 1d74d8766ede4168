"""Batched LAPACK calls that XLA's CPU pool could split go to LAPACK in pieces that it
cannot (psijax.parallel.cpu_lapack): the same results, on one device and sharded. That
two CPU devices no longer deadlock is tests/test_cpu_pool.py's."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

from psijax.parallel import cpu_lapack

needs_splitting_jaxlib = pytest.mark.skipif(
    not cpu_lapack.splitting_jaxlib(), reason="this jaxlib never splits LAPACK batches"
)


def test_splitting_releases():
    assert not cpu_lapack.splitting_jaxlib("0.9.2")
    assert cpu_lapack.splitting_jaxlib("0.10.0")
    assert cpu_lapack.splitting_jaxlib("0.11.1")
    assert not cpu_lapack.splitting_jaxlib("0.12.0")


def test_pieces_stay_below_the_threshold(monkeypatch):
    monkeypatch.setattr(cpu_lapack, "pool_threads", lambda: 2)
    assert cpu_lapack._pieces(8, 14**3) == 1  # below the threshold: one call
    for batch, cost in ((4096, 14**3), (64, 64**3), (1000, 42**3), (97, 14**3)):
        pieces = cpu_lapack._pieces(batch, cost)
        per_call = batch // pieces
        assert batch % pieces == 0
        assert per_call == 1 or per_call * cost < cpu_lapack.THRESHOLD
    monkeypatch.setattr(cpu_lapack, "pool_threads", lambda: 1)
    assert cpu_lapack._pieces(4096, 14**3) == 1  # a one-thread pool never splits


@needs_splitting_jaxlib
def test_lu_and_solve_in_pieces_are_lapacks():
    """The test session's four CPU devices give the pool four threads: a batch above the
    threshold is factored in pieces, and every piece is LAPACK's own factorization."""
    assert cpu_lapack.pool_threads() > 1
    with jax.enable_x64(True):
        x = jax.random.normal(jax.random.key(0), (2, 300, 14, 14), jnp.float64)
        b = jax.random.normal(jax.random.key(1), (2, 300, 14, 3), jnp.float64)
        lu = jax.jit(jax.lax.linalg.lu)
        text = lu.lower(x).as_text()
        assert "while" in text and "getrf" in text  # a loop of LAPACK calls
        factors, pivots, perm = lu(x)
        solved = jax.jit(jnp.linalg.solve)(x, b)
        grad = jax.jit(jax.grad(lambda x: jnp.sum(jnp.linalg.slogdet(x)[1])))(x)
    for i in np.ndindex(2, 300):
        want, piv = scipy.linalg.lu_factor(np.asarray(x[i]))
        np.testing.assert_allclose(factors[i], want, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(pivots[i], piv)
        order = np.arange(14)
        for k, p in enumerate(piv):  # the row exchanges, applied in turn
            order[[k, p]] = order[[p, k]]
        np.testing.assert_array_equal(perm[i], order)
    xs = np.asarray(x)
    np.testing.assert_allclose(solved, np.linalg.solve(xs, np.asarray(b)), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(grad, np.linalg.inv(xs).swapaxes(-1, -2), rtol=1e-8, atol=1e-10)


@needs_splitting_jaxlib
def test_pieces_keep_a_sharded_batch_sharded():
    """A batch split over the session's four devices (Explicit mesh) is factored in
    pieces on each device: slogdet and its gradient as numpy's, the sharding kept."""
    from jax.sharding import AxisType, NamedSharding, PartitionSpec

    mesh = jax.make_mesh((4,), ("walkers",), axis_types=(AxisType.Explicit,))
    walkers = NamedSharding(mesh, PartitionSpec("walkers"))
    with jax.enable_x64(True):
        x = jax.random.normal(jax.random.key(2), (4096, 14, 14), jnp.float64)
        x = jax.device_put(x, walkers)
        f = jax.jit(lambda x: jnp.linalg.slogdet(x)[1])
        assert "while" in f.lower(x).as_text()
        log_abs = f(x)
        grad = jax.jit(jax.grad(lambda x: jnp.sum(f(x))))(x)
    xs = np.asarray(x)
    assert log_abs.sharding.is_equivalent_to(NamedSharding(mesh, PartitionSpec("walkers")), 1)
    np.testing.assert_allclose(log_abs, np.linalg.slogdet(xs)[1], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(grad, np.linalg.inv(xs).swapaxes(-1, -2), rtol=1e-8, atol=1e-8)
