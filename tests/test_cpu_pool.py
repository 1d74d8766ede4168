"""XLA's CPU pool: after importing psijax, concurrent batched LAPACK calls (the LU behind
slogdet) cannot deadlock it, whether psijax hands them to LAPACK in pieces
(psijax.parallel.cpu_lapack, the pool keeping one thread per core) or the pool has one
thread (psijax.parallel.cpu_pool, where the pieces cannot be installed)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import pytest

from psijax.parallel import cpu_lapack, cpu_pool

# Sixteen independent batched slogdets, each above jaxlib's threshold for splitting its
# batch over the pool: with the default pool (one thread per core) this program stalled
# for ever on a 2-core machine, every time (benchmarks/lapack_stall.py).
PROGRAM = textwrap.dedent(
    """
    import os
    import psijax  # before any JAX computation: psijax's own or the user's
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
    env = {k: v for k, v in os.environ.items() if k not in cpu_pool.ENV}
    return {**env, "JAX_NUM_CPU_DEVICES": "1", **extra}


@pytest.mark.compat
@pytest.mark.parametrize("devices", [1, 2])
def test_concurrent_batched_lu_finishes_once_psijax_is_imported(devices):
    """One or two CPU devices, XLA's pool of one thread per core (at least one per device):
    on a splitting jaxlib psijax hands LAPACK the batches in pieces it cannot split; without
    them this program stalled every time on two cores (jaxlib 0.10.2, 2 of 2 times on two
    devices). Where the pieces are not needed or not installed, the pool has one thread."""
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM], env=_clean_env(JAX_NUM_CPU_DEVICES=str(devices)),
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    nproc, pool_threads = out.stdout.split()
    if cpu_pool.needed():
        assert nproc == "1"
    else:
        assert nproc == "None"  # XLA's own size: the pool is left alone
        if sys.platform.startswith("linux") and cpu_lapack.splitting_jaxlib():
            assert int(pool_threads) == max(cpu_pool.cores(), devices)


def test_a_size_the_user_chose_is_kept(monkeypatch):
    monkeypatch.setattr(cpu_pool, "needed", lambda: True)  # no pieces: one thread
    monkeypatch.setenv("PJRT_NPROC", "2")
    assert cpu_pool.one_thread() is False
    assert os.environ["PJRT_NPROC"] == "2"
    monkeypatch.delenv("PJRT_NPROC")
    monkeypatch.setenv("NPROC", "1")
    assert cpu_pool.one_thread() is True
    assert "PJRT_NPROC" not in os.environ


def test_nothing_is_set_once_jax_has_its_backend(monkeypatch):
    monkeypatch.setattr(cpu_pool, "needed", lambda: True)  # no pieces: one thread
    import jax

    jax.devices()  # the test session's backend exists
    for name in cpu_pool.ENV:
        monkeypatch.delenv(name, raising=False)
    assert cpu_pool.one_thread() is False
    assert not any(name in os.environ for name in cpu_pool.ENV)


def test_a_pool_made_before_psijax_is_named_once(monkeypatch):
    monkeypatch.setattr(cpu_pool, "needed", lambda: True)  # no pieces: one thread
    import jax

    jax.devices()  # the test session's backend exists
    for name in cpu_pool.ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(cpu_pool, "_warned", False)
    monkeypatch.setattr(cpu_pool, "cores", lambda: 2)
    with pytest.warns(RuntimeWarning, match="import psijax first or set PJRT_NPROC=1"):
        cpu_pool.one_thread_or_warn()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cpu_pool.one_thread_or_warn()  # once per process


def test_a_pool_that_needs_no_single_thread_is_left_alone(monkeypatch):
    for name in cpu_pool.ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(cpu_pool, "needed", lambda: False)
    assert cpu_pool.one_thread() is False
    assert not any(name in os.environ for name in cpu_pool.ENV)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cpu_pool.one_thread_or_warn()
