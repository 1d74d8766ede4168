"""The files of an evaluation (``RUN/eval/``), its summary, plot and progress, and the report.

``metrics.csv`` has one row per step: the walker mean of every observable column, the
variance of the local energy over the walkers, the acceptance and the walkers left out for
a non-finite local energy. ``walkers.h5`` holds ``local_energy`` ``[step, walker]``
(Hartree) and, when asked for, ``positions`` ``[step, walker, electron, 3]`` (bohr).
``summary.json`` holds the settings and, for every column, the mean, blocking error,
autocorrelation time (in steps) and number of steps; it is written when the evaluation
starts (``"status": "running"``) and again when it ends. ``psijax report RUN`` recomputes
the numbers from the metrics files, so it works on a running run too.
"""

from __future__ import annotations

import csv
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from psijax import observables as observables_lib
from psijax.errors import InputError
from psijax.run.report import Progress, plot_energy
from psijax.run.rundir import atomic_write
from psijax.stats import Estimate, blocking_estimate, running_mean, tail_estimate

TAIL = ("variance", "acceptance", "nonfinite_walkers")
UNITS = {
    "energy": "Ha", "kinetic": "Ha", "electron_nucleus": "Ha", "electron_electron": "Ha",
    "nucleus_nucleus": "Ha", "variance": "Ha^2", "s2": "", "dipole_x": "e*bohr",
    "dipole_y": "e*bohr", "dipole_z": "e*bohr", "acceptance": "", "nonfinite_walkers": "",
}  # fmt: skip


def _unit(column: str) -> str:
    return "Ha/bohr" if column.startswith("force_") else UNITS.get(column, "")


