"""float32 accuracy of each Laplacian operator on nearly singular orbital matrices.

Two same-spin electrons 1e-3..1e-1 bohr apart; float32 kinetic energy of each
operator against the float64 Hessian trace. Prints median / 90th percentile of
the relative error and the fraction of walkers off by more than 1%.

    python benchmarks/laplacian_accuracy.py --electrons 16 --walkers 64
"""

import argparse
import functools

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import psijax  # noqa: E402
from psijax import laplacian  # noqa: E402
from psijax.ansatz import FermiNet  # noqa: E402
from psijax.hamiltonian import kinetic_energy  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--electrons", type=int, default=16)
    parser.add_argument("--walkers", type=int, default=64)
    args = parser.parse_args()
    n, w_count = args.electrons, args.walkers
    net = FermiNet(n // 2, n - n // 2, ((0.0, 0.0, 0.0),), layers=((16, 4),), n_determinants=2)
    params64 = net.init(jax.random.PRNGKey(0), jnp.float64)
    params32 = jax.tree.map(lambda a: a.astype(jnp.float32), params64)
    w = jax.random.normal(jax.random.PRNGKey(3), (w_count, n, 3), jnp.float64) * 1.2
    d = jnp.exp(jax.random.uniform(jax.random.PRNGKey(4), (w_count, 1), jnp.float64,
                                   np.log(1e-3), np.log(1e-1)))  # fmt: skip
    u = jax.random.normal(jax.random.PRNGKey(5), (w_count, 3), jnp.float64)
    w = w.at[:, 1].set(w[:, 0] + d * u / jnp.linalg.norm(u, axis=-1, keepdims=True))
    kin = lambda op, p, r: kinetic_energy(op, net.log_abs, p, r)
    ref = np.asarray(jax.jit(jax.vmap(functools.partial(kin, laplacian.Hessian(), params64)))(w))
    print(f"jax {jax.__version__}, {n} electrons, {w_count} walkers, float32 vs float64 Hessian")
    print("| method | median rel. error | 90th pct | walkers off > 1% |")
    print("|---|---|---|---|")
    for name, op in [("Loop()", laplacian.Loop()), ("Hessian()", laplacian.Hessian()),
                     ("Forward()", laplacian.Forward()),
                     ("default_operator", laplacian.default_operator(n))]:  # fmt: skip
        out = jax.jit(jax.vmap(functools.partial(kin, op, params32)))(w.astype(jnp.float32))
        e = np.abs(np.asarray(out, np.float64) - ref) / np.abs(ref)
        print(f"| {name} | {np.median(e):.1e} | {np.percentile(e, 90):.1e} | "
              f"{100 * np.mean(e > 1e-2):.1f}% |")  # fmt: skip


if __name__ == "__main__":
    psijax.configure()  # the process-wide set-up psijax's own jobs do
    main()
