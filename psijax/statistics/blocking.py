"""Error bars for a correlated series of energies (one mean local energy per step).

Successive VMC steps are correlated, so the naive standard error ``std / sqrt(n)``
is too small. Blocking (Flyvbjerg & Petersen, J. Chem. Phys. 91, 461 (1989))
averages neighbouring pairs until the block means are uncorrelated; the block
size is chosen automatically by Jonsson's test (Phys. Rev. E 98, 043304 (2018)).
The blocks the test accepts still carry a small lag-1 correlation ``rho`` that
biases the error low (about 15% for 4096 steps with tau ~ 10), so by default the
variance is multiplied by ``max(1 + 2 rho, 1)``, the lag-1 term of Jonsson's
exact decomposition of the variance of the mean (his ``e_k``).

Lengths that are not powers of two are handled by truncating at each blocking
level: when a level has an odd number of values its *first* value is dropped,
so the blocks at every level are the most recent ``n // block_size`` blocks.

The integrated autocorrelation time is ``tau = (error / naive_error) ** 2 / 2``,
with ``naive_error = std(x, ddof=1) / sqrt(n)``, so that ``error ** 2 = 2 tau
sigma ** 2 / n``; uncorrelated data have ``tau = 0.5`` (Sokal's convention).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy.special import gammaincinv

from psijax.errors import InputError

__all__ = [
    "BlockingLevel",
    "Estimate",
    "blocking_estimate",
    "reblock",
    "running_mean",
    "tail_estimate",
]

MIN_BLOCKING_LENGTH = 16


@dataclass(frozen=True)
class Estimate:
    """A mean with its standard error and how the error was obtained."""

    mean: float
    error: float
    n_samples: int
    block_size: int
    n_blocks: int
    autocorrelation_time: float

    def __str__(self) -> str:
        """Compact notation: two significant digits of error, e.g. ``-8.07012(15)``."""
        return _compact(self.mean, self.error)

    def format(self, unit: str = "Ha") -> str:
        """One line with the value, unit and blocking details."""
        value = f"{self} {unit}" if unit else str(self)
        return (
            f"{value} (n={self.n_samples}, block {self.block_size} x {self.n_blocks}, "
            f"tau={self.autocorrelation_time:.3g})"
        )


class BlockingLevel(NamedTuple):
    """One level of a blocking analysis; ``error`` is the standard error of ``mean``."""

    block_size: int
    mean: float
    error: float
    error_of_error: float


def _compact(mean: float, error: float) -> str:
    """Format ``mean(error)`` with the error's last two digits in parentheses."""
    if not math.isfinite(error) or error <= 0:
        return f"{mean:.10g}({error:g})"
    decimals = max(1 - math.floor(math.log10(error)), 0)
    digits = round(error * 10**decimals)
    if digits >= 100 and decimals > 0:  # e.g. 0.000996 rounds up to 0.0010
        decimals -= 1
        digits = round(error * 10**decimals)
    return f"{mean:.{decimals}f}({digits})"


