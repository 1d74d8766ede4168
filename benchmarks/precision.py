"""float32 accuracy and cost of each matrix-product precision, per computation.

    python benchmarks/precision.py [--electrons 16] [--walkers 64] [--gram-walkers 4096]
                                   [--out precision.json]

On a GPU, JAX's default precision for a float32 product is TensorFloat-32; on a CPU every
precision is full float32, so the tables only differ on a GPU (psijax.precision). For
the precisions of ``jax.default_matmul_precision``:

1. **The wavefunction and its Laplacian** (the ansatz's ``matmul_precision``): FermiNet
   1 x (16, 4), 2 determinants, ``--electrons`` electrons, walkers drawn at random and
   the same walkers with two same-spin electrons 1e-3..1e-1 bohr apart (nearly singular
   orbital matrices), at precisions default and highest, and with TensorFloat-32 emulated
   on any device (benchmarks/tf32_emulation.py: at most what a GPU's default precision
   gives). Against the float64 forward Laplacian: log|psi| (absolute error), the kinetic
   energy per walker (median and 90th percentile of the relative error, walkers off by
   > 1%), the mean kinetic energy (its error over the mean absolute kinetic energy: the
   bias a run would see) and the parameter gradient of the mean kinetic energy (relative
   error of the whole vector), for the ``--operators`` (the default operator, ``Forward``,
   ``Loop``).
2. **SPRING's products** (``gram_precision``), at default, high, highest and emulated
   TensorFloat-32: the update direction of SPRING from the per-walker jacobian of psijax's
   default network for LiH (256 walkers) against the same formula in float64 with numpy
   (relative error), and the time of one SPRING update on a random jacobian of
   ``--gram-walkers`` x the parameters of FermiNet 4 x (256, 32), 16 determinants, for N2
   (FermiNet's production sizes).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import psijax
from psijax import config as config_lib
from psijax import laplacian, optim, registry, system
from psijax.ansatz import FermiNet
from psijax.hamiltonian import kinetic_energy
from psijax.system import sizing

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tf32_emulation import tf32

PRECISIONS = ("default", "high", "highest")
EMULATED = "TF32 emulated"  # benchmarks/tf32_emulation.py: what a GPU's default would give


def walkers(n: int, count: int) -> jax.Array:
    """``count`` walkers at random, then the same walkers with electrons 0 and 1 (same
    spin) 1e-3..1e-1 bohr apart."""
    w = jax.random.normal(jax.random.PRNGKey(3), (count, n, 3), jnp.float64) * 1.2
    d = jnp.exp(jax.random.uniform(jax.random.PRNGKey(4), (count, 1), jnp.float64,
                                   np.log(1e-3), np.log(1e-1)))  # fmt: skip
    u = jax.random.normal(jax.random.PRNGKey(5), (count, 3), jnp.float64)
    near = w.at[:, 1].set(w[:, 0] + d * u / jnp.linalg.norm(u, axis=-1, keepdims=True))
    return jnp.concatenate([w, near])


def laplacian_table(n: int, count: int, operators: list[str]) -> list[dict]:
    rows = []
    with jax.enable_x64(True):
        net_of = lambda precision: FermiNet(n // 2, n - n // 2, ((0.0, 0.0, 0.0),),
                                            layers=((16, 4),), n_determinants=2,
                                            matmul_precision=precision)  # fmt: skip
        ref_net = net_of(None)
        params64 = ref_net.init(jax.random.PRNGKey(0), jnp.float64)
        w = walkers(n, count)
        halves = {"random": slice(0, count), "near a node": slice(count, 2 * count)}
        kin = lambda net, op, p, r: kinetic_energy(op, net.log_abs, p, r)

        def outputs(net, op, params, ws):
            """log|psi|, kinetic energies, and the gradient of the mean kinetic energy of
            each half of the walkers."""
            k = jax.vmap(functools.partial(kin, net, op, params))(ws)
            half = lambda s: lambda p: jnp.mean(jax.vmap(functools.partial(kin, net, op, p))(ws[s]))
            grads = [jax.flatten_util.ravel_pytree(jax.grad(half(s))(params))[0]
                     for s in halves.values()]  # fmt: skip
            return jax.vmap(net.log_abs, (None, 0))(params, ws), k, grads

        # the forward Laplacian in float64 (tests/test_laplacian_matrix.py holds it to the
        # dense Hessian there): the Hessian's program took minutes to compile on a GPU
        ref = jax.device_get(jax.jit(functools.partial(outputs, ref_net, laplacian.Forward()))(
            params64, w))  # fmt: skip
        params32 = jax.tree.map(lambda a: a.astype(jnp.float32), params64)
        ops = {"default": laplacian.default_operator(n), "Forward": laplacian.Forward(),
               "Loop": laplacian.Loop()}  # fmt: skip
        variants = (("default", "default", False), ("highest", "highest", False),
                    (EMULATED, None, True))  # fmt: skip
        for precision, setting, emulate in variants:
            for name in operators:
                fn = functools.partial(outputs, net_of(setting), ops[name])
                fn = jax.jit(tf32(fn) if emulate else fn)
                out = jax.device_get(fn(params32, w.astype(jnp.float32)))
                for i, (label, s) in enumerate(halves.items()):
                    psi, k, g = (np.asarray(x, np.float64)
                                 for x in (out[0][s], out[1][s], out[2][i]))  # fmt: skip
                    psi_ref, k_ref, g_ref = ref[0][s], ref[1][s], ref[2][i]
                    e = np.abs(k - k_ref) / np.abs(k_ref)
                    rows.append(dict(
                        walkers=label, precision=precision, operator=name,
                        log_psi_abs_err=float(np.max(np.abs(psi - psi_ref))),
                        kinetic_median=float(np.median(e)), kinetic_p90=float(np.percentile(e, 90)),
                        kinetic_off_1pct=float(np.mean(e > 1e-2)),
                        mean_kinetic=float(abs(k.mean() - k_ref.mean()) / np.abs(k_ref).mean()),
                        gradient=float(np.linalg.norm(g - g_ref) / np.linalg.norm(g_ref)),
                    ))  # fmt: skip
                    print(json.dumps(rows[-1]), flush=True)
    return rows


def spring_reference(jac, centered, damping=1e-3):
    """SPRING's first direction (no momentum) in float64: O^T (O O^T + d I + 1/n)^-1 eps."""
    n = jac.shape[0]
    o = (jac - jac.mean(axis=0)) / np.sqrt(n)
    gram = o @ o.T + damping * np.eye(n) + 1.0 / n
    return o.T @ np.linalg.solve(gram, -centered / np.sqrt(n))


