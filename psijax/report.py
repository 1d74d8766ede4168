"""What a run leaves behind and shows: metrics.csv, summary.json, energy.png, progress."""

from __future__ import annotations

import csv
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from psijax import config as config_lib
from psijax.errors import InputError
from psijax.stats import running_mean
from psijax.system import Molecule

if TYPE_CHECKING:
    from psijax.vmc import Result

COLUMNS = (
    "step", "energy", "variance", "acceptance", "width",
    "nonfinite_walkers", "rejected", "grad_norm", "seconds",
)  # fmt: skip
RUN_FILES = ("metrics.csv", "summary.json", "energy.png", "config.json")


class RunWriter:
    """Owns the run directory; refuses to overwrite another run's files unless forced."""

    def __init__(self, out: Path, molecule: Molecule, config: config_lib.Config, force: bool):
        self.out = out
        existing = [name for name in RUN_FILES if (out / name).exists()]
        if existing and not force:
            raise InputError(
                f"output directory {str(out)!r} already holds a run ({existing[0]}); "
                "choose another --out or pass --force to overwrite it"
            )
        out.mkdir(parents=True, exist_ok=True)
        _atomic_write(out / "config.json", json.dumps(config_lib.to_dict(config), indent=2))
        self._file = open(out / "metrics.csv", "w", newline="")  # noqa: SIM115
        self._csv = csv.writer(self._file)
        self._csv.writerow(COLUMNS)
        self.molecule = molecule

    def row(self, step: int, metrics: dict[str, float], seconds: float) -> None:
        values = {"step": step, "seconds": round(seconds, 3), **metrics}
        self._csv.writerow([values.get(c, "") for c in COLUMNS])
        if step % 50 == 0:
            self._file.flush()

    def finish(self, result: Result, config: config_lib.Config) -> None:
        self._file.close()
        est = result.energy
        summary: dict[str, Any] = {
            "system": config.system,
            "formula": " ".join(self.molecule.symbols),
            "charge": self.molecule.charge,
            "spin": self.molecule.spin,
            "energy": est.mean,
            "energy_error": est.error,
            "energy_text": str(est),
            "block_size": est.block_size,
            "autocorrelation_time": est.autocorrelation_time,
            "eval_steps": est.n_samples,
            "steps": config.steps,
            "walkers": config.walkers,
            "optimizer": config.optimizer,
            "laplacian": config.laplacian,
            "seconds": round(result.seconds, 2),
            "exact": result.exact,
            "error_vs_exact": result.error_vs_exact,
            "fingerprint": self.molecule.fingerprint(),
        }
        _atomic_write(self.out / "summary.json", json.dumps(summary, indent=2))
        plot_energy(self.out / "energy.png", result.energies, result.exact, est, config.system)


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


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


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

    def phase(self, name: str, total: int) -> None:
        self._end_line()
        self.total, self._t0 = total, time.perf_counter()
        self._t_prev = self._t0
        self._print(f"{name} ({total} steps)", final=True)

    def pretrain(self, i: int, loss: float) -> None:
        self._maybe(i, f"pretrain {i + 1}/{self.total}  loss {loss:.4f}")

    def step(self, i: int, m: dict[str, float]) -> None:
        now = time.perf_counter()
        per_step = (now - self._t0) / (i + 1)
        eta = per_step * (self.total - i - 1)
        text = (
            f"step {i + 1}/{self.total}  E {m['energy']:.5f}  var {m['variance']:.4f}  "
            f"acc {m['acceptance']:.2f}  {per_step:.3f} s/step  ETA {eta:5.0f} s"
        )
        if m.get("rejected"):
            text += "  [update rejected: non-finite]"
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
