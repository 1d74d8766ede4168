"""The training step of each ansatz on the same job, measured in one run.

    python benchmarks/ansatz_step.py [--system LiH] [--steps 40] [--rounds 3]

For FermiNet and PsiFormer at their defaults (``psijax.config.Config``: 256 walkers,
16 determinants, 10 MCMC moves per step, SPRING, float32) builds the state from the same
seed (no pretraining; 20 burn-in steps), compiles the step, then times ``--steps`` steps
per round, alternating the ansaetze round by round so that a change in machine load hits
both. Prints parameters, compile time, the median step over all rounds and the ratio to
FermiNet.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import jax
import jax.numpy as jnp

import psijax
from psijax import config as config_lib
from psijax import hamiltonian, parallel, registry, sampling, system
from psijax.parallel.batching import map_walkers
from psijax.sampling import burn_in
from psijax.system import sizing
from psijax.training.job import step_config
from psijax.training.state import train_state
from psijax.training.step import make_step

ANSATZES = ("ferminet", "psiformer")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", default="LiH")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    molecule = system.resolve(args.system)
    mesh = parallel.make_mesh(None)
    jobs = {name: list(build_named(name, args.system, molecule, mesh)) for name in ANSATZES}
    times: dict[str, list[float]] = {name: [] for name in ANSATZES}
    for _ in range(args.rounds):
        for name in ANSATZES:
            _, step, state, _, _ = jobs[name]
            state, m = step(state)  # one untimed step after the other ansatz ran
            jax.block_until_ready(m)
            for _ in range(args.steps):
                t0 = time.perf_counter()
                state, m = step(state)
                jax.block_until_ready(m)
                times[name].append(time.perf_counter() - t0)
            jobs[name][2] = state
    print(f"# ansatz step benchmark, {time.strftime('%Y-%m-%dT%H:%M:%S')}")
    print(
        f"- {args.system}, 256 walkers, 10 MCMC moves, SPRING, float32; {args.rounds} rounds x "
        f"{args.steps} steps, alternating; python {platform.python_version()}, "
        f"jax {jax.__version__}; {os.cpu_count()} logical cores; load "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    print()
    print("| ansatz | parameters | compile (s) | median step (s) | vs FermiNet |")
    print("|---|---|---|---|---|")
    ref = statistics.median(times["ferminet"])
    for name in ANSATZES:
        net, _, _, compile_s, n_params = jobs[name]
        med = statistics.median(times[name])
        print(
            f"| {net.describe()} | {n_params:,} | {compile_s:.1f} | {med:.3f} | {med / ref:.2f} |"
        )


def build_named(name, system_name, molecule, mesh):
    config = config_lib.Config(system=system_name, ansatz=name)
    config = sizing.for_system(config)  # walkers by the molecule, as a run
    return build_step(config, molecule, mesh)


def build_step(config, molecule, mesh):
    """(network, compiled training step, its state after 20 burn-in steps, compile seconds,
    parameter count) of ``config`` for ``molecule``, random parameters."""
    net = registry.ansatz(molecule, config)
    optimizer = registry.optimizer(config)
    local_energy = hamiltonian.for_config(molecule, config).local_energy(net)
    sampler = registry.sampler(config, molecule)
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    params = net.init(keys[0], jnp.float32)
    walkers = sampling.init_walkers(keys[1], molecule, config.walkers)
    walkers, _, width = burn_in(
        keys[2], sampler, lambda w: map_walkers(net.log_abs, params, w), walkers,
        sampler.init(jnp.float32), n_steps=20,
    )  # fmt: skip
    state = train_state(net, optimizer, params, walkers, keys[3], sampler_state=width, mesh=mesh)
    phase = net.phase if getattr(net, "is_complex", False) else None  # a twist's complex psi
    step = make_step(
        net.log_abs, local_energy, optimizer, step_config(config), mesh, state, sampler,
        phase=phase,
    )  # fmt: skip
    t0 = time.perf_counter()
    step = step.lower(state).compile()
    compile_s = time.perf_counter() - t0
    n_params = sum(x.size for x in jax.tree.leaves(params))
    return net, step, state, compile_s, n_params


if __name__ == "__main__":
    psijax.configure()  # the process-wide set-up psijax's own jobs do
    main()
