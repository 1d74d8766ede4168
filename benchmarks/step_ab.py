"""The training step of two configs, timed call by call in one process.

    python benchmarks/step_ab.py --system LiH --a determinants=8 --b determinants=16 [--steps 40]
                                 [--more "laplacian=forward chunk_size=64" ...]

Builds the default job's training step (``psijax.training.step``, random parameters, no
pretraining: a step's cost does not depend on the parameters' values) for the config
keys of ``--a`` and of ``--b`` (``key=value`` pairs over the defaults, values as TOML
would read them), compiles both, then alternates them step by step so that load from
other jobs hits both alike, and prints one table: parameters, compile time, median and
p10/p90 step time, and the ratio to a. Each ``--more`` adds a config (its pairs in one
argument), timed in the same rotation (c, d, ...). ``groups=N`` sets the step's walker
groups (``psijax.training.execution``; 1: one program), which is not a config key.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import time
import tomllib

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree
from vmc_step import _cpu_name  # benchmarks/: the same machine line

import psijax
from psijax import config as config_lib
from psijax import hamiltonian, parallel, registry, sampling, system
from psijax.system import sizing
from psijax.training.job import step_config
from psijax.training.state import train_state
from psijax.training.step import make_step


def _overrides(pairs: list[str]) -> dict:
    return tomllib.loads("\n".join(pairs)) if pairs else {}


def _build(base: dict, pairs: list[str]):
    overrides = _overrides(pairs)
    groups = overrides.pop("groups", None)  # the step's walker groups, not a config key
    config = config_lib.from_dict({**base, **overrides})
    config = sizing.for_system(config)  # walkers by the molecule, as a run
    molecule = system.resolve(config.system, charge=config.charge, spin=config.spin,
                              unit=config.unit, ecp=config.ecp)  # fmt: skip
    mesh = parallel.make_mesh(config.devices)
    net = registry.ansatz(molecule, config)
    keys = jax.random.split(jax.random.PRNGKey(config.seed), 3)
    params = net.init(keys[0], jnp.float32)
    walkers = sampling.init_walkers(keys[1], molecule, config.walkers)
    optimizer = registry.optimizer(config)
    state = train_state(net, optimizer, params, walkers, keys[2], mesh=mesh)
    energy = hamiltonian.for_config(molecule, config).local_energy(net)
    settings = dataclasses.replace(step_config(config), groups=groups)
    step = make_step(net.log_abs, energy, optimizer, settings, mesh, state,
                     registry.sampler(config, molecule))  # fmt: skip
    t = time.perf_counter()
    state, metrics = step(state)
    jax.block_until_ready(metrics)
    return step, state, time.perf_counter() - t, ravel_pytree(params)[0].size, net.describe()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", default="LiH")
    parser.add_argument("--a", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--b", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--more", action="append", default=[], metavar="'KEY=VALUE ...'")
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()

    base = {"system": args.system}
    configs = {"a": args.a, "b": args.b}
    configs.update({chr(ord("c") + i): more.split() for i, more in enumerate(args.more)})
    runs = {name: _build(base, pairs) for name, pairs in configs.items()}
    states = {name: run[1] for name, run in runs.items()}
    for name in runs:  # warm up
        for _ in range(2):
            states[name], metrics = runs[name][0](states[name])
        jax.block_until_ready(metrics)
    load = os.getloadavg()[0]
    times = {name: [] for name in runs}
    for _ in range(args.steps):
        for name, run in runs.items():
            t = time.perf_counter()
            states[name], metrics = run[0](states[name])
            jax.block_until_ready(metrics)
            times[name].append(time.perf_counter() - t)

    print(f"# Training step, A/B: {args.system[:60]}, {time.strftime('%Y-%m-%dT%H:%M')}")
    print(
        f"- python {platform.python_version()}, jax {jax.__version__}, psijax {psijax.__version__}"
    )
    print(f"- CPU: {_cpu_name()}, {os.cpu_count()} logical cores, "
          f"XLA CPU pool PJRT_NPROC={os.environ.get('PJRT_NPROC')}")  # fmt: skip
    print(f"- {args.steps} steps each, alternating; load average {load:.2f} -> "
          f"{os.getloadavg()[0]:.2f}\n")  # fmt: skip
    print("| | config | network | parameters | compile + first step (s) | median step (s) "
          "| p10 / p90 (s) | vs a |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    median_a = statistics.median(times["a"])
    for name, pairs in configs.items():
        t = sorted(times[name])
        median = statistics.median(t)
        p10, p90 = t[len(t) // 10], t[(9 * len(t)) // 10]
        _, _, compile_s, n_params, network = runs[name]
        print(f"| {name} | {' '.join(pairs) or 'defaults'} | {network} | {n_params:,} | "
              f"{compile_s:.1f} | {median:.4f} | {p10:.4f} / {p90:.4f} | "
              f"{median / median_a:.2f} |")  # fmt: skip


if __name__ == "__main__":
    psijax.configure()  # the process-wide set-up psijax's own jobs do
    main()
