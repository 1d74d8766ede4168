"""What a run shows: the energy plot and the live progress display."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

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


class Progress:
    """One live line on a terminal; a line every few seconds elsewhere (logs, CI)."""

    def __init__(self, total: int, enabled: bool = True, stream=None):
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = self.stream.isatty()
        self.total = total
        self._last = 0.0
        self._t0 = time.perf_counter()
        self._t_prev = self._t0
        self.rejected = 0
        self._start = 0

    def phase(self, name: str, total: int, start: int = 0) -> None:
        self._end_line()
        self.total, self._t0, self._start = total, time.perf_counter(), start
        self._t_prev = self._t0
        where = f", from step {start}" if start else ""
        self._print(f"{name} ({total} steps{where})", final=True)

    def pretrain(self, i: int, loss: float) -> None:
        self._maybe(i, f"pretrain {i + 1}/{self.total}  loss {loss:.4f}")

    def step(self, i: int, m: dict[str, float]) -> None:
        now = time.perf_counter()
        per_step = (now - self._t0) / max(i + 1 - self._start, 1)
        eta = per_step * (self.total - i - 1)
        text = (
            f"step {i + 1}/{self.total}  E {m['energy']:.5f}  var {m['variance']:.4f}  "
            f"acc {m['acceptance']:.2f}  {per_step:.3f} s/step  ETA {eta:5.0f} s"
        )
        if m.get("rejected"):
            self.rejected += 1
        if self.rejected:
            text += f"  rejected {self.rejected}"
        self._maybe(i, text)

    def close(self) -> None:
        self._end_line()

    def _maybe(self, i: int, text: str) -> None:
        now = time.perf_counter()
        last = i + 1 == self.total
        if last or now - self._last > (0.2 if self.tty else 5.0):
            self._last = now
            self._print(text, final=not self.tty)

    def _print(self, text: str, final: bool) -> None:
        if not self.enabled:
            return
        if self.tty and not final:
            self.stream.write("\r\033[K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def _end_line(self) -> None:
        if self.enabled and self.tty:
            self.stream.write("\n")
