"""What a run says while it runs: phase lines and the progress line.

Everything goes to one stream (stderr by default) and is flushed at once, so that a pipe
or a log file shows the same phases as a terminal. On a terminal the progress line is one
live line, rewritten in place and cut to the terminal's width; elsewhere (a pipe, a log,
CI) it is a full line every few seconds. Phase lines (Hartree-Fock, pretraining, burn-in,
compiling, restored step N) are always whole lines of their own.

The progress line carries the running estimate of the energy, computed exactly as the
final one (blocking analysis of the trailing ``eval_fraction`` of the steps so far), with
its error bar and the difference from the exact energy where one is known. Below
``stats.MIN_BLOCKING_LENGTH`` values the error bar is the naive ``std / sqrt(n)``, which
is too small for correlated steps; the line then says ``naive``.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np

from psijax.estimators import training
from psijax.statistics.blocking import (
    MIN_BLOCKING_LENGTH,
    Estimate,
    blocking_estimate,
    tail_estimate,
)


def describe_estimate(est: Estimate) -> str:
    """How the error bar was obtained, in words (for the final report)."""
    if est.n_samples < MIN_BLOCKING_LENGTH:
        return (
            f"naive error of the last {est.n_samples} steps: too few for blocking, which "
            f"needs {MIN_BLOCKING_LENGTH}; the error bar is too small"
        )
    return f"blocking analysis of the last {est.n_samples} steps"


def running_estimate(energies: Sequence[float], fraction: float) -> Estimate | None:
    """The estimate the run would report if it stopped now (None below two finite values)."""
    values = np.asarray(energies, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size < 2:
        return None
    return tail_estimate(values, fraction)


class Progress:
    """Phase lines and one progress line; see the module docstring.

    ``energies`` is the run's list of per-step energies (kept rows of a resumed run
    included); the display reads it and appends nothing when it is given.
    """

    def __init__(
        self,
        total: int,
        enabled: bool = True,
        stream=None,
        *,
        exact: float | None = None,
        eval_fraction: float = 0.3,
        energies: list[float] | None = None,
        columns: Callable[[], int] | None = None,
        label: str = "E",
        leading: tuple = (),
    ):
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.total = total
        self.exact = exact
        self.eval_fraction = eval_fraction
        self._own = energies is None
        self.energies = [] if energies is None else energies
        self._columns = columns or self._terminal_columns
        self._last = 0.0
        self._t0 = time.perf_counter()
        self._start = 0
        self._live = False  # a live (unterminated) line is on the terminal
        self.rejected = 0
        # ``leading`` columns first (several states: each one's energy in the step)
        self.shown = [*leading, *(c for c in training.columns() if c.show is not None)]
        self.label = label  # what the running estimate is of: "E", "sum E"

    def _terminal_columns(self) -> int:
        """The width of the terminal this display writes to (stdout may be a file)."""
        try:
            return os.get_terminal_size(self.stream.fileno()).columns
        except (AttributeError, OSError, ValueError):
            return shutil.get_terminal_size((100, 24)).columns

    def follow(self, energies: list[float]) -> None:
        """Read the per-step energies from ``energies`` (which the caller appends to)."""
        self.energies, self._own = energies, False

    # ------------------------------------------------------------------ phase lines
    def note(self, text: str) -> None:
        """One phase line of its own (ends a live progress line first)."""
        self._end_line()
        self._write(text + "\n")

    def phase(self, name: str, total: int, start: int = 0) -> None:
        """Start a counted phase (pretraining, training) of ``total`` steps."""
        self.total, self._t0, self._start = total, time.perf_counter(), start
        self._last = 0.0
        where = f", from step {start}" if start else ""
        self.note(f"{name} ({total} steps{where})")

    # ---------------------------------------------------------------- progress lines
    def pretrain(self, i: int, loss: float) -> None:
        beyond = f"{i + 1} (orbitals still off by > 0.7%)"
        count = f"{i + 1}/{self.total}" if i < self.total else beyond
        self._maybe(i, lambda: f"pretrain {count}  loss {loss:.3g}")

    def step(self, i: int, m: dict[str, float]) -> None:
        if self._own:
            self.energies.append(m["energy"])
        if m.get("rejected"):
            self.rejected += 1
        self._maybe(i, lambda: self.step_text(i, m))

    def step_text(self, i: int, m: dict[str, float]) -> str:
        """The progress line of step ``i``: most important first (a terminal cuts the end)."""
        per_step = (time.perf_counter() - self._t0) / max(i + 1 - self._start, 1)
        eta = per_step * (self.total - i - 1)
        parts = [f"step {i + 1}/{self.total}"]
        est = running_estimate(self.energies, self.eval_fraction)
        if est is not None:
            parts.append(f"{self.label}={est}")
            if est.n_samples < MIN_BLOCKING_LENGTH:
                parts.append(f"(naive, {est.n_samples} steps)")
            if self.exact is not None and math.isfinite(est.mean):
                parts.append(f"vs exact {1000 * (est.mean - self.exact):+.2f} mHa")
        parts += [c.show.format(m.get(c.name, math.nan)) for c in self.shown]
        parts += [f"{per_step:.3f} s/step", f"ETA {_duration(eta)}"]
        if self.rejected:
            parts.append(f"rejected {self.rejected}")
        return "  ".join(parts)

    def close(self) -> None:
        self._end_line()

    # ---------------------------------------------------------------------- writing
    def _maybe(self, i: int, text: Callable[[], str]) -> None:
        now = time.perf_counter()
        last = i + 1 == self.total
        if last or now - self._last > (0.2 if self.tty else 5.0):
            self._last = now
            line = text()
            if self.tty:
                width = max(self._columns() - 1, 20)
                self._write("\r\033[K" + line[:width])
                self._live = True
            else:
                self._write(line + "\n")

    def _write(self, text: str) -> None:
        if not self.enabled:
            return
        self.stream.write(text)
        self.stream.flush()

    def _end_line(self) -> None:
        if self._live:
            self._write("\n")
            self._live = False


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = max(seconds, 0.0)
    if seconds < 100:
        return f"{seconds:.0f} s"
    if seconds < 6000:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


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
