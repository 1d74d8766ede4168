"""XLA's CPU code generation: one of psijax's choices against XLA's default, in compile
time, step time and a first launch. ``--option emitters``: the elemental emitters against
the fusion emitters; ``--option level``: LLVM's optimisation level 1 against 3.

    python benchmarks/cpu_codegen.py [--option emitters|level]
                                     [--cases LiH:ferminet,LiH:psiformer,N2:ferminet]
                                     [--rounds 2] [--launches 3] [--steps 20]

Each measurement runs in its own process (nothing cached), the two settings alternating:
psijax's (``psijax.parallel.cpu_codegen``) and XLA's default, asked for by the user's own
``XLA_FLAGS`` (``--xla_cpu_use_fusion_emitters=true`` or ``--xla_backend_optimization_level=3``,
which psijax then keeps).

- step: the default job of each case at psijax's default sizes with random parameters
  (benchmarks/step_profile.py's ``random_job``), its training step lowered and compiled as
  ``make_step`` builds it, then the median of ``--steps`` steps;
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
# per option: XLA's default as the user's flag, and the names of the two settings
OPTIONS = {
    "emitters": (
        "--xla_cpu_use_fusion_emitters=true",
        "fusion (XLA default)",
        "elemental (psijax)",
    ),
    "level": ("--xla_backend_optimization_level=3", "level 3 (XLA default)", "level 1 (psijax)"),
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


def alternating_row(option: str, system: str, ansatz: str, steps: int) -> dict:
    """The step compiled both ways in one process (True: XLA's default), then called
    alternately (load from other work hits both alike): median step seconds of each."""
    import jax

    from psijax.parallel import cpu_codegen

    step, state = default_step(system, ansatz)
    lowered = step.lower(state)
    default = {"emitters": {cpu_codegen.OPTION: True}, "level": {cpu_codegen.LEVEL: 3}}[option]
    compiled = {True: lowered.compile(default), False: lowered.compile()}
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
    return dict(default_s=median[True], psijax_s=median[False])


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


def run(what: list[str], default: bool, option: str) -> dict:
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + OPTIONS[option][0] * default).strip()
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
    _, default_name, psijax_name = OPTIONS[args.option]
    print(f"\n| case | {args.option} | lower s | compile s | median step s |"
          "\n|---|---|---|---|---|")  # fmt: skip
    ratios = []
    for case in args.cases.split(","):
        system, ansatz = case.split(":")
        steps = args.steps if system != "N2" else max(args.steps // 4, 3)
        rows = {True: [], False: []}
        for _ in range(args.rounds):
            for default in (True, False):
                row = run(["step", system, ansatz, str(steps)], default, args.option)
                rows[default].append(row)
        for default in (True, False):
            med = {k: statistics.median(r[k] for r in rows[default]) for k in rows[default][0]}
            rows[default] = med
            name = default_name if default else psijax_name
            print(f"| {case} | {name} | {med['lower_s']:.2f} | {med['compile_s']:.2f} "
                  f"| {med['step_s']:.4f} |")  # fmt: skip
        ab = run(["alternating", args.option, system, ansatz, str(2 * steps)], False, args.option)
        ratios.append((case, rows[False]["compile_s"] / rows[True]["compile_s"], ab))
    print("\n| case | compile, psijax / default | step alternating in one process: default / "
          "psijax s | ratio |\n|---|---|---|---|")  # fmt: skip
    for case, c, ab in ratios:
        print(f"| {case} | {c:.2f}x | {ab['default_s']:.4f} / {ab['psijax_s']:.4f} | "
              f"{ab['psijax_s'] / ab['default_s']:.3f}x |")  # fmt: skip
    if args.launches:
        print("\n| LiH first launch (empty cache) | to the first step's metrics, s | CPU s |"
              "\n|---|---|---|")  # fmt: skip
        launches = {True: [], False: []}
        for _ in range(args.launches):
            for default in (True, False):
                r = run(["launch"], default, args.option)
                launches[default].append(r)
                print(f"| {default_name if default else psijax_name} | "
                      f"{r['launch_s']:.1f} | {r['cpu_s']:.1f} |", flush=True)  # fmt: skip
        med = {d: statistics.median(r["launch_s"] for r in launches[d]) for d in launches}
        print(
            f"\nmedian launch: psijax {med[False]:.1f} s, default {med[True]:.1f} s "
            f"({med[False] / med[True]:.2f}x)"
        )


if __name__ == "__main__":
    main()
