"""The plots of a run directory: training's ``energy.png`` and evaluation's ``eval.png``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from psijax.statistics.blocking import running_mean


def new_figure(figsize: tuple[float, float], rows: int = 1, **subplots):
    """A figure and its axes (``rows`` of them, stacked) outside pyplot: no backend is chosen
    and no figure is registered, so a user's own plots (a notebook's, a GUI's) are left as
    they are; ``fig.savefig`` renders with Agg."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.subplots(rows, 1, **subplots)


def plot_energy(path: Path, energies: np.ndarray, exact: float | None, est, title: str) -> None:
    """Energy against step, a trailing mean, and the exact reference where known."""
    steps = np.arange(len(energies))
    fig, ax = new_figure((7, 4.2))
    ax.plot(steps, energies, lw=0.6, alpha=0.5, label="mean local energy")
    window = max(1, len(energies) // 20)
    ax.plot(steps, running_mean(np.nan_to_num(energies, nan=np.nanmedian(energies)), window),
            lw=1.5, label=f"trailing mean ({window} steps)")  # fmt: skip
    if exact is not None:
        ax.axhline(exact, color="k", ls="--", lw=1, label=f"exact {exact:.6f} Ha")
        ax.axhspan(exact - 1.6e-3, exact + 1.6e-3, color="g", alpha=0.15, label="±1.6 mHa")
    lo, hi = _range(energies)
    if exact is not None:
        lo, hi = min(lo, exact - 0.005), max(hi, exact + 0.005)
    _save(fig, ax, path, f"{title}: E = {est} Ha", lo, hi)


def _range(values: np.ndarray) -> tuple[float, float]:
    """The 1st to 99th percentile of the values past the first tenth of the steps."""
    tail = values[len(values) // 10 :]
    return tuple(np.nanpercentile(tail, [1, 99])) if tail.size else (0.0, 1.0)


def _save(fig, ax, path: Path, title: str, lo: float, hi: float) -> None:
    """Energy axes from ``lo`` to ``hi`` (padded), labels, legend; write."""
    pad = 0.1 * (hi - lo) + 1e-4
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_xlabel("step")
    ax.set_ylabel("energy (Ha)")
    ax.set_title(title)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_states(path: Path, per_step: np.ndarray, estimates, title: str) -> None:
    """Several states: each state's energy per step ``[steps, K]`` (eigenvalues of the step's
    energy matrix), its trailing mean and its final estimate."""
    steps = np.arange(len(per_step))
    window = max(1, len(per_step) // 20)
    fig, ax = new_figure((7, 4.2))
    for i in range(per_step.shape[1]):
        e = per_step[:, i]
        ax.plot(steps, e, lw=0.4, alpha=0.3, color=f"C{i}")
        smooth = running_mean(np.nan_to_num(e, nan=np.nanmedian(e)), window)
        ax.plot(steps, smooth, lw=1.5, color=f"C{i}", label=f"state {i}: {estimates[i]} Ha")
    _save(fig, ax, path, f"{title}: {per_step.shape[1]} states", *_range(per_step))


def plot_evaluation(path: Path, rows, summary: dict, title: str) -> None:
    """Per-step mean local energy, its running mean, the estimate, training's and exact."""
    energies = np.asarray([float(r["energy"]) for r in rows])
    if energies.size == 0:
        return
    steps = np.arange(energies.size)
    finite = np.nan_to_num(energies, nan=float(np.nanmedian(energies)))
    fig, ax = new_figure((7, 4.2))
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
