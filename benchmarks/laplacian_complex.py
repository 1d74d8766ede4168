"""Benchmark the Laplacian operators on a complex-valued log psi.

The network is psijax's FermiNet with its orbitals multiplied by plane waves with a
twist, ``exp(i (G_o + k) . r_e)`` (one wave vector ``G_o`` per orbital, a parameter), a
complex ``slogdet`` per determinant, the determinants summed with complex weights
(a signed log-sum-exp) and a phase term ``i sum(c sin(r))``: the log psi of a periodic
system with a twist, in the form docs/laplacian.md shows. For every size and operator:

* value: jit of ``map_walkers`` of the kinetic energy Re(-1/2 (lap + sum(grad * grad)));
* grad: jit of the gradient of the batch-mean kinetic energy w.r.t. every parameter;
* real grad: the same gradient for the real network alone (log|psi| of the FermiNet), for
  the cost of the complex values;
* compile: seconds to lower and compile the complex value and gradient.

Times are medians over ``--repeats`` calls after one warm-up call; ratios are against
``Loop`` (FermiNet's method) in the same run. Every operator's kinetic energies are
checked against ``Loop``'s (max relative difference) before they are timed.

    python benchmarks/laplacian_complex.py                   # 4 and 8 electrons
    python benchmarks/laplacian_complex.py --sizes 4 --quick # smoke test
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import statistics
import sys
import time

TWIST = (0.31, -0.17, 0.23)  # 1/bohr


def header(args: argparse.Namespace) -> None:
    import folx
    import jax
    import numpy as np

    print("# Laplacian operators on a complex-valued log psi")
    print(f"- command: python {' '.join(sys.argv)}")
    print(
        f"- python {platform.python_version()}, jax {jax.__version__}, folx "
        f"{folx.__version__}, numpy {np.__version__}; backend {jax.default_backend()}, "
        f"{jax.device_count()} device(s)"
    )
    from vmc_step import _cpu_name

    print(f"- CPU: {_cpu_name()}; {os.cpu_count()} logical cores; load {os.getloadavg()[0]:.1f}")
    layers = " x ".join(f"({a}, {b})" for a, b in args.layers)
    print(
        f"- network: FermiNet {layers}, {args.determinants} determinants, full_det, plane "
        f"waves with a twist, complex slogdet, complex weights, phase term; {args.dtype}; "
        f"{args.walkers} walkers ~ N(0, 1) bohr; one nucleus; spin-balanced"
    )
    print(f"- timing: median of {args.repeats} calls after 1 warm-up; ratios against Loop")
    print()
    print(
        "| electrons | operator | value ms | value / Loop | grad ms | grad / Loop "
        "| real grad ms | complex / real grad | compile s (value/grad) | max rel diff vs Loop |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")


def make_problem(n: int, args: argparse.Namespace):
    """(complex log psi, real log|psi|, complex params, real params, walkers)."""
    import jax
    import jax.numpy as jnp

    from psijax.ansatz import FermiNet

    net = FermiNet(
        (n + 1) // 2, n // 2, ((0.0, 0.0, 0.0),), layers=args.layers,
        n_determinants=args.determinants, full_det=True,
    )  # fmt: skip
    dtype = jnp.dtype(args.dtype)
    keys = jax.random.split(jax.random.PRNGKey(args.seed), 5)
    k = args.determinants
    params = {
        "net": net.init(keys[0], dtype),
        "g": 0.5 * jax.random.normal(keys[1], (3, n), dtype),  # wave vector of each orbital
        "weights": 1.0 + 0.2 * jax.random.normal(keys[2], (k,), dtype),
        "theta": jax.random.normal(keys[3], (k,), dtype),
        "c": 0.3 * jax.random.normal(keys[4], (3,), dtype),
    }
    walkers = jax.random.normal(jax.random.PRNGKey(args.seed + 1), (args.walkers, n, 3), dtype)

    def log_psi(p, r):
        (mats,) = net.orbitals(p["net"], r)  # [k, n, n], real
        waves = jnp.exp(1j * (r @ (p["g"] + jnp.asarray(TWIST, r.dtype)[:, None])))  # [n, n]
        sign, log_abs = jnp.linalg.slogdet(mats * waves)
        sign = sign * p["weights"] * jnp.exp(1j * p["theta"])
        shift = jax.lax.stop_gradient(jnp.max(log_abs))
        total = jnp.sum(sign * jnp.exp(log_abs - shift))
        return jnp.log(total) + shift + 1j * jnp.sum(p["c"] * jnp.sin(r))

    return log_psi, net.log_abs, params, params["net"], walkers


def operators(n: int, args: argparse.Namespace) -> dict:
    from psijax import laplacian

    ops = {"Loop": laplacian.Loop(), "Forward": laplacian.Forward()}
    ops["ForwardSparse(6)"] = laplacian.ForwardSparse(6)
    if n <= args.hessian_max:
        ops["Hessian"] = laplacian.Hessian()
    return ops


def kinetic(op, log_psi, params, r):
    import jax.numpy as jnp

    _, grad, lap = op(functools.partial(log_psi, params))(r)
    return jnp.real(-0.5 * (lap + jnp.sum(grad * grad)))


def programs(op, log_psi):
    import jax
    import jax.numpy as jnp

    from psijax.parallel.batching import map_walkers

    def value(p, w):
        return map_walkers(functools.partial(kinetic, op, log_psi), p, w)

    return jax.jit(value), jax.jit(jax.grad(lambda p, w: jnp.mean(value(p, w))))


def median_ms(fn, args, repeats: int):
    import jax

    out = jax.block_until_ready(fn(*args))  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times), out


def run_size(n: int, args: argparse.Namespace) -> None:
    import jax
    import numpy as np

    log_psi, log_abs, params, real_params, walkers = make_problem(n, args)
    rows, ref = [], None
    for name, op in operators(n, args).items():
        value, grad = programs(op, log_psi)
        start = time.perf_counter()
        value = value.lower(params, walkers).compile()
        mid = time.perf_counter()
        grad = grad.lower(params, walkers).compile()
        compile_s = (mid - start, time.perf_counter() - mid)
        value_ms, ke = median_ms(value, (params, walkers), args.repeats)
        grad_ms, _ = median_ms(grad, (params, walkers), args.repeats)
        _, real_grad = programs(op, log_abs)
        real_ms, _ = median_ms(real_grad, (real_params, walkers), args.repeats)
        ke = np.asarray(ke, np.float64)
        ref = ke if ref is None else ref
        diff = np.max(np.abs(ke - ref) / np.maximum(np.abs(ref), 1.0))
        rows.append((name, value_ms, grad_ms, real_ms, compile_s, diff))
        jax.clear_caches()
    loop_value, loop_grad = rows[0][1], rows[0][2]
    for name, value_ms, grad_ms, real_ms, (cv, cg), diff in rows:
        print(
            f"| {n} | {name} | {value_ms:.1f} | {value_ms / loop_value:.2f} | {grad_ms:.1f} "
            f"| {grad_ms / loop_grad:.2f} | {real_ms:.1f} | {grad_ms / real_ms:.2f} "
            f"| {cv:.1f} / {cg:.1f} | {diff:.1e} |",
            flush=True,
        )


def parse_layers(text: str) -> tuple[tuple[int, int], ...]:
    """'64x16,64x16' -> ((64, 16), (64, 16))."""
    return tuple(tuple(int(v) for v in item.split("x")) for item in text.split(","))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4,8", help="electron counts, comma separated")
    parser.add_argument("--walkers", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=7, help="timed calls after 1 warm-up")
    parser.add_argument("--layers", type=parse_layers, default=((64, 16),) * 2)
    parser.add_argument("--determinants", type=int, default=4)
    parser.add_argument("--dtype", default="float32", help="float32 (complex64) or float64")
    parser.add_argument("--hessian-max", type=int, default=8, help="largest size for Hessian")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--quick", action="store_true", help="smoke test: (16, 4) x 1, 2 determinants, 8 walkers"
    )
    args = parser.parse_args()
    if args.quick:
        args.layers, args.determinants, args.walkers, args.repeats = ((16, 4),), 2, 8, 2

    import jax

    if args.dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    import psijax

    if hasattr(psijax, "configure"):  # the process-wide set-up psijax's own jobs make
        psijax.configure()
    header(args)
    for n in (int(s) for s in args.sizes.split(",")):
        run_size(n, args)


if __name__ == "__main__":
    main()
