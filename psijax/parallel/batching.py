"""Apply a one-walker function to a batch of walkers: vmap, or chunks of bounded memory.

``map_walkers`` is the one place psijax batches over walkers. It is safe inside
``shard_map`` and under ``jit`` on Auto meshes, and on meshes whose walker axis
is ``Explicit`` (JAX's default since 0.10) it enters ``shard_map`` over that axis
itself, since folx's gathers and the loop Laplacian cannot be traced with
explicitly sharded batch dimensions (docs/compatibility.md #3).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec

from psijax.types import Array, PyTree

# Walkers per device evaluated at once by the step's local energies and MCMC moves when
# no chunk size is given. A vmap over all 256 walkers of the default LiH job spills the
# caches: chunks of 64 made the forward-Laplacian local energies ~1.4x and log|psi|
# ~1.3x faster on a 2-core CPU (benchmarks/vmc_step.py); 32 was no faster.
AUTO_CHUNK = 64


def auto_chunk(n_walkers: int, n_devices: int) -> int | None:
    """A global ``chunk_size`` of AUTO_CHUNK walkers per device (None: one vmap suffices)."""
    if n_walkers // n_devices <= AUTO_CHUNK:
        return None
    return AUTO_CHUNK * n_devices


def map_walkers(
    fn: Callable[[PyTree, Array], PyTree],
    params: PyTree,
    walkers: PyTree,
    *,
    chunk_size: int | None = None,
) -> PyTree:
    """``fn(params, walker)`` for every walker along axis 0 of ``walkers``.

    Args:
        fn: function of the shared parameters and one walker.
        params: broadcast to every walker (replicated on a mesh). Pass them here
            rather than closing over them: JAX cannot close over values on an
            Explicit mesh inside ``shard_map``.
        walkers: ``[n_walkers, ...]``, on any device layout, or a pytree of such arrays
            with the same walker axis (e.g. walkers and one random key per walker).
        chunk_size: walkers evaluated at once per device (``lax.map``), bounding
            memory; None vectorises all of them at once (``vmap``).

    Returns:
        ``fn``'s outputs stacked along a new leading walker axis.
    """
    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"chunk_size={chunk_size} must be a positive number of walkers or None")
    local = functools.partial(_local_map, fn, chunk_size=chunk_size)
    lead = jax.tree.leaves(walkers)[0]
    axes = _explicit_walker_axes(lead)
    if axes is None:
        return local(params, walkers)
    mesh = jax.typeof(lead).sharding.mesh
    spec = PartitionSpec(axes)
    in_specs = (PartitionSpec(), jax.tree.map(lambda _: spec, walkers))
    sharded = jax.shard_map(local, mesh=mesh, in_specs=in_specs, out_specs=spec)
    return sharded(params, walkers)


def on_every_device(walkers: PyTree, sharding: jax.sharding.Sharding) -> PyTree:
    """Inside ``jit``: ``walkers`` (sharded or not) replicated on every device of
    ``sharding``'s mesh, so that what is computed from them is computed alike on any
    number of devices (a sum over walkers split across devices adds in another order).
    Unchanged unless ``sharding`` is a ``NamedSharding``."""
    if not isinstance(sharding, NamedSharding):
        return walkers
    everywhere = NamedSharding(sharding.mesh, PartitionSpec())

    def one(x: Array) -> Array:
        if _explicit_walker_axes(x) is not None:
            return jax.sharding.reshard(x, everywhere)
        return jax.lax.with_sharding_constraint(x, everywhere)

    return jax.tree.map(one, walkers)


def _local_map(fn, params: PyTree, walkers: PyTree, chunk_size: int | None) -> PyTree:
    one = functools.partial(fn, params)
    n = jax.tree.leaves(walkers)[0].shape[0]
    if chunk_size is None or chunk_size >= n:
        return jax.vmap(one)(walkers)
    n_chunks = -(-n // chunk_size)
    if n % n_chunks:
        return jax.lax.map(one, walkers, batch_size=chunk_size)
    # Chunk c holds walkers c, c + n_chunks, c + 2 n_chunks, ...: strided, not contiguous,
    # so that on a mesh whose devices hold contiguous blocks of walkers every chunk is
    # spread evenly over the devices and the loop over chunks needs no communication.
    strided = lambda x: jnp.swapaxes(x.reshape(n // n_chunks, n_chunks, *x.shape[1:]), 0, 1)
    out = jax.lax.map(jax.vmap(one), jax.tree.map(strided, walkers))
    return jax.tree.map(lambda y: jnp.swapaxes(y, 0, 1).reshape(n, *y.shape[2:]), out)


def _explicit_walker_axes(walkers: Array) -> tuple[str, ...] | None:
    """Mesh axes that shard the walker axis explicitly, or None."""
    sharding = getattr(jax.typeof(walkers), "sharding", None)
    if not isinstance(sharding, NamedSharding) or not sharding.spec:
        return None
    entry = sharding.spec[0]
    if entry is None:
        return None
    names = (entry,) if isinstance(entry, str) else tuple(entry)
    types = dict(zip(sharding.mesh.axis_names, sharding.mesh.axis_types, strict=True))
    if all(types[name] == AxisType.Explicit for name in names):
        return names
    return None
