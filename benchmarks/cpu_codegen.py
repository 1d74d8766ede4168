"""XLA's CPU code generation: psijax's choices against others, in compile time, step time
and a first launch. ``--option emitters``: the elemental emitters (psijax's) against the
fusion emitters (XLA's default); ``--option level``: LLVM's optimisation level, psijax's
(XLA's default 3 for the training step, 1 for pretraining and burn-in) against 3 and 1
for every program.

    python benchmarks/cpu_codegen.py [--option emitters|level]
                                     [--cases LiH:ferminet,LiH:psiformer,N2:ferminet]
                                     [--rounds 2] [--launches 3] [--steps 20]

Each measurement runs in its own process (nothing cached), the settings alternating:
psijax's (``psijax.parallel.cpu_codegen``) and the others, asked for by the user's own
``XLA_FLAGS`` (``--xla_cpu_use_fusion_emitters=true``, ``--xla_backend_optimization_level=N``),
which psijax then keeps.

- step: the default job of each case at psijax's default sizes with random parameters
  (benchmarks/step_profile.py's ``random_job``), its training step lowered and compiled as
  ``make_step`` builds it, then the median of ``--steps`` steps; and the step compiled
  with each setting in one process, called alternately;
- launch: ``psijax.train(system="LiH", steps=3, compilation_cache="")``, seconds from the
  process's exec to the first training step's metrics (they arrive one step late) and the
  process's CPU seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# per option: (name, the user's XLA_FLAGS asking for it) of the settings other than psijax's;
# the step's rows compare psijax's with the first, the launch's with all
OPTIONS = {
    "emitters": [("fusion (XLA default)", "--xla_cpu_use_fusion_emitters=true")],
    "level": [
        ("level 1 everywhere", "--xla_backend_optimization_level=1"),
        ("level 3 everywhere (XLA default)", "--xla_backend_optimization_level=3"),
    ],
}
PSIJAX = "psijax"


def _options(flag: str) -> dict:
    """``--name=value`` as compile options."""
    name, value = flag.removeprefix("--").split("=")
    return {
        name: {"true": True, "false": False}.get(value, int(value) if value.isdigit() else value)
    }


def default_step(system: str, ansatz: str):
    """The training step of ``system``'s default job with ``ansatz`` at psijax's default
    sizes (random parameters) as ``make_step`` builds it, and the job's state."""
    from psijax import config as config_lib
    from psijax.training.job import step_config
    from psijax.training.step import make_step

    sys.path.insert(0, HERE)
    from step_profile import random_job

    config = config_lib.from_dict(dict(system=system, ansatz=ansatz))
    job = random_job(config)
    step = make_step(job.net.log_abs, job.local_energy, job.optimizer, step_config(config),
                     job.mesh, job.state, job.sampler)  # fmt: skip
    return step, job.state


def step_row(system: str, ansatz: str, steps: int) -> dict:
    from step_compile import median_step

    step, state = default_step(system, ansatz)
    t = time.perf_counter()
    lowered = step.lower(state)
    t1 = time.perf_counter()
    compiled = lowered.compile()
    t2 = time.perf_counter()
    return dict(lower_s=t1 - t, compile_s=t2 - t1, step_s=median_step(compiled, state, steps))


def alternating_row(flag: str, system: str, ansatz: str, steps: int) -> dict:
    """The step compiled psijax's way and with ``flag``'s options in one process, then
    called alternately (load from other work hits both alike): median step seconds of each
    (``other``: with ``flag``)."""
    import jax

    step, state = default_step(system, ansatz)
    lowered = step.lower(state)
    compiled = {True: lowered.compile(_options(flag)), False: lowered.compile()}
    walls = {True: [], False: []}
    states = {x: jax.tree.map(lambda a: a.copy(), state) for x in (True, False)}
    for i in range(2 * steps + 2):
        x = bool(i % 2)
        s = time.perf_counter()
        states[x], metrics = compiled[x](states[x])
        jax.block_until_ready(metrics)
        if i >= 2:  # each variant's first call
            walls[x].append(time.perf_counter() - s)
    median = {x: statistics.median(w) for x, w in walls.items()}
    return dict(other_s=median[True], psijax_s=median[False])


