"""The evaluation's jitted pieces: its state, one sampling-and-observables step, and
re-equilibration.

Walkers and their log|psi| are split over the mesh's walker axis, everything else is
replicated; the parameters are an argument (frozen, replicated), never part of the state.
The walkers move exactly as in training (``psijax.sampling.move``: the sampler, then lost
walkers restarted), with the sampler's state frozen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from psijax import parallel, sampling
from psijax.parallel import cpu_codegen
from psijax.parallel.batching import map_walkers
from psijax.sampling import Sampler
from psijax.types import Array, LogAbs, Metrics, Params, PyTree, Walkers

# Per-walker metrics of a step: not averaged; written to walkers.h5.
PER_WALKER = ("local_energy", "positions")


class EvalState(NamedTuple):
    walkers: Walkers  # [walker, electron, 3], sharded
    log_abs: Array  # [walker], sharded
    sampler: PyTree  # the sampler's (frozen) state (``Sampler.init``)
    step: Array  # int32
    key: Array


def make_eval_step(
    log_abs: LogAbs,
    local_values: Callable[..., dict[str, Array]],
    sampler: Sampler,
    mesh,
    chunk: int | None,
    combine: Callable[[dict[str, Array], Array], dict[str, Array]],
    *,
    random: bool = False,
    positions: bool = False,
) -> Callable[[Params, EvalState], tuple[EvalState, Metrics]]:
    """One jitted evaluation step: one round of ``sampler`` moves (a sampler that does not
    adapt), then ``local_values(params, r[, key])`` of every walker (one key per walker when
    ``random``). Returns the new state and the metrics: the walker means of every column
    (walkers with a non-finite local energy or any other non-finite value left out and
    counted; nan, and the step ``rejected``, when none is finite), turned into the step's
    values by ``combine(means, n)``, the energy's variance, the acceptance, and the
    per-walker local energies (and ``positions``, if asked for)."""

    def step(params: Params, state: EvalState) -> tuple[EvalState, Metrics]:
        if random:
            key, k_move, k_energy = jax.random.split(state.key, 3)
        else:
            (key, k_move), k_energy = jax.random.split(state.key), None
        batch = lambda w: map_walkers(log_abs, params, w, chunk_size=chunk)
        walkers, logp, sampler_state, moves, n_reset = sampling.move(
            sampler, k_move, batch, state.walkers, state.log_abs, state.sampler
        )
        if random:
            keys = jax.random.split(k_energy, walkers.shape[0])
            one = lambda p, walker_key: local_values(p, *walker_key)
            values = map_walkers(one, params, (walkers, keys), chunk_size=chunk)
        else:
            values = map_walkers(local_values, params, walkers, chunk_size=chunk)
        energy = values["energy"]
        # a walker counts where every value it gave is finite, so that every column (and
        # each covariance a ``combine`` forms from two of them) averages the same walkers
        ok = jnp.isfinite(energy)
        for v in values.values():
            ok &= jnp.all(jnp.isfinite(v).reshape(v.shape[0], -1), axis=1)
        n_ok = jnp.sum(ok).astype(energy.dtype)
        any_ok = n_ok > 0

        def mean(v: Array) -> Array:
            total = jnp.sum(jnp.where(ok, v, 0.0)) / jnp.maximum(n_ok, 1.0)
            return jnp.where(any_ok, total, jnp.nan)

        metrics = combine({name: mean(v) for name, v in values.items()}, n_ok)
        metrics["variance"] = mean((energy - metrics["energy"]) ** 2)
        metrics["acceptance"] = moves.acceptance
        metrics["nonfinite_walkers"] = jnp.sum(~ok).astype(energy.dtype)
        metrics["reset_walkers"] = n_reset.astype(energy.dtype)
        metrics["rejected"] = (~any_ok).astype(energy.dtype)
        metrics["local_energy"] = energy
        if positions:
            metrics["positions"] = walkers
        new = EvalState(walkers, logp, sampler_state, state.step + 1, key)
        return new, metrics

    shardings = state_shardings(mesh)
    return jax.jit(
        step,
        in_shardings=(parallel.replicated(mesh), shardings),
        out_shardings=(shardings, None),
        donate_argnums=1,
        compiler_options=cpu_codegen.compiler_options(),
    )


def make_equilibrate(log_abs: LogAbs, sampler: Sampler, mesh, chunk: int | None):
    """Jitted ``equilibrate(params, state, n_steps)``: ``n_steps`` of ``sampler`` (which
    adapts its state) from the state's walkers."""

    def equilibrate(params: Params, state: EvalState, n_steps: int) -> EvalState:
        batch = lambda w: map_walkers(log_abs, params, w, chunk_size=chunk)
        walkers, logp, sampler_state = sampling.burn_in(
            state.key, sampler, batch, state.walkers, state.sampler, n_steps=n_steps
        )
        key = jax.random.fold_in(state.key, n_steps)
        return state._replace(walkers=walkers, log_abs=logp, sampler=sampler_state, key=key)

    shardings = state_shardings(mesh)
    return jax.jit(
        equilibrate,
        in_shardings=(parallel.replicated(mesh), shardings),
        out_shardings=shardings,
        static_argnums=2,
        compiler_options=cpu_codegen.compiler_options(brief=True),  # run once, as burn-in
    )


def state_shardings(mesh) -> EvalState:
    """Walkers and their log|psi| split over devices, the rest replicated (as in training;
    a prefix of the state: the sampler's whole state replicated)."""
    return parallel.state_shardings(mesh, EvalState(*[None] * len(EvalState._fields)))


def abstract_state(n_walkers: int, n_electrons: int, dtype, mesh, sampler) -> EvalState:
    """Shapes, dtypes and shardings of the evaluation's state (the restore template), with
    ``sampler``'s state."""
    sh = state_shardings(mesh)
    spec = jax.ShapeDtypeStruct
    of = lambda s: spec(s.shape, s.dtype, sharding=sh.sampler)
    return EvalState(
        walkers=spec((n_walkers, n_electrons, 3), dtype, sharding=sh.walkers),
        log_abs=spec((n_walkers,), dtype, sharding=sh.log_abs),
        sampler=jax.tree.map(of, jax.eval_shape(lambda: sampler.init(dtype))),
        step=spec((), np.int32, sharding=sh.step),
        key=spec((2,), np.uint32, sharding=sh.key),
    )


def initial_state(
    log_abs: LogAbs, params: Params, walkers: np.ndarray, sampler_state, n_walkers: int,
    seed: int, mesh,
) -> EvalState:  # fmt: skip
    """The given walkers (repeated or cut to ``n_walkers``) with their log|psi| under
    ``params``, the sampler's state and a key of ``seed``, on ``mesh``."""
    walkers = walkers[np.arange(n_walkers) % walkers.shape[0]]
    key = jax.random.fold_in(jax.random.PRNGKey(seed), 0xE7A1)
    state = EvalState(
        walkers=walkers,
        log_abs=np.zeros((n_walkers,), walkers.dtype),
        sampler=sampler_state,
        step=np.zeros((), np.int32),
        key=np.asarray(key),
    )
    sh = state_shardings(mesh)
    full = sh._replace(sampler=jax.tree.map(lambda _: sh.sampler, sampler_state))
    state = parallel.to_global(state, full)
    batch = jax.jit(lambda p, w: map_walkers(log_abs, p, w))
    return state._replace(log_abs=batch(params, state.walkers))
