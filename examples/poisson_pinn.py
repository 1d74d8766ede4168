"""A physics-informed network for the Poisson equation, with psijax's Laplacian engine.

Solves  -lap u = f  on the unit cube [0, 1]^d (d = 3 by default) with u = 0 on the
boundary, for f = d pi^2 prod_i sin(pi x_i), whose solution is u* = prod_i sin(pi x_i).

- The network is u(x) = prod_i 4 x_i (1 - x_i) * MLP(x): zero on the boundary by
  construction, so the loss is the squared residual (lap u + f)^2 alone.
- Collocation points are drawn afresh every step and sharded over the devices
  (4 fake CPU devices here); the loss runs inside ``jax.shard_map`` and averages
  over all devices with ``lax.pmean``.
- ``jax.grad`` of the loss differentiates through the Laplacian (any psijax
  operator: ``--operator forward|forward-sparse|loop|hessian``).

Run:  python examples/poisson_pinn.py            (about 20-40 s on a 2-core CPU)
The relative L2 error against u* on 4,096 test points is printed at the end.
"""

from __future__ import annotations

import argparse
import functools
import math
import time

N_DEVICES = 4


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=3, help="dimensions of the cube")
    parser.add_argument("--steps", type=int, default=1500, help="Adam steps")
    parser.add_argument("--points", type=int, default=256, help="collocation points per step")
    parser.add_argument("--width", type=int, default=32, help="hidden units per layer")
    parser.add_argument("--operator", default="forward", help="forward, forward-sparse, loop")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    return train(args.dim, args.steps, args.points, args.width, args.operator, args.seed)


def train(dim: int, steps: int, points: int, width: int, operator: str, seed: int):
    import jax
    import jax.numpy as jnp
    import optax
    from jax.sharding import AxisType, NamedSharding
    from jax.sharding import PartitionSpec as P

    from psijax import laplacian

    op = {
        "forward": laplacian.Forward(),
        "forward-sparse": laplacian.ForwardSparse(),
        "loop": laplacian.Loop(),
        "hessian": laplacian.Hessian(),
    }[operator]
    n_dev = min(N_DEVICES, jax.device_count())
    mesh = jax.make_mesh((n_dev,), ("points",), axis_types=(AxisType.Auto,))
    points -= points % n_dev

    def init(key):
        sizes = [dim, width, width, 1]
        keys = jax.random.split(key, len(sizes))
        return [
            {"w": jax.random.normal(k, (a, b)) / math.sqrt(a), "b": jnp.zeros(b)}
            for k, a, b in zip(keys, sizes[:-1], sizes[1:], strict=False)
        ]

    def u(params, x):  # one point x: [dim] -> scalar
        h = x
        for layer in params[:-1]:
            h = jnp.tanh(h @ layer["w"] + layer["b"])
        out = (h @ params[-1]["w"] + params[-1]["b"])[0]
        return jnp.prod(4.0 * x * (1.0 - x)) * out

    def source(x):
        return dim * math.pi**2 * jnp.prod(jnp.sin(math.pi * x))

    def residuals(params, xs):  # inside shard_map: this device's points
        def one(x):
            _, _, lap = op(functools.partial(u, params))(x)
            return lap + source(x)

        return jax.vmap(one)(xs)

    def loss(params, xs):
        scale = dim * math.pi**2  # of f: the loss is the relative squared residual
        return jax.lax.pmean(jnp.mean((residuals(params, xs) / scale) ** 2), "points")

    sharded_grad = jax.shard_map(
        jax.value_and_grad(loss), mesh=mesh, in_specs=(P(), P("points")), out_specs=(P(), P())
    )
    optimizer = optax.adam(optax.cosine_decay_schedule(1e-2, steps, alpha=0.01))
    point_sharding = NamedSharding(mesh, P("points"))

    @jax.jit
    def step(params, opt_state, key, i):
        # the step's key is derived inside the program: the loop below dispatches one
        # program per step and nothing else
        xs = jax.random.uniform(jax.random.fold_in(key, i), (points, dim))
        xs = jax.lax.with_sharding_constraint(xs, point_sharding)
        value, grads = sharded_grad(params, xs)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    key = jax.random.PRNGKey(seed)
    with jax.set_mesh(mesh):
        params = init(key)
        opt_state = optimizer.init(params)
        start = time.perf_counter()
        for i in range(steps):
            params, opt_state, value = step(params, opt_state, key, i)
            if (i + 1) % max(steps // 10, 1) == 0:
                print(f"step {i + 1:5d}  loss {float(value):.3e}", flush=True)
        seconds = time.perf_counter() - start

    test = jax.random.uniform(jax.random.PRNGKey(seed + 1), (4096, dim))
    predicted = jax.vmap(functools.partial(u, params))(test)
    exact = jnp.prod(jnp.sin(math.pi * test), axis=-1)
    rel_l2 = float(jnp.linalg.norm(predicted - exact) / jnp.linalg.norm(exact))
    print(f"relative L2 error {rel_l2:.2e} after {steps} steps in {seconds:.1f} s")
    return {"rel_l2": rel_l2, "seconds": seconds, "loss": float(value)}


if __name__ == "__main__":
    import os
    import sys

    import jax

    # fake CPU devices, 4 unless PSIJAX_EXAMPLE_DEVICES says (docs/compatibility.md #11)
    devices = int(os.environ.get("PSIJAX_EXAMPLE_DEVICES", N_DEVICES))
    jax.config.update("jax_num_cpu_devices", devices)
    main(sys.argv[1:])
