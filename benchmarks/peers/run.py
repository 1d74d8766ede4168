"""LiH in psijax, FermiNet and jaqmc, one after the other, in rounds: launch, step, energy.

    python benchmarks/peers/run.py --out DIR [--rounds 2] [--iterations 400] \
        [--ferminet /tmp/peers/venv-ferminet/bin/python] [--jaqmc /tmp/peers/venv-jaqmc/bin/python]

Each round runs ``psijax_lih.py`` (this interpreter), ``ferminet_lih.py`` and
``jaqmc_lih.py`` (each peer in its own venv; a peer whose interpreter is not given is left
out), in an order that rotates from round to round, nothing else running, then prints for
every run the launch (exec to the first training step finished), the median step over
``--steps`` with its 10th and 90th percentiles, the mean energy over ``--energy-steps``,
and, on runs of 200 steps or more, the time from exec from which the trailing 100-step mean
stays within 1.6 mHa of LiH's exact energy; then psijax's ratios to each peer within the
round. All three runs use the same pretraining and burn-in counts (by default psijax's:
50 and 10; psijax pretrains longer only while its orbitals are off by > 0.7%, which LiH's
are not after 50 steps); psijax's seed is the round's number. Results go to DIR/results.jsonl,
every run's directory under DIR. docs/benchmarks.md, "The step against FermiNet and jaqmc".
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import peer_times

HERE = os.path.dirname(os.path.abspath(__file__))
LIH_EXACT = -8.070548  # Ha; psijax's LiH preset's reference (docs/benchmarks.md)


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def _command(code: str, python: str, out: str, args, seed: int) -> list[str]:
    common = ["--iterations", str(args.iterations), "--out", out]
    if code == "psijax":
        return [python, os.path.join(HERE, "psijax_lih.py"), *common, "--seed", str(seed),
                f"pretrain_steps={args.pretrain_iterations}",
                f"burn_in_steps={args.burn_in}"]  # fmt: skip
    return [python, os.path.join(HERE, f"{code}_lih.py"), *common,
            "--pretrain-iterations", str(args.pretrain_iterations),
            "--burn-in", str(args.burn_in)]  # fmt: skip


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", required=True, help="a new or empty directory")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--iterations", type=int, default=400)
    p.add_argument("--ferminet", help="FermiNet's venv python (left out if not given)")
    p.add_argument("--jaqmc", help="jaqmc's venv python (left out if not given)")
    p.add_argument("--pretrain-iterations", type=int, default=50)
    p.add_argument("--burn-in", type=int, default=10)
    p.add_argument("--steps", type=int, nargs=2, default=(100, 400), metavar=("A", "B"))
    p.add_argument("--energy-steps", type=int, nargs=2, default=(300, 400), metavar=("A", "B"))
    args = p.parse_args()
    if os.path.exists(args.out) and os.listdir(args.out):
        sys.exit(f"{args.out} is not empty: give a new directory for --out")
    os.makedirs(args.out, exist_ok=True)
    codes = {"psijax": sys.executable, "ferminet": args.ferminet, "jaqmc": args.jaqmc}
    codes = {code: python for code, python in codes.items() if python}
    exact = LIH_EXACT if args.iterations >= 200 else None
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M')}, {_cpu()}, {os.cpu_count()} cores, "
        f"{args.iterations} steps, pretraining {args.pretrain_iterations}, "
        f"burn-in {args.burn_in}; OPENBLAS_NUM_THREADS "
        f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}; command: python {' '.join(sys.argv)}",
        flush=True,
    )
    results = []
    names = list(codes)
    for r in range(args.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for code in order:
            out = os.path.join(args.out, f"round{r}", code)
            command = _command(code, codes[code], out, args, seed=r)
            log = out + ".log"
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with open(log, "w") as f:
                done = subprocess.run(command, stdout=f, stderr=subprocess.STDOUT, cwd=HERE)
            try:  # a run that stopped early (a peer's NaN abort) still has its rows
                s = peer_times.summary(out, args.steps, args.energy_steps, exact)
            except (OSError, KeyError, IndexError, ValueError):
                s = {"launch": float("nan"), "jax": None, "last_step": None}
            s |= {"code": code, "round": r, "command": command, "exit": done.returncode}
            if done.returncode:
                s["within_1p6_for_good_s"] = None  # it did not stay: it stopped
            results.append(s)
            with open(os.path.join(args.out, "results.jsonl"), "a") as f:
                f.write(json.dumps(s) + "\n")
            print(_line(s), flush=True)
    _table(results, names, args)


def _line(s: dict) -> str:
    good = s.get("within_1p6_for_good_s")
    good = "" if good is None else f", within 1.6 mHa for good from {good / 60:.2f} min"
    if s["exit"]:
        good += f"; STOPPED (exit {s['exit']}) after step {s['last_step']}"
    if s.get("energy_nonfinite"):
        good += f"; {s['energy_nonfinite']} non-finite energies in the mean's steps, left out"
    return (
        f"round {s['round']} {s['code']:8s} jax {s['jax']}: launch {s['launch']:.2f} s, "
        f"median step {s.get('step_median', float('nan')):.4f} s "
        f"(p10 {s.get('step_p10', float('nan')):.4f}, p90 {s.get('step_p90', float('nan')):.4f}), "
        f"mean energy {s.get('energy_mean', float('nan')):.5f}({s.get('energy_se', 0) * 1e5:.0f})"
        f"{good}"
    )


def _table(results: list[dict], names: list[str], args) -> None:
    peers = [n for n in names if n != "psijax"]
    head = ["round"] + [f"{n}: median step / launch" for n in names]
    head += [f"psijax / {n}: step, launch" for n in peers]
    print("\n| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for r in range(args.rounds):
        got = {s["code"]: s for s in results if s["round"] == r}
        cells = [str(r)] + [
            f"{got[n].get('step_median', float('nan')):.4f} s / {got[n]['launch']:.2f} s"
            for n in names
        ]
        me = got["psijax"]
        for n in peers:
            step = me.get("step_median", float("nan")) / got[n].get("step_median", float("nan"))
            cells.append(f"{step:.2f}x, {me['launch'] / got[n]['launch']:.2f}x")
        print("| " + " | ".join(cells) + " |")
    if args.iterations >= 200:
        print(
            f"\ntrailing 100-step mean within 1.6 mHa of {LIH_EXACT} Ha for good, minutes from "
            "exec (-: not by the run's end):"
        )
        for n in names:
            times = [s.get("within_1p6_for_good_s") for s in results if s["code"] == n]
            print(f"  {n}: " + ", ".join("-" if t is None else f"{t / 60:.2f}" for t in times))
    for s in results:
        if s["exit"]:
            log = os.path.join(args.out, f"round{s['round']}", s["code"]) + ".log"
            print(
                f"round {s['round']}: {s['code']} stopped (exit {s['exit']}) after step "
                f"{s['last_step']}; its log: {log}"
            )


if __name__ == "__main__":
    main()
