"""What an ECP costs: its terms against the kinetic energy, and the step against all-electron.

    python benchmarks/ecp_cost.py [--system "Cl 0 0 0"|C6H6] [--spin 1] [--ecp ccecp]
                                  [--walkers 256] [--steps 20] [--repeats 10]
                                  [--points 4 6 18 26] [--unit bohr]

Part 1 times, on the same walkers and the default FermiNet (random parameters, float32),
each term of the ECP molecule's Hamiltonian alone (kinetic, Coulomb, ECP local, ECP
nonlocal with each quadrature rule; where the default moves fewer than all electrons onto
each nucleus' sphere, also the nonlocal term moving all of them), jitted over the walkers:
the median of ``--repeats`` calls after one warm-up. Part 2 trains the default job (no
pretraining, 5 burn-in steps) for ``--steps`` steps on the ECP molecule and on the same
atoms all-electron (``--ecp-only``: the ECP molecule with each nucleus moving its nearest
electrons against moving all), alternating A/B/A/B, and prints the median step time of
each from its metrics.csv.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import os
import platform
import statistics
import sys
import tempfile
import time

import jax
import jax.numpy as jnp

import psijax
from psijax import hamiltonian, registry, sampling, system
from psijax.config import Config
from psijax.hamiltonian import ecp as ecp_terms
from psijax.parallel.batching import map_walkers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from molecule_scale import MOLECULES, atom_string


def _median_seconds(fn, repeats: int) -> float:
    jax.block_until_ready(fn())
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def terms(args) -> None:
    molecule = system.resolve(args.system, spin=args.spin, ecp=args.ecp, unit=args.unit)
    config = Config(ecp=args.ecp)
    net = registry.ansatz(molecule, config)
    params = net.init(jax.random.PRNGKey(0), jnp.float32)
    walkers = sampling.init_walkers(jax.random.PRNGKey(1), molecule, args.walkers)
    keys = jax.random.split(jax.random.PRNGKey(2), args.walkers)
    print(f"## Terms alone: {args.label} with {args.ecp} ({molecule.n_electrons} valence "
          f"electrons), {args.walkers} walkers, FermiNet defaults\n")  # fmt: skip
    print("| term | median ms | vs kinetic |")
    print("|---|---|---|")
    kinetic_ms = None
    rows = []
    default_k = ecp_terms.EcpNonlocal.of(molecule).neighbours
    variants = [(12, None)] + [(12, 0)] * (default_k < molecule.n_electrons)
    variants += [(points, None) for points in args.points]
    for points, neighbours in variants:
        config = Config(ecp=args.ecp, ecp_quadrature=points, ecp_neighbours=neighbours)
        ham = hamiltonian.for_config(molecule, config)
        for term in ham.terms:
            name = type(term).__name__
            if (points, neighbours) != (12, None) and name != "EcpNonlocal":
                continue

            def one(p, r_key, term=term, ham=ham):
                r, key = r_key
                walker = ham.walker(net, p, r, key)
                return sum(term(walker, key).values())

            fn = jax.jit(lambda p, w, k, one=one: map_walkers(one, p, (w, k)))
            ms = 1e3 * _median_seconds(lambda fn=fn: fn(params, walkers, keys), args.repeats)
            label = name
            if name == "EcpNonlocal":
                all_moved = term.neighbours == molecule.n_electrons
                moved = "all" if all_moved else f"nearest {term.neighbours}"
                label = f"{name} ({points} points, {moved} of {molecule.n_electrons} electrons)"
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
    print(f"\n## Training step: {args.label}, {args.steps} steps, default job, A/B/A/B\n")
    common = dict(system=args.system, spin=args.spin, unit=args.unit, steps=args.steps,
                  pretrain_steps=0, burn_in_steps=5, progress=False,
                  compilation_cache="")  # fmt: skip
    if args.ecp_only:
        runs = {"ECP, nearest electrons": dict(ecp=args.ecp),
                "ECP, all electrons": dict(ecp=args.ecp, ecp_neighbours=0)}  # fmt: skip
    else:
        runs = {"ECP": dict(ecp=args.ecp), "all-electron": dict(ecp=None)}
    base_label = list(runs)[-1]
    print(f"| run | electrons | median step (s) | vs {base_label} |")
    print("|---|---|---|---|")
    results: dict[str, list[float]] = {label: [] for label in runs}
    electrons = {}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(2):
            for label, settings in runs.items():
                out = os.path.join(tmp, f"{len(results[label])}-{round_}-{label[:3]}")
                result = psijax.train(**common, **settings, out=out)
                electrons[label] = result.molecule.n_electrons
                results[label].append(_median_step(out))
    base = statistics.median(results[base_label])
    for label, values in results.items():
        m = statistics.median(values)
        print(f"| {label} | {electrons[label]} | {m:.3f} ({', '.join(f'{v:.3f}' for v in values)}) "
              f"| {m / base:.2f} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--system",
        default="Cl 0 0 0",
        help="a psijax system, or N2, C4H6, C6H6 of molecule_scale.py",
    )
    parser.add_argument("--spin", type=int, default=1)
    parser.add_argument("--ecp", default="ccecp")
    parser.add_argument("--walkers", type=int, default=256)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument(
        "--points",
        type=int,
        nargs="*",
        default=[4, 6, 18, 26],
        help="other quadrature rules to time the nonlocal term with",
    )
    parser.add_argument("--unit", default="bohr", help="of --system's coordinates")
    parser.add_argument(
        "--ecp-only",
        action="store_true",
        help="steps: nearest electrons against all, instead of against all-electron",
    )
    parser.add_argument("--skip-steps", action="store_true", help="only time the terms")
    parser.add_argument("--skip-terms", action="store_true", help="only time the steps")
    args = parser.parse_args()
    args.label = args.system
    if args.system in MOLECULES:  # the scale benchmark's molecules, by name
        args.system, args.unit = atom_string(args.system), "bohr"
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
    psijax.configure()  # the process-wide set-up psijax's own jobs do
    main()
