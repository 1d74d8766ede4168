"""How far the walkers are from equilibrium when training starts, per sampler.

    python benchmarks/sampler_equilibration.py --system N2 --seeds 0 1 \
        --samplers metropolis scaled-metropolis [--burn-in 50] [--steps 12]

Runs ``psijax.train`` (Hartree-Fock, pretraining, burn-in, ``--steps`` training steps) with
each sampler and seed, the sampler used in pretraining and burn-in alike. Burn-in is run one
step at a time (each step ``--mcmc-moves`` moves, as the job's compiled burn-in does), and
after each step the mean of 2 log|psi| over the walkers is recorded: at equilibrium under
the pretrained parameters it fluctuates about a constant; walkers still relaxing into the
density drift upwards. Prints that mean every ``--every`` burn-in steps, the adapted width
and the mean of the first 10 training energies.
"""

import argparse
import platform
import time
import types

import jax
import jax.numpy as jnp
import numpy as np

import psijax
from psijax.sampling import burn_in
from psijax.training import job


def recording_burn_in(trace: list[float]):
    """A stand-in for ``psijax.sampling.burn_in`` in ``job``: its ``lower(...).compile()``
    gives a function that runs the same burn-in one sampler step at a time and appends the
    walkers' mean 2 log|psi| after each step (and before the first) to ``trace``."""

    def lower(key, sampler, log_abs, walkers, width, n_steps):
        one = jax.jit(lambda k, w, s: burn_in(k, sampler, log_abs, w, s, n_steps=1))

        def run(key, walkers, width):
            log_abs_walkers = log_abs(walkers)
            trace.append(float(jnp.mean(2 * log_abs_walkers)))
            for i in range(n_steps):
                walkers, log_abs_walkers, width = one(jax.random.fold_in(key, i), walkers, width)
                trace.append(float(jnp.mean(2 * log_abs_walkers)))
            trace.append(float(width))
            return walkers, log_abs_walkers, width

        return types.SimpleNamespace(compile=lambda: run)

    return types.SimpleNamespace(lower=lower)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--system", default="N2")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--samplers", nargs="+", default=["metropolis", "scaled-metropolis"])
    parser.add_argument("--burn-in", type=int, default=50)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--out", default="/tmp/psijax-sampler-equilibration")
    args = parser.parse_args()
    print(f"psijax {psijax.__version__}, jax {jax.__version__}, "
          f"{platform.processor() or platform.machine()}, {args.system}")  # fmt: skip
    marks = list(range(0, args.burn_in + 1, args.every))
    print("| sampler | seed | mean 2 log\\|psi\\| after burn-in steps "
          + ", ".join(map(str, marks)) + " | width | first 10 energies (Ha) | s |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for sampler in args.samplers:
        for seed in args.seeds:
            trace: list[float] = []
            job.burn_in = recording_burn_in(trace)
            energies: list[float] = []
            t0 = time.perf_counter()
            psijax.train(
                system=args.system, seed=seed, steps=args.steps, burn_in_steps=args.burn_in,
                sampler=sampler, out=f"{args.out}/{sampler}-{seed}", force=True,
                progress=False, on_step=lambda i, m, e=energies: e.append(m["energy"]),
            )  # fmt: skip
            width = trace.pop()
            means = " ".join(f"{trace[i]:.1f}" for i in marks)
            print(f"| {sampler} | {seed} | {means} | {width:.3f} | "
                  f"{np.mean(energies[:10]):.3f} | {time.perf_counter() - t0:.0f} |")  # fmt: skip


if __name__ == "__main__":
    main()
