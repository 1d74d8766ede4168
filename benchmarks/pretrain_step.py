"""The cost of one Hartree-Fock pretraining step, as ``psijax train`` pretrains.

    python benchmarks/pretrain_step.py [--system N2] [--steps 100] [--seed 0]

Builds the default job's network for ``--system`` (``psijax.config.Config``), runs Hartree-Fock
and ``psijax.training.pretrain.pretrain`` for exactly ``--steps`` steps (no extension), and
prints one table row: the first chunk of ``CHUNK`` steps (its compile included), then the
median wall and CPU time per step over the later chunks, and the mean loss of the last
chunk (equal losses in an A/B mean the same arithmetic). For an A/B comparison run it with
``PYTHONPATH`` at two checkouts, alternating, on an otherwise quiet machine.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import statistics
import time

import jax
import jax.numpy as jnp
from vmc_step import _cpu_name  # benchmarks/: the same machine line

import psijax
from psijax import config as config_lib
from psijax import registry, sampling, system
from psijax.system import sizing
from psijax.system.scf import hartree_fock
from psijax.training import pretrain as pretrain_lib


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", default="N2")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.steps < 2 * pretrain_lib.CHUNK:
        parser.error(f"--steps must be at least {2 * pretrain_lib.CHUNK}: two chunks or more")

    config = config_lib.from_dict({"system": args.system, "seed": args.seed})
    config = sizing.for_system(config)  # walkers by the molecule, as a run
    molecule = system.for_config(config)
    net = registry.ansatz(molecule, config)
    keys = jax.random.split(jax.random.PRNGKey(config.seed), 3)
    params = net.init(keys[0], jnp.float32)
    walkers = sampling.init_walkers(keys[1], molecule, config.walkers)
    hf = hartree_fock(molecule, config.basis)

    marks = [(time.perf_counter(), time.process_time())]
    _, _, losses = pretrain_lib.pretrain(
        keys[2], net, params, molecule, walkers, steps=args.steps, hf=hf,
        sampler=pretrain_lib.sampler_of(config, molecule),
        on_chunk=lambda done: marks.append((time.perf_counter(), time.process_time())),
    )  # fmt: skip
    chunk = pretrain_lib.CHUNK
    later = [(b[0] - a[0], b[1] - a[1]) for a, b in itertools.pairwise(marks[1:])]
    wall = statistics.median(w for w, _ in later) / chunk
    cpu = statistics.median(c for _, c in later) / chunk

    print(f"# Pretraining step: {args.system}, {time.strftime('%Y-%m-%dT%H:%M')}")
    print(
        f"- psijax {psijax.__version__}, jax {jax.__version__}, python {platform.python_version()}"
    )
    print(f"- CPU: {_cpu_name()}, {os.cpu_count()} logical cores; load {os.getloadavg()[0]:.2f}")
    print(
        f"- {net.describe()}, {config.walkers} walkers, {args.steps} steps in chunks of {chunk}\n"
    )
    print("| system | first chunk, compile included (s) | wall per step, later chunks (ms) "
          "| CPU per step (ms) | mean loss, last chunk |")  # fmt: skip
    print("|---|---|---|---|---|")
    print(f"| {args.system} | {marks[1][0] - marks[0][0]:.2f} | {1e3 * wall:.1f} | "
          f"{1e3 * cpu:.1f} | {losses[-chunk:].mean():.4e} |")  # fmt: skip


if __name__ == "__main__":
    psijax.configure()  # the process-wide set-up psijax's own jobs do
    main()
