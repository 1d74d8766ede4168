"""What an ECP costs: its terms against the kinetic energy, and the step against all-electron.

    python benchmarks/ecp_cost.py [--system "Cl 0 0 0"] [--spin 1] [--ecp ccecp]
                                  [--walkers 256] [--steps 20] [--repeats 10]

Part 1 times, on the same walkers and the default FermiNet (random parameters, float32),
each term of the ECP molecule's Hamiltonian alone (kinetic, Coulomb, ECP local, ECP
nonlocal with each quadrature rule), jitted over the walkers: the median of ``--repeats``
calls after one warm-up. Part 2 trains the default job (no pretraining, 5 burn-in steps)
for ``--steps`` steps on the ECP molecule and on the same atoms all-electron, alternating
A/B/A/B, and prints the median step time of each from its metrics.csv.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import os
import platform
import statistics
import tempfile
import time

import jax
import jax.numpy as jnp

import psijax
from psijax import hamiltonian, registry, sampling, system
from psijax.config import Config
from psijax.parallel.batching import map_walkers


def _median_seconds(fn, repeats: int) -> float:
    jax.block_until_ready(fn())
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def terms(args) -> None:
    molecule = system.resolve(args.system, spin=args.spin, ecp=args.ecp)
    config = Config(ecp=args.ecp)
    net = registry.ansatz(molecule, config)
    params = net.init(jax.random.PRNGKey(0), jnp.float32)
    walkers = sampling.init_walkers(jax.random.PRNGKey(1), molecule, args.walkers)
    keys = jax.random.split(jax.random.PRNGKey(2), args.walkers)
    print(f"## Terms alone: {args.system} with {args.ecp} ({molecule.n_electrons} valence "
          f"electrons), {args.walkers} walkers, FermiNet defaults\n")  # fmt: skip
    print("| term | median ms | vs kinetic |")
    print("|---|---|---|")
    kinetic_ms = None
    rows = []
    for points in (12, 4, 6, 18, 26):
        ham = hamiltonian.for_config(molecule, Config(ecp=args.ecp, ecp_quadrature=points))
        for term in ham.terms:
            name = type(term).__name__
            if points != 12 and name != "EcpNonlocal":
                continue

            def one(p, r_key, term=term, ham=ham):
                r, key = r_key
                walker = ham.walker(net, p, r, key)
                return sum(term(walker, key).values())

            fn = jax.jit(lambda p, w, k, one=one: map_walkers(one, p, (w, k)))
            ms = 1e3 * _median_seconds(lambda fn=fn: fn(params, walkers, keys), args.repeats)
            label = f"{name} ({points} points)" if name == "EcpNonlocal" else name
            kinetic_ms = ms if name == "Kinetic" else kinetic_ms
            rows.append((label, ms))
    for label, ms in rows:
        print(f"| {label} | {ms:.1f} | {ms / kinetic_ms:.2f} |")


def _median_step(out: str) -> float:
    """The median time of a step after the first two (metrics.csv's seconds are cumulative)."""
    with open(os.path.join(out, "metrics.csv")) as f:
        seconds = [float(r["seconds"]) for r in csv.DictReader(f)]
    return statistics.median(b - a for a, b in itertools.pairwise(seconds[2:]))


def steps(args) -> None:
    print(f"\n## Training step: {args.system}, {args.steps} steps, default job, A/B/A/B\n")
    print("| run | electrons | median step (s) | vs all-electron |")
    print("|---|---|---|---|")
    common = dict(system=args.system, spin=args.spin, steps=args.steps, pretrain_steps=0,
                  burn_in_steps=5, progress=False, compilation_cache="")  # fmt: skip
    results: dict[str, list[float]] = {"ECP": [], "all-electron": []}
    electrons = {}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(2):
            for label, ecp in (("ECP", args.ecp), ("all-electron", None)):
                out = os.path.join(tmp, f"{label}-{round_}")
                result = psijax.train(**common, ecp=ecp, out=out)
                electrons[label] = result.molecule.n_electrons
                results[label].append(_median_step(out))
    base = statistics.median(results["all-electron"])
    for label, values in results.items():
        m = statistics.median(values)
        print(f"| {label} | {electrons[label]} | {m:.3f} ({', '.join(f'{v:.3f}' for v in values)}) "
              f"| {m / base:.2f} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", default="Cl 0 0 0")
    parser.add_argument("--spin", type=int, default=1)
    parser.add_argument("--ecp", default="ccecp")
    parser.add_argument("--walkers", type=int, default=256)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--skip-steps", action="store_true", help="only time the terms")
    parser.add_argument("--skip-terms", action="store_true", help="only time the steps")
    args = parser.parse_args()
    print(f"# ECP cost, {time.strftime('%Y-%m-%d')}")
    print(
        f"- python {platform.python_version()}, jax {jax.__version__}, psijax {psijax.__version__}"
    )
    print(f"- {platform.machine()}, {os.cpu_count()} cores, load "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}\n")  # fmt: skip
    if not args.skip_terms:
        terms(args)
    if not args.skip_steps:
        steps(args)


if __name__ == "__main__":
    main()
