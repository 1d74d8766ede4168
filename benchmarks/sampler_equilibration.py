"""How far the walkers are from equilibrium when training starts, per sampler.

    python benchmarks/sampler_equilibration.py --system N2 --seeds 0 1 \
        --samplers metropolis scaled-metropolis [--burn-in 20] [--steps 12]

Runs ``psijax.train`` (Hartree-Fock, pretraining, burn-in, ``--steps`` training steps) with
each sampler as the run's and each seed. Pretraining moves with steps scaled to the nearest
nucleus whatever the run's sampler, and so do all but the last 10 burn-in steps (the run's
sampler's, adapting its width). Burn-in is run one step at a time (each step 10 moves, as
the job's compiled burn-in does), and after each step the mean of 2 log|psi| over the
walkers is recorded: at equilibrium under the pretrained parameters it fluctuates about a
constant; walkers still relaxing into the density drift upwards. Prints that mean every
``--every`` burn-in steps, the adapted width and the mean of the first 10 training energies.
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
from psijax.sampling.base import LEAD_STREAM
from psijax.training import start


def recording_burn_in(trace: list[float]):
    """A stand-in for ``psijax.sampling.burn_in`` in ``psijax.training.start``: its
    ``lower(...).compile()`` gives a function that runs the same burn-in (the lead's steps,
    then the run's sampler's) one sampler step at a time and appends the walkers' mean
    2 log|psi| after each step (and before the first) to ``trace``, then the width."""

    def lower(key, sampler, log_abs, walkers, width, n_steps, lead=None, lead_steps=0):
        one = jax.jit(lambda k, w, s, chosen: burn_in(k, chosen, log_abs, w, s, n_steps=1),
                      static_argnums=3)  # fmt: skip

        def run(key, walkers, width):
            log_abs_walkers = log_abs(walkers)
            trace.append(float(jnp.mean(2 * log_abs_walkers)))
            lead_key, state = jax.random.fold_in(key, LEAD_STREAM), lead and lead.init()
            for i in range(lead_steps):
                walkers, log_abs_walkers, state = one(
                    jax.random.fold_in(lead_key, i), walkers, state, lead
                )
                trace.append(float(jnp.mean(2 * log_abs_walkers)))
            for i in range(n_steps):
                walkers, log_abs_walkers, width = one(
                    jax.random.fold_in(key, i), walkers, width, sampler
                )
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
    parser.add_argument("--burn-in", type=int, default=20)
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
            start.burn_in = recording_burn_in(trace)
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
