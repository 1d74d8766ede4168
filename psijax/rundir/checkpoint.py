"""Checkpoints of the whole ``TrainState``, written with orbax.

A checkpoint is ``RUN/checkpoints/<step>/`` with two items: ``state`` (every leaf of the
``TrainState`` -- parameters, optimiser state, walkers, the sampler's state, random key,
step -- as sharded arrays, each under its pytree name such as ``params.layers.0.one.w``,
``walkers`` or ``sampler``) and ``meta`` (JSON: the step, the run's identity, the names,
shapes and dtypes of the arrays and the psijax, JAX, folx and orbax versions that wrote
it). orbax alone can read one:
``orbax.checkpoint.StandardCheckpointer().restore(<absolute path>/<step>/state)`` gives a
dict of arrays by name. Format 2 (the sampler's state was Metropolis's width, named
``width``) and format 1 (arrays named ``leaf_0000``, ...; before psijax 0.1.0's
self-describing checkpoints) still restore.
orbax writes into a temporary directory and renames it when complete, so a crash at any
instant leaves the previous checkpoints intact and never a half-written one that is read
back. Restoring takes a template whose leaves carry the *new* shardings, so a run saved on
four devices continues on two, one or several processes.

Saving is asynchronous: ``save`` returns once the arrays are copied off the devices, and
the files are written by a background thread while training goes on. orbax deletes the
checkpoints past the newest ``keep`` after each save is complete; a process killed in
between leaves one too many, which the next writer of that directory deletes on opening it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from psijax.errors import InputError
from psijax.types import TrainState

FORMAT = 3  # written; 3: arrays under pytree names (the sampler's state as ``sampler``)
READS = (1, 2, 3)  # 2: the sampler's state was Metropolis's width, ``width``; 1: leaf_0000, ...
SUBDIR = "checkpoints"


class Checkpoints:
    """The checkpoints of one run directory; keeps the newest ``keep``."""

    def __init__(self, run_dir: str | Path, *, keep: int = 3, read_only: bool = False):
        import orbax.checkpoint as ocp  # ~0.4 s to import; only runs that checkpoint pay it

        self._ocp = ocp
        self.directory = Path(run_dir).absolute() / SUBDIR
        logging.getLogger("absl").setLevel(logging.ERROR)  # orbax's chatter is not for users
        options = ocp.CheckpointManagerOptions(
            max_to_keep=None if read_only else keep,
            save_interval_steps=0 if read_only else 1,
            create=not read_only,
            read_only=read_only,
            cleanup_tmp_directories=not read_only,
            enable_async_checkpointing=True,
        )
        self._manager = ocp.CheckpointManager(self.directory, options=options)
        if not read_only:  # a process killed between a save and orbax's pruning left more
            for step in self.steps()[:-keep]:
                self._manager.delete(step)

    def steps(self) -> list[int]:
        return sorted(self._manager.all_steps())

    def latest(self) -> int | None:
        steps = self.steps()
        return steps[-1] if steps else None

    def save(self, state: TrainState, identity: dict[str, Any]) -> None:
        """Start writing ``state`` (returns before the files are written)."""
        step = int(jax.device_get(_replicated_value(state.step)))
        if step in self._manager.all_steps():
            return  # already on disk (e.g. the final step was also a periodic one)
        leaves = jax.tree.leaves(state)
        named = _as_dict(state, FORMAT)
        meta = {
            "checksums": [int(c) for c in jax.device_get(_checksums(leaves))],
            "format": FORMAT,
            "step": step,
            "identity": identity,
            "names": list(named),
            "leaves": [[list(x.shape), str(x.dtype)] for x in leaves],
            "devices": jax.device_count(),
            "processes": jax.process_count(),
            "versions": dict(versions()),
        }
        ocp = self._ocp
        args = ocp.args.Composite(state=ocp.args.StandardSave(named), meta=ocp.args.JsonSave(meta))
        self._manager.save(step, args=args, force=True)

    def restore(
        self, template: TrainState, identity: dict[str, Any], step: int | None = None
    ) -> TrainState:
        """The checkpoint at ``step`` (the newest by default) laid out like ``template``.

        ``template``'s leaves are ``jax.ShapeDtypeStruct``s with the shardings wanted now.
        Raises ``InputError`` when the checkpoint is unreadable or from another run.
        """
        step = self.latest() if step is None else step
        if step is None:
            raise InputError(f"no checkpoint in {str(self.directory)!r}; start a new run")
        where = self.directory / str(step)
        ocp = self._ocp
        meta = self._read(step, ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]
        _check_meta(meta, identity, template, where)
        treedef = jax.tree.structure(template)
        target = _as_dict(template, meta["format"])
        args = ocp.args.Composite(state=ocp.args.StandardRestore(target))
        restored = self._read(step, args)["state"]
        leaves = [restored[name] for name in target]
        for name, got, want in zip(target, leaves, target.values(), strict=True):
            if got.shape != want.shape or got.dtype != want.dtype:
                raise InputError(f"checkpoint {str(where)!r} is damaged ({name}); " + _FIX)
        sums = [int(c) for c in jax.device_get(_checksums(leaves))]
        if sums != meta.get("checksums"):
            raise InputError(
                f"checkpoint {str(where)!r} is damaged (its arrays do not match their "
                "checksums); " + _FIX
            )
        return jax.tree.unflatten(treedef, leaves)

    def arrays(self, step: int | None = None) -> list[np.ndarray]:
        """Every leaf of a checkpoint as a host array, in ``TrainState`` order (inspection)."""
        step = self.latest() if step is None else step
        ocp = self._ocp
        meta = self._read(step, ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]
        device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
        names = meta.get("names") or [f"leaf_{i:04d}" for i in range(len(meta["leaves"]))]
        target = {
            name: jax.ShapeDtypeStruct(tuple(s), np.dtype(d), sharding=device)
            for name, (s, d) in zip(names, meta["leaves"], strict=True)
        }
        restored = self._read(step, ocp.args.Composite(state=ocp.args.StandardRestore(target)))
        return [np.asarray(restored["state"][name]) for name in target]

    def wait(self) -> None:
        """Block until every started save is on disk."""
        self._manager.wait_until_finished()

    def close(self) -> None:
        self._manager.wait_until_finished()
        self._manager.close()

    def _read(self, step: int, args):
        where = self.directory / str(step)
        try:
            return self._manager.restore(step, args=args)
        except InputError:
            raise
        except Exception as err:  # orbax/tensorstore raise many types for damaged files
            first = (str(err).strip().splitlines() or [""])[0].split(". See full")[0][:100]
            raise InputError(
                f"checkpoint {str(where)!r} is damaged or truncated, its files are unreadable "
                f"({type(err).__name__}: {first}); " + _FIX
            ) from None


_FIX = "delete that step directory to resume from an older checkpoint, or start a new run"


def _as_dict(tree: Any, fmt: int) -> dict[str, Any]:
    """The leaves of ``tree`` by name, in tree order: pytree names (format 2) or
    ``leaf_0000``, ... (format 1)."""
    if fmt == 1:
        return {f"leaf_{i:04d}": x for i, x in enumerate(jax.tree.leaves(tree))}
    named = {_name(path): x for path, x in jax.tree_util.tree_flatten_with_path(tree)[0]}
    if fmt == 2:  # the sampler's state was one array, the proposal width
        named = {"width" if name == "sampler" else name: x for name, x in named.items()}
    if len(named) != len(jax.tree.leaves(tree)):
        raise ValueError("two leaves of the state have the same name")
    return named


def _name(path: tuple) -> str:
    """``params.layers.0.one.w`` for the path of a leaf."""
    parts = []
    for key in path:
        for attr in ("name", "key", "idx"):
            if hasattr(key, attr):
                parts.append(str(getattr(key, attr)))
                break
        else:
            parts.append(str(key))
    return ".".join(parts)


@functools.cache
def versions() -> dict[str, str]:
    """The versions of the software that writes a checkpoint."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}  # (cached: one lookup per process)
    for name in ("psijax", "jax", "jaxlib", "folx", "orbax-checkpoint", "optax", "numpy"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "unknown"
    return found


def _replicated_value(x: jax.Array) -> jax.Array:
    return x.addressable_data(0) if isinstance(x, jax.Array) else x


@jax.jit
def _checksums(leaves: list[jax.Array]) -> list[jax.Array]:
    """A uint32 checksum of each array's bits: a position-weighted sum that wraps around.

    Integer sums do not depend on the summation order, so the value is the same however
    the array is sharded; any changed bit changes it.
    """
    sums = []
    for x in leaves:
        x = jnp.asarray(x)
        if x.dtype.itemsize in (4, 8) and x.dtype != jnp.bool_:
            bits = jax.lax.bitcast_convert_type(x, jnp.uint32).reshape(-1)
        else:
            bits = x.astype(jnp.uint32).reshape(-1)
        weight = jnp.arange(bits.size, dtype=jnp.uint32) * jnp.uint32(2654435761) + 1
        sums.append(jnp.sum(bits * weight, dtype=jnp.uint32))
    return sums


def _check_meta(meta: dict, identity: dict, template: TrainState, where: Path) -> None:
    if meta.get("format") not in READS:
        wrote = meta.get("versions", {}).get("psijax", "another version")
        raise InputError(
            f"checkpoint {str(where)!r} has format {meta.get('format')!r}, this psijax reads "
            f"{', '.join(map(str, READS))}; resume it with the psijax that wrote it ({wrote})"
        )
    saved = meta.get("identity", {})
    for key, value in identity.items():
        if saved.get(key) != value:
            raise InputError(
                f"checkpoint {str(where)!r} belongs to a run with another {key} "
                f"({saved.get(key)!r}, this run has {value!r}); resume it with its own "
                "config or start a new run in another --out"
            )
    leaves = [[list(x.shape), str(x.dtype)] for x in jax.tree.leaves(template)]
    if meta.get("leaves") != leaves:
        raise InputError(
            f"checkpoint {str(where)!r} does not match this run's network, optimiser or "
            "walkers; resume it with its own config or start a new run in another --out"
        )


def as_trained(config, run_dir: str | Path):
    """``config`` (a ``Config``) as the network of ``run_dir``'s checkpoints was built.

    ``jastrow`` was PsiFormer's alone until FermiNet got the cusp Jastrow factor too: a
    FermiNet run from before holds ``jastrow = true`` in its config.json and no Jastrow
    parameters in its checkpoints, and is resumed, loaded and evaluated without one.
    """
    if config.ansatz != "ferminet" or not config.jastrow:
        return config
    names = saved_names(run_dir)
    if names is None or any(".jastrow." in f".{name}." for name in names):
        return config
    return dataclasses.replace(config, jastrow=False)


def saved_names(run_dir: str | Path) -> list[str] | None:
    """The array names of the newest complete checkpoint in ``run_dir``, read from its
    meta file alone (empty for format 1, which named none); None without a readable one."""
    step = newest_complete(run_dir)
    if step is None:
        return None
    try:
        meta = json.loads((Path(run_dir) / SUBDIR / str(step) / "meta" / "metadata").read_text())
    except (OSError, ValueError):
        return None  # restoring it says what is wrong
    if not isinstance(meta, dict):
        return None
    names = meta.get("names")
    return names if isinstance(names, list) else []


def newest_complete(run_dir: str | Path) -> int | None:
    """The newest checkpoint step on disk that was completely written, read from the
    directory alone (orbax renames a checkpoint into place only once every process has
    written its part), so that it works in a process whose peers are gone."""
    directory = Path(run_dir) / SUBDIR
    if not directory.is_dir():
        return None
    return max((int(p.name) for p in directory.iterdir() if p.name.isdigit()), default=None)


def identity_of(fingerprint: str, config_values: dict[str, Any]) -> dict[str, Any]:
    """What must match between a checkpoint and the run that resumes it, JSON-normalised."""
    return json.loads(json.dumps({"molecule": fingerprint, **config_values}, default=str))
