"""Blocking error bars on synthetic series with known answers."""

import math

import numpy as np
import pytest
from scipy.signal import lfilter

from psijax.statistics.blocking import (
    Estimate,
    blocking_estimate,
    dominant_steps,
    reblock,
    running_mean,
    tail_estimate,
    tail_note,
)


def ar1(rng: np.random.Generator, phi: float, shape: tuple[int, ...]) -> np.ndarray:
    """Stationary AR(1), x_t = phi x_{t-1} + e_t with unit-variance e_t, along the last axis."""
    e = rng.standard_normal(shape)
    e[..., 0] /= math.sqrt(1.0 - phi**2)  # start in the stationary distribution
    return lfilter([1.0], [1.0, -phi], e, axis=-1)


def ar1_error_of_mean(phi: float, n: int) -> float:
    sigma_x = 1.0 / math.sqrt(1.0 - phi**2)
    return sigma_x * math.sqrt((1.0 + phi) / (1.0 - phi) / n)


def test_white_noise_error_is_naive_and_blocks_are_small():
    n = 2**14
    x = 3.0 + 2.0 * np.random.default_rng(0).standard_normal(n)
    est = blocking_estimate(x)
    assert est.error == pytest.approx(2.0 / math.sqrt(n), rel=0.15)
    assert est.block_size <= 4
    assert est.autocorrelation_time == pytest.approx(0.5, abs=0.2)
    assert est.mean == pytest.approx(x.mean())
    assert est.n_samples == n and est.n_blocks == n // est.block_size


def test_ar1_error_matches_analytic_and_naive_underestimates():
    phi, n = 0.9, 2**16
    x = ar1(np.random.default_rng(1), phi, (n,))
    est = blocking_estimate(x)
    exact = ar1_error_of_mean(phi, n)
    assert est.error == pytest.approx(exact, rel=0.2)
    naive = x.std(ddof=1) / math.sqrt(n)
    assert est.error > 3.0 * naive
    # tau = (1 + phi) / (1 - phi) / 2 = 9.5 in the convention error^2 = 2 tau sigma^2 / n.
    assert est.autocorrelation_time == pytest.approx(9.5, rel=0.4)
    assert est.block_size >= 16


def test_ar1_coverage_is_about_one_sigma():
    phi, n, m = 0.9, 4096, 200
    xs = ar1(np.random.default_rng(2), phi, (m, n))
    covered = [abs(x.mean()) <= blocking_estimate(x).error for x in xs]
    assert 0.6 <= np.mean(covered) <= 0.76
    # The naive error bar covers the true mean far less often.
    naive = [abs(x.mean()) <= x.std(ddof=1) / math.sqrt(n) for x in xs]
    assert np.mean(naive) < 0.4


def test_lag1_correction_raises_error_of_short_correlated_runs():
    xs = ar1(np.random.default_rng(3), 0.9, (50, 4096))
    exact = ar1_error_of_mean(0.9, 4096)
    plain = np.mean([blocking_estimate(x, lag1_correction=False).error for x in xs]) / exact
    corrected = np.mean([blocking_estimate(x).error for x in xs]) / exact
    assert plain < corrected
    assert corrected == pytest.approx(1.0, abs=0.1)


@pytest.mark.parametrize("n", [16, 17, 100, 1000, 4097, 50_000])
def test_non_power_of_two_lengths(n):
    x = ar1(np.random.default_rng(n), 0.5, (n,))
    est = blocking_estimate(x)
    assert est.n_samples == n
    assert est.n_blocks == n // est.block_size >= 2
    assert est.block_size & (est.block_size - 1) == 0
    assert est.mean == pytest.approx(x.mean())
    assert math.isfinite(est.error) and est.error > 0
    levels = reblock(x)
    assert [lv.block_size for lv in levels] == [2**k for k in range(len(levels))]
    assert n // levels[-1].block_size in (2, 3)


def test_non_power_of_two_ar1_error():
    phi, n = 0.8, 50_000
    x = ar1(np.random.default_rng(4), phi, (n,))
    assert blocking_estimate(x).error == pytest.approx(ar1_error_of_mean(phi, n), rel=0.2)


