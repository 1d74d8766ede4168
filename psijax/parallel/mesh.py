"""Meshes and shardings: walkers split along one mesh axis, everything else replicated."""

from __future__ import annotations

from typing import TypeVar

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

from psijax.errors import InputError

WALKER_AXIS = "walkers"
S = TypeVar("S", bound=tuple)


def make_mesh(n_devices: int | None = None) -> Mesh:
    """A 1-D mesh over the first ``n_devices`` devices (all by default), of every process.

    Built as a ``Mesh`` of the device list, not by ``jax.make_mesh``: since JAX 0.11
    ``make_mesh`` refuses devices from several slices, which is how JAX describes the
    GPUs of a multi-node job (NetKet issue 2260). Its topology-aware reordering buys
    nothing on one axis that is only split and reduced over.
    """
    devices = jax.devices()
    n = len(devices) if n_devices is None else n_devices
    if not 1 <= n <= len(devices):
        cpu = devices[0].platform == "cpu"
        raise InputError(
            f"devices={n_devices} but {len(devices)} are available; "
            f"choose a number from 1 to {len(devices)}"
            + " (a CPU's cores are one device: JAX_NUM_CPU_DEVICES=N splits them into N)"
            * cpu
        )
    return Mesh(np.asarray(devices[:n]), (WALKER_AXIS,), axis_types=(AxisType.Auto,))


def walker_sharding(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec(WALKER_AXIS))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())


def state_shardings(mesh: Mesh, state: S) -> S:
    """Walkers and their log|psi| split over devices; the rest replicated.

    ``state`` is any NamedTuple with ``walkers`` and ``log_abs`` fields (the training's
    ``TrainState``, the evaluation's ``EvalState``); a field that is None stands for one
    array.
    """
    rep = replicated(mesh)
    full = jax.tree.map(lambda _: rep, state, is_leaf=lambda x: x is None)
    return full._replace(walkers=walker_sharding(mesh), log_abs=walker_sharding(mesh))


def check_walkers(n_walkers: int, mesh: Mesh) -> None:
    n = mesh.devices.size
    if n_walkers < 1 or n_walkers % n:
        raise InputError(
            f"walkers={n_walkers} cannot be split evenly over {n} devices; "
            f"use a positive multiple of {n}"
        )


def to_global(tree, shardings):
    """Host or single-device values -> global arrays laid out by ``shardings``.

    Works with several processes: every process holds the same full value (it was computed
    from the same seed) and hands over only the slices its own devices own.
    """

    def put(x, sharding):
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            return x if x.sharding == sharding else jax.device_put(x, sharding)
        host = np.asarray(jax.device_get(x))
        return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])

    return jax.tree.map(put, tree, shardings)


def to_host(x: jax.Array) -> np.ndarray:
    """The full value of a global array on every process (a collective if it is split)."""
    if x.is_fully_addressable or x.is_fully_replicated:
        return np.asarray(x)
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def from_lead(tree):
    """``tree`` of host arrays as process 0 holds it, on every process (a collective when
    there are several; unchanged in one). For values computed on the host in every process
    that must agree to the last bit, such as pyscf's orbitals: ``to_global`` takes them as
    equal on every process and would keep each process's own copy of a replicated array."""
    if jax.process_count() == 1:
        return tree
    from jax.experimental import multihost_utils

    # as bytes: the broadcast is a sum in JAX's dtypes, which would round float64 to float32
    raw = lambda x: np.ascontiguousarray(x).reshape(-1).view(np.uint8)
    sent = multihost_utils.broadcast_one_to_all(jax.tree.map(raw, tree))
    back = lambda x, b: np.asarray(b).view(np.asarray(x).dtype).reshape(np.shape(x))[()]
    return jax.tree.map(back, tree, sent)


def check_on_lead(check) -> None:
    """Run ``check()`` on process 0 only (e.g. about files process 0 alone writes); if it
    raises ``InputError`` there, every process raises, so that none is left waiting."""
    error = None
    if jax.process_index() == 0:
        try:
            check()
        except InputError as err:
            error = err
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        failed = bool(multihost_utils.broadcast_one_to_all(np.int32(error is not None)))
        if failed and error is None:
            raise InputError("process 0 refused to start; see its error message for the fix")
    if error is not None:
        raise error
