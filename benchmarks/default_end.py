"""Would ending a run by convergence serve better than its step count? Measured on runs
that trained to their default step count.

For each finished run directory (metrics.csv and summary.json with the preset's exact
energy), the training stop rule of ``--target-error`` (psijax.statistics.stopping,
checked every 10 steps as in training) is replayed on the run's per-step energies for
each target error: the step it would have stopped at, the energy it would have reported
there (the trailing ``eval_fraction`` of the steps so far, as a run reports), that
energy's distance from exact, and the wall time it would have saved. The run's own
result at its full step count is the first row of each run.

    python benchmarks/default_end.py RUN [RUN ...] [--targets 1e-4 2e-4 5e-4 1e-3]
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
from pathlib import Path

import numpy as np

from psijax.statistics.blocking import tail_estimate
from psijax.statistics.stopping import CHECK_EVERY, StopRule, first_stop

TOLERANCE = 1.6e-3  # chemical accuracy (Hartree)


def load(run: Path) -> tuple[dict, dict, np.ndarray, np.ndarray]:
    config = json.loads((run / "config.json").read_text())
    summary = json.loads((run / "summary.json").read_text())
    with open(run / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    energies = np.array([float(r["energy"]) for r in rows])
    seconds = np.array([float(r["seconds"]) for r in rows])  # since the run started
    return config, summary, energies, seconds


def rows_of(run: Path, targets: list[float]) -> list[str]:
    config, summary, energies, seconds = load(run)
    exact, fraction = summary.get("exact"), config["eval_fraction"]
    label = f"{config['system']} seed {config['seed']}"

    def row(what: str, n: int) -> str:
        estimate = tail_estimate(energies[:n], fraction)
        diff = 1000 * (estimate.mean - exact)
        inside = "yes" if abs(diff) <= 1000 * TOLERANCE else "no"
        return (
            f"| {label} | {what} | {n} | {seconds[n - 1] / 60:.1f} | {estimate.mean:.5f}"
            f"({round(1e5 * estimate.error):d}) | {diff:+.2f} ± {1000 * estimate.error:.2f} "
            f"| {inside} |"
        )

    lines = [row("all steps", energies.size)]
    for target in targets:
        rule = StopRule(target, fraction)
        hit = first_stop(rule, energies, CHECK_EVERY)
        what = f"--target-error {target:g}"
        if hit is None:
            lines.append(f"| {label} | {what} | never stops | | | | |")
        else:
            lines.append(row(what, hit[0]))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--targets", nargs="+", type=float, default=[1e-4, 2e-4, 5e-4, 1e-3])
    args = parser.parse_args()
    print(f"python {platform.python_version()}, {platform.machine()}; stop rule checked "
          f"every {CHECK_EVERY} steps, replayed on each run's per-step energies")  # fmt: skip
    print()
    print("| run | end | steps | wall (min) | energy (Ha) | vs exact (mHa) | within 1.6 mHa |")
    print("|---|---|---:|---:|---|---|---|")
    for run in args.runs:
        for line in rows_of(run, args.targets):
            print(line)


if __name__ == "__main__":
    main()
