"""The XLA CPU deadlock of concurrent batched LAPACK calls, and the ways around it.

    python benchmarks/lapack_stall.py [--size 14] [--batch 1024] [--branches 16]
                                      [--calls 50] [--timeout 60] [--repeats 2]
                                      [--devices 1]

Runs a plain-JAX program in a fresh process: ``--branches`` independent
branches, each a batched ``slogdet`` of ``--batch`` matrices of ``--size`` x ``--size``,
summed, jitted and called ``--calls`` times. Each batch is above jaxlib's 2e5-flop
threshold, so each LU splits its batch over XLA's CPU pool and blocks its pool thread
until the pieces are done; XLA runs the branches at the same time on that pool. With the
pool at its default size (one thread per core) the program can stall for ever. Two ways
around it are timed: ``PJRT_NPROC=1`` (JAX's public setting: a one-thread pool, in which
every LU runs inline, but XLA gives the pool one thread per CPU device, ``--devices``) and
``psijax.configure()`` (psijax.parallel.cpu_lapack: the batches handed to LAPACK in pieces
it cannot split, the pool at its default size). Each setting runs ``--repeats`` times; a
run that has not finished after ``--timeout`` seconds counts as stalled (its CPU time then
shows that it sat idle).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import textwrap
import time

PROGRAM = textwrap.dedent(
    """
    import resource, sys, time
    if sys.argv[5] == "configure":
        import psijax
        psijax.configure()
    import jax, jax.numpy as jnp

    n, batch, branches, calls = (int(a) for a in sys.argv[1:5])

    @jax.jit
    def program(xs):
        total = 0.0
        for j, x in enumerate(xs):
            sign, log_abs = jnp.linalg.slogdet(jnp.tanh(x @ x.mT * (j + 1)) + jnp.eye(n))
            total = total + jnp.sum(sign * log_abs)
        return total

    keys = jax.random.split(jax.random.key(0), branches)
    xs = [jax.random.normal(k, (batch, n, n)) for k in keys]
    program(xs).block_until_ready()
    t0 = time.perf_counter()
    for i in range(calls):
        program([x + i for x in xs]).block_until_ready()
    print(f"{(time.perf_counter() - t0) / calls * 1e3:.1f}", flush=True)
    """
)


def run_once(args, nproc: str | None, configure: bool) -> tuple[str, float, float]:
    """(outcome, wall seconds, CPU seconds) of one fresh process."""
    env = dict(os.environ)
    env.pop("NPROC", None)
    env.pop("PJRT_NPROC", None)
    env["JAX_NUM_CPU_DEVICES"] = str(args.devices)
    if nproc is not None:
        env["PJRT_NPROC"] = nproc
    argv = [sys.executable, "-c", PROGRAM, *(str(a) for a in
            (args.size, args.batch, args.branches, args.calls)),
            "configure" if configure else "plain"]  # fmt: skip
    t0 = time.perf_counter()
    before = os.times()
    try:
        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=args.timeout)
        outcome = f"finished, {out.stdout.strip()} ms per call" if out.returncode == 0 else (
            f"failed (exit {out.returncode})")  # fmt: skip
    except subprocess.TimeoutExpired:
        outcome = "stalled"
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system)  # fmt: skip
    return outcome, time.perf_counter() - t0, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=14)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--branches", type=int, default=16)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--devices", type=int, default=1, help="CPU devices (the pool has "
                        "at least one thread per device)")  # fmt: skip
    args = parser.parse_args()
    import jax

    print(f"# Concurrent batched LAPACK on XLA's CPU pool, {time.strftime('%Y-%m-%d')}")
    print(f"- python {platform.python_version()}, jax {jax.__version__}, "
          f"{platform.machine()}, {os.cpu_count()} cores, load "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")  # fmt: skip
    print(f"- {args.branches} branches x slogdet of {args.batch} matrices {args.size} x "
          f"{args.size}, {args.calls} calls, stalled = not done after "
          f"{args.timeout:g} s, {args.devices} CPU device(s)\n")  # fmt: skip
    print("| pool | run | outcome | wall s | CPU s |")
    print("|---|---|---|---|---|")
    settings = (
        ("default (one thread per core)", None, False),
        ("PJRT_NPROC=1", "1", False),
        ("psijax.configure(), default pool", None, True),
    )
    for label, nproc, configure in settings:
        for r in range(args.repeats):
            outcome, wall, cpu = run_once(args, nproc, configure)
            print(f"| {label} | {r + 1} | {outcome} | {wall:.1f} | {cpu:.1f} |", flush=True)


if __name__ == "__main__":
    main()
