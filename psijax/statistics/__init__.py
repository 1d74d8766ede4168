"""Statistics of correlated series: blocking error bars and when a run may stop."""

from psijax.statistics.blocking import (
    MIN_BLOCKING_LENGTH,
    Estimate,
    blocking_estimate,
    dominant_steps,
    reblock,
    running_mean,
    tail_estimate,
    tail_note,
)
from psijax.statistics.stopping import StopRule, Verdict, first_stop

__all__ = [
    "MIN_BLOCKING_LENGTH", "Estimate", "StopRule", "Verdict", "blocking_estimate",
    "dominant_steps", "first_stop", "reblock", "running_mean", "tail_estimate", "tail_note",
]  # fmt: skip
