"""The default job's training step in two source trees of psijax, timed in fresh processes
taken in turn.

    python benchmarks/step_versions.py --a /tmp/old --b . [--system LiH N2] [--rounds 3]
                                       [--steps 40] [--skip 8] [--set 'optimizer="march"']

Each round runs, for every system, one process per tree (a, then b; the next round b
first), each ``psijax.train(system=..., steps=...)`` through the public API with the
default config except a short pretraining (10 steps: a step's cost does not depend on the
parameters' values; ``--set`` adds config keys, ``key=value`` pairs as TOML would read
them), and times its training steps by the calls of ``on_step`` (one per
step, one step late, so that consecutive calls are one step apart). The first ``--skip``
steps are dropped; the table gives each process's median step, the median over the rounds
and the ratio b / a. A tree is any checkout of psijax (``git worktree add /tmp/old REV``);
its own ``psijax`` is imported (``PYTHONPATH``), the rest of the environment is this one's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import tomllib

PROGRAM = textwrap.dedent(
    """
    import json, sys, tempfile, time
    import psijax

    system, steps, skip = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    more = json.loads(sys.argv[4])
    stamps = []
    with tempfile.TemporaryDirectory() as out:
        psijax.train(system=system, steps=steps, pretrain_steps=10, out=out + "/run",
                     progress=False, on_step=lambda i, m: stamps.append(time.perf_counter()),
                     **more)
    gaps = [b - a for a, b in zip(stamps[skip:], stamps[skip + 1:])]
    gaps.sort()
    print(json.dumps({"median": gaps[len(gaps) // 2], "n": len(gaps)}))
    """
)


def run_once(tree: str, system: str, steps: int, skip: int, more: dict) -> float:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
    with tempfile.TemporaryDirectory() as cache:  # each process compiles from nothing
        env["JAX_COMPILATION_CACHE_DIR"] = cache
        out = subprocess.run(
            [sys.executable, "-c", PROGRAM, system, str(steps), str(skip), json.dumps(more)],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(f"{tree}: {system} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["median"]


def _revision(tree: str) -> str:
    out = subprocess.run(["git", "-C", tree, "log", "-1", "--format=%h %s"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    dirty = subprocess.run(["git", "-C", tree, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, check=False).stdout.strip()  # fmt: skip
    return (out.stdout.strip()[:60] or "?") + (" (with uncommitted changes)" if dirty else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="the source tree to compare with")
    parser.add_argument("--b", default=".", help="the source tree compared")
    parser.add_argument("--system", nargs="+", default=["LiH"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--skip", type=int, default=8)
    parser.add_argument("--set", nargs="*", default=[], help="config keys, key=value (TOML)")
    args = parser.parse_args()
    more = tomllib.loads("\n".join(args.set))
    import jax

    print(f"# The default training step, two trees: {time.strftime('%Y-%m-%dT%H:%M')}")
    print(f"- python {platform.python_version()}, jax {jax.__version__}, {platform.machine()}, "
          f"{os.cpu_count()} logical cores, load {os.getloadavg()[0]:.2f}")  # fmt: skip
    print(f"- a: {args.a} = {_revision(args.a)}\n- b: {args.b} = {_revision(args.b)}")
    print(f"- config beyond the defaults: {more or 'none'}")
    print(f"- {args.steps} steps per process, the first {args.skip} dropped; rounds "
          "alternate which tree runs first\n")  # fmt: skip
    print("| system | a: median step per round (s) | b: median step per round (s) | "
          "a | b | b / a |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for system in args.system:
        times: dict[str, list[float]] = {"a": [], "b": []}
        for r in range(args.rounds):
            order = ("a", "b") if r % 2 == 0 else ("b", "a")
            for name in order:
                tree = args.a if name == "a" else args.b
                times[name].append(run_once(tree, system, args.steps, args.skip, more))
        a, b = statistics.median(times["a"]), statistics.median(times["b"])
        show = lambda ts: " / ".join(f"{t:.4f}" for t in ts)
        print(f"| {system} | {show(times['a'])} | {show(times['b'])} | {a:.4f} | {b:.4f} | "
              f"{b / a:.3f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
