"""The Laplacian compatibility matrix on many generated networks (the long run of
tests/test_laplacian_matrix.py).

Draws ``--networks`` networks from the grammar in tests/network_grammar.py (seeds
``--seed`` onwards) and runs, on each, every cell of tests/laplacian_cells.py (4
operators x 4 batchings x 4 contexts x {value, grad}, 120 cells) or, with
``--cells K``, K cells drawn at random per network. Each cell is compared with the
dense Hessian in float64. Prints one line per network as it goes and, at the end,
a table per operator and context: cells passed, failed (error above the tolerance)
and crashed (an exception), with the largest error seen.

    python benchmarks/laplacian_matrix.py --networks 20             # full product
    python benchmarks/laplacian_matrix.py --networks 300 --cells 6  # wide sample
    python benchmarks/laplacian_matrix.py --networks 10 --complex   # complex-valued log psi

With ``--complex`` the networks are complex-valued (plane waves with a twist, complex
orbital weights, complex slogdet/det/logsumexp, a phase term) and each cell checks the
complex kinetic energies, the values and the gradient of a real function of both against
the dense Hessians of the real and imaginary parts (``laplacian_cells.DenseParts``).

Exit status 1 if any cell failed or crashed.
"""

from __future__ import annotations

import argparse
import collections
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

# Compile-bound: the same XLA option as the test suite.
os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0"

import jax

jax.config.update("jax_num_cpu_devices", 4)
jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

from laplacian_cells import CELLS, OPERATORS, RTOL, error, reference, run  # noqa: E402
from network_grammar import Network, seeded_spec, walkers  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--networks", type=int, default=20)
    parser.add_argument("--seed", type=int, default=10_000, help="first network seed")
    parser.add_argument("--cells", type=int, default=None, help="random cells per network")
    parser.add_argument("--walkers", type=int, default=16)
    parser.add_argument("--complex", action="store_true", help="complex-valued networks")
    parser.add_argument("--max-electrons", type=int, default=5)
    parser.add_argument("--max-layers", type=int, default=3)
    args = parser.parse_args()
    bounds = {"max_electrons": args.max_electrons, "max_layers": args.max_layers}

    import folx

    print(
        f"# Laplacian matrix: python {platform.python_version()}, jax {jax.__version__}, "
        f"folx {folx.__version__}, {platform.machine()} {os.cpu_count()} cores, "
        f"load {os.getloadavg()[0]:.1f}; tolerance {RTOL:g} of each output's largest entry; "
        f"{'complex' if args.complex else 'real'}-valued networks, {bounds}"
    )
    rng = np.random.default_rng(args.seed)
    tally: dict = collections.defaultdict(lambda: [0, 0, 0, 0.0])  # pass, fail, crash, max
    failures = []
    start = time.perf_counter()
    for seed in range(args.seed, args.seed + args.networks):
        spec = seeded_spec(seed, complex_valued=args.complex, **bounds)
        net = Network(spec)
        params = net.init(jax.random.PRNGKey(seed))
        w = walkers(net, params, args.walkers, seed)
        ref = reference(net.log_psi, params, w)
        cells = CELLS
        if args.cells is not None:
            cells = [CELLS[i] for i in rng.choice(len(CELLS), args.cells, replace=False)]
        worst = 0.0
        for op, batching, context, mode in cells:
            row = tally[(op, context)]
            try:
                out = run(net.log_psi, OPERATORS[op], batching, context, mode, params, w)
                err = error(out, ref, mode)
            except Exception as exc:  # a crash is a result here
                row[2] += 1
                failures.append((seed, op, batching, context, mode, f"{type(exc).__name__}"))
                continue
            row[3] = max(row[3], err)
            worst = max(worst, err)
            if err <= RTOL:
                row[0] += 1
            else:
                row[1] += 1
                failures.append((seed, op, batching, context, mode, f"error {err:.1e}"))
        print(f"seed {seed}: {len(cells)} cells, worst {worst:.1e}  [{spec}]", flush=True)

    print(f"\n{args.networks} networks, {time.perf_counter() - start:.0f} s\n")
    print("| operator | context | passed | failed | crashed | largest error |")
    print("|---|---|---|---|---|---|")
    for op in OPERATORS:
        for context in ("none", "auto", "explicit", "shard_map"):
            p, f, c, m = tally[(op, context)]
            print(f"| {op} | {context} | {p} | {f} | {c} | {m:.1e} |")
    for failure in failures:
        print("FAILED", *failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
