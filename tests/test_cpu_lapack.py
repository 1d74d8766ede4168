"""Batched LAPACK calls that XLA's CPU pool could split go to LAPACK in pieces that it
cannot (psijax.parallel.cpu_lapack, installed by psijax.configure()): the same results,
on one device and sharded; concurrent batched LU no longer deadlocks the pool, on one and
two CPU devices; where the pieces cannot be installed the pool gets one thread, unless
the user chose its size or JAX made it first."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import warnings

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


def _batches(text: str, kernel: str) -> list[int]:
    """The batch sizes of the LAPACK calls ``kernel`` (``getrf``, ``trsm``) in a program."""
    lines = [line for line in text.splitlines() if f"{kernel}_ffi" in line]
    return [int(re.search(r": \(tensor<(\d+)x", line).group(1)) for line in lines]


@needs_splitting_jaxlib
def test_complex_batches_count_three_times_the_flop_as_jaxlib_does():
    """jaxlib counts a complex matrix three times (``cost_per_matrix *= 3``): 40 complex 14 x
    14 matrices it splits, whose real flop count is below the threshold; psijax's pieces
    must count them the same way, or the split kernels can deadlock the pool."""
    assert 40 * 14**3 < cpu_lapack.THRESHOLD <= 3 * 40 * 14**3
    with jax.enable_x64(True):
        key = jax.random.key(3)
        x = jax.random.normal(key, (40, 14, 14)) + 1j * jax.random.normal(key, (40, 14, 14))
        lu = jax.jit(jax.lax.linalg.lu)
        assert max(_batches(lu.lower(x).as_text(), "getrf")) < 40  # in pieces
        factors = lu(x)[0]
        inverse = jax.jit(jnp.linalg.inv)
        assert max(_batches(inverse.lower(x).as_text(), "trsm")) < 40
        inverted = inverse(x)
        real = jax.random.normal(jax.random.key(4), (40, 14, 14))
        assert _batches(lu.lower(real).as_text(), "getrf") == [40]  # below the threshold
    for i in range(40):
        want, _ = scipy.linalg.lu_factor(np.asarray(x[i]))
        np.testing.assert_allclose(factors[i], want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(inverted, np.linalg.inv(np.asarray(x)), rtol=1e-9, atol=1e-12)


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


# Sixteen independent batched slogdets, each above jaxlib's threshold for splitting its
# batch over the pool: with the default pool (one thread per core) this program stalled
# for ever on a 2-core machine, every time (benchmarks/lapack_stall.py).
PROGRAM = textwrap.dedent(
    """
    import os
    import psijax
    psijax.configure()  # before any JAX computation: psijax's own or the user's
    import jax, jax.numpy as jnp

    @jax.jit
    def program(xs):
        total = 0.0
        for j, x in enumerate(xs):
            sign, log_abs = jnp.linalg.slogdet(jnp.tanh(x @ x.mT * (j + 1)) + jnp.eye(14))
            total = total + jnp.sum(sign * log_abs)
        return total

    xs = [jax.random.normal(k, (1024, 14, 14)) for k in jax.random.split(jax.random.key(0), 16)]
    for i in range(5):
        program([x + i for x in xs]).block_until_ready()
    tasks = os.listdir("/proc/self/task")
    threads = [open(f"/proc/self/task/{t}/comm").read().strip() for t in tasks]
    print(os.environ.get("PJRT_NPROC"), threads.count("tf_XLAEigen"))
    """
)


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in cpu_lapack.POOL_ENV}
    return {**env, "JAX_NUM_CPU_DEVICES": "1", **extra}


@pytest.mark.compat
@pytest.mark.parametrize("devices", [1, 2])
def test_concurrent_batched_lu_finishes_once_psijax_is_configured(devices):
    """One or two CPU devices, XLA's pool of one thread per core (at least one per device):
    on a splitting jaxlib psijax hands LAPACK the batches in pieces it cannot split; without
    them this program stalled every time on two cores (jaxlib 0.10.2, 2 of 2 times on two
    devices). The pool keeps XLA's size."""
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM], env=_clean_env(JAX_NUM_CPU_DEVICES=str(devices)),
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    nproc, pool_threads = out.stdout.split()
    assert nproc == "None"  # XLA's own size: the pool is left alone
    if sys.platform.startswith("linux") and cpu_lapack.splitting_jaxlib():
        assert int(pool_threads) == max(cpu_lapack.cores(), devices)


@pytest.fixture
def no_pieces(monkeypatch):
    """A splitting jaxlib whose internals psijax cannot wrap: the one-thread pool's case."""
    monkeypatch.setattr(cpu_lapack, "splitting_jaxlib", lambda: True)
    monkeypatch.setattr(cpu_lapack, "installed", lambda: False)
    monkeypatch.setattr(cpu_lapack, "_backends_exist", lambda: False)
    for name in cpu_lapack.POOL_ENV:
        monkeypatch.delenv(name, raising=False)


def test_without_pieces_the_pool_gets_one_thread(no_pieces):
    assert cpu_lapack.one_thread_pool() is True
    assert os.environ["PJRT_NPROC"] == "1"


def test_a_size_the_user_chose_is_kept(no_pieces, monkeypatch):
    monkeypatch.setenv("PJRT_NPROC", "2")
    assert cpu_lapack.one_thread_pool() is False
    assert os.environ["PJRT_NPROC"] == "2"
    monkeypatch.delenv("PJRT_NPROC")
    monkeypatch.setenv("NPROC", "1")
    assert cpu_lapack.one_thread_pool() is False
    assert "PJRT_NPROC" not in os.environ


def test_a_pool_made_before_the_set_up_is_named(no_pieces, monkeypatch):
    monkeypatch.setattr(cpu_lapack, "_backends_exist", lambda: True)
    monkeypatch.setattr(cpu_lapack, "cores", lambda: 2)
    said = r"call psijax.configure\(\) first or set PJRT_NPROC=1"
    with pytest.warns(RuntimeWarning, match=said):
        assert cpu_lapack.one_thread_pool() is False
    assert not any(name in os.environ for name in cpu_lapack.POOL_ENV)


def test_a_pool_that_needs_no_single_thread_is_left_alone(monkeypatch):
    for name in cpu_lapack.POOL_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(cpu_lapack, "installed", lambda: True)  # the pieces are in place
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cpu_lapack.one_thread_pool() is False
    assert not any(name in os.environ for name in cpu_lapack.POOL_ENV)
