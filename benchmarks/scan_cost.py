"""A scan's cost and curve against one single-point run, measured in one go.

    python benchmarks/scan_cost.py [--system LiH] [--lengths 2.5:4.5:8]
                                   [--reference ref.csv] [--out DIR] [--seed N]

Runs, one after the other as separate commands (as a user would), ``psijax train --system
SYSTEM`` (the defaults) and ``psijax scan --system SYSTEM --bond 1-2 --lengths LENGTHS``,
and prints every point's energy and steps, against a reference curve where ``--reference``
gives one (a CSV of ``length,energy`` in bohr and Hartree, interpolated by a cubic
spline), the fitted minimum, and the scan's steps and wall time against the single run's.
``--seed`` is passed to both commands (0, psijax's default, when not given).
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from vmc_step import _cpu_name


def _timed(argv: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "psijax.cli", *argv], check=False,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    if done.returncode:
        raise SystemExit(f"psijax {' '.join(argv)} failed: {done.stderr.strip()[-500:]}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", default="LiH")
    parser.add_argument("--lengths", default="2.5:4.5:8")
    parser.add_argument("--reference", default=None)
    parser.add_argument("--out", default="/tmp/psijax-scan-bench")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    import jax
    from scipy.interpolate import CubicSpline

    import psijax
    from psijax.curves.scan import ScanPoint, fitted_minimum
    from psijax.statistics import Estimate

    out = Path(args.out)
    print(f"# psijax {psijax.__version__}, jax {jax.__version__}, python "
          f"{platform.python_version()}, {_cpu_name()}, seed {args.seed}")  # fmt: skip
    seed = ["--seed", str(args.seed)]
    single = _timed(["train", "--system", args.system, "--out", str(out / "single"),
                     "--force", "--quiet", *seed])  # fmt: skip
    summary = json.loads((out / "single" / "summary.json").read_text())
    single_steps = int(summary["steps_run"])
    wall = _timed(["scan", "--system", args.system, "--bond", "1-2", "--lengths", args.lengths,
                   "--out", str(out / "scan"), "--force", "--quiet", *seed])  # fmt: skip
    rows = list(csv.DictReader((out / "scan" / "scan.csv").read_text().splitlines()))
    reference = None
    if args.reference:
        ref = np.loadtxt(args.reference, delimiter=",", skiprows=1)
        reference = CubicSpline(ref[:, 0], ref[:, 1])
    print("| R (bohr) | psijax (Ha) | steps | reference (Ha) | difference (mHa) |")
    print("|---|---|---:|---|---|")
    for r in rows:
        x, e, err = float(r["coordinate"]), float(r["energy"]), float(r["error"])
        ref_text = diff = ""
        if reference is not None:
            ref_text = f"{float(reference(x)):.6f}"
            diff = f"{(e - float(reference(x))) * 1e3:+.2f} ± {err * 1e3:.2f}"
        print(f"| {x:.4f} | {e:.6f}({round(err * 1e6)}) | {r['steps']} | {ref_text} | {diff} |")

    points = [
        ScanPoint(float(r["coordinate"]), Estimate(float(r["energy"]), float(r["error"]), 0, 1, 0,
                  0.0), int(r["steps"]), float(r["seconds"]), out / "scan" / r["run"])
        for r in rows
    ]  # fmt: skip
    minimum = fitted_minimum(points)
    if minimum is not None:
        line = f"fitted minimum: {minimum[0]:.4f} bohr, {minimum[1]:.6f} Ha"
        if reference is not None:
            grid = np.linspace(float(rows[0]["coordinate"]), float(rows[-1]["coordinate"]), 20001)
            best = grid[np.argmin(reference(grid))]
            line += f" (reference curve's minimum {best:.4f} bohr)"
        print(line)
    steps = sum(int(r["steps"]) for r in rows)
    print(f"| | steps | wall time (s) |\n|---|---:|---:|\n| the scan, {len(rows)} points | "
          f"{steps} | {wall:.0f} |\n| one default run | {single_steps} | {single:.0f} |\n"
          f"| ratio | {steps / single_steps:.1f}x | {wall / single:.1f}x |")  # fmt: skip


if __name__ == "__main__":
    main()