def test_truncation_drops_the_oldest_values():
    x = np.array([1000.0, 1.0, 2.0, 3.0, 4.0])
    levels = reblock(x)
    assert len(levels) == 2  # a level with a single block is not reported
    assert levels[0].mean == pytest.approx(x.mean())
    assert levels[1].block_size == 2 and levels[1].mean == pytest.approx(2.5)
    x = np.concatenate([[1000.0, 1000.0, 1000.0], np.arange(1.0, 9.0)])
    levels = reblock(x)
    assert [lv.block_size for lv in levels] == [1, 2, 4]
    assert levels[1].mean == pytest.approx(x[1:].mean())
    assert levels[2].mean == pytest.approx(4.5)  # blocks (1..4) and (5..8)


def test_reblock_errors():
    x = np.random.default_rng(5).standard_normal(1024)
    levels = reblock(x)
    assert len(levels) == 10
    assert levels[0].error == pytest.approx(x.std(ddof=1) / math.sqrt(x.size))
    for lv in levels:
        m = x.size // lv.block_size
        blocks = x.reshape(m, lv.block_size).mean(axis=1)
        assert lv.mean == pytest.approx(x.mean())
        assert lv.error == pytest.approx(blocks.std(ddof=1) / math.sqrt(m))
        assert lv.error_of_error == pytest.approx(lv.error / math.sqrt(2 * (m - 1)))


def test_short_series_falls_back_to_naive_error():
    x = np.array([1.0, 2.0, 4.0, 3.0, 5.0, 2.0, 1.0, 0.0, 3.0, 2.0])
    est = blocking_estimate(x)
    assert est.block_size == 1 and est.n_blocks == 10
    assert est.error == pytest.approx(x.std(ddof=1) / math.sqrt(10))
    assert est.autocorrelation_time == pytest.approx(0.5)


def test_constant_series_has_zero_error():
    est = blocking_estimate(np.full(100, -1.5))
    assert est.mean == -1.5 and est.error == 0.0


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize(
    "fn",
    [blocking_estimate, reblock, tail_estimate, lambda x: running_mean(x, 3)],
    ids=["blocking_estimate", "reblock", "tail_estimate", "running_mean"],
)
def test_non_finite_input_raises(fn, bad):
    x = np.random.default_rng(6).standard_normal(64)
    x[40] = bad
    with pytest.raises(ValueError, match="non-finite") as info:
        fn(x)
    assert "\n" not in str(info.value)
    assert "index 40" in str(info.value)


def test_bad_shapes_and_arguments_raise():
    with pytest.raises(ValueError):
        blocking_estimate([1.0])
    with pytest.raises(ValueError):
        blocking_estimate(np.zeros((4, 4)))
    with pytest.raises(ValueError):
        tail_estimate(np.arange(10.0), fraction=0.0)
    with pytest.raises(ValueError):
        tail_estimate(np.arange(10.0), fraction=1.5)
    with pytest.raises(ValueError):
        running_mean(np.arange(10.0), 0)


def make(mean: float, error: float) -> Estimate:
    return Estimate(mean, error, 1000, 8, 125, 3.0)


@pytest.mark.parametrize(
    ("mean", "error", "text"),
    [
        (-8.070123, 0.000153, "-8.07012(15)"),
        (-8.070123, 0.0000153, "-8.070123(15)"),
        (1.23456789, 0.000996, "1.2346(10)"),
        (12.345, 2.5, "12.3(25)"),
        (-75.0123, 0.05, "-75.012(50)"),
        (1234.5, 153.0, "1234(153)"),
    ],
)
def test_compact_notation(mean, error, text):
    assert str(make(mean, error)) == text


def test_format_with_unit():
    est = make(-8.070123, 0.000153)
    line = est.format()
    assert line.startswith("-8.07012(15) Ha")
    assert "block 8 x 125" in line and "n=1000" in line
    assert est.format(unit="eV").startswith("-8.07012(15) eV")
    assert est.format(unit="").startswith("-8.07012(15) (")