def _as_series(x: npt.ArrayLike, min_length: int = 2) -> np.ndarray:
    """Validate a 1-D finite series of at least ``min_length`` values, as float64."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1:
        raise InputError(f"expected a 1-D series of energies, got shape {arr.shape}")
    if arr.size < min_length:
        raise InputError(f"need at least {min_length} values for statistics, got {arr.size}")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise InputError(
            f"series has {int(bad.sum())} non-finite values (first at index "
            f"{int(np.argmax(bad))}); drop or fix them before computing statistics"
        )
    return arr


def _levels(x: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """Yield ``(block_size, block_means)`` for every level with at least 2 blocks."""
    size = 1
    while x.size >= 2:
        yield size, x
        if x.size % 2:
            x = x[1:]  # drop the oldest value, keeping the most recent data
        x = 0.5 * (x[0::2] + x[1::2])
        size *= 2


def _naive_error(x: np.ndarray) -> float:
    return float(np.std(x, ddof=1) / math.sqrt(x.size))


def _estimate(x: np.ndarray, block_size: int, blocks: np.ndarray, factor: float = 1.0) -> Estimate:
    """Estimate from the block means at one level, scaled to the full series.

    The blocks cover ``blocks.size * block_size <= n`` values; with uncorrelated
    blocks the variance of a mean falls as 1/n, so the error of the mean of all
    ``n`` values is ``sqrt(factor * var(blocks, ddof=1) * block_size / n)``.
    """
    n = x.size
    error = math.sqrt(factor * float(np.var(blocks, ddof=1)) * block_size / n)
    naive = _naive_error(x)
    tau = 0.5 * (error / naive) ** 2 if naive > 0 else 0.5
    return Estimate(
        mean=float(np.mean(x)),
        error=error,
        n_samples=n,
        block_size=block_size,
        n_blocks=n // block_size,
        autocorrelation_time=tau,
    )


def reblock(x: npt.ArrayLike) -> list[BlockingLevel]:
    """Flyvbjerg–Petersen blocking: one entry per level of pair-averaging.

    At each level the standard error is ``sqrt(var(blocks, ddof=1) / n_blocks)``
    and its own uncertainty ``error / sqrt(2 (n_blocks - 1))``. Levels of odd
    length drop their oldest value; the mean is that of the blocks kept.
    """
    arr = _as_series(x)
    out = []
    for size, blocks in _levels(arr):
        m = blocks.size
        error = float(np.std(blocks, ddof=1) / math.sqrt(m))
        out.append(BlockingLevel(size, float(blocks.mean()), error, error / math.sqrt(2 * (m - 1))))
    return out


@lru_cache(maxsize=256)
def _chi2_quantiles(d: int, alpha: float) -> np.ndarray:
    """Quantiles ``q_j`` of chi-square with ``d - j`` degrees of freedom, j = 0..d-1: the
    chi-square distribution with k degrees of freedom is 2 x Gamma(k / 2), so its quantile
    is twice the regularised incomplete gamma function's inverse (``scipy.stats``, whose
    ``chi2.ppf`` gives the same, takes 0.5 s more to import, on the launch's path)."""
    k = np.arange(d, 0, -1)
    return np.asarray(2.0 * gammaincinv(k / 2.0, 1.0 - alpha), dtype=np.float64)


def blocking_estimate(
    x: npt.ArrayLike, *, alpha: float = 0.01, lag1_correction: bool = True
) -> Estimate:
    """Mean and error of a correlated series, block size chosen by Jonsson's test.

    At level ``k`` (``n_k`` block means, variance ``s_k^2``, lag-1 autocovariance
    ``g_k``) form ``M_j = sum_{k >= j} n_k (g_k / s_k^2)^2``, which is chi-square
    with ``d - j`` degrees of freedom (``d`` levels) once the blocks at level ``j``
    are uncorrelated. The chosen level is the first ``j`` with ``M_j`` below the
    ``1 - alpha`` quantile; if none passes, the coarsest level is used and the
    error is rough (the run is too short for its correlation time). With
    ``lag1_correction`` the variance at the chosen level is multiplied by
    ``max(1 + 2 rho_j, 1)``, ``rho_j = g_j / s_j^2`` (see the module docstring);
    ``lag1_correction=False`` gives Jonsson's estimator as published (but with
    the unbiased ``ddof=1`` block variance).

    Series shorter than 16 values fall back to the naive error ``std / sqrt(n)``
    with ``block_size == 1``, which underestimates the error of correlated data.
    Raises ``ValueError`` (``InputError``) for non-finite values or fewer than 2.
    """
    if not 0.0 < alpha < 1.0:
        raise InputError(f"alpha must be in (0, 1), got {alpha}")
    arr = _as_series(x)
    if arr.size < MIN_BLOCKING_LENGTH:
        return _estimate(arr, 1, arr)
    levels = list(_levels(arr))
    rho = np.zeros(len(levels))  # lag-1 autocorrelation of the block means
    for k, (_, blocks) in enumerate(levels):
        c = blocks - blocks.mean()
        s2 = float(np.mean(c * c))
        if s2 > 0:
            rho[k] = float(np.dot(c[:-1], c[1:])) / c.size / s2
    sizes = np.array([blocks.size for _, blocks in levels])
    m_stat = np.cumsum((sizes * rho**2)[::-1])[::-1]
    passing = np.flatnonzero(m_stat < _chi2_quantiles(len(levels), float(alpha)))
    k = int(passing[0]) if passing.size else len(levels) - 1
    factor = max(1.0 + 2.0 * rho[k], 1.0) if lag1_correction else 1.0
    return _estimate(arr, *levels[k], factor=factor)


