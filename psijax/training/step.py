"""The training step and the loop.

``make_step`` returns one jitted pure function ``step(state) -> (state, metrics)``:
MCMC moves, local energies, the VMC gradient, the optimiser update and a guard
that rejects any update with a non-finite energy, gradient or parameter. The
state is donated; the host loop (``psijax.run.loop``) fetches metrics one step late, so the
device never waits for logging. On one CPU device with two cores or more the same step
comes as ``psijax.training.groups.GroupedStep``: the walkers in two groups whose programs
run at once on two threads, then a combining program (``finish``, shared).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree
from jax.sharding import Mesh

from psijax import optim, parallel, sampling
from psijax.estimators import training as estimators_lib
from psijax.estimators.training import Estimator, StepValues
from psijax.optim import jacobian as jacobian_lib
from psijax.optim.base import CENTERED_ENERGIES, JACOBIAN, MESH, PER_WALKER
from psijax.optim.gradient import EnergyStats, make_energy_loss
from psijax.parallel import cpu_codegen
from psijax.parallel.batching import auto_chunk, map_walkers
from psijax.sampling import Sampler
from psijax.types import Array, LogAbs, Metrics, Params, TrainState


@dataclasses.dataclass(frozen=True)
class StepConfig:
    clip_scale: float | None = 5.0
    chunk_size: int | None = None
    jacobian_blocks: int = 1  # > 1: the jacobian is never formed whole (psijax/optim/jacobian.py)
    groups: int | None = None  # walker groups run at once on one CPU device; None: automatic


def make_step(
    log_abs: LogAbs,
    local_energy: Callable[..., Array],
    optimizer: optim.Optimizer | optax.GradientTransformation,
    config: StepConfig,
    mesh: Mesh,
    state_template: TrainState,
    sampler: Sampler,
    estimators: tuple[Estimator, ...] = estimators_lib.TRAINING,
) -> Callable[[TrainState], tuple[TrainState, Metrics]]:
    """The jitted training step, sharded like ``state_template`` on ``mesh``.

    ``sampler`` moves the walkers (``psijax.registry.sampler``); its state is
    ``state.width``. The optimiser gets the extra inputs it declares (``psijax.optim.base``):
    with the per-walker jacobian the gradient comes from its rows, else from one backward
    pass. The metrics are the columns of ``estimators`` (``psijax.estimators.training``).
    """
    needs = optim.needs_of(optimizer)
    random = bool(getattr(local_energy, "needs_key", False))
    chunk = walker_chunk(config, mesh, state_template.walkers.shape[0])
    loss = make_energy_loss(log_abs, local_energy, clip_scale=config.clip_scale, chunk_size=chunk)

    def per_walker(
        params: Params, walkers: Array, energy_key
    ) -> tuple[Array, EnergyStats, Params, dict]:
        """Energy, statistics, gradient and the optimiser's extra inputs from one jacobian.

        The mean-energy gradient 2 <(E_L - E) d log|psi|> is the jacobian's rows weighted
        by the centered energies, so no second backward pass over the walkers is needed.
        With ``jacobian_blocks`` > 1 the jacobian is a ``psijax.optim.jacobian.Blocked`` (never
        formed whole) and the gradient one backward pass over the walkers.
        """
        with jax.named_scope("local_energy"):  # the primal only: no backward pass
            energy, stats = loss(params, walkers, energy_key)
        with jax.named_scope("jacobian"):
            n_finite = jnp.maximum(walkers.shape[0] - stats.n_nonfinite, 1.0)
            if config.jacobian_blocks > 1:  # one backward pass here, the blocks in SPRING
                jac = jacobian_lib.blocked(
                    log_abs, params, walkers, stats.finite, config.jacobian_blocks, chunk
                )
                grads = ravel_pytree(params)[1]((2.0 / n_finite) * jac.rmatvec(stats.centered))
            else:  # one block per parameter leaf, never concatenated (psijax/optim/jacobian.py)
                jac = jacobian_lib.leaves(
                    log_abs, params, walkers, stats.finite, chunk_size=config.chunk_size
                )
                grads = jac.rmatvec_like(params, (2.0 / n_finite) * stats.centered)
        extra = {JACOBIAN: jac, CENTERED_ENERGIES: stats.centered}
        return energy, stats, grads, {k: v for k, v in extra.items() if k in needs}

    def step(state: TrainState) -> tuple[TrainState, Metrics]:
        key, mcmc_key, energy_key = streams(state.key, random)
        batch_log_abs = sampling.values_of(
            lambda w: map_walkers(log_abs, state.params, w, chunk_size=chunk)
        )
        # state.log_abs belongs to the parameters before the last update: recompute it, or
        # the first acceptance test of every walker would compare two different |psi|^2.
        with jax.named_scope("mcmc"):
            walkers, log_abs_w, width, moves, n_reset = sampling.move(
                sampler, mcmc_key, batch_log_abs, state.walkers, batch_log_abs(state.walkers),
                state.width,
            )  # fmt: skip
        if needs & PER_WALKER:
            energy, stats, grads, extra = per_walker(state.params, walkers, energy_key)
        else:
            (energy, stats), grads = jax.value_and_grad(loss, has_aux=True)(
                state.params, walkers, energy_key
            )
            extra = {}
        moved = Moved(walkers, log_abs_w, width, moves, n_reset)
        return finish(
            optimizer, needs, mesh, estimators, state, key, moved, energy, stats, grads, extra
        )

    from psijax.training import groups  # it builds on this module's pieces

    if groups.count(config, mesh, state_template, sampler, needs) > 1:
        return groups.GroupedStep(
            log_abs, local_energy, optimizer, config, mesh, state_template, sampler, estimators
        )
    shardings = parallel.state_shardings(mesh, state_template)
    return jax.jit(
        step,
        in_shardings=(shardings,),
        out_shardings=(shardings, parallel.replicated(mesh)),
        donate_argnums=0,
        compiler_options=cpu_codegen.compiler_options(),
    )


def streams(key: Array, random: bool) -> tuple[Array, Array, Array | None]:
    """A step's random streams from its state's key: (the next step's key, the MCMC's, the
    local energy's, None unless it draws: ``random``)."""
    if random:  # the local energy draws: its own key, the other streams as before
        return tuple(jax.random.split(key, 3))
    (key, mcmc_key), energy_key = jax.random.split(key), None
    return key, mcmc_key, energy_key


class Moved(NamedTuple):
    """The MCMC's outcome in a step: ``sampling.move``'s outputs."""

    walkers: Array
    log_abs: Array
    width: Array  # the sampler's state
    moves: object  # its statistics
    n_reset: Array


def finish(
    optimizer, needs, mesh: Mesh, estimators, state: TrainState, key: Array, moved: Moved,
    energy: Array, stats: EnergyStats, grads: Params, extra: dict,
) -> tuple[TrainState, Metrics]:  # fmt: skip
    """The step after the walkers moved and the gradient is known: the optimiser's update,
    the guard that keeps the old parameters on a non-finite energy, gradient or parameter,
    the new state and the metrics."""
    if MESH in needs:  # the optimiser may split its work over the walker axis
        extra = extra | dict(mesh=mesh, axis=parallel.WALKER_AXIS)
    with jax.named_scope("optimizer"):
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params, **extra)
        params = optax.apply_updates(state.params, updates)
    ok = jnp.isfinite(energy) & _all_finite((grads, params))
    keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, old)
    new_state = TrainState(
        params=keep(params, state.params),
        opt_state=keep(opt_state, state.opt_state),
        walkers=moved.walkers,
        log_abs=moved.log_abs,
        width=moved.width,
        step=state.step + 1,
        key=key,
    )
    values = StepValues(
        params=new_state.params, walkers=moved.walkers, energy=stats, moves=moved.moves,
        sampler_state=moved.width, n_reset=moved.n_reset, accepted=ok, grads=grads,
    )  # fmt: skip
    with jax.named_scope("metrics"):
        return new_state, estimators_lib.metrics(estimators, values)


def walker_chunk(config: StepConfig, mesh: Mesh, n_walkers: int) -> int | None:
    """The user's chunk size, or else the automatic one (``batching.auto_chunk``)."""
    if config.chunk_size is not None:
        return config.chunk_size
    return auto_chunk(n_walkers, mesh.devices.size)


def _all_finite(tree) -> Array:
    """Whether every entry of every leaf is finite, as one check over the leaves raveled
    together: one reduction per leaf made XLA compile dozens of small kernels (about 1.5 of
    the combining program's 6-8 CPU-s for LiH), for a copy of the parameters that costs
    microseconds."""
    flat, _ = ravel_pytree(tree)
    return jnp.all(jnp.isfinite(flat))
