"""The training step, defined once: the walkers' work, then the step's finish.

``StepWork.walkers`` is the work each walker does on its own: MCMC moves, its local
energy and, where the optimiser takes the per-walker jacobian (SPRING), its jacobian row.
``StepWork.finish`` is what needs all walkers: the energy's statistics and clipping, the
VMC gradient (``vmc_weights``: the jacobian's rows, or one backward pass, weighted by the
centered local energies), the optimiser's update, a guard that rejects any update with a
non-finite energy, gradient or parameter, the new state and the metrics. ``make_step``
runs them as one jitted program, or on one CPU device with two cores or more as walker
groups at once, one host thread each (``psijax.training.execution``). The host loop
(``psijax.run.loop``) fetches metrics one step late, so the device never waits for
logging.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

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
from psijax.optim.gradient import (
    EnergyStats,
    energy_stats,
    make_local_energies,
    vmc_weights,
    vmc_weights_imaginary,
)
from psijax.parallel.batching import auto_chunk, map_walkers
from psijax.parallel.cpu_lapack import cores
from psijax.sampling import Sampler
from psijax.training import execution
from psijax.types import Array, LogAbs, Metrics, Params, TrainState

GROUPS = 2  # walker groups per CPU device with two cores or more


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
    phase: Callable[[Params, Array], Array] | None = None,
) -> Callable[[TrainState], tuple[TrainState, Metrics]]:
    """The training step, sharded like ``state_template`` on ``mesh``.

    ``sampler`` moves the walkers (``psijax.registry.sampler``); its state is
    ``state.sampler``. The optimiser gets the extra inputs it declares (``psijax.optim.base``).
    The metrics are the columns of ``estimators`` (``psijax.estimators.training``). A
    complex psi gives its ``phase`` (arg psi) and a local energy with Im E_L beside E_L
    (``psijax.hamiltonian.base.ComplexLocalEnergy``): its gradient and jacobian then hold
    the phase's derivatives too (``_complex_gradient``).
    """
    n = state_template.walkers.shape[0]
    work = StepWork(
        log_abs, local_energy, optimizer, config, mesh, sampler, estimators, n, phase
    )  # fmt: skip
    k = group_count(config, mesh, state_template, sampler, work.needs)
    if k > 1:
        return execution.ThreadGroups(work, k, state_template)
    return execution.one_program(work, state_template)


class Moved(NamedTuple):
    """The MCMC's outcome in a step: ``sampling.move``'s outputs."""

    walkers: Array
    log_abs: Array
    sampler: Any  # the sampler's state
    moves: Any  # its statistics
    n_reset: Array


class Walked(NamedTuple):
    """The walkers' work (all of them, or one group's): moved walkers, their local energies
    (and a ``with_aux`` local energy's extra outputs), their jacobian rows or None."""

    moved: Moved
    energies: Array
    aux: dict | None
    jacobian: jacobian_lib.Leaves | None


@dataclasses.dataclass(frozen=True)
class StepWork:
    """The step's two parts (module docstring), for ``n_walkers`` walkers in all."""

    log_abs: LogAbs
    local_energy: Callable[..., Array]
    optimizer: Any
    config: StepConfig
    mesh: Mesh
    sampler: Sampler
    estimators: tuple[Estimator, ...]
    n_walkers: int
    phase: Callable[[Params, Array], Array] | None = None  # a complex psi's arg psi

    @property
    def needs(self) -> frozenset:
        return optim.needs_of(self.optimizer)

    @property
    def random(self) -> bool:
        """Whether the local energy draws random numbers (its own key each step)."""
        return bool(getattr(self.local_energy, "needs_key", False))

    def chunk(self, size: int) -> int | None:
        """The walker chunk for ``size`` walkers: the user's or the automatic one for all
        of them (``walker_chunk``); a group that fits in one automatic chunk takes none."""
        chunk = walker_chunk(self.config, self.mesh, self.n_walkers)
        if size < self.n_walkers and self.config.chunk_size is None and chunk is not None:
            return None if chunk >= size else chunk
        return chunk

    def walkers(
        self, params: Params, walkers: Array, sampler_state, key: Array, rows=None
    ) -> Walked:
        """``walkers`` moved, their local energies and jacobian rows (where the optimiser
        takes them whole). ``rows=(offset, total)``: they are those rows of the whole
        batch, and draw its random numbers for their rows."""
        _, mcmc_key, energy_key = streams(key, self.random)
        chunk = self.chunk(walkers.shape[0])
        batch_log_abs = sampling.values_of(
            lambda w: map_walkers(self.log_abs, params, w, chunk_size=chunk)
        )
        # state.log_abs belongs to the parameters before the last update: recompute it, or
        # the first acceptance test of every walker would compare two different |psi|^2.
        with jax.named_scope("mcmc"):
            moved = Moved(*sampling.move(
                self.sampler, mcmc_key, batch_log_abs, walkers, batch_log_abs(walkers),
                sampler_state, rows=rows,
            ))  # fmt: skip
        with jax.named_scope("local_energy"):  # the primal only: no backward pass
            energies_of = make_local_energies(self.local_energy, chunk_size=chunk)
            energies, aux = energies_of(params, moved.walkers, energy_key, rows=rows)
        jac = None
        complex_rows = self.phase is not None  # formed over all walkers (``_complex_gradient``)
        if self.needs & PER_WALKER and self.config.jacobian_blocks == 1 and not complex_rows:
            with jax.named_scope("jacobian"):  # one block per parameter leaf, never joined
                jac = jacobian_lib.leaves(
                    self.log_abs, params, moved.walkers, jnp.isfinite(energies),
                    chunk_size=self.config.chunk_size,
                )  # fmt: skip
        return Walked(moved, energies, aux, jac)

    def finish(self, state: TrainState, parts: Sequence[Walked]) -> tuple[TrainState, Metrics]:
        """The step once every walker's work is done (``parts``: all walkers', or each
        group's in order): the statistics, the gradient, the guarded update, the metrics."""
        moved, energies, aux, jac = _together(self.sampler, parts)
        stats = energy_stats(energies, self.config.clip_scale, aux)
        grads, extra = self.gradient(state.params, moved.walkers, stats, jac)
        if MESH in self.needs:  # the optimiser may split its work over the walker axis
            extra = extra | dict(mesh=self.mesh, axis=parallel.WALKER_AXIS)
        with jax.named_scope("optimizer"):
            updates, opt_state = self.optimizer.update(
                grads, state.opt_state, state.params, **extra
            )
            params = optax.apply_updates(state.params, updates)
        ok = jnp.isfinite(stats.energy) & _all_finite((grads, params))
        keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, old)
        new_state = TrainState(
            params=keep(params, state.params),
            opt_state=keep(opt_state, state.opt_state),
            walkers=moved.walkers,
            log_abs=moved.log_abs,
            sampler=moved.sampler,
            step=state.step + 1,
            key=streams(state.key, self.random)[0],
        )
        values = StepValues(
            params=new_state.params, walkers=moved.walkers, energy=stats, moves=moved.moves,
            width=self.sampler.width(moved.sampler), n_reset=moved.n_reset, accepted=ok,
            grads=grads,
        )  # fmt: skip
        with jax.named_scope("metrics"):
            return new_state, estimators_lib.metrics(self.estimators, values)

    def gradient(
        self, params: Params, walkers: Array, stats: EnergyStats, jac
    ) -> tuple[Params, dict]:
        """The VMC gradient J^T w (``vmc_weights``) and the optimiser's extra inputs: J's
        rows as the walkers' work formed them, J in blocks (never formed whole), or no J
        at all (one backward pass over the walkers)."""
        if self.phase is not None:
            return self._complex_gradient(params, walkers, stats)
        weights = vmc_weights(stats)
        with jax.named_scope("jacobian"):
            if jac is not None:
                grads = jac.rmatvec_like(params, weights)
            elif self.needs & PER_WALKER:  # jacobian_blocks > 1: its blocks in the optimiser
                jac = jacobian_lib.blocked(
                    self.log_abs, params, walkers, stats.finite, self.config.jacobian_blocks,
                    self.chunk(walkers.shape[0]),
                )  # fmt: skip
                grads = ravel_pytree(params)[1](jac.rmatvec(weights))
            else:
                chunk = self.chunk(walkers.shape[0])
                batch = lambda p: map_walkers(self.log_abs, p, walkers, chunk_size=chunk)
                grads = jax.vjp(batch, params)[1](weights)[0]
        extra = {JACOBIAN: jac, CENTERED_ENERGIES: stats.centered}
        return grads, {k: v for k, v in extra.items() if k in self.needs}

    def _complex_gradient(
        self, params: Params, walkers: Array, stats: EnergyStats
    ) -> tuple[Params, dict]:
        """A complex psi's gradient (``psijax.optim.gradient``) and the optimiser's inputs:
        J with a row of d log|psi| and one of d arg psi per walker, the centered Re and Im
        E_L beside them (``jacobian.interleaved``), formed over all walkers at once so that
        each half is centered over all of them."""
        real, imaginary = vmc_weights(stats), vmc_weights_imaginary(stats)
        chunk = self.chunk(walkers.shape[0])
        log_abs = lambda p, r: self.log_abs(p, r)  # plain functions: no tapped layers
        phase = lambda p, r: self.phase(p, r)
        jac, energies = None, stats.centered
        with jax.named_scope("jacobian"):
            if self.needs & PER_WALKER:
                rows = [
                    jacobian_lib.leaves(f, params, walkers, stats.finite, chunk_size=chunk)
                    for f in (log_abs, phase)
                ]
                jac = jacobian_lib.interleaved(*rows)
                pair = lambda a, b: jnp.stack([a, b], axis=1).reshape(-1)
                grads = jac.rmatvec_like(params, pair(real, imaginary))
                energies = pair(stats.centered, stats.centered_imaginary)
            else:
                grads = None
                for f, weights in ((log_abs, real), (phase, imaginary)):
                    batch = lambda p, f=f: map_walkers(f, p, walkers, chunk_size=chunk)
                    part = jax.vjp(batch, params)[1](weights)[0]
                    grads = part if grads is None else jax.tree.map(jnp.add, grads, part)
        extra = {JACOBIAN: jac, CENTERED_ENERGIES: energies}
        return grads, {k: v for k, v in extra.items() if k in self.needs}