def direction(opt, flat, state, jacobian, centered):
    """SPRING's direction phi after one update (its state's ``previous``)."""
    return opt.update(flat, state, flat, jacobian=jacobian, centered_energies=centered)[1].previous


def gram_table(gram_walkers: int) -> list[dict]:
    rows = []
    config = config_lib.Config()
    config = sizing.for_system(config)  # walkers by the molecule, as a run
    molecule = system.for_config(config)
    net = registry.ansatz(molecule, config)  # the default network, its default precision
    params = net.init(jax.random.PRNGKey(0), jnp.float32)
    from psijax import sampling

    w = sampling.init_walkers(jax.random.PRNGKey(1), molecule, 256)
    grad = lambda r: jax.flatten_util.ravel_pytree(jax.grad(net.log_abs)(params, r))[0]
    jac = jax.jit(jax.vmap(grad))(w)
    centered = np.random.default_rng(0).normal(size=256)
    centered -= centered.mean()
    ref = spring_reference(np.asarray(jac, np.float64), centered)
    flat = jnp.zeros(jac.shape[1])
    for precision in (*PRECISIONS, EMULATED):
        setting = None if precision == EMULATED else precision
        opt = optim.spring(learning_rate=1.0, momentum=0.0, max_norm=1e30,
                           gram_precision=setting)  # fmt: skip
        state = opt.init(flat)
        update = functools.partial(direction, opt, flat)
        update = jax.jit(tf32(update) if precision == EMULATED else update)
        phi = np.asarray(update(state, jac, jnp.asarray(centered, jnp.float32)), np.float64)
        rows.append(dict(part="SPRING direction, LiH 256 walkers", precision=precision,
                         params=int(jac.shape[1]),
                         error=float(np.linalg.norm(phi - ref) / np.linalg.norm(ref))))  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)

    # cost at FermiNet's production sizes for N2: the parameter count, no network run
    big = config_lib.from_dict(dict(system="N2", layers=((256, 32),) * 4, determinants=16))
    big_net = registry.ansatz(system.for_config(big), big)
    shapes = jax.eval_shape(lambda k: big_net.init(k, jnp.float32), jax.random.PRNGKey(0))
    n_params = sum(int(np.prod(s.shape)) for s in jax.tree.leaves(shapes))
    key = jax.random.PRNGKey(2)
    jac = jax.random.normal(key, (gram_walkers, n_params), jnp.float32)
    centered = jax.random.normal(jax.random.PRNGKey(3), (gram_walkers,), jnp.float32)
    flat = jnp.zeros(n_params)
    for precision in PRECISIONS:
        opt = optim.spring(learning_rate=1.0, gram_precision=precision)
        state = opt.init(flat)
        update = jax.jit(functools.partial(direction, opt, flat))
        jax.block_until_ready(update(state, jac, centered))
        times = []
        for _ in range(5):
            t = time.perf_counter()
            jax.block_until_ready(update(state, jac, centered))
            times.append(time.perf_counter() - t)
        rows.append(dict(part=f"SPRING update, {gram_walkers} walkers x {n_params:,} params",
                         precision=precision, seconds=statistics.median(times)))  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--electrons", type=int, default=16)
    parser.add_argument("--walkers", type=int, default=64)
    parser.add_argument("--gram-walkers", type=int, default=4096)
    parser.add_argument("--operators", default="default", help="of default,Forward,Loop")
    parser.add_argument("--out", default=None, help="all rows as JSON")
    args = parser.parse_args()
    print(f"# precision: python {platform.python_version()}, jax {jax.__version__}, "
          f"device {jax.devices()[0].device_kind}", flush=True)  # fmt: skip
    gram = gram_table(args.gram_walkers)  # the quick part first
    lap = laplacian_table(args.electrons, args.walkers, args.operators.split(","))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(device=jax.devices()[0].device_kind, jax=jax.__version__,
                           laplacian=lap, gram=gram), f, indent=1)  # fmt: skip
    print(
        "\n| walkers | precision | operator | max abs err log|psi| | kinetic median / p90 "
        "rel. err | off > 1% | mean kinetic rel. err | gradient rel. err |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in lap:
        print(f"| {r['walkers']} | {r['precision']} | {r['operator']} | "
              f"{r['log_psi_abs_err']:.1e} | {r['kinetic_median']:.1e} / {r['kinetic_p90']:.1e}"
              f" | {100 * r['kinetic_off_1pct']:.1f}% | {r['mean_kinetic']:.1e} | "
              f"{r['gradient']:.1e} |")  # fmt: skip
    print("\n| SPRING | precision | relative error / median seconds |")
    print("|---|---|---|")
    for r in gram:
        value = f"{r['error']:.1e}" if "error" in r else f"{r['seconds']:.4f} s"
        print(f"| {r['part']} | {r['precision']} | {value} |")


if __name__ == "__main__":
    psijax.configure()  # the process-wide set-up psijax's own jobs do
    main()
