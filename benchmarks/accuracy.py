"""How accurate, how fast: train systems with the defaults (or given flags) and tabulate the
energy against the exact one and the time to chemical accuracy.

    python benchmarks/accuracy.py --out DIR --system Be C --seeds 0 1 [--flags "--optimizer march"]
                                  [--label NAME] [--report-only]

Each (system, seed) runs ``psijax train --system X --seed S FLAGS --out DIR/NAME-X-S`` in
a fresh process, one at a time (a run already finished in its directory is kept and only
read; one stopped with a checkpoint, by SIGTERM or a lost machine, is resumed), then one
table row is printed per run: the energy of the trailing ``eval_fraction`` of the steps by
blocking and its distance from the preset's exact energy, the step count,
the median step, the wall time of the run (launch to the end), and the time from the
launch from which the trailing 100-step mean energy stays within 1.6 mHa of exact ("for
good"; "-" if it does not by the end). Rows go to DIR/results.jsonl too.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

WINDOW, TOLERANCE = 100, 1.6e-3  # the trailing mean, chemical accuracy (Hartree)


def time_to_accuracy(seconds: np.ndarray, energies: np.ndarray, exact: float) -> float | None:
    """Seconds from the launch after which the trailing ``WINDOW``-step mean stays within
    ``TOLERANCE`` of ``exact`` to the end; None if it is outside at the end."""
    if energies.size < WINDOW:
        return None
    mean = np.convolve(energies, np.ones(WINDOW) / WINDOW, mode="valid")
    outside = np.abs(mean - exact) > TOLERANCE
    if outside[-1]:
        return None
    last_out = np.nonzero(outside)[0]
    first_good = 0 if last_out.size == 0 else last_out[-1] + 1
    return float(seconds[first_good + WINDOW - 1])


def row_of(run: Path, label: str, system: str, seed: int) -> dict:
    summary = json.loads((run / "summary.json").read_text())
    with open(run / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    seconds = np.asarray([float(r["seconds"]) for r in rows])
    energies = np.asarray([float(r["energy"]) for r in rows])
    exact = summary.get("exact")
    good = None if exact is None else time_to_accuracy(seconds, energies, exact)
    config = json.loads((run / "config.json").read_text())
    return {
        "label": label, "system": system, "seed": seed, "energy": summary["energy"],
        "error": summary["energy_error"], "text": summary["energy_text"], "exact": exact,
        "steps": len(rows), "walkers": config["walkers"], "optimizer": config["optimizer"],
        "step_s": float(np.median(np.diff(seconds[len(seconds) // 10 :]))),
        "wall_s": float(summary["seconds"]), "good_s": good,
    }  # fmt: skip


def show(row: dict) -> str:
    diff = "" if row["exact"] is None else (
        f"{1000 * (row['energy'] - row['exact']):+.2f} ± {1000 * row['error']:.2f}")  # fmt: skip
    good = "-" if row["good_s"] is None else f"{row['good_s'] / 60:.1f}"
    return (f"| {row['system']} | {row['label']} | {row['seed']} | {row['text']} | {diff} | "
            f"{row['steps']} | {row['walkers']} | {row['step_s']:.3f} | "
            f"{row['wall_s'] / 60:.1f} | {good} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--system", nargs="+", default=["Li", "Be", "B", "C"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--flags", default="", help="more psijax train flags, one string")
    parser.add_argument("--label", default="defaults", help="the runs' name in the table")
    parser.add_argument("--report-only", action="store_true", help="read the runs, train none")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import jax

    print(f"# Accuracy and time, {time.strftime('%Y-%m-%dT%H:%M')}: {args.label} "
          f"({args.flags or 'the defaults'})")  # fmt: skip
    print(f"- python {platform.python_version()}, jax {jax.__version__}, {platform.machine()}, "
          f"{os.cpu_count()} logical cores, load {os.getloadavg()[0]:.2f}\n")  # fmt: skip
    print("| system | runs | seed | energy (Ha) | vs exact (mHa) | steps | walkers | step (s) "
          "| wall (min) | within 1.6 mHa for good from (min) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for system in args.system:
        for seed in args.seeds:
            run = args.out / f"{args.label}-{system}-{seed}"
            finished = (run / "summary.json").is_file()
            if not finished and not args.report_only:
                argv = [sys.executable, "-m", "psijax.cli", "train", "--system", system,
                        "--seed", str(seed), "--out", str(run), "--quiet",
                        *shlex.split(args.flags)]  # fmt: skip
                if any((run / "checkpoints").glob("*")):  # stopped: it goes on from there
                    argv = [sys.executable, "-m", "psijax.cli", "train", "--resume", str(run),
                            "--quiet"]  # fmt: skip
                elif run.exists():  # a launch that saved nothing
                    argv.append("--force")
                done = subprocess.run(argv, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    print(f"| {system} | {args.label} | {seed} | failed: "
                          f"{done.stderr.strip().splitlines()[-1:]} |", flush=True)  # fmt: skip
                    continue
            if not (run / "summary.json").is_file():
                continue
            row = row_of(run, args.label, system, seed)
            with open(args.out / "results.jsonl", "a") as f:
                f.write(json.dumps(row) + "\n")
            print(show(row), flush=True)


if __name__ == "__main__":
    main()