def group_count(config: StepConfig, mesh, state_template: TrainState, sampler, needs) -> int:
    """How many walker groups the step runs at once: ``config.groups`` where set, else
    ``GROUPS`` on one CPU device with two cores or more, where the step can be split, and 1
    (one program) otherwise. It can be split where each walker's work holds most of the
    step (the optimiser takes the per-walker jacobian, formed whole) and the sampler can
    move rows of a batch and merge the groups' states (``Sampler.merge``)."""
    n = state_template.walkers.shape[0]
    splittable = (
        needs & PER_WALKER
        and config.jacobian_blocks == 1
        and callable(getattr(sampler, "merge", None))
        and mesh.devices.size == 1
    )
    if config.groups is not None:
        if config.groups > 1 and not splittable:
            raise ValueError(
                f"groups={config.groups} needs one device, SPRING's per-walker jacobian "
                "(jacobian_blocks 1) and a sampler that merges groups' states; use groups=1"
            )
        if config.groups > 1 and n % config.groups:
            raise ValueError(f"groups={config.groups} does not divide the {n} walkers")
        return config.groups
    cpu = mesh.devices.flat[0].platform == "cpu"
    if not (splittable and cpu and cores() >= 2 and n % GROUPS == 0):
        return 1
    size = n // GROUPS
    chunk = walker_chunk(config, mesh, n)
    if config.chunk_size is None and chunk is not None and chunk >= size:
        chunk = None  # a group fits in one automatic chunk
    return GROUPS if chunk is None or size % chunk == 0 else 1