def test_tail_estimate_uses_only_the_tail():
    rng = np.random.default_rng(7)
    n = 4000
    energies = np.concatenate(
        [100.0 + 50.0 * rng.standard_normal(n // 2), -8.0 + 0.01 * ar1(rng, 0.5, (n // 2,))]
    )
    est = tail_estimate(energies, fraction=0.5)
    assert est.n_samples == n // 2
    assert abs(est.mean + 8.0) < 5 * est.error
    assert est.error < 0.01
    quarter = tail_estimate(energies, fraction=0.25)
    assert quarter.n_samples == n // 4
    assert quarter.mean == pytest.approx(energies[-n // 4 :].mean())
    assert tail_estimate(energies[:3], fraction=0.01).n_samples == 2
    whole = tail_estimate(energies, fraction=1.0)
    assert whole.mean == pytest.approx(energies.mean())


def test_running_mean():
    x = np.random.default_rng(8).standard_normal(50) - 100.0
    for window in (1, 5, 50, 80):
        expected = [x[max(0, i - window + 1) : i + 1].mean() for i in range(x.size)]
        np.testing.assert_allclose(running_mean(x, window), expected, rtol=0, atol=1e-12)
    assert running_mean([], 3).shape == (0,)


# ----------------------------------------------------------- heavy-tail events in a run
def test_gaussian_noise_has_no_dominant_steps_and_an_outlier_has():
    rng = np.random.default_rng(0)
    for _ in range(100):  # correlated noise neither
        assert dominant_steps(ar1(rng, 0.5, (450,))).size == 0
    x = rng.normal(size=450)
    x[[100, 101]] += 60.0  # one walker deep in the tail, seen for two steps
    assert dominant_steps(x).tolist() == [100, 101]
    x[200] += 20.0  # a third, smaller: the two still carry over half the spread
    assert dominant_steps(x).tolist() == [100, 101]
    many = rng.normal(size=450)
    many[::10] += 15.0  # 45 steps (10%) out: a shifted population, not a rare event
    assert dominant_steps(many).size == 0
    assert dominant_steps(np.ones(50)).size == 0


def test_the_tail_note_names_the_runs_own_step_numbers():
    """Step numbers count from the run's first step, not from the tail's; an outlier in the
    discarded start, or a naive estimate, gives no note."""
    rng = np.random.default_rng(1)
    energies = -7.478 + 1e-3 * rng.normal(size=1500)
    energies[1440] += 0.25
    est = tail_estimate(energies, 0.3)
    note = tail_note(energies, est)
    assert note is not None and note.startswith("step 1440 carries 9")
    assert "of the last 450 steps' spread" in note
    energies[1440] -= 0.25
    energies[[3, 4]] += 0.25  # before the estimate's steps
    assert tail_note(energies, tail_estimate(energies, 0.3)) is None
    energies[[1441, 1442]] += 0.25
    assert tail_note(energies, tail_estimate(energies, 0.3)).startswith("steps 1441, 1442 carry")
    short = energies[:300]  # 90 steps in the estimate: below TAIL_NOTE_STEPS
    short[290] += 0.25
    assert tail_note(short, tail_estimate(short, 0.3)) is None


def test_an_evaluations_summary_and_its_report_carry_the_tail_line(tmp_path):
    """``psijax evaluate`` and ``psijax report`` print the same note for the evaluation's
    own steps (numbered from its first), kept in summary.json as ``energy_tail``."""
    from psijax.rundir.report import format_summary, summarize

    energies = -8.0705 + 2e-4 * np.random.default_rng(2).normal(size=300)
    rows = [{"step": i, "energy": e} for i, e in enumerate(energies)]
    summary, _ = summarize(rows, ["step", "energy"], (), {"steps": 300}, tmp_path)
    assert "energy_tail" not in summary
    rows[250]["energy"] += 0.3
    summary, _ = summarize(rows, ["step", "energy"], (), {"steps": 300}, tmp_path)
    assert summary["energy_tail"].startswith("step 250 carries")
    assert "\ntail                    step 250 carries" in format_summary(summary)


@pytest.mark.parametrize("alpha", [0.05, 0.01, 0.3])
def test_chi2_quantiles_are_scipys(alpha):
    from scipy.stats import chi2

    from psijax.statistics.blocking import _chi2_quantiles

    got = _chi2_quantiles(40, alpha)
    want = chi2.ppf(1.0 - alpha, np.arange(40, 0, -1))
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_a_training_run_does_not_import_scipy_stats():
    """scipy.stats costs about 0.5 s of a launch's single-threaded imports."""
    import subprocess
    import sys

    code = "import sys, psijax.training.job; print('scipy.stats' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