def launch_row() -> dict:
    sys.path.insert(0, os.path.join(HERE, "peers"))
    from _clock import process_start_wall

    start = process_start_wall(time.time())
    import psijax

    first = []
    with tempfile.TemporaryDirectory() as out:
        psijax.train(system="LiH", steps=3, compilation_cache="", out=os.path.join(out, "run"),
                     progress=False, on_step=lambda *_: first.append(time.time()))  # fmt: skip
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return dict(launch_s=first[0] - start, cpu_s=usage.ru_utime + usage.ru_stime)


def run(what: list[str], flag: str) -> dict:
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + flag).strip()
    done = subprocess.run([sys.executable, __file__, "--row", *what], env=env, check=True,
                          capture_output=True, text=True)  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--option", choices=sorted(OPTIONS), default="emitters")
    parser.add_argument("--cases", default="LiH:ferminet,LiH:psiformer,N2:ferminet")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--launches", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--row", nargs="+", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.row:
        kind, *rest = args.row
        if kind == "alternating":
            row = alternating_row(*rest[:3], int(rest[3]))
        else:
            rows = dict(launch=launch_row, step=step_row)
            row = rows[kind](*rest[:2], int(rest[2])) if rest else rows[kind]()
        print(json.dumps(row), flush=True)
        return
    import jax

    sys.path.insert(0, HERE)
    from vmc_step import _cpu_name

    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {_cpu_name()}, {os.cpu_count()} cores, "
          f"python {platform.python_version()}, jax {jax.__version__}; command: "
          f"python benchmarks/cpu_codegen.py {' '.join(sys.argv[1:])}")  # fmt: skip
    others = OPTIONS[args.option]
    other_name, other_flag = others[0]
    print(f"\n| case | {args.option} | lower s | compile s | median step s |"
          "\n|---|---|---|---|---|")  # fmt: skip
    ratios = []
    for case in args.cases.split(","):
        system, ansatz = case.split(":")
        steps = args.steps if system != "N2" else max(args.steps // 4, 3)
        settings = {other_name: other_flag, PSIJAX: ""}
        rows = {name: [] for name in settings}
        for _ in range(args.rounds):
            for name, flag in settings.items():
                rows[name].append(run(["step", system, ansatz, str(steps)], flag))
        for name in settings:
            med = {k: statistics.median(r[k] for r in rows[name]) for k in rows[name][0]}
            rows[name] = med
            print(f"| {case} | {name} | {med['lower_s']:.2f} | {med['compile_s']:.2f} "
                  f"| {med['step_s']:.4f} |")  # fmt: skip
        ab = run(["alternating", other_flag.removeprefix("--"), system, ansatz, str(2 * steps)], "")
        ratios.append((case, rows[PSIJAX]["compile_s"] / rows[other_name]["compile_s"], ab))
    print(f"\n| case | compile, psijax / {other_name} | step alternating in one process: "
          f"{other_name} / psijax s | ratio |\n|---|---|---|---|")  # fmt: skip
    for case, c, ab in ratios:
        print(f"| {case} | {c:.2f}x | {ab['other_s']:.4f} / {ab['psijax_s']:.4f} | "
              f"{ab['psijax_s'] / ab['other_s']:.3f}x |")  # fmt: skip
    if args.launches:
        print("\n| LiH first launch (empty cache) | to the first step's metrics, s | CPU s |"
              "\n|---|---|---|")  # fmt: skip
        settings = {**dict(others), PSIJAX: ""}
        launches = {name: [] for name in settings}
        for _ in range(args.launches):
            for name, flag in settings.items():
                r = run(["launch"], flag)
                launches[name].append(r)
                print(f"| {name} | {r['launch_s']:.1f} | {r['cpu_s']:.1f} |", flush=True)
        med = {name: statistics.median(r["launch_s"] for r in launches[name]) for name in settings}
        print("\nmedian launch: " + ", ".join(
            f"{name} {med[name]:.1f} s ({med[PSIJAX] / med[name]:.2f}x psijax's)"
            for name in settings if name != PSIJAX
        ) + f", psijax {med[PSIJAX]:.1f} s")  # fmt: skip


if __name__ == "__main__":
    import psijax

    psijax.configure()  # the process-wide set-up psijax's own jobs do
    main()
