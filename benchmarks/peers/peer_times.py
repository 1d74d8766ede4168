"""Summarise a run of ferminet_lih.py, jaqmc_lih.py or psijax train: launch time, step time, energy.

    python benchmarks/peers/peer_times.py /tmp/peers/out-ferminet/lih [--steps 100 400]
                                        [--energy-steps 300 400]

Needs only the standard library (any python3). Reads RUN/train_stats.csv (or psijax's
metrics.csv; columns step,
energy, ..., seconds: seconds since the process was exec'd, taken when that step's row was
written, after the step's results were on the host) and RUN/timing.json (launch events).

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
import os
import statistics


def main():
    p = argparse.ArgumentParser()
    p.add_argument("run")
    p.add_argument("--steps", type=int, nargs=2, default=(100, 400), metavar=("A", "B"))
    p.add_argument("--energy-steps", type=int, nargs=2, default=(300, 400), metavar=("A", "B"))
    a = p.parse_args()
    # FermiNet's and JaQMC's train_stats.csv; psijax's metrics.csv (its `seconds` count from
    # the start of the run inside `psijax train`, a second or two after the process started)
    name = (
        "train_stats.csv"
        if os.path.exists(os.path.join(a.run, "train_stats.csv"))
        else "metrics.csv"
    )
    with open(os.path.join(a.run, name)) as f:
        rows = list(csv.DictReader(f))
    step = [int(r["step"]) for r in rows]
    sec = {s: float(r["seconds"]) for s, r in zip(step, rows, strict=False)}
    ekey = "energy" if "energy" in rows[0] else "total_energy"  # FermiNet / JaQMC
    energy = {s: float(r[ekey]) for s, r in zip(step, rows, strict=False)}
    print(f"run: {a.run}  ({len(rows)} steps written, last step {step[-1]})")

    try:
        with open(os.path.join(a.run, "timing.json")) as f:
            ev = json.load(f)["events_since_process_start"]
    except FileNotFoundError:
        ev = {}
    if ev:
        print("launch timeline (seconds since process exec; + time since the previous event):")
        prev = 0.0
        for name, t in sorted(ev.items(), key=lambda kv: kv[1]):
            print(f"  {t:8.2f}  (+{t - prev:6.2f})  {name}")
            prev = t
    print(f"launch to first step finished: {sec[step[0]]:.2f} s")

    lo, hi = a.steps
    dts = [sec[i] - sec[i - 1] for i in range(max(lo, 1), hi) if i in sec and i - 1 in sec]
    if dts:
        q = statistics.quantiles(dts, n=10) if len(dts) > 1 else [dts[0]] * 9
        print(
            f"median step time, steps {lo}-{hi} ({len(dts)} steps): {statistics.median(dts):.4f} s"
            f"  (p10 {q[0]:.4f}, p90 {q[-1]:.4f}, mean {statistics.fmean(dts):.4f})"
        )
    else:
        print(f"no steps in {lo}-{hi}")

    lo, hi = a.energy_steps
    es = [energy[i] for i in range(lo, hi) if i in energy]
    if es:
        se = statistics.stdev(es) / len(es) ** 0.5 if len(es) > 1 else float("nan")
        print(
            f"mean energy, steps {lo}-{hi} ({len(es)} steps): {statistics.fmean(es):.5f} Ha"
            f"  (naive s.e. {se:.5f})"
        )
    else:
        print(f"no energies in steps {lo}-{hi}")


if __name__ == "__main__":
    main()
