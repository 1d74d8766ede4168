"""Summarise a run of ferminet_lih.py, jaqmc_lih.py or psijax_lih.py: launch, step time, energy.

    python benchmarks/peers/peer_times.py /tmp/peers/out-ferminet/lih [--steps 100 400]
                                        [--energy-steps 300 400]

Needs only the standard library (any python3); ``summary`` is what benchmarks/peers/run.py
tabulates. Reads RUN/train_stats.csv (columns step, energy, ..., seconds: seconds since the
process was exec'd, taken when that step's row was written, after the step's results were on
the host) and RUN/timing.json (launch events). Given a run of ``psijax train`` instead, it
reads its metrics.csv, whose seconds count from ``train()``'s start, after the imports.

- launch to first step: `seconds` of step 0 (process exec -> first training step finished,
  compile of the training step included).
- step time of step i = seconds[i] - seconds[i-1]; the median over steps a <= i < b.
- mean energy over steps a <= i < b (FermiNet's `energy`, JaQMC's `total_energy`: the batch
  mean of the unclipped local energies of that step), with a naive standard error (ignores
  autocorrelation).
"""

import argparse
import csv
import json
import math
import os
import statistics


def summary(run: str, steps=(100, 400), energy_steps=(300, 400), exact=None) -> dict:
    """The run's launch, step times and mean energy (and, given the exact energy, the time
    from exec from which the trailing 100-step mean stays within 1.6 mHa of it)."""
    name = (
        "train_stats.csv" if os.path.exists(os.path.join(run, "train_stats.csv")) else "metrics.csv"
    )
    with open(os.path.join(run, name)) as f:
        rows = list(csv.DictReader(f))
    step = [int(r["step"]) for r in rows]
    sec = {s: float(r["seconds"]) for s, r in zip(step, rows, strict=False)}
    ekey = "energy" if "energy" in rows[0] else "total_energy"  # FermiNet / JaQMC
    energy = {s: float(r[ekey]) for s, r in zip(step, rows, strict=False)}
    try:
        with open(os.path.join(run, "timing.json")) as f:
            info = json.load(f)
    except FileNotFoundError:
        info = {}
    out = {
        "run": run, "rows": len(rows), "last_step": step[-1], "jax": info.get("jax"),
        "events": info.get("events_since_process_start", {}), "launch": sec[step[0]],
    }  # fmt: skip
    lo, hi = steps
    dts = [sec[i] - sec[i - 1] for i in range(max(lo, 1), hi) if i in sec and i - 1 in sec]
    if dts:
        q = statistics.quantiles(dts, n=10) if len(dts) > 1 else [dts[0]] * 9
        out |= dict(
            step_median=statistics.median(dts), step_p10=q[0], step_p90=q[-1],
            step_mean=statistics.fmean(dts), step_count=len(dts),
        )  # fmt: skip
    lo, hi = energy_steps
    window = [energy[i] for i in range(lo, hi) if i in energy]
    es = [e for e in window if math.isfinite(e)]  # a code that went to nan: its finite steps
    out["energy_nonfinite"] = len(window) - len(es)
    if es:
        se = statistics.stdev(es) / len(es) ** 0.5 if len(es) > 1 else float("nan")
        out |= dict(energy_mean=statistics.fmean(es), energy_se=se, energy_count=len(es))
    if exact is not None:
        out["within_1p6_for_good_s"] = _for_good(step, energy, sec, exact)
    return out


def _for_good(step, energy, sec, exact, window=100, tolerance=1.6e-3):
    """Seconds from exec from which the trailing ``window``-step mean of the energy stays
    within ``tolerance`` of ``exact`` to the run's end (None: it never does)."""
    values = [energy[s] for s in step]
    since = None
    for i in range(window - 1, len(values)):
        inside = abs(statistics.fmean(values[i - window + 1 : i + 1]) - exact) <= tolerance
        if inside and since is None:
            since = sec[step[i]]
        elif not inside:
            since = None
    return since


def main():
    p = argparse.ArgumentParser()
    p.add_argument("run")
    p.add_argument("--steps", type=int, nargs=2, default=(100, 400), metavar=("A", "B"))
    p.add_argument("--energy-steps", type=int, nargs=2, default=(300, 400), metavar=("A", "B"))
    a = p.parse_args()
    s = summary(a.run, a.steps, a.energy_steps)
    print(f"run: {a.run}  ({s['rows']} steps written, last step {s['last_step']})")
    if s["events"]:
        print("launch timeline (seconds since process exec; + time since the previous event):")
        prev = 0.0
        for name, t in sorted(s["events"].items(), key=lambda kv: kv[1]):
            print(f"  {t:8.2f}  (+{t - prev:6.2f})  {name}")
            prev = t
    print(f"launch to first step finished: {s['launch']:.2f} s")
    lo, hi = a.steps
    if "step_median" in s:
        print(
            f"median step time, steps {lo}-{hi} ({s['step_count']} steps): "
            f"{s['step_median']:.4f} s  (p10 {s['step_p10']:.4f}, p90 {s['step_p90']:.4f}, "
            f"mean {s['step_mean']:.4f})"
        )
    else:
        print(f"no steps in {lo}-{hi}")
    lo, hi = a.energy_steps
    if "energy_mean" in s:
        print(
            f"mean energy, steps {lo}-{hi} ({s['energy_count']} steps): "
            f"{s['energy_mean']:.5f} Ha  (naive s.e. {s['energy_se']:.5f})"
        )
    else:
        print(f"no energies in steps {lo}-{hi}")


if __name__ == "__main__":
    main()
