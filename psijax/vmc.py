"""The whole job in one call: molecule -> trained FermiNet -> energy with an error bar.

>>> import psijax
>>> result = psijax.train(system="H2", steps=500)
>>> print(result.energy, result.exact)
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from psijax import config as config_lib
from psijax import laplacian, mcmc, optim, parallel, pretrain, system
from psijax.ansatz import FermiNet
from psijax.batching import map_walkers
from psijax.errors import InputError
from psijax.hamiltonian import coulomb_potential, make_local_energy
from psijax.report import Progress, RunWriter
from psijax.stats import Estimate, tail_estimate
from psijax.training import StepConfig, make_step, run
from psijax.types import Params, TrainState


@dataclasses.dataclass
class Result:
    molecule: system.Molecule
    energy: Estimate  # blocking analysis of the trailing eval_fraction of the run
    exact: float | None
    energies: np.ndarray  # per-step mean local energy
    params: Params
    seconds: float
    out: Path

    @property
    def error_vs_exact(self) -> float | None:
        return None if self.exact is None else self.energy.mean - self.exact


def laplacian_operator(name: str, n_electrons: int) -> laplacian.LaplacianOperator:
    """The CLI's string -> operator mapping, done once at the boundary."""
    if name == "default":
        return laplacian.default_operator(n_electrons)
    return laplacian.OPERATORS[name]()


def make_optimizer(config: config_lib.Config):
    if config.optimizer == "spring":
        return optim.spring(learning_rate=config.lr, decay_steps=config.decay_steps)
    return optim.adam(learning_rate=config.lr, decay_steps=config.decay_steps)


def train(
    config: config_lib.Config | None = None,
    *,
    progress: bool = True,
    force: bool = False,
    **overrides,
) -> Result:
    """Train on ``config`` (or the defaults) with keyword ``overrides``; see ``Config``."""
    config = config_lib.from_dict(overrides, config)
    started = time.perf_counter()
    molecule = system.resolve(
        config.system, charge=config.charge, spin=config.spin, unit=config.unit
    )
    mesh = parallel.make_mesh(config.devices)
    parallel.check_walkers(config.walkers, mesh)
    writer = RunWriter(Path(config.out), molecule, config, force=force)
    show = Progress(config.steps, enabled=progress)

    net = FermiNet(
        molecule.n_up,
        molecule.n_down,
        tuple(map(tuple, molecule.nuclear_positions.tolist())),
        layers=config.layers,
        n_determinants=config.determinants,
    )
    keys = jax.random.split(jax.random.PRNGKey(config.seed), 5)
    params = jax.device_put(net.init(keys[0], jnp.float32), parallel.replicated(mesh))
    walkers = mcmc.init_walkers(keys[1], molecule, config.walkers)
    walkers = jax.device_put(walkers, parallel.walker_sharding(mesh))

    if config.pretrain_steps:
        show.phase(f"pretraining on Hartree-Fock ({config.basis})", config.pretrain_steps)
        params, walkers, _ = pretrain.pretrain(
            keys[2], net, params, molecule, walkers,
            steps=config.pretrain_steps, basis=config.basis,
            callback=lambda i, loss: show.pretrain(i, loss),
        )  # fmt: skip

    width = jnp.asarray(0.1, jnp.float32)
    if config.burn_in_steps:
        batch_log_abs = lambda w: map_walkers(net.log_abs, params, w)
        walkers, _, width = mcmc.burn_in(
            keys[3], batch_log_abs, walkers, width,
            n_steps=config.burn_in_steps, n_moves=config.mcmc_moves,
        )  # fmt: skip
    log_abs = map_walkers(net.log_abs, params, walkers)

    op = laplacian_operator(config.laplacian, molecule.n_electrons)
    local_energy = make_local_energy(net.log_abs, coulomb_potential(molecule), op)
    optimizer = make_optimizer(config)
    state = TrainState(
        params=params,
        opt_state=optimizer.init(params),
        walkers=walkers,
        log_abs=log_abs,
        width=width,
        step=jnp.zeros((), jnp.int32),
        key=keys[4],
    )
    state = jax.device_put(state, parallel.state_shardings(mesh, state))
    step_config = StepConfig(
        n_moves=config.mcmc_moves,
        clip_scale=config.clip_scale,
        chunk_size=config.chunk_size,
        natural_gradient=config.optimizer == "spring",
    )
    step = make_step(net.log_abs, local_energy, optimizer, step_config, mesh, state)

    show.phase("training", config.steps)
    energies = []
    final = state
    for i, final, metrics in run(step, state, config.steps):  # noqa: B007 (kept after the loop)
        energies.append(metrics["energy"])
        writer.row(i, metrics, time.perf_counter() - started)
        show.step(i, metrics)
    show.close()

    energies_arr = np.asarray(energies)
    finite = energies_arr[np.isfinite(energies_arr)]
    if finite.size < 2:
        raise InputError("fewer than two finite energies; run more steps")
    estimate = tail_estimate(finite, config.eval_fraction)
    seconds = time.perf_counter() - started
    result = Result(
        molecule, estimate, molecule.exact_energy, energies_arr, final.params, seconds, writer.out
    )
    writer.finish(result, config)
    return result
