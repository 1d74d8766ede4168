"""Everything psijax measures on a GPU, in one call within a time budget.

    python benchmarks/gpu_run.py --out DIR [--budget 540] [--only PARTS] [--quick]

scripts/gpu.sh runs it on a bare GPU machine (after installing what is missing there).
Each part runs in its own process, all started at once (compiling is the CPU's work and the
GPU machine has 16 cores); the step rows are then timed one at a time, every other process
stopped (SIGSTOP) meanwhile, so no timed figure shares the GPU. A part that breaks or runs
long costs that part only; the results go to ``DIR`` as they come (``results.jsonl``, one
JSON object per row, and one log per part), and the tables are printed at the end:

1. the tests marked ``compat`` that run on one device, and tests/test_precision.py (not
   timed);
2. benchmarks/precision.py: float32 errors of the Laplacian, its gradient and SPRING's
   direction at each matrix-product precision (not timed);
3. benchmarks/gpu_step.py: the default LiH job with the step's parts, the same with XLA's
   loop for SPRING's Cholesky factor (the CPU's; an A/B of the device's own) and with
   TensorFloat-32 in the wavefunction, then N2 (14 electrons; SPRING's Gram matrix at
   the default precision and at highest) and butadiene (30) at FermiNet's production sizes
   (4 x (256, 32), 16 determinants, 4,096 walkers), each step's split from a trace;
4. ``psijax train --system N2`` at the defaults from the start to the end (paused while a
   row is timed), continued where ``--run-dir`` already holds the run: the energy against
   the estimated exact energy as the run goes; its newest checkpoint comes back with the
   results, so a later GPU session can continue it.

``--only`` runs some of the parts (e.g. ``--only n2_production,accuracy``); ``--quick``
shrinks every size, to check the script itself on a CPU.
"""

from __future__ import annotations

import argparse
import contextlib
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
sys.path.insert(0, HERE)
from molecule_scale import atom_string  # noqa: E402

N2_EXACT = -109.5423  # psijax.system.presets, estimated exact
PRODUCTION = ["layers=[[256,32],[256,32],[256,32],[256,32]]", "determinants=16", "walkers=4096"]
# trans-1,3-butadiene, 30 electrons (benchmarks/molecule_scale.py)
BUTADIENE = atom_string("C4H6")
# seconds each row may take once it is told to go (its steps and parts)
TIMED = dict(lih=60, lih_loop_factor=40, lih_tf32=40, n2_production=150,
             n2_production_highest=150, c4h6_production=180)  # fmt: skip
# rows at production sizes: compiled all at once, each held to an equal share of BIG_SHARE
# of the GPU's memory (two that each could take 90% ran out of it in XLA's autotuner), every
# other process to SMALL
BIG = ("n2_production", "n2_production_highest", "c4h6_production")
BIG_SHARE, SMALL = 0.84, "0.06"
# the tests' programs without autotuning of the GPU's kernels (the compat selection, whose
# programs each compile once, ran at seconds per compile and had not finished in 253 s on an
# H200 with 4 workers); their timings are no figure, their results do not depend on it
TESTS_XLA_FLAGS = "--xla_gpu_autotune_level=0"
TEST_WORKERS = "8"  # compiling is the host's work: 16 cores there
# tests that need several devices, a CPU or several processes
NOT_ON_ONE_GPU = (
    "not concurrent_batched_lu and not two_processes and not several_slices and not saved_on_four"
)


class Run:
    def __init__(self, out: str, budget: float, quick: bool, big_fraction: str):
        self.out, self.quick, self.big_fraction = out, quick, big_fraction
        self.deadline = time.monotonic() + budget
        self.results = os.path.join(out, "results.jsonl")

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def record(self, row: dict) -> None:
        with open(self.results, "a") as f:
            f.write(json.dumps(row) + "\n")

    def start(self, name: str, cmd: list[str], big: bool = False) -> tuple:
        """``cmd`` in its own process group; the ``big`` (production-size) rows may take
        ``big_fraction`` of the GPU's memory each, every other process SMALL, so that a big
        row's fit to the memory (which sees only its own process) holds beside them."""
        log = open(os.path.join(self.out, f"{name}.log"), "w")  # noqa: SIM115
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        fraction = self.big_fraction if big else SMALL
        env = {**os.environ, "XLA_PYTHON_CLIENT_MEM_FRACTION": fraction}
        if name.startswith("tests"):
            env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + TESTS_XLA_FLAGS).strip()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env,
                                start_new_session=True)  # fmt: skip
        return proc, log

    def finish(self, name: str, proc, log, timeout: float, stop=signal.SIGTERM) -> int | None:
        """The exit code, or None when the part was stopped at its deadline (by ``stop``:
        pytest, interrupted, still prints the failures so far)."""
        t = time.monotonic()
        try:
            code = proc.wait(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, stop)
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


