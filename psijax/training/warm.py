"""A run that starts from another run's wavefunction (``init_from``): the same network with
its nuclei moved, as a geometry scan or relaxation takes it from point to point.

The parameters are the other run's newest checkpoint's; the walkers are its walkers, each
electron moved with the nucleus it was nearest to (so that a core electron stays in its
core), as many as this run has (repeated or cut). Pretraining is skipped: the parameters
are already a wavefunction of nearly this molecule; burn-in still runs and adapts the
sampler to the moved nuclei. The optimiser starts fresh.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from psijax import parallel, registry, system
from psijax.errors import InputError
from psijax.rundir import train_files
from psijax.training import saved
from psijax.types import Params, Walkers


def start(run: str, molecule, config, mesh) -> tuple[Params, Walkers]:
    """(parameters, walkers ``[config.walkers, K * N, 3]``) from ``run`` (``check``ed),
    placed on ``mesh`` like a fresh run's."""
    source = saved.restore(run, mesh)
    walkers = np.asarray(parallel.to_host(source.state.walkers), np.float64)
    walkers = follow_nuclei(walkers, source.molecule.nuclear_positions, molecule.nuclear_positions)
    rows = np.arange(config.walkers) % walkers.shape[0]
    walkers = jnp.asarray(walkers[rows], jnp.float32)
    walkers = parallel.to_global(walkers, parallel.walker_sharding(mesh))
    return source.state.params, walkers  # restored replicated on ``mesh``


def follow_nuclei(walkers: np.ndarray, old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """``walkers [W, N, 3]`` with each electron moved by the displacement of the nucleus of
    ``old [atoms, 3]`` it is nearest to (``new`` holds the nuclei's new positions)."""
    distance = np.linalg.norm(walkers[..., None, :] - old, axis=-1)  # [W, N, atoms]
    nearest = np.argmin(distance, axis=-1)
    return walkers + (new - old)[nearest]


def check(run: str, molecule, config) -> None:
    """``InputError`` unless ``run`` is a run with a checkpoint whose network and electrons
    fit this run's (``config`` sized for ``molecule``); reads its config, no checkpoint."""
    path = saved.check_run(run)
    their_config = train_files.read_config(path)
    theirs = system.for_config(their_config)
    if theirs.symbols != molecule.symbols or (theirs.n_up, theirs.n_down) != (
        molecule.n_up,
        molecule.n_down,
    ):
        raise InputError(
            f"init_from {run!r} is a run of {' '.join(theirs.symbols)} with {theirs.n_up} up "
            f"and {theirs.n_down} down electrons; a warm start needs the same atoms in the same "
            "order and the same spin (only the nuclei may move)"
        )
    if theirs.ecp != molecule.ecp:
        raise InputError(
            f"init_from {run!r} has other effective core potentials; give the same --ecp"
        )
    shapes = lambda net: jax.tree.map(
        lambda a: (a.shape, str(a.dtype)),
        jax.eval_shape(lambda: net.init(jax.random.PRNGKey(0), jnp.float32)),
    )
    if shapes(registry.ansatz(theirs, their_config)) != shapes(registry.ansatz(molecule, config)):
        raise InputError(
            f"init_from {run!r} has another network than this run's; give the same network "
            "settings (--ansatz, --layers, --determinants, --states, ...) as that run"
        )