def tail_estimate(energies: npt.ArrayLike, fraction: float = 0.5) -> Estimate:
    """Blocking estimate of the last ``fraction`` of a run (at least 2 values).

    Discards the start of the run (equilibration, early optimisation).
    """
    if not 0.0 < fraction <= 1.0:
        raise InputError(f"fraction must be in (0, 1], got {fraction}")
    arr = _as_series(energies)
    n_tail = max(2, math.ceil(fraction * arr.size))
    return blocking_estimate(arr[-n_tail:])


def dominant_steps(values: npt.ArrayLike, share: float = 0.5, most: float = 0.01) -> np.ndarray:
    """Indices (ascending) of the ``values`` that each carry at least a tenth of the squared
    deviations from the median, when together they carry more than ``share`` of them and are
    at most ``most`` of the values (or 3: a walker stays out for a step or two); none
    otherwise. In a run's per-step energies: steps where one walker far out in the local
    energy's heavy tail moved the batch mean, and the error bar with it. Gaussian noise
    hardly qualifies (its largest of n squared deviations is ~2 ln n / n of the sum)."""
    x = _as_series(values)
    dev = (x - np.median(x)) ** 2
    total = dev.sum()
    big = dev >= 0.1 * total
    if not total > 0 or dev[big].sum() <= share * total or big.sum() > max(3, int(most * x.size)):
        return np.zeros(0, dtype=int)
    return np.flatnonzero(big)


# tail_note speaks of estimates over this many steps or more: over 40-50 steps Gaussian
# noise alone has dominant steps in 0.1-1% of series (none in 5,000 at 100, correlated or not).
TAIL_NOTE_STEPS = 100


def tail_note(energies: npt.ArrayLike, est: Estimate) -> str | None:
    """One line for the final report when a few of the steps ``est`` was taken over carry
    most of their spread (``dominant_steps``), naming them; None otherwise. ``energies``:
    the run's per-step energies, step 0 first."""
    values = np.asarray(energies, dtype=np.float64)
    steps = np.flatnonzero(np.isfinite(values))[-est.n_samples :]
    if steps.size < TAIL_NOTE_STEPS:
        return None
    tail = values[steps]
    hit = dominant_steps(tail)
    if hit.size == 0:
        return None
    dev = (tail - np.median(tail)) ** 2
    named = ", ".join(str(s) for s in steps[hit])
    return (
        f"step{'s' * (hit.size > 1)} {named} carr{'y' if hit.size > 1 else 'ies'} "
        f"{dev[hit].sum() / dev.sum():.0%} of the last {steps.size} steps' spread (a walker "
        "far out in the local energy's tail): the error bar includes it; more steps narrow it"
    )


def running_mean(x: npt.ArrayLike, window: int) -> np.ndarray:
    """Trailing mean over ``window`` values, same length as ``x`` (shorter windows at the start)."""
    if int(window) != window or window < 1:
        raise InputError(f"window must be a positive integer, got {window}")
    window = int(window)
    arr = _as_series(x, min_length=0)
    if arr.size == 0:
        return arr
    shift = arr[0]  # subtract an offset so the cumulative sum keeps its precision
    c = np.concatenate([[0.0], np.cumsum(arr - shift)])
    idx = np.arange(1, arr.size + 1)
    lo = np.maximum(idx - window, 0)
    return shift + (c[idx] - c[lo]) / (idx - lo)
