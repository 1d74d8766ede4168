"""Evaluation throughput against the training step's MCMC, same walkers, same process.

    python benchmarks/eval_throughput.py [--system LiH] [--rounds 3] [--calls 10]

Builds the default network (random parameters: the cost does not depend on their values)
and times, interleaved round by round so that load from other jobs hits each alike:

- the training step's MCMC alone (``mcmc_moves`` Metropolis moves of every walker),
- the whole training step (MCMC, local energy, jacobian, SPRING),
- one evaluation step with every observable (energy parts, S^2, dipole, forces with the
  Pulay term), and with each observable set given by ``--sets``.

Prints walker-steps per second (walkers / median seconds per step) and each ratio to the
MCMC alone. One device; float32 as in training.
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import psijax
from psijax import config as config_lib
from psijax import hamiltonian, parallel, registry, sampling, system
from psijax.estimators import observables
from psijax.evaluation import step as eval_step
from psijax.parallel.batching import map_walkers
from psijax.system import sizing
from psijax.training.state import train_state
from psijax.training.step import StepConfig, make_step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", default="LiH")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=10, help="timed calls per round")
    parser.add_argument("--sets", default="energy;energy,spin,dipole;energy,forces")
    args = parser.parse_args()

    config = config_lib.from_dict(dict(system=args.system))
    config = sizing.for_system(config)  # walkers by the molecule, as a run
    molecule = system.resolve(config.system)
    mesh = parallel.make_mesh(1)
    net = registry.ansatz(molecule, config)
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    params = net.init(keys[0], jnp.float32)
    walkers = sampling.init_walkers(keys[1], molecule, config.walkers)
    walkers = jax.device_put(walkers, parallel.walker_sharding(mesh))
    sampler = registry.sampler(config, molecule)
    frozen = registry.sampler(config, molecule, adapt=False)
    width = sampler.init(jnp.float32)
    n_moves, n_walkers = config.mcmc_moves, config.walkers
    energy = hamiltonian.for_config(molecule, config)
    op = energy.laplacian
    chunk = config.chunk_size

    @jax.jit
    def mcmc_only(params, walkers, key):
        batch = lambda w: map_walkers(net.log_abs, params, w, chunk_size=chunk)
        logp = batch(walkers)
        new, logp, _, moves = frozen.step(key, batch, walkers, logp, width)
        return new, logp, moves.acceptance

    local_energy = energy.local_energy(net)
    optimizer = registry.optimizer(config)
    own = lambda x: jax.tree.map(jnp.copy, x)  # the training step donates its state
    state = train_state(
        net, optimizer, own(params), own(walkers), keys[2], sampler_state=width, mesh=mesh
    )
    holder = {"state": state}

    def train_once():
        holder["state"], metrics = train(holder["state"])
        return metrics

    step_config = StepConfig(clip_scale=config.clip_scale, chunk_size=chunk)
    train = make_step(net.log_abs, local_energy, optimizer, step_config, mesh, state, sampler)

    def eval_fn(names):
        observed = observables.build(observables.parse(names), molecule, net)
        local = observables.local_values(energy, net, observed)
        step = eval_step.make_eval_step(
            net.log_abs, local, frozen, mesh, chunk,
            functools.partial(observables.combine, observed),
        )  # fmt: skip
        es = eval_step.EvalState(
            walkers, map_walkers(net.log_abs, params, walkers), width, jnp.zeros((), jnp.int32),
            keys[3],
        )  # fmt: skip
        held = {"state": parallel.to_global(own(es), eval_step.state_shardings(mesh))}

        def once():  # the evaluation step donates its state, as training's does
            held["state"], metrics = step(params, held["state"])
            return metrics

        return once

    cases = {
        f"training step's MCMC alone ({n_moves} moves)": (
            lambda: mcmc_only(params, walkers, keys[3])
        ),
        "whole training step (SPRING)": train_once,
        "evaluation step, all observables": eval_fn(list(observables.DEFAULT)),
    }
    for names in args.sets.split(";"):
        cases[f"evaluation step, {names}"] = eval_fn(names.split(","))

    compile_s = {}
    for name, fn in cases.items():
        t = time.perf_counter()
        jax.block_until_ready(fn())
        compile_s[name] = time.perf_counter() - t
    times: dict[str, list[float]] = {name: [] for name in cases}
    load = os.getloadavg()
    for _ in range(args.rounds):
        for name, fn in cases.items():
            for _ in range(args.calls):
                t = time.perf_counter()
                jax.block_until_ready(fn())
                times[name].append(time.perf_counter() - t)

    base = statistics.median(next(iter(times.values())))
    print(
        f"# {molecule.n_electrons} electrons ({config.system}), {n_walkers} walkers, "
        f"{net.describe()}, Laplacian {type(op).__name__}; jax {jax.__version__}, "
        f"numpy {np.__version__}, "
        f"python {platform.python_version()}; load {load[0]:.2f} -> {os.getloadavg()[0]:.2f}; "
        f"median of {args.rounds} x {args.calls} calls, interleaved"
    )
    print("| step | median (s) | walker-steps/s | time / MCMC alone | first call (s) |")
    print("|---|---|---|---|---|")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(
            f"| {name} | {med:.4f} | {n_walkers / med:.0f} | {med / base:.2f}x | "
            f"{compile_s[name]:.1f} |"
        )


if __name__ == "__main__":
    psijax.configure()  # the process-wide set-up psijax's own jobs do
    main()
