"""Everything psijax measures on a GPU, in one call within a time budget.

    python benchmarks/gpu_run.py --out DIR [--budget 540] [--quick]

scripts/gpu.sh runs it on a bare GPU machine (after installing what is missing there).
Each part runs in its own process with its own deadline, so a part that breaks or runs
long costs that part only; the results go to ``DIR`` as they come (``results.jsonl``, one
JSON object per row, and one log per part), and the tables are printed at the end:

1. the tests marked ``compat`` that run on one device, and tests/test_precision.py, on the
   GPU, beside 2. (neither is timed);
2. benchmarks/precision.py: float32 errors of the Laplacian, its gradient and SPRING's
   direction at each matrix-product precision, and the SPRING update's time;
3. benchmarks/gpu_step.py: the default LiH job with the step's parts, the same with XLA's
   loop for SPRING's Cholesky factor (the CPU's; an A/B of the device's own) and with
   TensorFloat-32 in the wavefunction, then N2 at FermiNet's production sizes
   (4 x (256, 32), 16 determinants, 4,096 walkers) with its parts (SPRING's update at
   production sizes in each precision is in 2.);
4. ``psijax train --system N2`` at the defaults for what time is left: the energy against
   the estimated exact energy as the run goes.

``--only`` runs some of the parts (e.g. ``--only n2_production,accuracy``); ``--quick``
shrinks every size, to check the script itself on a CPU.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
N2_EXACT = -109.5423  # psijax.system.presets, estimated exact
PRODUCTION = ["layers=[[256,32],[256,32],[256,32],[256,32]]", "determinants=16", "walkers=4096"]
# tests that need several devices, a CPU or several processes
NOT_ON_ONE_GPU = "not cpu_pool and not two_processes and not several_slices and not saved_on_four"


class Run:
    def __init__(self, out: str, budget: float, quick: bool):
        self.out, self.quick = out, quick
        self.deadline = time.monotonic() + budget
        self.results = os.path.join(out, "results.jsonl")

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def record(self, row: dict) -> None:
        with open(self.results, "a") as f:
            f.write(json.dumps(row) + "\n")

    def start(self, name: str, cmd: list[str]) -> tuple[subprocess.Popen, object]:
        log = open(os.path.join(self.out, f"{name}.log"), "w")  # noqa: SIM115
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                                start_new_session=True)  # fmt: skip
        return proc, log

    def finish(self, name: str, proc, log, timeout: float) -> int | None:
        """The exit code, or None when the part was stopped at its deadline."""
        t = time.monotonic()
        try:
            code = proc.wait(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            code = None
        log.close()
        self.record(dict(part=name, exit=code, waited_s=round(time.monotonic() - t, 1)))
        print(f"[{name}] exit {code} ({self.left():.0f} s left)", flush=True)
        return code

    def run(self, name: str, cmd: list[str], timeout: float) -> int | None:
        timeout = min(timeout, self.left() - 30)
        if timeout < 10:
            self.record(dict(part=name, skipped="no time left"))
            print(f"[{name}] skipped: no time left", flush=True)
            return None
        proc, log = self.start(name, cmd)
        return self.finish(name, proc, log, timeout)

    def rows_of(self, name: str) -> list[dict]:
        with open(os.path.join(self.out, f"{name}.log")) as f:
            return [json.loads(x) for x in f if x.startswith("{")]


def environment(run: Run) -> None:
    import platform

    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
         "--format=csv,noheader"], capture_output=True, text=True,
    ) if _has("nvidia-smi") else None  # fmt: skip
    code = "import jax, optax; print(jax.__version__, jax.devices(), optax.__version__)"
    jax_line = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    row = dict(part="environment", python=platform.python_version(),
               gpu=smi.stdout.strip() if smi else "none", jax=jax_line.stdout.strip(),
               jax_error=jax_line.stderr.strip()[-300:] if jax_line.returncode else "",
               cpus=os.cpu_count())  # fmt: skip
    run.record(row)
    print(json.dumps(row), flush=True)


def _has(program: str) -> bool:
    return any(os.access(os.path.join(d, program), os.X_OK) for d in os.environ["PATH"].split(":"))


def accuracy(run: Run, seconds: float) -> None:
    """``psijax train --system N2`` until ``seconds`` have passed, then SIGTERM (psijax
    writes a checkpoint and stops); the energy trajectory from its metrics.csv."""
    if seconds < 30:
        run.record(dict(part="accuracy", skipped="no time left"))
        return
    work = tempfile.mkdtemp(prefix="psijax-gpu-n2-")
    cmd = [sys.executable, "-m", "psijax.cli", "train", "--system", "N2", "--steps", "100000",
           "--out", os.path.join(work, "run"), "--checkpoint-minutes", "0",
           "--checkpoint-every", "0"]  # fmt: skip
    if run.quick:
        cmd += ["--walkers", "32", "--layers", "16x4", "--determinants", "2"]
    started = time.monotonic()
    proc, log = run.start("accuracy", cmd)
    run.finish("accuracy", proc, log, seconds)
    wall = time.monotonic() - started
    metrics = os.path.join(work, "run", "metrics.csv")
    if not os.path.exists(metrics):
        run.record(dict(part="accuracy", error="no metrics.csv"))
        return
    with open(metrics) as f:
        rows = [r for r in csv.DictReader(f)]
    shutil.copyfile(metrics, os.path.join(run.out, "n2_metrics.csv"))
    run.record(dict(part="accuracy", wall_s=wall, steps=len(rows),
                    first_seconds=float(rows[0]["seconds"]) if rows else None,
                    last_seconds=float(rows[-1]["seconds"]) if rows else None))  # fmt: skip


def trajectory(path: str) -> list[tuple[int, float, float, float]]:
    """(last step, seconds, mean energy, its gap to exact in mHa) per window of steps: up to
    12 windows of near-equal length (no short remainder of a few steps)."""
    with open(path) as f:
        rows = [r for r in csv.DictReader(f)]
    n = min(12, len(rows))
    out = []
    for k in range(n):
        part = rows[k * len(rows) // n : (k + 1) * len(rows) // n]
        e = sum(float(r["energy"]) for r in part) / len(part)
        out.append((int(part[-1]["step"]), float(part[-1]["seconds"]), e, 1e3 * (e - N2_EXACT)))
    return out


def tables(run: Run) -> None:
    with open(run.results) as f:
        rows = [json.loads(x) for x in f]
    print("\n## parts")
    for r in rows:
        if "part" in r and r["part"] not in ("environment",):
            print(f"- {r}")
    steps = [r for r in rows if "step_s" in r or "compile_s" in r]
    if steps:
        print("\n| row | device | electrons | params | walkers | Laplacian | chunk / blocks | "
              "compile s | first step s | median step s | walker-steps/s | peak MiB | "
              "MCMC / local energy / jacobian / optimiser s |")  # fmt: skip
        print("|" + "---|" * 13)
        for r in steps:
            p = r.get("parts") or {}
            split = " / ".join(f"{p[k]:.4f}" for k in ("mcmc", "local_energy", "jacobian",
                                                        "optimizer") if k in p)  # fmt: skip
            print(f"| {r['label']} | {r['device']} | {r['electrons']} | {r['params']:,} | "
                  f"{r['walkers']} | {r['laplacian']} | {r['chunk_size'] or 'none'} / "
                  f"{r['jacobian_blocks']} | {r['compile_s']:.1f} | "
                  f"{r.get('first_step_s', 0):.2f} | {r.get('step_s', float('nan')):.4f} | "
                  f"{r.get('walker_steps_per_s', float('nan')):,.0f} | "
                  f"{r.get('peak_mib', float('nan')):,.0f} | {split} |")  # fmt: skip
    metrics = os.path.join(run.out, "n2_metrics.csv")
    if os.path.exists(metrics):
        print("\n| N2 steps to | seconds | mean energy (Ha) | minus exact (mHa) |")
        print("|---|---|---|---|")
        for step, seconds, e, gap in trajectory(metrics):
            print(f"| {step} | {seconds:.0f} | {e:.4f} | {gap:+.1f} |")
    precision = os.path.join(run.out, "precision.log")
    if os.path.exists(precision):
        with open(precision) as f:
            text = f.read()
        print("\n" + text[text.find("| walkers |") :] if "| walkers |" in text else "")


PARTS = ("tests", "precision", "lih", "lih_loop_factor", "lih_tf32", "n2_production",
         "accuracy")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--budget", type=float, default=540.0, help="seconds for everything")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: check the script")
    parser.add_argument("--only", default=",".join(PARTS), help=f"some of {','.join(PARTS)}")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if only - set(PARTS):
        parser.error(f"--only: unknown parts {sorted(only - set(PARTS))}; use some of {PARTS}")
    os.makedirs(args.out, exist_ok=True)
    run = Run(args.out, args.budget, args.quick)
    py = sys.executable
    environment(run)

    # 1 and 2 side by side: neither is timed
    # pytest-benchmark (on some GPU images) warns under xdist, which the suite's
    # warnings-are-errors setting turns into an internal error: leave it out
    pytest = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark"]
    tests = [*pytest, "-m", "compat", "-k", NOT_ON_ONE_GPU, "-n", "4", "tests/"]
    tests_precision = [*pytest, "-n", "2", "tests/test_precision.py"]
    if args.quick:
        tests[tests.index("-k") + 1] += " and operator_results"
    precision = [py, "benchmarks/precision.py", "--out", os.path.join(args.out, "precision.json")]
    precision += ["--electrons", "6", "--walkers", "8", "--gram-walkers", "64"] * args.quick
    side = min(180.0, run.left() * 0.35)
    chosen = [(name, cmd) for name, cmd, part in (
        ("tests", tests, "tests"), ("tests_precision", tests_precision, "tests"),
        ("precision", precision, "precision")) if part in only]  # fmt: skip
    procs = [(name, *run.start(name, cmd)) for name, cmd in chosen]
    end = time.monotonic() + side
    for name, proc, log in procs:
        run.finish(name, proc, log, end - time.monotonic())

    # 3: one row at a time, each in its own process
    step = [py, "benchmarks/gpu_step.py"]
    lih_steps, big_steps = ("3", "1") if args.quick else ("30", "5")
    big = ["system=N2", *(["walkers=64", "layers=[[32,8]]"] if args.quick else PRODUCTION)]
    sets = lambda items: [x for item in items for x in ("--set", item)]
    rows = [
        ("lih", ["--steps", lih_steps, "--parts", *sets(["system=LiH"])], 90),
        # the A/B of SPRING's Cholesky factor: XLA's loop, as on a CPU
        ("lih_loop_factor", ["--steps", lih_steps, "--factor", "loop", *sets(["system=LiH"])], 60),
        # TensorFloat-32 in the wavefunction only (SPRING's products in it give NaN)
        ("lih_tf32", ["--steps", lih_steps, *sets(["system=LiH", "matmul_precision=default"])], 60),
        ("n2_production", ["--steps", big_steps, "--parts", *sets(big)], 240),
    ]
    for label, extra, timeout in rows:
        if label not in only:
            continue
        code = run.run(label, [*step, *extra, "--label", label], timeout)
        if code == 0:
            for row in run.rows_of(label):
                run.record(row)

    # 4: what is left
    if "accuracy" in only:
        accuracy(run, run.left() - 30)
    tables(run)


if __name__ == "__main__":
    main()
