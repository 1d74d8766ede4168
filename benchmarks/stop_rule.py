"""False-stop rate of training's --target-error rule on synthetic correlated energies.

Each synthetic run is E(t) = decay(t) + AR(1) noise (lag-1 correlation rho, stationary
standard deviation sigma), with limit 0. The rule (psijax.statistics.stopping.StopRule, checked
every 10 steps as in training) stops a run at some step; the stop is *false* when the
noise-free mean of the reported window is more than 2 x target above the limit. Also
printed: how often a run stops at all within the cap, the median stop step, and how
often the limit lies outside the reported error bar (2 sigma).

    python benchmarks/stop_rule.py [--runs 400]
"""

from __future__ import annotations

import argparse
import math
import platform
import time

import numpy as np

from psijax.statistics.stopping import CHECK_EVERY, StopRule, first_stop

# (name, decay(t) in Hartree, sigma, rho, target, cap): VMC-like scales (mHa noise per step)
SCENARIOS = (
    ("stationary", lambda t: 0.0 * t, 3e-3, 0.5, 1e-4, 20_000),
    ("exp 20 mHa, T=200", lambda t: 0.02 * np.exp(-t / 200), 3e-3, 0.5, 1e-4, 20_000),
    ("exp 20 mHa, T=200, tau~10", lambda t: 0.02 * np.exp(-t / 200), 1e-3, 0.9, 1e-4, 20_000),
    ("exp 50 mHa, T=1000", lambda t: 0.05 * np.exp(-t / 1000), 2e-3, 0.7, 1e-4, 20_000),
    ("power 20 mHa / (1 + t/50)", lambda t: 0.02 / (1 + t / 50), 3e-3, 0.5, 1e-4, 20_000),
    ("power 20 mHa / (1 + t/50), tau~10", lambda t: 0.02 / (1 + t / 50), 1e-3, 0.9, 1e-4, 20_000),
)


def ar1(rng: np.random.Generator, n: int, sigma: float, rho: float) -> np.ndarray:
    """AR(1) series with stationary standard deviation sigma and lag-1 correlation rho."""
    noise = rng.normal(0.0, sigma * math.sqrt(1 - rho**2), n)
    x = np.empty(n)
    x[0] = rng.normal(0.0, sigma)
    for i in range(1, n):
        x[i] = rho * x[i - 1] + noise[i]
    return x


def measure(decay, sigma, rho, target, cap, runs, seed=0, fraction=0.3, **rule_args) -> dict:
    rng = np.random.default_rng(seed)
    rule = StopRule(target, fraction, **rule_args)
    t = np.arange(cap, dtype=np.float64)
    clean = decay(t)
    stops, false, outside = [], 0, 0
    for _ in range(runs):
        series = clean + ar1(rng, cap, sigma, rho)
        hit = first_stop(rule, series, CHECK_EVERY)
        if hit is None:
            continue
        n, verdict = hit
        stops.append(n)
        window = clean[n - verdict.estimate.n_samples : n]
        false += window.mean() > 2 * target
        outside += abs(verdict.estimate.mean) > 2 * verdict.estimate.error
    return dict(
        stopped=len(stops) / runs,
        false=false / runs,
        outside=outside / max(len(stops), 1),
        median_stop=float(np.median(stops)) if stops else math.nan,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400)
    args = parser.parse_args()
    print(f"# numpy {np.__version__}, python {platform.python_version()}, {platform.machine()}")
    print(f"# {args.runs} synthetic runs per scenario, check every {CHECK_EVERY} steps, "
          "window = last 30%, drift test z = 2")  # fmt: skip
    header = "| scenario | sigma (mHa) | rho | target (mHa) | stopped | false stops | "
    print(header + "limit outside 2 error bars | median stop step |")
    print("|---|---|---|---|---|---|---|---|")
    t0 = time.perf_counter()
    for name, decay, sigma, rho, target, cap in SCENARIOS:
        r = measure(decay, sigma, rho, target, cap, args.runs)
        print(
            f"| {name} | {1000 * sigma:g} | {rho:g} | {1000 * target:g} | {r['stopped']:.1%} | "
            f"{r['false']:.1%} | {r['outside']:.1%} | {r['median_stop']:.0f} |"
        )
    print(f"# {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
