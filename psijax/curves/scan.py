"""An energy curve: one training run per geometry, in order, each started from its
neighbour's wavefunction (``psijax.training.warm``), so that every point after the first
trains only as long as it needs.

The first point trains as a single run would (the defaults sized from the molecule, or
what the config says). Every later point starts from the point before and ends by the
convergence rule of ``--target-error`` (``psijax.statistics.stopping``: the energy's error
bar at most ``LATER_ERROR`` times the first point's, and no drift between the last half of
its steps and the steps before, in a window of at least 100 steps), over the last
``LATER_FRACTION`` of its steps, within as many steps as the first point took. Each point
is a run directory of its own (``OUT/point-NN``), so a scan that stopped resumes point by
point: a finished point is read, an unfinished one resumed from its checkpoint.
``OUT/scan.csv`` and ``OUT/scan.png`` hold the curve.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from psijax import config as config_lib
from psijax.curves.claim import claim, write_rows
from psijax.curves.fit import CurveFit, fit_curve
from psijax.curves.points import Point, config_at
from psijax.statistics import Estimate

LATER_FRACTION = 0.5  # the later points' energy (and convergence window): their last half
LATER_ERROR = 2.0  # the later points' error bar: at most this many times the first point's
MANIFEST = "scan.json"
FRAMES = "frame"  # the label of a scan through the frames of an .xyz file


@dataclasses.dataclass(frozen=True)
class ScanPoint:
    coordinate: float
    energy: Estimate
    steps: int  # training steps the point took
    seconds: float  # its wall time (all its sessions)
    run: Path


@dataclasses.dataclass(frozen=True)
class ScanResult:
    points: list[ScanPoint]
    out: Path
    label: str  # what the coordinate is, e.g. "bond 1-2 (bohr)"

    @property
    def steps(self) -> int:
        return sum(p.steps for p in self.points)

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.points)

    @property
    def minimum(self) -> tuple[float, float] | None:
        """(coordinate, energy) of the fitted curve's lowest point (``fitted_minimum``)."""
        return fitted_minimum(self.points, bond=is_bond(self.label))

    @property
    def fit(self) -> CurveFit | None:
        """The curve fitted through the points (``psijax.curves.fit``)."""
        return fitted_curve(self.points, bond=is_bond(self.label))


def is_bond(label: str) -> bool:
    """Whether a scan's coordinate is a bond length: all but the frames of an .xyz file."""
    return label != FRAMES


def fitted_curve(points: Sequence[ScanPoint], bond: bool = True) -> CurveFit | None:
    """The curve through the points (``psijax.curves.fit.fit_curve``: a Morse curve along a
    bond, a polynomial near the lowest point otherwise); None where the lowest point is at
    either end of the scan or fewer than three points are there."""
    x = np.array([p.coordinate for p in points])
    y = np.array([p.energy.mean for p in points])
    err = np.array([p.energy.error for p in points])
    return fit_curve(x, y, err, bond=bond)


def fitted_minimum(points: Sequence[ScanPoint], bond: bool = True) -> tuple[float, float] | None:
    """(coordinate, energy) of the fitted curve's minimum (``fitted_curve``)."""
    fit = fitted_curve(points, bond)
    return None if fit is None else (fit.at, fit.energy)


def scan(
    config: config_lib.Config,
    points: Sequence[Point],
    out: str | Path,
    *,
    label: str = "coordinate",
    progress: bool = True,
    force: bool = False,
    train: Callable | None = None,
) -> ScanResult:
    """Train ``config`` at each of ``points`` in order (module docstring); returns the
    curve. ``force`` starts over in ``out``; otherwise a scan there of the same points is
    continued and anything else is refused."""
    if train is None:
        from psijax.training.job import train
    out = Path(out)
    manifest = {
        "label": label,
        "points": [[c, m.atom_string()] for c, m in points],
        "config": config_lib.to_dict(dataclasses.replace(config, out=str(out))),
    }
    claim(out, MANIFEST, manifest, force, "scan")
    done: list[ScanPoint] = []
    for k, (coordinate, molecule) in enumerate(points):
        run = out / f"point-{k:02d}"
        point = config_at(config, molecule, run)
        if k:
            point = _later(point, done[0], out / f"point-{k - 1:02d}")
        if not (run / "summary.json").is_file():
            started = time.perf_counter()
            train(point, progress=progress, resume=(run / "config.json").is_file())
            if progress:
                print(f"scan: point {k} ({label} {coordinate:g}) done in "
                      f"{time.perf_counter() - started:.0f} s", flush=True)  # fmt: skip
        done.append(_read(run, coordinate))
        _write_curve(out, done, label)
    return ScanResult(done, out, label)


def _later(point: config_lib.Config, first: ScanPoint, before: Path) -> config_lib.Config:
    """A later point's config: from the point ``before``, ending by the convergence rule at
    ``LATER_ERROR`` times the first point's error bar, within the first point's steps."""
    return dataclasses.replace(
        point, init_from=str(before), steps=first.steps, eval_fraction=LATER_FRACTION,
        target_error=point.target_error or LATER_ERROR * first.energy.error,
    )  # fmt: skip


def _read(run: Path, coordinate: float) -> ScanPoint:
    summary = json.loads((run / "summary.json").read_text())
    n, block = summary.get("eval_steps") or 0, summary.get("block_size") or 1
    energy = Estimate(
        mean=summary["energy"], error=summary["energy_error"], n_samples=n, block_size=block,
        n_blocks=n // block, autocorrelation_time=summary.get("autocorrelation_time") or 0.0,
    )  # fmt: skip
    return ScanPoint(coordinate, energy, int(summary["steps_run"]), summary["seconds"], run)


def _write_curve(out: Path, points: list[ScanPoint], label: str) -> None:
    """scan.csv (coordinate, energy, error, steps, seconds, run) and scan.png."""
    rows = [
        {"coordinate": p.coordinate, "energy": p.energy.mean, "error": p.energy.error,
         "steps": p.steps, "seconds": p.seconds, "run": p.run.name}
        for p in points
    ]  # fmt: skip
    write_rows(out / "scan.csv", rows)
    plot_curve(out / "scan.png", points, label)


def plot_curve(path: Path, points: list[ScanPoint], label: str) -> None:
    """The energy against the coordinate, with error bars, and the fitted curve."""
    from psijax.rundir.plots import new_figure

    x = np.array([p.coordinate for p in points])
    y = np.array([p.energy.mean for p in points])
    err = np.array([p.energy.error for p in points])
    fig, ax = new_figure((6.5, 4.2))
    ax.errorbar(x, y, yerr=err, marker="o", ms=4, capsize=3, lw=1, label="psijax")
    fit = fitted_curve(points, bond=is_bond(label))
    if fit is not None:
        grid = np.linspace(*fit.span, 400)
        ax.plot(grid, fit.curve(grid), "k-", lw=0.8, alpha=0.6, label=f"{fit.model} fit")
        ax.plot(fit.at, fit.energy, "k+", ms=12, label=f"fitted minimum {fit.at:.4f}")
        ax.legend(fontsize=8)
    ax.set_xlabel(label)
    ax.set_ylabel("energy (Ha)")
    ax.set_title(f"{len(points)} points, {sum(p.steps for p in points)} steps")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