def side_jobs(args, only: set[str]) -> list[tuple[str, list[str]]]:
    """The compat tests, tests/test_precision.py and the precision tables (none is timed)."""
    py = sys.executable
    # pytest-benchmark (on some GPU images) warns under xdist, which the suite's
    # warnings-are-errors setting turns into an internal error: leave it out
    # -v: each test's result as it ends (a run stopped at the deadline still says which
    # failed); -rfE: the failures' summary, also when interrupted
    pytest = [py, "-m", "pytest", "-v", "-rfE", "--tb=short", "-p", "no:cacheprovider",
              "-p", "no:benchmark"]  # fmt: skip
    tests = [*pytest, "-m", "compat", "-k", NOT_ON_ONE_GPU, "-n", TEST_WORKERS, "tests/"]
    if args.quick:
        tests[tests.index("-k") + 1] += " and operator_results"
    # the SPRING update's time at production sizes is a timed figure: measured alone with
    # `benchmarks/precision.py` where wanted; here its errors, with a small jacobian
    precision = [py, "benchmarks/precision.py", "--out", os.path.join(args.out, "precision.json"),
                 "--gram-walkers", "64" if args.quick else "256"]  # fmt: skip
    precision += ["--electrons", "6", "--walkers", "8"] * args.quick
    tests_precision = [*pytest, "-n", "2", "tests/test_precision.py"]
    jobs = [("tests", tests, "tests"), ("tests_precision", tests_precision, "tests"),
            ("precision", precision, "precision")]  # fmt: skip
    return [(name, cmd) for name, cmd, part in jobs if part in only]


def step_rows(args, only: set[str]) -> list[tuple[str, list[str]]]:
    """benchmarks/gpu_step.py per row, each told to wait for its go file once compiled."""
    step = [sys.executable, "benchmarks/gpu_step.py"]
    lih_steps, big_steps = ("3", "1") if args.quick else ("30", "5")
    small = ["walkers=64", "layers=[[32,8]]", "determinants=2"] if args.quick else PRODUCTION
    sets = lambda items: [x for item in items for x in ("--set", item)]
    rows = [
        ("lih", ["--steps", lih_steps, "--parts", "--trace", "5", *sets(["system=LiH"])]),
        # the A/B of SPRING's Cholesky factor: XLA's loop, as on a CPU
        ("lih_loop_factor", ["--steps", lih_steps, "--factor", "loop", *sets(["system=LiH"])]),
        # TensorFloat-32 in the wavefunction (SPRING's products at their default)
        ("lih_tf32", ["--steps", lih_steps, *sets(["system=LiH", "matmul_precision=default"])]),
        # the A/B of SPRING's Gram precision at N2 (the update was 64% of the step with
        # highest): the default (high) against highest, each traced (no parts' programs,
        # which took as long to compile as the step)
        ("n2_production", ["--steps", big_steps, "--trace", "3", *sets(["system=N2", *small])]),
        ("n2_production_highest", ["--steps", big_steps, "--trace", "3",
                                   *sets(["system=N2", *small, "gram_precision=highest"])]),
        ("c4h6_production", ["--steps", big_steps, "--trace", "3",
                             *sets([f"system={BUTADIENE}", *small])]),
    ]  # fmt: skip
    return [(label, [*step, *extra, "--label", label, "--go",
                     os.path.join(args.out, f"go-{label}")])
            for label, extra in rows if label in only]  # fmt: skip


def wait_ready(run: Run, label: str, proc, seconds: float) -> bool:
    """Whether the row said READY (compiled) within ``seconds``."""
    end = time.monotonic() + seconds
    path = os.path.join(run.out, f"{label}.log")
    while time.monotonic() < end and proc.poll() is None:
        with open(path) as f:
            if "READY\n" in f.read():
                return True
        time.sleep(0.5)
    run.record(dict(part=label, ready=False, exit=proc.poll()))
    return False


def signal_all(procs: dict, sig: int) -> None:
    for proc, _ in procs.values():
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)


def accuracy_start(run: Run, run_dir: str):
    """``psijax train --system N2`` (continued where ``run_dir`` holds a run), running until
    ``accuracy_finish``; (start time, process, log)."""
    path = os.path.join(run_dir, "run")
    cmd = [sys.executable, "-m", "psijax.cli", "train", "--steps", "1000000", "--stall-timeout",
           "0", "--checkpoint-minutes", "2", "--checkpoint-every", "0"]  # fmt: skip
    if os.path.exists(os.path.join(path, "config.json")):
        cmd += ["--resume", path]
    else:
        cmd += ["--system", "N2", "--out", path]
        if run.quick:
            cmd += ["--walkers", "32", "--layers", "16x4", "--determinants", "2"]
    return (time.monotonic(), *run.start("accuracy", cmd))


