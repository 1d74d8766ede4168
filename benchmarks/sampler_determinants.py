"""The samplers' determinants: LAPACK's LU (``jnp.linalg.slogdet``) against the unrolled
elimination of ``psijax.ansatz.slogdet``, alone and in the training step.

    python benchmarks/sampler_determinants.py [--sizes 2,4,7,8,10,14] [--systems LiH,Be]
                                              [--steps 20] [--rounds 6]

First, for each matrix size n, a batch of 2,048 x 16 random n x n float32 matrices (the
MCMC's calls of a LiH step hold 128 walkers x 16 determinants each): both jitted, called
alternately, median time of 30 calls, and their float32 errors in log|det| against float64
LAPACK (median, 99th percentile). Then the training step of each system at psijax's
defaults (random parameters, no pretraining: a step's cost does not depend on the
parameters' values) compiled twice in one process, with the samplers' determinants by
LAPACK (``slogdet.SMALL = 0`` while it traces) and as psijax has them, and called in
alternating rounds of ``--steps`` steps: the compile (the second sees XLA's and LLVM's
warm caches; a first launch compiles once) and median step, and the ratio.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH = (2048, 16)


def _median_call(fn, *args, calls: int = 30) -> float:
    jax.block_until_ready(fn(*args))
    walls = []
    for _ in range(calls):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        walls.append(time.perf_counter() - t)
    return statistics.median(walls)


def matrices_row(n: int) -> dict:
    from psijax.ansatz import slogdet

    x64 = np.random.default_rng(n).standard_normal((*BATCH, n, n))
    with jax.enable_x64(True):
        exact = np.asarray(jnp.linalg.slogdet(jnp.asarray(x64))[1])
    x = jnp.asarray(x64, jnp.float32)
    lapack, unrolled = jax.jit(jnp.linalg.slogdet), jax.jit(slogdet.eliminate)
    times = {"lapack": [], "unrolled": []}
    for _ in range(3):  # alternating, so that load hits both alike
        times["lapack"].append(_median_call(lapack, x))
        times["unrolled"].append(_median_call(unrolled, x))
    row = {k: statistics.median(v) for k, v in times.items()}
    for name, fn in (("lapack", lapack), ("unrolled", unrolled)):
        error = np.abs(np.asarray(fn(x)[1], np.float64) - exact)
        row[name + "_err"] = (np.median(error), np.quantile(error, 0.99))
    return row


def step_row(system: str, steps: int, rounds: int) -> dict:
    from psijax import config as config_lib
    from psijax.ansatz import slogdet
    from psijax.training.job import step_config
    from psijax.training.step import make_step

    sys.path.insert(0, HERE)
    from molecule_scale import MOLECULES, atom_string
    from step_profile import random_job

    atoms = atom_string(system) if system in MOLECULES else system
    config = config_lib.from_dict(dict(system=atoms))
    job = random_job(config)
    compiled, states, compile_s = {}, {}, {}
    default = slogdet.SMALL
    for name, small in (("lapack", 0), ("psijax", default)):
        slogdet.SMALL = small
        try:
            step = make_step(job.net.log_abs, job.local_energy, job.optimizer,
                             step_config(config), job.mesh, job.state, job.sampler)  # fmt: skip
            lowered = step.lower(job.state)
            t = time.perf_counter()
            compiled[name] = lowered.compile()
            compile_s[name] = time.perf_counter() - t
        finally:
            slogdet.SMALL = default
        states[name] = jax.tree.map(lambda a: a.copy(), job.state)  # the step donates it
        for _ in range(2):
            states[name], metrics = compiled[name](states[name])
            jax.block_until_ready(metrics)
    walls = {name: [] for name in compiled}
    for r in range(rounds):
        for name in list(compiled)[:: 1 if r % 2 == 0 else -1]:
            for _ in range(steps):
                t = time.perf_counter()
                states[name], metrics = compiled[name](states[name])
                jax.block_until_ready(metrics)
                walls[name].append(time.perf_counter() - t)
    sizes = sorted({m.shape[-1] for m in _orbital_shapes(job)})
    row = {name: statistics.median(w) for name, w in walls.items()}
    row["sizes"] = sizes
    row["compile"] = compile_s
    return row


def _orbital_shapes(job):
    """The shapes of the orbital matrices of one walker."""
    walker = job.state.walkers[0]
    return jax.eval_shape(job.net.orbitals, job.state.params, walker)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2,4,7,8,10,14")
    parser.add_argument("--systems", default="LiH,Be")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()

    sys.path.insert(0, HERE)
    from vmc_step import _cpu_name

    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {_cpu_name()}, {os.cpu_count()} CPUs, "
          f"jax {jax.__version__}, python {platform.python_version()}; command: python "
          f"benchmarks/sampler_determinants.py {' '.join(sys.argv[1:])}")  # fmt: skip
    print("\n| n | LAPACK ms | unrolled ms | unrolled / LAPACK | float32 error, LAPACK "
          "(median / p99) | unrolled |\n|---|---|---|---|---|---|")  # fmt: skip
    for n in map(int, args.sizes.split(",")):
        r = matrices_row(n)
        err = lambda e: f"{e[0]:.1e} / {e[1]:.1e}"
        print(f"| {n} | {r['lapack'] * 1e3:.2f} | {r['unrolled'] * 1e3:.2f} | "
              f"{r['unrolled'] / r['lapack']:.2f}x | {err(r['lapack_err'])} | "
              f"{err(r['unrolled_err'])} |", flush=True)  # fmt: skip
    print(
        "\n| system | orbital matrices | compile s, samplers by LAPACK / psijax | step, "
        "samplers by LAPACK | step, psijax | psijax / LAPACK |\n" + "|---" * 6 + "|"
    )
    for system in filter(None, args.systems.split(",")):
        r = step_row(system, args.steps, args.rounds)
        c, sizes = r["compile"], "/".join(f"{n} x {n}" for n in r["sizes"])
        print(f"| {system} | {sizes} | {c['lapack']:.1f} / {c['psijax']:.1f} | "
              f"{r['lapack']:.4f} s | {r['psijax']:.4f} s | {r['psijax'] / r['lapack']:.3f}x |",
              flush=True)  # fmt: skip


if __name__ == "__main__":
    import psijax

    psijax.configure()  # the process-wide set-up psijax's own jobs do
    main()
