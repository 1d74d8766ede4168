"""Comparing float32 results that were computed in different orders.

Two device counts, two processes, a chunked or grouped layout, or another machine's
compiler sum the same float32 numbers in another order. The results differ by rounding,
and rounding is relative to the size of the numbers summed, not to the result: a step's
mean energy can be near 0 Ha while each of its local energies is several hartree away
from it, and a per-element relative tolerance then fails on one machine and passes on
another. Each comparison here is relative to the quantity's scale instead.
"""

from __future__ import annotations

import numpy as np


def assert_close(actual, expected, *, rtol: float, scale=None, err_msg: str = "") -> None:
    """|actual - expected| <= rtol * (|expected| + scale), element by element.

    ``scale`` is the size of what each value was computed from (a number, or an array
    that broadcasts against ``expected``); by default the largest |expected|, the array's
    own scale.
    """
    actual = np.asarray(actual, np.float64)
    expected = np.asarray(expected, np.float64)
    assert actual.shape == expected.shape, f"{err_msg} shapes {actual.shape} != {expected.shape}"
    if scale is None:
        scale = np.abs(expected).max(initial=0.0)
    bound = rtol * (np.abs(expected) + np.asarray(scale, np.float64))
    error = np.abs(actual - expected)
    bad = ~(error <= bound)  # nan fails
    if bad.any():
        worst = np.unravel_index(np.argmax(np.where(bad, error / np.maximum(bound, 1e-300), 0)),
                                 error.shape)  # fmt: skip
        raise AssertionError(
            f"{err_msg} {bad.sum()} of {bad.size} elements differ by more than "
            f"{rtol:g} of their scale; worst at {worst}: {actual[worst]!r} against "
            f"{expected[worst]!r} (difference {error[worst]:.3g}, allowed {bound[worst]:.3g})"
        )


def assert_energies_close(actual, expected, variance, *, rtol: float, err_msg: str = "") -> None:
    """Per-step mean energies, each the mean of local energies with ``variance``: equal to
    ``rtol`` of the local energies' spread (sqrt(variance)) plus the mean's magnitude.

    A wrong key or a lost step changes a step's mean by its statistical error,
    sqrt(variance / walkers), thousands of times this tolerance at ``rtol`` <= 1e-4.
    """
    spread = np.sqrt(np.asarray(variance, np.float64))
    assert_close(actual, expected, rtol=rtol, scale=spread, err_msg=err_msg)


def column(rows, name: str) -> np.ndarray:
    """One column of metrics rows (dicts of strings or numbers) as floats."""
    return np.asarray([float(r[name]) for r in rows])
