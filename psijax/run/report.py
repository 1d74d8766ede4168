"""What a run shows: the energy plot (the live display is ``psijax.run.progress``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from psijax.run.progress import Progress  # noqa: F401  (its old home)
from psijax.stats import running_mean


def plot_energy(path: Path, energies: np.ndarray, exact: float | None, est, title: str) -> None:
    """Energy against step, a trailing mean, and the exact reference where known."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.arange(len(energies))
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.plot(steps, energies, lw=0.6, alpha=0.5, label="mean local energy")
    window = max(1, len(energies) // 20)
    ax.plot(steps, running_mean(np.nan_to_num(energies, nan=np.nanmedian(energies)), window),
            lw=1.5, label=f"trailing mean ({window} steps)")  # fmt: skip
    if exact is not None:
        ax.axhline(exact, color="k", ls="--", lw=1, label=f"exact {exact:.6f} Ha")
        ax.axhspan(exact - 1.6e-3, exact + 1.6e-3, color="g", alpha=0.15, label="±1.6 mHa")
    tail = energies[len(energies) // 10 :]
    lo, hi = np.nanpercentile(tail, [1, 99]) if tail.size else (0, 1)
    if exact is not None:
        lo, hi = min(lo, exact - 0.005), max(hi, exact + 0.005)
    pad = 0.1 * (hi - lo) + 1e-4
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_xlabel("step")
    ax.set_ylabel("energy (Ha)")
    ax.set_title(f"{title}: E = {est} Ha")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
