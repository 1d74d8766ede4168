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

A complex-valued function (log psi of a complex network) gives per walker its complex
kinetic energy ``-1/2 (lap + sum(grad * grad))`` and its value, and the gradient is that
of a real function of both (``real_loss``); the reference is then ``DenseParts``, the
dense Hessians of its real and imaginary parts taken apart.
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
# The selection CI runs on every commit: the gradient (which checks the value too) in every
# batching and context, and the value-only program inside shard_map (16 groups, 63 cells
# with the dense Hessian left out where it is the reference itself); the other value-only
# programs run in benchmarks/laplacian_matrix.py, with every cell on many networks.
CI_GROUPS = [
    (batching, context, mode)
    for batching, context, mode in GROUPS
    if mode == "grad" or (batching == "vmap" and context == "shard_map")
]
# The complex-valued networks' selection in CI (tests/test_laplacian_complex.py): the
# gradient (which checks the value too) of the user's vmap with no mesh, on an Explicit mesh
# and inside shard_map, and of psijax's chunks inside shard_map; the value-only program of
# the user's vmap on an Auto mesh and of psijax's map_walkers on an Explicit mesh (where it
# enters shard_map). benchmarks/laplacian_matrix.py --complex runs every cell.
COMPLEX_CI_GROUPS = [
    ("vmap", "none", "grad"),
    ("vmap", "auto", "value"),
    ("vmap", "explicit", "grad"),
    ("vmap", "shard_map", "grad"),
    ("map_walkers/3", "shard_map", "grad"),
    ("map_walkers", "explicit", "value"),
]
N_WALKERS = 16
N_DEVICES = min(4, jax.device_count())  # the four fake CPU devices; one on a single GPU
AXIS = "walkers"


def kinetic(log_abs: Callable, op, batching: str, params, walkers):
    """-1/2 (lap + |grad|^2) of log|psi| for every walker, batched as ``batching`` says;
    for a complex log psi, -1/2 (lap + sum(grad * grad)) and log psi itself."""

    def one(p, x):
        value, g, lap = op(functools.partial(log_abs, p))(x)
        energy = -0.5 * (lap + jnp.sum(g**2))
        return (energy, value) if jnp.iscomplexobj(value) else energy

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
        mean = real_loss(k)
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


def real_loss(k) -> jax.Array:
    """The real function of a cell's outputs whose gradient it checks: the mean kinetic
    energy; for a complex function, a sum of the means of the real and imaginary parts of
    its kinetic energies and values, each with its own weight."""
    if not isinstance(k, tuple):
        return jnp.mean(k)
    energy, value = k
    parts = (jnp.real(energy), jnp.imag(energy), jnp.real(value), jnp.imag(value))
    return sum(w * jnp.mean(part) for w, part in zip((1.0, 0.5, 0.25, 0.125), parts, strict=True))


class DenseParts:
    """The reference for a complex-valued function: ``op(f)(x)`` with the gradient and the
    Laplacian of ``Re f`` and of ``Im f``, each from its own dense Hessian (``jax.hessian``),
    independent of psijax's operators."""

    def __call__(self, f: Callable) -> Callable:
        def apply(x):
            flat = x.reshape(-1)
            parts = [lambda y, p=p: p(f(y.reshape(x.shape))) for p in (jnp.real, jnp.imag)]
            grads = [jax.grad(part)(flat) for part in parts]
            laps = [jnp.trace(jax.hessian(part)(flat)) for part in parts]
            grad = jax.lax.complex(*grads).reshape(x.shape)
            return f(x), grad, jax.lax.complex(*laps)

        return apply


def reference(log_abs: Callable, params, walkers):
    """(kinetic energies, d mean / d params) from the dense Hessian, no mesh; of the real
    and imaginary parts apart (``DenseParts``) for a complex-valued function."""
    complex_valued = jnp.iscomplexobj(jax.eval_shape(log_abs, params, walkers[0]))
    op = DenseParts() if complex_valued else OPERATORS["hessian"]
    return run(log_abs, op, "vmap", "none", "grad", params, walkers)


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
