"""How long the training step takes to build, per Laplacian operator: tracing and lowering
against XLA's compile, the local energy alone against the whole step.

    python benchmarks/step_compile.py [--system N2] [--laplacian forward,forward-sparse,loop]
                                      [--steps 5]

For each operator, in its own process (nothing cached between them): the default job at
psijax's default sizes with random parameters (benchmarks/step_profile.py's ``random_job``),
then ``jax.jit(...).lower`` and ``.compile()`` timed apart for the batch's local energy and
for the whole training step (``make_step``, as ``psijax train`` builds it with the default
chunking), the number of lines of their StableHLO, and the median of ``--steps`` steps.
XLA flags come from the environment (``XLA_FLAGS``), as in a launch.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def measure(system: str, laplacian: str, steps: int) -> dict:
    import jax

    from psijax import config as config_lib
    from psijax.training.job import step_config
    from psijax.training.step import make_step

    sys.path.insert(0, HERE)
    from molecule_scale import MOLECULES, atom_string
    from step_profile import random_job

    atoms = atom_string(system) if system in MOLECULES else system
    config = config_lib.from_dict(dict(system=atoms, laplacian=laplacian))
    job = random_job(config)
    row = dict(laplacian=laplacian)

    def build(name: str, fn, *args):
        t = time.perf_counter()
        lowered = fn.lower(*args)
        t1 = time.perf_counter()
        compiled = lowered.compile()
        row.update({f"{name}_lower_s": t1 - t, f"{name}_compile_s": time.perf_counter() - t1,
                    f"{name}_lines": lowered.as_text().count("\n")})  # fmt: skip
        return compiled

    energy = jax.jit(lambda p, w: jax.vmap(job.local_energy, (None, 0))(p, w))
    build("local_energy", energy, job.state.params, job.state.walkers)
    step = make_step(job.net.log_abs, job.local_energy, job.optimizer, step_config(config),
                     job.mesh, job.state, job.sampler)  # fmt: skip
    compiled = build("step", step, job.state)
    row["step_s"] = median_step(compiled, job.state, steps)
    return row


def median_step(compiled, state, steps: int) -> float:
    """Median seconds of ``steps`` calls of a compiled training step, after one untimed
    call, each waited for (``state`` is donated)."""
    import jax

    state, metrics = compiled(state)
    jax.block_until_ready(metrics)
    walls = []
    for _ in range(steps):
        t = time.perf_counter()
        state, metrics = compiled(state)
        jax.block_until_ready(metrics)
        walls.append(time.perf_counter() - t)
    return statistics.median(walls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", default="N2")
    parser.add_argument("--laplacian", default="forward,forward-sparse,loop")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--row", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.row:
        print(json.dumps(measure(args.system, args.row, args.steps)), flush=True)
        return
    import jax

    sys.path.insert(0, HERE)
    from vmc_step import _cpu_name

    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {_cpu_name()}, {os.cpu_count()} cores, "
          f"python {platform.python_version()}, jax {jax.__version__}, "
          f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}; "
          f"command: python benchmarks/step_compile.py {' '.join(sys.argv[1:])}")  # fmt: skip
    print(
        "\n| Laplacian | local energy: lower / compile s (StableHLO lines) "
        "| step: lower / compile s (lines) | median step s |\n|---|---|---|---|"
    )
    for laplacian in args.laplacian.split(","):
        done = subprocess.run(
            [sys.executable, __file__, "--system", args.system, "--steps", str(args.steps),
             "--row", laplacian], check=True, capture_output=True, text=True,
        )  # fmt: skip
        r = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"| {laplacian} | {r['local_energy_lower_s']:.2f} / "
              f"{r['local_energy_compile_s']:.2f} ({r['local_energy_lines']}) | "
              f"{r['step_lower_s']:.2f} / {r['step_compile_s']:.2f} ({r['step_lines']}) | "
              f"{r['step_s']:.3f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    import psijax

    psijax.configure()  # the process-wide set-up psijax's own jobs do
    main()