def accuracy_finish(run: Run, started: float, proc, log, run_dir: str, paused: float) -> None:
    """SIGTERM at the deadline (psijax writes a checkpoint and stops); its metrics and
    newest checkpoint into the results (to continue the run elsewhere)."""
    run.finish("accuracy", proc, log, run.left() - 25)
    path = os.path.join(run_dir, "run")
    metrics = os.path.join(path, "metrics.csv")
    if not os.path.exists(metrics):
        run.record(dict(part="accuracy", error="no metrics.csv"))
        return
    shutil.copyfile(metrics, os.path.join(run.out, "n2_metrics.csv"))
    shutil.copytree(path, os.path.join(run.out, "n2_run"), dirs_exist_ok=True)
    with open(metrics) as f:
        rows = [r for r in csv.DictReader(f)]
    run.record(dict(part="accuracy", wall_s=round(time.monotonic() - started, 1),
                    paused_s=round(paused, 1), steps=len(rows),
                    last_step=int(rows[-1]["step"]) if rows else None,
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
              "MCMC / local energy / jacobian / optimiser s | traced, ms per step |")  # fmt: skip
        print("|" + "---|" * 14)
        for r in steps:
            p = r.get("parts") or {}
            split = " / ".join(f"{p[k]:.4f}" for k in ("mcmc", "local_energy", "jacobian",
                                                        "optimizer") if k in p)  # fmt: skip
            traced = ", ".join(f"{k} {v * 1e3:.2f}" for k, v in sorted(
                (r.get("traced_parts") or {}).items(), key=lambda kv: -kv[1]))  # fmt: skip
            print(f"| {r['label']} | {r['device']} | {r['electrons']} | {r['params']:,} | "
                  f"{r['walkers']} | {r['laplacian']} | {r['chunk_size'] or 'none'} / "
                  f"{r['jacobian_blocks']} | {r['compile_s']:.1f} | "
                  f"{r.get('first_step_s', 0):.2f} | {r.get('step_s', float('nan')):.4f} | "
                  f"{r.get('walker_steps_per_s', float('nan')):,.0f} | "
                  f"{r.get('peak_mib', float('nan')):,.0f} | {split} | {traced} |")  # fmt: skip
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
         "n2_production_highest", "c4h6_production", "accuracy")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--budget", type=float, default=540.0, help="seconds for everything")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: check the script")
    parser.add_argument("--only", default=",".join(PARTS), help=f"some of {','.join(PARTS)}")
    parser.add_argument("--run-dir", default=os.path.join(tempfile.gettempdir(), "psijax-gpu-n2"),
                        help="the accuracy run's directory: continued where it exists")  # fmt: skip
    args = parser.parse_args()
    only = set(args.only.split(","))
    if only - set(PARTS):
        parser.error(f"--only: unknown parts {sorted(only - set(PARTS))}; use some of {PARTS}")
    os.makedirs(args.out, exist_ok=True)
    commands = dict(step_rows(args, only))
    n_big = sum(label in BIG for label in commands)
    run = Run(args.out, args.budget, args.quick, f"{BIG_SHARE / max(1, n_big):.2f}")
    environment(run)

    # everything starts at once (the compiles are the CPU's work, 16 cores there); the step
    # rows then run one at a time, each with everything else stopped (SIGSTOP) while it is
    # timed, so that no figure shares the GPU
    others = {name: run.start(name, cmd) for name, cmd in side_jobs(args, only)}
    accuracy_run = accuracy_start(run, args.run_dir) if "accuracy" in only else None
    if accuracy_run:
        others["accuracy"] = accuracy_run[1:]
    reserve = 45.0 if accuracy_run else 15.0  # to stop the N2 run and write its checkpoint
    rows = {label: run.start(label, cmd, big=label in BIG) for label, cmd in commands.items()}
    paused = 0.0
    for label in commands:
        proc, log = rows[label]
        ready = wait_ready(run, label, proc, run.left() - reserve)
        if not ready:
            run.finish(label, proc, log, 0)
            continue
        t = time.monotonic()
        rest = {**others, **{k: v for k, v in rows.items() if k != label}}
        signal_all(rest, signal.SIGSTOP)
        open(os.path.join(run.out, f"go-{label}"), "w").close()
        code = run.finish(label, proc, log, min(TIMED[label], run.left() - reserve))
        signal_all(rest, signal.SIGCONT)
        paused += time.monotonic() - t
        if code == 0:
            for row in run.rows_of(label):
                run.record(row)
    run.record(dict(part="others paused", seconds=round(paused, 1)))
    for name in ("tests", "tests_precision", "precision"):
        if name in others:
            stop = signal.SIGINT if name.startswith("tests") else signal.SIGTERM
            run.finish(name, *others[name], run.left() - reserve - 10, stop=stop)
    if accuracy_run:
        accuracy_finish(run, *accuracy_run, args.run_dir, paused)
    tables(run)


if __name__ == "__main__":
    import psijax

    psijax.configure()  # the process-wide set-up psijax's own jobs do
    main()
