"""When to stop training: the energy's error bar is small enough and it no longer drifts.

``StopRule(target_error, fraction).check(energies)`` looks at the window the run would
report if it stopped now (the trailing ``fraction`` of the per-step energies, the same
window as ``stats.tail_estimate``) and says stop when

1. the window holds at least ``min_window`` steps,
2. the blocking error of the window's mean is below ``target_error``, and
3. the window shows no drift: its mean and the mean of the same number of steps just
   before it (each with its own blocking error) differ by less than ``z`` (2) standard
   errors of their difference and by less than ``max_drift`` (1) target errors. The steps
   before never reach into the first ``fraction`` of the run (the early transient); where
   that leaves fewer than half a window (``fraction`` above 0.4) the window's two halves
   are compared instead.

Comparing with the steps before the window, rather than the window's own halves, sees a
slow decay about three times better (a longer baseline and a smaller error of the
difference). No test on a finite window can see a decay that is slower than the window
and smaller than its noise; the rule then stops with a biased energy. A *false stop* is
a stop whose window mean (noise-free) lies more than ``2 * target_error`` above the
series' limit: the reported energy is off by more than twice what was asked for.
``benchmarks/stop_rule.py`` measures that rate on synthetic correlated series (AR(1)
noise on exponential and power-law decays, as VMC energies fall); docs/evaluation.md
has the table and tests/test_stopping.py holds the rule to it.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import numpy.typing as npt

from psijax.errors import InputError
from psijax.statistics.blocking import Estimate, blocking_estimate, tail_estimate

CHECK_EVERY = 10  # steps between checks during training


@dataclasses.dataclass(frozen=True)
class Verdict:
    stop: bool
    estimate: Estimate | None  # of the window (None below min_window steps)
    drift: float  # window mean minus the mean before it (nan when not tested)
    drift_error: float  # its standard error
    reason: str  # why it stops or goes on, in words


@dataclasses.dataclass(frozen=True)
class StopRule:
    """See the module docstring."""

    target_error: float  # Hartree
    fraction: float = 0.3  # the window: trailing fraction of the steps so far
    min_window: int = 200
    z: float = 2.0
    max_drift: float = 1.0  # and |drift| below this many target errors

    def __post_init__(self) -> None:
        if not (math.isfinite(self.target_error) and self.target_error > 0):
            raise InputError(
                f"target_error={self.target_error} must be a positive number of Hartree, e.g. 1e-4"
            )

    def check(self, energies: npt.ArrayLike) -> Verdict:
        values = np.asarray(energies, dtype=np.float64)
        values = values[np.isfinite(values)]
        n_window = math.ceil(self.fraction * values.size) if values.size else 0
        if n_window < self.min_window:
            return Verdict(
                False, None, math.nan, math.nan,
                f"window of {n_window} steps, below the {self.min_window} the rule needs",
            )  # fmt: skip
        estimate = tail_estimate(values, self.fraction)
        if estimate.error >= self.target_error:
            reason = f"error {estimate.error:.2g} Ha above the target {self.target_error:.2g}"
            return Verdict(False, estimate, math.nan, math.nan, reason)
        window = values[-n_window:]
        # as many steps just before the window, but none of the run's first n_window steps
        before = values[max(values.size - 2 * n_window, n_window) : values.size - n_window]
        if before.size * 2 >= n_window:
            first, second = blocking_estimate(before), estimate
            against = f"the {before.size} steps before"
        else:  # nothing (or too little) before the window: compare its halves
            half = n_window // 2
            first, second = blocking_estimate(window[:half]), blocking_estimate(window[half:])
            against = "its first half"
        drift = second.mean - first.mean
        drift_error = math.hypot(first.error, second.error)
        if abs(drift) >= min(self.z * drift_error, self.max_drift * self.target_error):
            reason = (
                f"the last {n_window} steps drift by {1000 * drift:+.3f}({1000 * drift_error:.3f})"
                f" mHa against {against}"
            )
            return Verdict(False, estimate, drift, drift_error, reason)
        reason = (
            f"error {estimate.error:.2g} Ha below the target {self.target_error:.2g} and the "
            f"last {n_window} steps do not drift against {against} "
            f"({1000 * drift:+.3f}({1000 * drift_error:.3f}) mHa)"
        )
        return Verdict(True, estimate, drift, drift_error, reason)


def first_stop(
    rule: StopRule, energies: npt.ArrayLike, every: int = CHECK_EVERY
) -> tuple[int, Verdict] | None:
    """The first check (after ``every``, 2 ``every``, ... steps) at which ``rule`` stops a
    run with these per-step energies, and its verdict; None if it never does."""
    values = np.asarray(energies, dtype=np.float64)
    for n in range(every, values.size + 1, every):
        verdict = rule.check(values[:n])
        if verdict.stop:
            return n, verdict
    return None
