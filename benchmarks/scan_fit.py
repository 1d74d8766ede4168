"""How well does a scan's fitted curve place the minimum? The Morse fit over every point
against the polynomial through the lowest five (psijax.curves.fit), on a reference curve
with noise and on finished scans.

    python benchmarks/scan_fit.py --reference REF.csv [--noise 2e-4 4e-4] [--draws 2000]
                                  [SCAN_DIR ...]

The reference (a CSV of ``length,energy``, bohr and Hartree, at the scan's lengths) is
interpolated by a cubic spline; its minimum is the target. Each draw adds independent
Gaussian noise of the given size to every reference point and fits both curves with
that error bar: printed are each fit's mean offset from the target (its bias), the
standard deviation of its minimum, and how often it misses by more than 0.02 bohr. A
noise of 0 gives each model's own error on the curve (equal weights). Each SCAN_DIR's
scan.csv is then fitted both ways, its minimum against the target.
"""

from __future__ import annotations

import argparse
import csv
import platform
from pathlib import Path

import numpy as np
from scipy.interpolate import CubicSpline

from psijax.curves.fit import fit_curve

MISS = 0.02  # bohr
UNIFORM = 1e-3  # Ha: the error bar given to a noise-free curve (equal weights; the Morse
# fit's residual test then passes, so the row shows the Morse form's own error)


def read(path: Path, x: str, y: str, err: str | None = None):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    columns = [np.array([float(r[c]) for r in rows]) for c in (x, y)]
    if err is not None:
        columns.append(np.array([float(r[err]) for r in rows]))
    return columns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scans", nargs="*", type=Path)
    parser.add_argument("--reference", type=Path, required=True)
    parser.add_argument("--noise", nargs="+", type=float, default=[0.0, 2e-4, 4e-4])
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    x, y = read(args.reference, "length", "energy")
    grid = np.linspace(x[0], x[-1], 20001)
    target = float(grid[np.argmin(CubicSpline(x, y)(grid))])
    print(f"python {platform.python_version()}; reference {args.reference.name}: {len(x)} "
          f"points, its spline's minimum {target:.4f} bohr")  # fmt: skip
    print()
    print("| noise (mHa) | fit | bias (bohr) | standard deviation (bohr) | misses by > 0.02 bohr |")
    print("|---|---|---|---|---|")
    rng = np.random.default_rng(args.seed)
    for noise in args.noise:
        draws = args.draws if noise > 0 else 1
        offsets: dict[str, list[float]] = {"morse": [], "polynomial": []}
        for _ in range(draws):
            noisy = y + rng.normal(0.0, noise, y.size) if noise > 0 else y
            err = np.full(y.size, noise if noise > 0 else UNIFORM)
            for model, bond in (("morse", True), ("polynomial", False)):
                fit = fit_curve(x, noisy, err, bond=bond)
                offsets[model].append(np.nan if fit is None else fit.at - target)
        for model, values in offsets.items():
            v = np.array(values)
            print(f"| {1000 * noise:g} | {model} | {np.nanmean(v):+.4f} | {np.nanstd(v):.4f} | "
                  f"{np.mean(np.abs(v) > MISS):.0%} |")  # fmt: skip
    if args.scans:
        print()
        print("| scan | Morse minimum (bohr) | vs target | polynomial minimum (bohr) | vs target |")
        print("|---|---|---|---|---|")
    for scan in args.scans:
        sx, sy, serr = read(scan / "scan.csv", "coordinate", "energy", "error")
        fits = [fit_curve(sx, sy, serr, bond=bond) for bond in (True, False)]
        cells = " | ".join(
            "-" if f is None else f"{f.at:.4f} ({f.model}) | {f.at - target:+.4f}" for f in fits
        )
        print(f"| {scan} | {cells} |")


if __name__ == "__main__":
    main()
