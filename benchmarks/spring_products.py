"""SPRING's per-walker jacobian and Gram matrix: the whole array against one block per leaf
and against factors, and the Gram matrix as one product against three of half the walkers.

    python benchmarks/spring_products.py [--system LiH] [--ansatz ferminet] [--walkers 256]

On the default network of ``--system`` with random parameters, times (jitted, interleaved
call by call so that load from other jobs hits every variant alike, median of
``--repeats``):

- the jacobian with the Gram matrix: per-walker gradients flattened into one
  ``[walkers, params]`` array (``jacobian.Dense``: a concatenate of every leaf) against the
  gradients kept as one block per leaf (``jacobian.Leaves`` of rows) and against the
  weight-shared layers' blocks in factors where cheaper (``jacobian.leaves``: what psijax
  does, ``psijax.ansatz.taps``);
- the Gram matrix alone from a given centered ``[walkers, params]`` array: ``C @ C.T`` (what
  psijax does) against three products of half the walkers (a quarter fewer flops; slower
  on one thread of XLA's CPU backend, docs/benchmarks.md).

Also prints the largest relative difference of each variant's Gram matrix from the first.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree
from vmc_step import _cpu_name  # benchmarks/: the same machine line

import psijax
from psijax import registry, sampling, system
from psijax.config import Config
from psijax.optim import jacobian
from psijax.parallel.batching import map_walkers


def _interleaved(fns: dict, args: tuple, repeats: int) -> dict[str, float]:
    """Median seconds per call of each function, called in turn ``repeats`` times."""
    for fn in fns.values():
        jax.block_until_ready(fn(*args))
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times[name].append(time.perf_counter() - t)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", default="LiH")
    parser.add_argument("--ansatz", default="ferminet")
    parser.add_argument("--walkers", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()

    config = Config(system=args.system, ansatz=args.ansatz, walkers=args.walkers)
    molecule = system.resolve(config.system)
    net = registry.ansatz(molecule, config)
    params = net.init(jax.random.PRNGKey(0), jnp.float32)
    walkers = sampling.init_walkers(jax.random.PRNGKey(1), molecule, args.walkers)
    keep = jnp.ones(args.walkers)
    n_params = ravel_pytree(params)[0].size

    def flat_grad(p, r):
        return ravel_pytree(jax.grad(net.log_abs)(p, r))[0]

    @jax.jit
    def whole(p, w):
        return jacobian.Dense(map_walkers(flat_grad, p, w)).centered_gram(jnp.float32)

    @jax.jit
    def leaves(p, w):
        rows = map_walkers(jax.grad(net.log_abs), p, w)
        return jacobian.Leaves.of(rows, keep).centered_gram(jnp.float32)

    @jax.jit
    def factors(p, w):
        return jacobian.leaves(net.log_abs, p, w, keep).centered_gram(jnp.float32)

    rows = jax.jit(lambda p, w: map_walkers(flat_grad, p, w))(params, walkers)
    centered = rows - rows.mean(axis=0)

    @jax.jit
    def one_product(c):
        return c @ c.T

    @jax.jit
    def symmetric(c):  # a quarter fewer flops: the upper right block is the lower left's .T
        top, bottom = c[: c.shape[0] // 2], c[c.shape[0] // 2 :]
        lower = bottom @ top.T
        return jnp.block([[top @ top.T, lower.T], [lower, bottom @ bottom.T]])

    print(f"# SPRING's jacobian and Gram matrix: {args.system}, {time.strftime('%Y-%m-%dT%H:%M')}")
    print(
        f"- python {platform.python_version()}, jax {jax.__version__}, psijax {psijax.__version__}"
    )
    pool = os.environ.get("PJRT_NPROC")
    print(f"- CPU: {_cpu_name()}; {os.cpu_count()} logical cores; XLA CPU pool PJRT_NPROC={pool}")
    print(f"- {net.describe()}, {args.walkers} walkers x {n_params} parameters, float32, "
          f"median of {args.repeats} interleaved calls")  # fmt: skip
    print(f"- load average at start: {os.getloadavg()[0]:.2f}\n")

    reference = whole(params, walkers)
    scale = float(jnp.max(jnp.abs(reference)))
    variants = {"whole": whole, "leaves": leaves, "factors": factors}
    jac = _interleaved(variants, (params, walkers), args.repeats)
    gram = _interleaved({"one": one_product, "sym": symmetric}, (centered,), args.repeats)
    diff = lambda g: float(jnp.max(jnp.abs(g - reference))) / scale
    print("| computation | variant | median ms | vs first | max rel. diff of the Gram matrix |")
    print("|---|---|---|---|---|")
    rows_out = [
        ("jacobian + Gram", "whole [walkers, params] (concatenated)", jac["whole"],
         jac["whole"], diff(whole(params, walkers))),
        ("jacobian + Gram", "one block of rows per leaf", jac["leaves"], jac["whole"],
         diff(leaves(params, walkers))),
        ("jacobian + Gram", "per leaf, shared layers in factors (psijax)", jac["factors"],
         jac["whole"], diff(factors(params, walkers))),
        ("Gram alone", "C @ C.T (psijax)", gram["one"], gram["one"], diff(one_product(centered))),
        ("Gram alone", "three half-walker products", gram["sym"], gram["one"],
         diff(symmetric(centered))),
    ]  # fmt: skip
    for what, variant, t, first, d in rows_out:
        print(f"| {what} | {variant} | {1e3 * t:.1f} | {first / t:.2f}x | {d:.1e} |")
    print(f"\nload average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    psijax.configure()  # the process-wide set-up psijax's own jobs do
    main()
