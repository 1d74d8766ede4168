"""One cell of the Laplacian compatibility matrix: an operator, a batching, a context and
a mode, run on a network and compared with the dense Hessian in float64.

Shared by tests/test_laplacian_matrix.py (bounded, seeded) and
benchmarks/laplacian_matrix.py (long runs).

- batching: ``vmap`` (the user's ``jax.vmap``), ``map_walkers`` and
  ``map_walkers/3`` (psijax's, all walkers at once or 3 per device and chunk: 3 does
  not divide the 4 walkers per device, so remainders are exercised) and ``lax.map``
  (the user's own chunks, ``jax.lax.map(batch_size=3)``; not on Explicit meshes,
  where JAX itself refuses to map over a sharded axis before any operator is called:
  use ``map_walkers(chunk_size=...)`` there);
- context: ``none`` (``jit``, one device), ``auto`` (``jit`` with walkers
  ``NamedSharding``-sharded over 4 devices on an Auto mesh, under ``set_mesh``),
  ``explicit`` (the same on an Explicit mesh) and ``shard_map`` (inside
  ``jax.shard_map`` over the 4 devices, Auto mesh, under ``set_mesh``);
- mode: ``value`` (per-walker kinetic energies) or ``grad`` (also the gradient of
  their mean with respect to every parameter, through the Laplacian).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from psijax import laplacian
from psijax.parallel.batching import map_walkers

OPERATORS = {
    "hessian": laplacian.Hessian(),
    "loop": laplacian.Loop(),
    "forward": laplacian.Forward(),
    "forward-sparse": laplacian.ForwardSparse(threshold=0.6),
}
BATCHINGS = ("vmap", "map_walkers", "map_walkers/3", "lax.map")
CONTEXTS = ("none", "auto", "explicit", "shard_map")
MODES = ("value", "grad")
# (batching, context, mode) triples; each is run with every operator.
GROUPS = [
    (batching, context, mode)
    for batching, context, mode in itertools.product(BATCHINGS, CONTEXTS, MODES)
    if not (batching == "lax.map" and context == "explicit")
]
CELLS = [(op, *group) for group in GROUPS for op in OPERATORS]
# The bounded selection CI runs on every commit: the gradient (which checks the value too)
# with vmap and psijax's map_walkers in every context, psijax's chunks (map_walkers/3)
# where they meet a sharded walker axis (Explicit mesh, shard_map), and the value-only
# program inside shard_map (11 groups, 43 cells with the dense Hessian left out where it
# is the reference itself); the user's own lax.map, chunks without sharding, the other
# value-only programs and the rest run in benchmarks/laplacian_matrix.py.
SHARDED = ("explicit", "shard_map")
CI_GROUPS = [
    (batching, context, mode)
    for batching, context, mode in GROUPS
    if (mode == "grad" and batching in ("vmap", "map_walkers"))
    or (mode == "grad" and batching == "map_walkers/3" and context in SHARDED)
    or (mode == "value" and batching == "vmap" and context == "shard_map")
]
N_WALKERS = 16
N_DEVICES = min(4, jax.device_count())  # the four fake CPU devices; one on a single GPU
AXIS = "walkers"


def kinetic(log_abs: Callable, op, batching: str, params, walkers) -> jax.Array:
    """-1/2 (lap + |grad|^2) of log|psi| for every walker, batched as ``batching`` says."""

    def one(p, x):
        _, g, lap = op(functools.partial(log_abs, p))(x)
        return -0.5 * (lap + jnp.sum(g**2))

    if batching == "vmap":
        return jax.vmap(one, in_axes=(None, 0))(params, walkers)
    if batching == "lax.map":
        return jax.lax.map(functools.partial(one, params), walkers, batch_size=3)
    chunk = 3 if batching == "map_walkers/3" else None
    return map_walkers(one, params, walkers, chunk_size=chunk)


def program(log_abs: Callable, op, batching: str, mode: str, axis: str | None):
    """``fn(params, walkers)`` -> kinetic energies (value) or (energies, d mean / d params)."""
    energies = functools.partial(kinetic, log_abs, op, batching)
    if mode == "value":
        return energies

    def loss(params, walkers):
        k = energies(params, walkers)
        mean = jnp.mean(k)
        return (mean if axis is None else jax.lax.pmean(mean, axis)), k

    def fn(params, walkers):
        (_, k), grad = jax.value_and_grad(loss, has_aux=True)(params, walkers)
        return k, grad

    return fn


def run(log_abs: Callable, op, batching: str, context: str, mode: str, params, walkers):
    """The cell's outputs, fetched to the host."""
    if context == "none":
        return jax.device_get(jax.jit(program(log_abs, op, batching, mode, None))(params, walkers))
    kind = AxisType.Explicit if context == "explicit" else AxisType.Auto
    mesh = jax.make_mesh((N_DEVICES,), (AXIS,), axis_types=(kind,))
    walkers = jax.device_put(walkers, NamedSharding(mesh, P(AXIS)))
    params = jax.device_put(params, NamedSharding(mesh, P()))
    if context == "shard_map":
        fn = program(log_abs, op, batching, mode, AXIS)
        out_specs = P(AXIS) if mode == "value" else (P(AXIS), P())
        fn = jax.shard_map(fn, mesh=mesh, in_specs=(P(), P(AXIS)), out_specs=out_specs)
    else:
        fn = program(log_abs, op, batching, mode, None)
    with jax.set_mesh(mesh):
        return jax.device_get(jax.jit(fn)(params, walkers))


def reference(log_abs: Callable, params, walkers):
    """(kinetic energies, d mean / d params) from the dense Hessian, no mesh."""
    return run(log_abs, OPERATORS["hessian"], "vmap", "none", "grad", params, walkers)


# Every method is exact arithmetic up to rounding; what differs is the order of the
# sums. The error of an output is measured against the largest entry of that output
# (the energies; the whole gradient tree), since entries that are zero analytically
# (e.g. the gradient with respect to a one-atom envelope weight) come out as rounding
# noise. Over the networks drawn by benchmarks/laplacian_matrix.py the largest
# disagreement with the dense Hessian was below 1e-10 (docs/laplacian.md); a real
# mistake (a missing term, a wrong walker, a gradient summed twice over devices) is
# off by far more than RTOL.
RTOL = 1e-8


def mismatch(out, ref) -> float:
    """max |out - ref| / max |ref| over one output (a pytree); inf if shapes differ or a
    value is not finite."""
    out, ref = jax.tree.leaves(out), jax.tree.leaves(ref)
    if len(out) != len(ref):
        return np.inf
    worst, scale = 0.0, 1e-300
    for a, b in zip(out, ref, strict=True):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or not np.all(np.isfinite(a)) or not np.all(np.isfinite(b)):
            return np.inf
        worst = max(worst, float(np.max(np.abs(a - b), initial=0.0)))
        scale = max(scale, float(np.max(np.abs(b), initial=0.0)))
    return worst / scale


def error(out, ref, mode: str) -> float:
    """The cell's error: of the energies, and in mode 'grad' also of the gradient."""
    if mode == "value":
        return mismatch(out, ref[0])
    return max(mismatch(out[0], ref[0]), mismatch(out[1], ref[1]))
