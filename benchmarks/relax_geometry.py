"""A relaxation's bond lengths and angles, cycle by cycle, against a reference geometry.

    python benchmarks/relax_geometry.py RELAX_DIR [--reference "O-H=0.95748,H-O-H=104.128"]

Reads a relaxation (``psijax relax --out RELAX_DIR``, finished or not): per cycle its
largest force and its bonds and angles (``psijax.curves.structure``: angstrom, degrees).
For the last cycle it prints each coordinate with its error bar (the spread of the minimum
the last forces predict, ``structure.with_errors``), the minimum itself (the geometry plus
the relaxation's Newton step from the last forces, without the trust radius) and, with
``--reference``, the difference from the reference in error bars (every bond of one kind,
e.g. both O-H, and every angle of one kind share one reference value).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from psijax.curves import geometry, structure
from psijax.curves.model_hessian import BOHR_PER_ANGSTROM
from psijax.curves.relax import _series
from psijax.rundir.eval_files import read_rows


def kind(label: str) -> str:
    """``O1-H2`` -> ``O-H``: the coordinate's atoms without their numbers."""
    return "-".join(part.rstrip("0123456789") for part in label.split("-"))


def cycles(relax_dir: Path, symbols: list[str]) -> list[geometry.Forces]:
    """The forces of every evaluated cycle, in order."""
    history = []
    for run in sorted(relax_dir.glob("cycle-*")):
        metrics = run / "eval" / "metrics.csv"
        if not metrics.is_file():
            break
        config = json.loads((run / "config.json").read_text())
        atoms = [item.split() for item in config["system"].split(";")]
        coords = np.array([[float(x) for x in atom[1:4]] for atom in atoms])
        if config.get("unit", "bohr") == "angstrom":
            coords = coords * BOHR_PER_ANGSTROM
        history.append(geometry.project(coords, _series(read_rows(metrics), len(symbols))))
    return history


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("relax_dir", type=Path)
    parser.add_argument("--reference", default="", help="KIND=VALUE,...: e.g. O-H=0.9575")
    args = parser.parse_args()
    reference = {k: float(v) for k, v in (item.split("=") for item in args.reference.split(",")
                                          if item)}  # fmt: skip
    start = json.loads((args.relax_dir / "relax.json").read_text())["start"]
    symbols = [item.split()[0] for item in start.split(";")]
    history = cycles(args.relax_dir, symbols)
    for k, forces in enumerate(history):
        largest, error = forces.largest
        values = structure.coordinates(symbols, forces.coords)
        text = ", ".join(f"{name} {v:.4f}" for name, v in values.items())
        print(f"cycle {k}: largest force {largest:.4f} +- {error:.4f} Ha/bohr; {text}")
    last = history[-1]
    minimum = geometry.next_geometry(history, symbols, trust=np.inf)
    predicted = structure.coordinates(symbols, minimum)
    print("\n| coordinate | last cycle | minimum from its forces | reference | last - reference |")
    print("|---|---|---|---|---|")
    for name, (value, error) in structure.with_errors(history, symbols).items():
        ref = reference.get(kind(name))
        diff = "" if ref is None else f"{value - ref:+.4f} ({(value - ref) / error:+.1f} bars)"
        print(f"| {name} | {value:.4f} +- {error:.4f} | {predicted[name]:.4f} | "
              f"{'' if ref is None else ref} | {diff} |")  # fmt: skip
    print(f"\n{len(history)} cycles; last forces zero within their error bars: "
          f"{last.zero_within_errors(1e-3)}")  # fmt: skip


if __name__ == "__main__":
    main()
