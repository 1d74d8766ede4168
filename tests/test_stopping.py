"""Training's --target-error rule: its verdicts, its false-stop rate on synthetic correlated
energies (benchmarks/stop_rule.py measures the same at full size), and a run it stops."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import psijax
from psijax.errors import InputError
from psijax.rundir import checkpoint
from psijax.statistics.stopping import StopRule, first_stop


def ar1(rng, n, sigma, rho):
    x = np.empty(n)
    x[0] = rng.normal(0, sigma)
    noise = rng.normal(0, sigma * math.sqrt(1 - rho**2), n)
    for i in range(1, n):
        x[i] = rho * x[i - 1] + noise[i]
    return x


def test_verdicts_name_why_the_run_goes_on():
    rng = np.random.default_rng(0)
    rule = StopRule(1e-3, fraction=0.3)
    short = rule.check(rng.normal(0, 1e-3, 300))
    assert not short.stop and "below the 200" in short.reason
    noisy = rule.check(rng.normal(0, 0.1, 1000))
    assert not noisy.stop and "above the target" in noisy.reason
    # a small error bar, but the window sits 3 mHa below the steps before it
    dropped = rng.normal(-1.0, 1e-3, 1000) - 3e-3 * (np.arange(1000) >= 700)
    drift = rule.check(dropped)
    assert not drift.stop and "drift" in drift.reason and drift.drift < 0
    flat = rule.check(rng.normal(-1.0, 1e-3, 1000))
    assert flat.stop and "do not drift" in flat.reason
    assert flat.estimate.n_samples == 300 and abs(flat.estimate.mean + 1) < 1e-3
    # with fraction above 1/2 there are too few steps before the window: its halves are compared
    halves = StopRule(1e-3, fraction=0.5).check(rng.normal(-1.0, 1e-3, 400))
    assert halves.stop and "first half" in halves.reason
    # ... which never reach back into the first steps of the run (a transient)
    early = np.concatenate([np.full(300, -0.5), rng.normal(-1.0, 1e-3, 700)])
    assert StopRule(1e-3, fraction=0.3).check(early).stop
    with pytest.raises(InputError, match="target_error"):
        StopRule(0.0)


def test_false_stops_are_rare_and_a_converged_run_stops():
    """Time-compressed versions of the benchmark's scenarios: an exponential decay (20 mHa
    over ~200 steps, then 50 mHa over ~400) under AR(1) noise (tau ~ 3); a stop is false
    when the window's noise-free mean is more than 2 targets above the limit."""
    rng = np.random.default_rng(1)
    target, cap, runs = 1e-3, 4000, 40
    t = np.arange(cap)
    for decay in (0.02 * np.exp(-t / 200), 0.05 * np.exp(-t / 400)):
        false = stopped = 0
        for _ in range(runs):
            hit = first_stop(StopRule(target), decay + ar1(rng, cap, 6e-3, 0.7))
            if hit is None:
                continue
            n, verdict = hit
            stopped += 1
            false += decay[n - verdict.estimate.n_samples : n].mean() > 2 * target
        assert stopped >= 0.95 * runs
        assert false <= 0.05 * runs, f"{false} false stops in {runs}"
    # the same rule with the drift test left out stops falsely far more often
    loose = StopRule(target, z=math.inf, max_drift=math.inf)
    decay = 0.05 * np.exp(-t / 400)
    false_loose = 0
    for _ in range(runs):
        n, verdict = first_stop(loose, decay + ar1(rng, cap, 6e-3, 0.7))
        false_loose += decay[n - verdict.estimate.n_samples : n].mean() > 2 * target
    assert false_loose >= 0.5 * runs


TINY = dict(
    system="H2", layers=((8, 4),), determinants=1, walkers=16, pretrain_steps=20,
    burn_in_steps=5, mcmc_moves=2, progress=False,
)  # fmt: skip


def test_training_stops_at_the_target_error_with_a_checkpoint(tmp_path):
    out = tmp_path / "run"
    result = psijax.train(
        **TINY, steps=3000, target_error=0.02, checkpoint_every=0,
        out=str(out),
    )  # fmt: skip
    n = result.converged_at
    assert n is not None and 670 <= n < 3000 and n % 10 == 0
    assert len(result.energies) == n and result.energy.error < 0.02
    summary = json.loads((out / "summary.json").read_text())
    assert summary["converged_at"] == n and summary["steps_run"] == n
    assert summary["target_error"] == 0.02 and summary["steps"] == 3000
    assert checkpoint.newest_complete(out) == n
    rows = (out / "metrics.csv").read_text().strip().splitlines()
    assert len(rows) == n + 1
