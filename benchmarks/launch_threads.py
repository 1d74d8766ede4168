"""Where a first launch's time goes: its phases, and the CPU time of every thread.

    python benchmarks/launch_threads.py [--system N2] [--seed 0] [--steps 3] [KEY=VALUE ...]

Runs ``psijax.train`` in this process as ``psijax train --system SYSTEM`` runs it (no
compilation cache; KEY=VALUE are more config keys, e.g. ``burn_in_steps=10``), with
progress off, and prints: the time (from this script's start) of every progress note and
training step, and the first training energies' mean; then, from /proc/self/task sampled
once a second, each thread's CPU time and when it was busy (XLA's execution pool is named
tf_XLAEigen; the compiles run on threads named like the process), and how many cores were
busy in each 5-second window. Linux only.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import sys
import tempfile
import threading
import time

START = time.time()
TICK = os.sysconf("SC_CLK_TCK")


def threads_cpu() -> dict[str, tuple[str, float]]:
    """thread id -> (name, user + system CPU seconds so far)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:  # the thread ended
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        out[tid] = (name, (int(fields[11]) + int(fields[12])) / TICK)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", default="N2")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("settings", nargs="*", help="more config keys, KEY=VALUE")
    args = parser.parse_args()
    extra = {}
    for item in args.settings:
        key, value = item.split("=", 1)
        extra[key] = int(value) if value.lstrip("-").isdigit() else value

    samples = []
    sampling = threading.Event()

    python_names: dict[str, str] = {}  # native id -> Python thread name, for those Python runs

    def sample() -> None:
        while not sampling.wait(1.0):
            samples.append((time.time() - START, threads_cpu()))
            python_names.update({str(t.native_id): t.name for t in threading.enumerate()})

    samples.append((0.0, threads_cpu()))
    threading.Thread(target=sample, daemon=True).start()

    import jax

    import psijax
    from psijax.run import progress

    events = []
    for name in ("note", "phase"):  # the progress lines, timed, with progress itself off
        original = getattr(progress.Progress, name)

        def timed(self, text, *rest, _original=original, **kw):
            events.append((time.time() - START, str(text)))
            return _original(self, text, *rest, **kw)

        setattr(progress.Progress, name, timed)
    energies = []

    def on_step(i, metrics) -> None:
        energies.append(float(metrics["energy"]))
        events.append((time.time() - START, f"step {i}: E {energies[-1]:.5f} Ha"))

    with tempfile.TemporaryDirectory() as out:
        psijax.train(system=args.system, steps=args.steps, seed=args.seed, out=out,
                     compilation_cache="", progress=False, on_step=on_step, **extra)  # fmt: skip
    sampling.set()
    samples.append((time.time() - START, threads_cpu()))
    known: dict[str, tuple[str, float]] = {}  # a thread that ended keeps its last figure
    for i, (t, seen) in enumerate(samples):
        known.update(seen)
        samples[i] = (t, dict(known))

    from vmc_step import _cpu_name

    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {_cpu_name()}, {os.cpu_count()} cores, "
          f"python {platform.python_version()}, jax {jax.__version__}; "
          f"command: python benchmarks/launch_threads.py {' '.join(sys.argv[1:])}")  # fmt: skip
    print("\n| s from start | event |\n|---|---|")
    for t, text in events:
        print(f"| {t:.1f} | {text[:90]} |")
    mean = sum(energies) / len(energies)
    print(f"\nmean of the {len(energies)} training energies: {mean:.3f} Ha")

    final = samples[-1][1]
    total = sum(cpu for _, cpu in final.values())
    print(f"\nCPU time of all threads: {total:.1f} s in {samples[-1][0]:.1f} s of wall time")
    print("\n| thread | name | CPU s | busy from - to (s) |\n|---|---|---|---|")
    for tid, (name, cpu) in sorted(final.items(), key=lambda kv: -kv[1][1]):
        if cpu < 0.5:
            continue
        series = [(t, s[tid][1]) for t, s in samples if tid in s]
        busy = [t for (t, a), (_, b) in itertools.pairwise(series) if b - a > 0.1] or [0.0]
        name = f"{name} (Python: {python_names[tid]})" if tid in python_names else name
        print(f"| {tid} | {name} | {cpu:.1f} | {min(busy):.0f} - {max(busy):.0f} |")
    print("\n| window (s) | cores busy |\n|---|---|")
    for (t0, a), (t1, b) in zip(samples[::5], samples[5::5], strict=False):
        used = sum(cpu for _, cpu in b.values()) - sum(cpu for _, cpu in a.values())
        print(f"| {t0:.0f} - {t1:.0f} | {used / (t1 - t0):.2f} |")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
