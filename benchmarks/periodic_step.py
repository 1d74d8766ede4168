"""The training step of a periodic system against a molecule of as many electrons,
measured in one run.

    python benchmarks/periodic_step.py [--pair gas|twist|crystal] [--steps 5] [--rounds 2]
        [--layers 64x16,64x16,64x16]

``--pair gas``: the electron gas of 14 electrons at rs = 5 (periodic FermiNet,
Ewald-summed Coulomb energy) against N2 (14 electrons, FermiNet with envelopes, plain
Coulomb energy); ``--pair twist``: the same gas at the twist (1/4, 1/4, 1/4) (complex
psi: complex determinants, two jacobian rows a walker) against it at Gamma; ``--pair
crystal``: LiH in its rocksalt primitive cell (4 electrons, the crystal FermiNet, Ewald
sums with the nuclei) against the LiH molecule. At the same
config (``psijax.config.Config``'s defaults: 256 walkers, 16 determinants, 10 MCMC moves
per step, SPRING, float32; ``--layers`` widths) build their state from the same seed (no
pretraining; 20 burn-in steps), compile the step, then time ``--steps`` steps per round,
alternating the systems round by round so that a change in machine load hits both.
Prints parameters, compile time, the median step over all rounds and the ratio to the
molecule's.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import jax
from ansatz_step import build_step  # benchmarks/: the same compiled step

import psijax
from psijax import config as config_lib
from psijax import parallel, system
from psijax.system import sizing

HALF = 4.0834 / 2  # angstrom: LiH's rocksalt lattice constant over 2
PAIRS = {  # the molecule first
    "gas": {"N2": {"system": "N2"}, "electron gas": {"system": "heg", "electrons": 14, "rs": 5.0}},
    "twist": {  # the gas at Gamma first: the twist's complex psi against its real one
        "electron gas": {"system": "heg", "electrons": 14, "rs": 5.0},
        "electron gas, twist": {"system": "heg", "electrons": 14, "rs": 5.0,
                                "twist": "0.25 0.25 0.25"},
    },
    "crystal": {
        "LiH": {"system": "LiH"},
        "LiH rocksalt": {"system": f"Li 0 0 0; H {HALF} 0 0", "unit": "angstrom",
                         "lattice": f"0 {HALF} {HALF}; {HALF} 0 {HALF}; {HALF} {HALF} 0"},
    },
}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", choices=PAIRS, default="gas")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--layers", default="64x16,64x16,64x16")
    args = parser.parse_args()
    layers = [[int(x) for x in part.split("x")] for part in args.layers.split(",")]
    mesh = parallel.make_mesh(None)
    systems = PAIRS[args.pair]
    molecule = next(iter(systems))
    jobs = {name: list(build(values, layers, mesh)) for name, values in systems.items()}
    times: dict[str, list[float]] = {name: [] for name in systems}
    for _ in range(args.rounds):
        for name in systems:
            _, step, state, _, _ = jobs[name]
            state, m = step(state)  # one untimed step after the other system ran
            jax.block_until_ready(m)
            for _ in range(args.steps):
                t0 = time.perf_counter()
                state, m = step(state)
                jax.block_until_ready(m)
                times[name].append(time.perf_counter() - t0)
            jobs[name][2] = state
    electrons = system.for_config(config_lib.from_dict(systems[molecule])).n_electrons
    print(
        f"# {' vs '.join(reversed(systems))} step benchmark, {time.strftime('%Y-%m-%dT%H:%M:%S')}"
    )
    print(
        f"- {electrons} electrons each, layers {args.layers}, 256 walkers, 16 determinants, "
        f"10 MCMC moves, SPRING, float32; {args.rounds} rounds x {args.steps} steps, alternating; "
        f"python {platform.python_version()}, jax {jax.__version__}; {os.cpu_count()} "
        f"logical cores; load {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    print()
    print(f"| system | network | parameters | compile (s) | median step (s) | vs {molecule} |")
    print("|---|---|---|---|---|---|")
    ref = statistics.median(times[molecule])
    for name in systems:
        net, _, _, compile_s, n_params = jobs[name]
        med = statistics.median(times[name])
        print(
            f"| {name} | {net.describe()} | {n_params:,} | {compile_s:.1f} | {med:.3f} "
            f"| {med / ref:.2f} |"
        )


def build(values, layers, mesh):
    config = config_lib.from_dict({**values, "layers": layers})
    molecule = system.for_config(config)
    config = sizing.sized(config, molecule)
    config = config_lib.from_dict({"walkers": 256}, config)
    return build_step(config, molecule, mesh)


if __name__ == "__main__":
    psijax.configure()  # the process-wide set-up psijax's own jobs do
    main()