def _together(sampler, parts: Sequence[Walked]) -> Walked:
    """The groups' work as one batch's: walkers, energies and jacobian rows in order, the
    sampler's states merged, its statistics averaged (equal groups), resets summed."""
    if len(parts) == 1:
        return parts[0]
    cat = lambda *a: jnp.concatenate(a, axis=0)
    moved = [p.moved for p in parts]
    together = Moved(
        walkers=cat(*(m.walkers for m in moved)),
        log_abs=cat(*(m.log_abs for m in moved)),
        sampler=sampler.merge([m.sampler for m in moved]),
        moves=jax.tree.map(lambda *a: jnp.mean(jnp.stack(a)), *(m.moves for m in moved)),
        n_reset=sum(m.n_reset for m in moved),
    )
    aux = None if parts[0].aux is None else jax.tree.map(cat, *(p.aux for p in parts))
    jac = None if parts[0].jacobian is None else jax.tree.map(cat, *(p.jacobian for p in parts))
    return Walked(together, cat(*(p.energies for p in parts)), aux, jac)


def streams(key: Array, random: bool) -> tuple[Array, Array, Array | None]:
    """A step's random streams from its state's key: (the next step's key, the MCMC's, the
    local energy's, None unless it draws: ``random``)."""
    if random:  # the local energy draws: its own key, the other streams as before
        return tuple(jax.random.split(key, 3))
    (key, mcmc_key), energy_key = jax.random.split(key), None
    return key, mcmc_key, energy_key


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
