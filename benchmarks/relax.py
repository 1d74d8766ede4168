"""A relaxation's cost and result against one single-point run, measured in one go.

    python benchmarks/relax.py [--system H2] [--starts "H 0 0 0; H 0 0 1.0|H 0 0 0; H 0 0 2.0"]
                               [--reference-length 1.4011] [--exact -1.174476] [--out DIR]

Runs, one after the other as separate commands (as a user would), ``psijax train
--system SYSTEM`` (the defaults) and ``psijax relax --system START`` for every start
geometry (atom strings in bohr, separated by '|'), and prints per relaxation its cycles,
steps, wall time and the ratio to the single run's, the final geometry's bond lengths
(against ``--reference-length`` for a diatomic) and its energy (against ``--exact``).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from vmc_step import _cpu_name


def _timed(argv: list[str]) -> tuple[float, int]:
    """(wall seconds, exit status) of ``psijax ARGV``."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "psijax.cli", *argv], check=False,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    if done.returncode not in (0, 1):
        raise SystemExit(f"psijax {' '.join(argv)} failed: {done.stderr.strip()[-500:]}")
    return time.perf_counter() - started, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", default="H2")
    parser.add_argument("--starts", default="H 0 0 0; H 0 0 1.0|H 0 0 0; H 0 0 2.0")
    parser.add_argument("--reference-length", type=float, default=1.4011)
    parser.add_argument("--exact", type=float, default=-1.174476)
    parser.add_argument("--out", default="/tmp/psijax-relax-bench")
    args = parser.parse_args()
    import jax

    import psijax
    from psijax.system import parse

    out = Path(args.out)
    print(f"# psijax {psijax.__version__}, jax {jax.__version__}, python "
          f"{platform.python_version()}, {_cpu_name()}")  # fmt: skip
    single, _ = _timed(["train", "--system", args.system, "--out", str(out / "single"),
                     "--force", "--quiet"])  # fmt: skip
    print(f"# single run (psijax train --system {args.system}): {single:.1f} s")
    print(
        "| start | cycles | converged | train + eval steps | wall (s) | x single | "
        "bond lengths (bohr) | energy (Ha) | vs exact (mHa) |"
    )
    print("|---|---:|---|---:|---:|---:|---|---|---|")
    for k, start in enumerate(args.starts.split("|")):
        run = out / f"relax-{k}"
        wall, status = _timed(["relax", "--system", start, "--out", str(run), "--force", "--quiet"])
        rows = list(csv.DictReader((run / "relax.csv").read_text().splitlines()))
        final = parse.from_xyz(run / "final.xyz")
        x = np.asarray(final.coords)
        lengths = [np.linalg.norm(x[i] - x[j]) for i, j in itertools.combinations(range(len(x)), 2)]
        energy, error = float(rows[-1]["energy"]), float(rows[-1]["error"])
        steps = sum(int(r["train_steps"]) + int(r["eval_steps"]) for r in rows)
        converged = status == 0  # psijax relax exits 1 at the cycle limit
        shown = ", ".join(f"{d:.4f}" for d in lengths)
        if len(x) == 2:
            shown += f" ({lengths[0] - args.reference_length:+.4f})"
        print(f"| {start} | {len(rows)} | {converged} | {steps} | {wall:.1f} | "
              f"{wall / single:.2f} | {shown} | {energy:.6f}({round(error * 1e6)}) | "
              f"{(energy - args.exact) * 1e3:+.2f} ± {error * 1e3:.2f} |")  # fmt: skip


if __name__ == "__main__":
    main()
