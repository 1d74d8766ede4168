"""A training run's newest checkpoint, restored: what ``psijax.load`` gives its users and a
warm start (``psijax.training.warm``) starts from."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
from jax.sharding import Mesh

from psijax import config as config_lib
from psijax import parallel, registry, system
from psijax.errors import InputError
from psijax.rundir import checkpoint, train_files
from psijax.training.state import abstract_train_state
from psijax.types import TrainState


@dataclasses.dataclass(frozen=True)
class Saved:
    """A run's config, molecule, network and newest training state."""

    path: Path
    config: config_lib.Config
    molecule: system.Molecule
    net: object
    state: TrainState


def check_run(run: str | Path) -> Path:
    """``run`` as a path to a training run with a checkpoint, or ``InputError``."""
    path = Path(run)
    if not path.is_dir():
        raise InputError(f"{str(path)!r} is not a directory; give a run directory (--out of train)")
    if not (path / "config.json").is_file():
        raise InputError(
            f"{str(path)!r} holds no psijax run (no config.json); give the --out of a training run"
        )
    steps = [
        p.name for p in (path / checkpoint.SUBDIR).glob("*") if p.is_dir() and p.name.isdigit()
    ]
    if not steps:
        raise InputError(
            f"{str(path)!r} has no checkpoint yet (checkpoints/ is empty or missing); train "
            "it until one is written, or resume it with psijax train --resume"
        )
    return path


def restore(run: str | Path, mesh: Mesh) -> Saved:
    """The newest checkpoint of ``run`` on ``mesh``: parameters replicated, walkers split
    over it (or replicated, when their number does not divide). ``InputError`` for anything
    but a run with a readable checkpoint."""
    path = check_run(run)
    config = train_files.read_config(path)
    molecule = system.for_config(config)
    net = registry.ansatz(molecule, config)
    template = abstract_train_state(
        net, registry.optimizer(config), config.walkers, net.n_electrons, mesh,
        sampler=registry.sampler(config, molecule),
    )  # fmt: skip
    if config.walkers % mesh.devices.size:  # restore the walkers whole on every device
        rep = parallel.replicated(mesh)
        retype = lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=rep)
        template = template._replace(
            walkers=retype(template.walkers), log_abs=retype(template.log_abs)
        )
    identity = checkpoint.identity_of(molecule.fingerprint(), config_lib.identity(config))
    reader = checkpoint.Checkpoints(path, read_only=True)
    try:
        state = reader.restore(template, identity)
    finally:
        reader.close()
    return Saved(path, config, molecule, net, state)