class EvalWriter:
    """Writes ``metrics.csv``, ``walkers.h5`` and the first ``summary.json``; keeps the rows.

    ``resume_step``: keep the rows and per-walker arrays of the steps before it, drop the
    rest (written after the checkpoint being resumed) and append from there.
    """

    def __init__(
        self, out: Path, columns, n_walkers: int, wf, *, enabled=True, save_positions=False,
        resume_step: int | None = None,
    ):  # fmt: skip
        self.out, self.enabled = out, enabled
        self.columns = ["step", *columns, *TAIL, "seconds"]
        self.rows: list[dict[str, float]] = []
        if resume_step is not None:
            rows = read_rows(out / "metrics.csv") if (out / "metrics.csv").is_file() else []
            self.rows = [r for r in rows if r["step"] < resume_step]
            if [int(r["step"]) for r in self.rows] != list(range(resume_step)):
                raise InputError(
                    f"{str(out / 'metrics.csv')!r} is missing rows before step {resume_step}; "
                    "start a new evaluation with --force"
                )
        if not enabled:
            return
        import h5py

        out.mkdir(parents=True, exist_ok=True)
        self._file = open(out / "metrics.csv", "w", newline="")  # noqa: SIM115
        self._csv = csv.DictWriter(self._file, self.columns, extrasaction="ignore")
        self._csv.writeheader()
        for row in self.rows:
            self._csv.writerow({k: int(v) if k == "step" else v for k, v in row.items()})
        if resume_step is not None:
            self._h5 = h5py.File(out / "walkers.h5", "a")
            self._energy = self._h5["local_energy"]
            self._positions = self._h5.get("positions")
            for data in (self._energy, self._positions):
                if data is not None:
                    data.resize(resume_step, axis=0)
            return
        self._h5 = h5py.File(out / "walkers.h5", "w")
        self._h5.attrs.update(
            system=wf.config.system, checkpoint_step=wf.step, unit_energy="Hartree",
            unit_length="bohr", n_up=wf.molecule.n_up, n_down=wf.molecule.n_down,
        )  # fmt: skip
        self._energy = self._h5.create_dataset(
            "local_energy", (0, n_walkers), maxshape=(None, n_walkers), dtype="f4",
            chunks=(max(1, min(256, 2**20 // (4 * n_walkers))), n_walkers),
        )  # fmt: skip
        self._positions = None
        if save_positions:
            shape = (n_walkers, wf.molecule.n_electrons, 3)
            self._positions = self._h5.create_dataset(
                "positions", (0, *shape), maxshape=(None, *shape), dtype="f4",
                chunks=(1, *shape),
            )  # fmt: skip

    def start(self, info: dict[str, Any]) -> None:
        if self.enabled:
            atomic_write(self.out / "summary.json", json.dumps({"status": "running", **info}))

    def row(self, step, metrics, per_walker, positions, seconds) -> None:
        values = {"step": step, **metrics, "seconds": round(seconds, 3)}
        self.rows.append(values)
        if not self.enabled:
            return
        self._csv.writerow(values)
        n = self._energy.shape[0]
        self._energy.resize(n + 1, axis=0)
        self._energy[n] = np.asarray(per_walker, np.float32)
        if self._positions is not None:
            self._positions.resize(n + 1, axis=0)
            self._positions[n] = np.asarray(positions, np.float32)
        if n % 50 == 0:
            self._file.flush()
            self._h5.flush()

    def flush(self) -> None:
        """Make every row so far durable (before each checkpoint)."""
        if self.enabled:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._h5.flush()

    def close(self) -> None:
        if self.enabled and not self._file.closed:
            self._file.close()
            self._h5.close()


def estimates_of(rows: list[dict[str, float]], columns) -> dict[str, Estimate]:
    """A blocking estimate of every column over the steps (non-finite steps left out)."""
    out = {}
    for name in columns:
        series = np.asarray([float(r[name]) for r in rows if name in r], np.float64)
        series = series[np.isfinite(series)]
        if series.size >= 2:
            out[name] = blocking_estimate(series)
    return out


def summarize(rows, observed, info: dict[str, Any], run: Path) -> tuple[dict, dict]:
    """summary.json's content: the settings, every column's estimate and derived values."""
    columns = [c for o in observed for c in o.columns] + ["variance", "acceptance"]
    estimates = estimates_of(rows, columns)
    table = {
        name: {
            "mean": e.mean, "error": e.error, "autocorrelation_time": e.autocorrelation_time,
            "n_samples": e.n_samples, "block_size": e.block_size, "unit": _unit(name),
        }
        for name, e in estimates.items()
    }  # fmt: skip
    derived: dict[str, Any] = {}
    for o in observed:
        derived.update(o.derived(table))
    summary = {
        **info,
        "estimates": table,
        "derived": derived,
        "nonfinite_walkers": float(sum(float(r.get("nonfinite_walkers", 0)) for r in rows)),
        "training": _training(run),
    }
    if "energy" in estimates:
        summary["energy_text"] = str(estimates["energy"])
    return summary, estimates


def _training(run: Path) -> dict[str, Any]:
    """The training's own estimate and the exact reference, from ``RUN/summary.json``."""
    try:
        saved = json.loads((run / "summary.json").read_text())
    except (OSError, ValueError):
        return {}
    keys = ("energy", "energy_error", "energy_text", "eval_steps", "steps", "exact")
    return {k: saved.get(k) for k in keys if k in saved}


def finish(out: Path, wf, observed, rows, info, *, enabled=True) -> tuple[dict, dict]:
    summary, estimates = summarize(rows, observed, {"status": "finished", **info}, wf.run)
    if enabled:
        atomic_write(out / "summary.json", json.dumps(summary, indent=2))
        plot_evaluation(out / "eval.png", rows, summary, wf.config.system)
    return summary, estimates


def plot_evaluation(path: Path, rows, summary: dict, title: str) -> None:
    """Per-step mean local energy, its running mean, the estimate, training's and exact."""
    energies = np.asarray([float(r["energy"]) for r in rows])
    if energies.size == 0:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.arange(energies.size)
    finite = np.nan_to_num(energies, nan=float(np.nanmedian(energies)))
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.plot(steps, energies, lw=0.5, alpha=0.5, label="mean local energy per step")
    cumulative = np.cumsum(finite) / (steps + 1)
    ax.plot(steps, cumulative, lw=1.5, label="cumulative mean")
    window = max(1, energies.size // 20)
    ax.plot(steps, running_mean(finite, window), lw=1, label=f"trailing mean ({window} steps)")
    est = summary.get("estimates", {}).get("energy")
    if est:
        ax.axhspan(est["mean"] - est["error"], est["mean"] + est["error"], color="C1", alpha=0.3)
    training = summary.get("training", {})
    if training.get("energy") is not None:
        ax.axhline(training["energy"], color="C3", lw=1, ls=":",
                   label=f"training {training.get('energy_text', '')} Ha")  # fmt: skip
    if training.get("exact") is not None:
        ax.axhline(training["exact"], color="k", lw=1, ls="--",
                   label=f"exact {training['exact']:.6f} Ha")  # fmt: skip
    lo, hi = np.nanpercentile(energies, [1, 99])
    pad = 0.1 * (hi - lo) + 1e-4
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_xlabel("evaluation step")
    ax.set_ylabel("energy (Ha)")
    ax.set_title(f"{title}: evaluated E = {summary.get('energy_text', '?')} Ha")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _line(name: str, text: str) -> str:
    return f"{name:<24}{text}"


def format_summary(summary: dict) -> str:
    """The lines ``psijax evaluate`` and ``psijax report`` print."""
    lines = []
    status = summary.get("status", "?")
    lines.append(
        _line("evaluation", f"{summary.get('steps', '?')} steps x {summary.get('walkers', '?')} "
              f"walkers from checkpoint step {summary.get('checkpoint_step', '?')} ({status})")
    )  # fmt: skip
    for name, e in summary.get("estimates", {}).items():
        if name == "acceptance":
            continue
        text = str(Estimate(e["mean"], e["error"], e["n_samples"], e["block_size"], 0,
                            e["autocorrelation_time"]))  # fmt: skip
        unit = e.get("unit", "")
        lines.append(
            f"{name:<24}{text} {unit}".rstrip() + f"   (tau {e['autocorrelation_time']:.2g})"
        )
    for name, d in summary.get("derived", {}).items():
        if isinstance(d, dict):
            lines.append(
                f"{name:<24}{d['mean']:.4f} ± {d['error']:.4f} {d.get('unit', '')}".rstrip()
            )
    training = summary.get("training", {})
    est = summary.get("estimates", {}).get("energy")
    if training.get("energy") is not None and est:
        diff = 1000 * (est["mean"] - training["energy"])
        err = 1000 * math.hypot(est["error"], training.get("energy_error") or 0.0)
        lines.append(
            f"{_line('training', '')}{training.get('energy_text')} Ha   (evaluation - training "
            f"{diff:+.2f} ± {err:.2f} mHa)"
        )
    if training.get("exact") is not None and est:
        diff = 1000 * (est["mean"] - training["exact"])
        lines.append(
            f"{_line('exact', '')}{training['exact']:.6f} Ha   (difference {diff:+.2f} ± "
            f"{1000 * est['error']:.2f} mHa)"
        )
    if summary.get("target_error") is not None:
        lines.append(
            f"{_line('target error', '')}{summary['target_error']:g} Ha "
            f"({'reached' if summary.get('reached_target') else 'NOT reached'})"
        )
    if summary.get("walker_steps_per_second"):
        lines.append(
            f"{_line('throughput', '')}{summary['walker_steps_per_second']:.0f} walker-steps/s"
        )
    return "\n".join(lines)


class EvalProgress(Progress):
    """The progress line of an evaluation: the current estimate and its error bar."""

    def step(self, i: int, m: dict[str, float], energies=None) -> None:
        now = time.perf_counter()
        if not (i + 1 == self.total or now - self._last > (0.2 if self.tty else 5.0)):
            return
        per_step = (now - self._t0) / max(i + 1, 1)
        finite = [e for e in energies or [] if math.isfinite(e)]
        est = str(blocking_estimate(finite)) if len(finite) >= 2 else f"{m['energy']:.5f}"
        text = (
            f"eval {i + 1}/{self.total}  E {est}  var {m['variance']:.4f}  "
            f"acc {m['acceptance']:.2f}  {per_step:.3f} s/step"
        )
        if "s2" in m:
            text += f"  S2 {m['s2']:.3f}"
        self._maybe(i, lambda: text)


# ------------------------------------------------------------------------------ report
def read_rows(path: Path) -> list[dict[str, float]]:
    """The complete rows of a metrics.csv (a torn last line of a running run is dropped)."""
    rows = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if None in row.values() or None in row:
                continue
            try:
                rows.append({k: float(v) for k, v in row.items() if v != ""})
            except ValueError:
                continue
    return rows


def report(run: str | Path) -> str:
    """The summary of the run in ``run`` and of its evaluation, recomputed from their
    metrics files; redraws ``energy.png`` and ``eval/eval.png``. Returns the text."""
    from psijax import config as config_lib
    from psijax import system

    run = Path(run)
    if not run.is_dir():
        raise InputError(f"{str(run)!r} is not a directory; give a run directory (--out of train)")
    if not (run / "config.json").is_file():
        raise InputError(
            f"{str(run)!r} holds no psijax run (no config.json); give the --out of a training run"
        )
    config = config_lib.load(run / "config.json")
    molecule = system.resolve(config.system, charge=config.charge, spin=config.spin,
                              unit=config.unit)  # fmt: skip
    train_rows = read_rows(run / "metrics.csv") if (run / "metrics.csv").is_file() else []
    eval_dir = run / "eval"
    eval_rows = read_rows(eval_dir / "metrics.csv") if (eval_dir / "metrics.csv").is_file() else []
    if len(train_rows) < 2 and len(eval_rows) < 2:
        raise InputError(
            f"{str(run)!r} has fewer than two steps of metrics yet; wait for the run or "
            "check the directory"
        )
    lines = []
    if len(train_rows) >= 2:
        energies = np.asarray([r["energy"] for r in train_rows])
        finite = energies[np.isfinite(energies)]
        est = tail_estimate(finite, config.eval_fraction)
        exact = molecule.exact_energy
        lines.append(f"{_line('system', '')}{config.system}")
        lines.append(
            f"{_line('training', '')}{est} Ha   (blocking analysis of the last {est.n_samples} of "
            f"{energies.size} steps)"
        )
        if exact is not None:
            lines.append(
                f"{_line('exact', '')}{exact:.6f} Ha   (difference "
                f"{1000 * (est.mean - exact):+.2f} ± {1000 * est.error:.2f} mHa)"
            )
        plot_energy(run / "energy.png", energies, exact, est, config.system)
    if len(eval_rows) >= 2:
        try:
            info = json.loads((eval_dir / "summary.json").read_text())
        except (OSError, ValueError):
            info = {}
        names = observables_lib.parse(info.get("observables") or None)
        observed = observables_lib.build(names, molecule)
        keep = {k: v for k, v in info.items() if k not in ("estimates", "derived", "training")}
        keep["steps"] = len(eval_rows)
        summary, _ = summarize(eval_rows, observed, keep, run)
        lines.append(format_summary(summary))
        plot_evaluation(eval_dir / "eval.png", eval_rows, summary, config.system)
    return "\n".join(lines)
