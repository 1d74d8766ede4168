"""Read a run directory and report how fast it converged.

    python benchmarks/vmc_convergence.py runs/lih [--window 100] [--tolerance 1.6e-3]

Prints launch-to-first-step seconds, the median steady-state step time, and the
wall-clock time at which the trailing `window`-step mean energy first came within
`tolerance` Ha of the exact reference, and after which it stayed there.
"""

import argparse
import csv
import json
import platform
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run", type=Path)
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--tolerance", type=float, default=1.6e-3)
    args = parser.parse_args()
    with open(args.run / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    summary = json.loads((args.run / "summary.json").read_text())
    seconds = np.array([float(r["seconds"]) for r in rows])
    energy = np.array([float(r["energy"]) for r in rows])
    exact = summary.get("exact")
    steady = np.median(np.diff(seconds[len(seconds) // 10 :]))
    print(f"machine: {platform.processor() or platform.machine()}, run: {args.run}")
    print(f"system {summary['system']}, {len(rows)} steps, {summary['walkers']} walkers, "
          f"optimizer {summary['optimizer']}")  # fmt: skip
    print(f"launch to first step finished: {seconds[0]:.1f} s")
    print(f"steady-state step time (median): {steady:.4f} s")
    print(f"final energy: {summary['energy_text']} Ha, exact {exact}")
    if exact is None or len(energy) < args.window:
        return
    kernel = np.ones(args.window) / args.window
    trailing = np.convolve(energy, kernel, mode="valid")  # index i: steps i .. i+window-1
    inside = np.abs(trailing - exact) <= args.tolerance
    t_end = seconds[args.window - 1 :]
    if not inside.any():
        best = np.min(np.abs(trailing - exact))
        print(f"trailing {args.window}-step mean never within {args.tolerance * 1e3:.1f} mHa "
              f"(closest {best * 1e3:.2f} mHa)")  # fmt: skip
        return
    first = t_end[np.argmax(inside)]
    outside = np.nonzero(~inside)[0]
    good = t_end[outside[-1] + 1] if outside.size and outside[-1] + 1 < len(t_end) else None
    if not outside.size:
        good = t_end[0]
    print(f"trailing {args.window}-step mean within {args.tolerance * 1e3:.1f} mHa: first at "
          f"{first / 60:.2f} min, for good from "
          f"{'never (left again)' if good is None else f'{good / 60:.2f} min'}")  # fmt: skip
    print(f"final trailing mean: {(trailing[-1] - exact) * 1e3:+.2f} mHa vs exact")


if __name__ == "__main__":
    main()
