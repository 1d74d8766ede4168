"""An evaluation's ``summary.json`` and the ``psijax report`` command.

``summary.json`` holds the settings and, for every column, the mean, blocking error,
autocorrelation time (in steps) and number of steps; it is written when the evaluation
starts (``"status": "running"``) and again when it ends. ``psijax report RUN`` recomputes
the numbers from the metrics files, so it works on a running run too.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from psijax.errors import InputError
from psijax.estimators import observables as observables_lib
from psijax.rundir.eval_files import COUNTS, read_rows, unit_of
from psijax.rundir.plots import plot_evaluation
from psijax.rundir.train_files import atomic_write
from psijax.statistics import Estimate, blocking_estimate, tail_estimate, tail_note


def estimates_of(rows: list[dict[str, float]], columns) -> dict[str, Estimate]:
    """A blocking estimate of every column over the steps (non-finite steps left out)."""
    out = {}
    for name in columns:
        series = np.asarray([float(r[name]) for r in rows if name in r], np.float64)
        series = series[np.isfinite(series)]
        if series.size >= 2:
            out[name] = blocking_estimate(series)
    return out


def summarize(
    rows, columns, observed, info: dict[str, Any], run: Path, units: dict[str, str] | None = None
) -> tuple[dict, dict]:
    """summary.json's content: the settings, the estimate of every metrics column (but the
    step, the time and the counts, which are summed) and the observables' derived values.
    ``units`` name the unit of a column where ``eval_files.unit_of`` does not know it."""
    units = units or {}
    skip = ("step", "seconds", *COUNTS)
    # matrix elements of several states stay in metrics.csv; their states are ``derived``
    kept = [c for c in columns if c not in skip and "_matrix_" not in c]
    estimates = estimates_of(rows, kept)
    table = {
        name: {
            "mean": e.mean, "error": e.error, "autocorrelation_time": e.autocorrelation_time,
            "n_samples": e.n_samples, "block_size": e.block_size,
            "unit": units.get(name, unit_of(name)),
        }
        for name, e in estimates.items()
    }  # fmt: skip
    derived: dict[str, Any] = {}
    for o in observed:
        derived.update(
            o.derived(table, rows) if getattr(o, "needs_rows", False) else o.derived(table)
        )
    summary = {
        **info,
        "estimates": table,
        "derived": derived,
        **{name: float(sum(float(r.get(name, 0)) for r in rows)) for name in COUNTS},
        "training": _training(run),
    }
    if "energy" in estimates:
        summary["energy_text"] = str(estimates["energy"])
        if summary["training"].get("energy_per") == "cell":  # a periodic system's, per cell
            n = summary["training"]["electrons"]
            summary |= {"energy_per": "cell", "electrons": n,
                        "energy_per_electron": estimates["energy"].mean / n,
                        "energy_per_electron_error": estimates["energy"].error / n}  # fmt: skip
        energies = [float(r.get("energy", np.nan)) for r in rows]
        if note := tail_note(energies, estimates["energy"]):
            summary["energy_tail"] = note
    return summary, estimates


def _training(run: Path) -> dict[str, Any]:
    """The training's own estimate and the exact reference, from ``RUN/summary.json``."""
    try:
        saved = json.loads((run / "summary.json").read_text())
    except (OSError, ValueError):
        return {}
    keys = ("energy", "energy_error", "energy_text", "eval_steps", "steps", "exact",
            "electrons", "energy_per", "rs", "cell_volume")  # fmt: skip
    return {k: saved.get(k) for k in keys if k in saved}


def finish(
    out: Path, run: Path, title: str, columns, observed, rows, info, *, units=None, enabled=True
) -> tuple[dict, dict]:
    """The final ``summary.json`` and ``eval.png`` of the evaluation in ``out``."""
    info = {"status": "finished", **info}
    summary, estimates = summarize(rows, columns, observed, info, run, units)
    if enabled:
        atomic_write(out / "summary.json", json.dumps(summary, indent=2))
        plot_evaluation(out / "eval.png", rows, summary, title)
    return summary, estimates


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
    if summary.get("energy_tail"):
        lines.append(_line("tail", summary["energy_tail"]))
    for name, d in summary.get("derived", {}).items():
        if isinstance(d, dict):
            value = f"{d['mean']:.4f} ± {d['error']:.4f}"
            if name.startswith(("state_", "excitation_")):  # energies: to their error bar
                value = str(Estimate(d["mean"], d["error"], 0, 0, 0, 0.0))
            lines.append(f"{name:<24}{value} {d.get('unit', '')}".rstrip())
    if summary.get("energy_per") == "cell":
        per = Estimate(summary["energy_per_electron"], summary["energy_per_electron_error"],
                       0, 0, 0, 0.0)  # fmt: skip
        lines.append(f"{_line('per electron', '')}{per} Ha   (the energy is per cell of "
                     f"{summary['electrons']} electrons)")  # fmt: skip
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


# ------------------------------------------------------------------------------ report
def report(run: str | Path) -> str:
    """The summary of the run in ``run`` and of its evaluation, recomputed from their
    metrics files; redraws ``energy.png`` and ``eval/eval.png``. Returns the text."""
    from psijax import config as config_lib
    from psijax import registry, system

    run = Path(run)
    if not run.is_dir():
        raise InputError(f"{str(run)!r} is not a directory; give a run directory (--out of train)")
    if not (run / "config.json").is_file():
        raise InputError(
            f"{str(run)!r} holds no psijax run (no config.json); give the --out of a training run"
        )
    config = config_lib.load_saved(run / "config.json")
    molecule = system.for_config(config)
    eigenstates = registry.eigenstates(config)  # what the run solved for
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
        exact = eigenstates.exact(molecule)
        lines.append(f"{_line('system', '')}{config.system}")
        lines.append(
            f"{_line(eigenstates.label, '')}{est} Ha   (blocking analysis of the last "
            f"{est.n_samples} of {energies.size} steps)"
        )
        if exact is not None:
            lines.append(
                f"{_line('exact', '')}{exact:.6f} Ha   (difference "
                f"{1000 * (est.mean - exact):+.2f} ± {1000 * est.error:.2f} mHa)"
            )
        extra = eigenstates.report_lines(run, train_rows, config, energies, est, exact)
        lines += [f"{_line(name, '')}{text}" for name, text in extra]
    if len(eval_rows) >= 2:
        try:
            info = json.loads((eval_dir / "summary.json").read_text())
        except (OSError, ValueError):
            info = {}
        names = observables_lib.parse(info.get("observables") or None)
        observed = eigenstates.reported(names, molecule)
        keep = {k: v for k, v in info.items() if k not in ("estimates", "derived", "training")}
        keep["steps"] = len(eval_rows)
        units = {k: e.get("unit", "") for k, e in info.get("estimates", {}).items()}
        summary, _ = summarize(eval_rows, list(eval_rows[0]), observed, keep, run, units)
        lines.append(format_summary(summary))
        plot_evaluation(eval_dir / "eval.png", eval_rows, summary, config.system)
    return "\n".join(lines)
