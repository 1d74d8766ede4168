"""The evaluation's jitted pieces: its state, one MCMC-and-observables step, re-equilibration.

Walkers and their log|psi| are split over the mesh's walker axis, everything else is
replicated; the parameters are an argument (frozen, replicated), never part of the state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from psijax import parallel
from psijax.batching import map_walkers
from psijax.sampler import Metropolis, burn_in
from psijax.types import Array, Params, Walkers
from psijax.wavefunction import Wavefunction


class EvalState(NamedTuple):
    walkers: Walkers  # [walker, electron, 3], sharded
    log_abs: Array  # [walker], sharded
    width: Array  # MCMC proposal width (bohr)
    step: Array  # int32
    key: Array


def make_eval_step(
    apply,
    local_values: Callable,
    n_moves: int,
    mesh,
    chunk: int | None,
    donate: bool = True,
    combine: Callable | None = None,
) -> Callable[[Params, EvalState], tuple[EvalState, dict[str, Array], Array]]:
    """One jitted evaluation step: ``n_moves`` Metropolis moves at a fixed width, then
    every observable of every walker; returns the new state, the walker means (walkers
    with a non-finite local energy left out and counted) and the per-walker energies.
    ``combine(means, n)`` turns the walker means into the step's values (see
    ``observables.combine``)."""
    log_abs = lambda p, r: apply(p, r).log_abs

    def step(params: Params, state: EvalState):
        key, k_move = jax.random.split(state.key)
        batch = lambda w: map_walkers(log_abs, params, w, chunk_size=chunk)
        walkers, logp, _, moves = Metropolis(n_moves, adapt=False).step(
            k_move, batch, state.walkers, state.log_abs, state.width
        )
        values = map_walkers(local_values, params, walkers, chunk_size=chunk)
        energy = values["energy"]
        ok = jnp.isfinite(energy)
        n_ok = jnp.maximum(jnp.sum(ok), 1).astype(energy.dtype)
        mean = lambda v: jnp.sum(jnp.where(ok, v, 0.0)) / n_ok
        metrics = {name: mean(v) for name, v in values.items()}
        if combine is not None:
            metrics = combine(metrics, n_ok)
        metrics["variance"] = mean((energy - metrics["energy"]) ** 2)
        metrics["acceptance"] = moves.acceptance
        metrics["nonfinite_walkers"] = jnp.sum(~ok).astype(energy.dtype)
        new = state._replace(walkers=walkers, log_abs=logp, step=state.step + 1, key=key)
        return new, metrics, energy

    shardings = state_shardings(mesh)
    rep, walker = parallel.replicated(mesh), parallel.walker_sharding(mesh)
    return jax.jit(
        step,
        in_shardings=(rep, shardings),
        out_shardings=(shardings, rep, walker),
        donate_argnums=1 if donate else (),
    )


def make_equilibrate(apply, n_moves: int, mesh, chunk: int | None):
    """Jitted ``equilibrate(params, state, n_steps)``: MCMC with an adapted width."""
    log_abs = lambda p, r: apply(p, r).log_abs

    def equilibrate(params: Params, state: EvalState, n_steps: int) -> EvalState:
        batch = lambda w: map_walkers(log_abs, params, w, chunk_size=chunk)

        walkers, logp, width = burn_in(
            state.key, Metropolis(n_moves), batch, state.walkers, state.width, n_steps=n_steps
        )
        key = jax.random.fold_in(state.key, n_steps)
        return state._replace(walkers=walkers, log_abs=logp, width=width, key=key)

    shardings = state_shardings(mesh)
    return jax.jit(
        equilibrate,
        in_shardings=(parallel.replicated(mesh), shardings),
        out_shardings=shardings,
        static_argnums=2,
    )


def state_shardings(mesh) -> EvalState:
    """Walkers and their log|psi| split over devices, the rest replicated (as in training)."""
    return parallel.state_shardings(mesh, EvalState(*[None] * len(EvalState._fields)))


def abstract_state(wf: Wavefunction, n_walkers: int, mesh) -> EvalState:
    """Shapes, dtypes and shardings of the evaluation's state (the restore template)."""
    n, dtype = wf.molecule.n_electrons, wf.walkers.dtype
    sh = state_shardings(mesh)
    spec = jax.ShapeDtypeStruct
    return EvalState(
        walkers=spec((n_walkers, n, 3), dtype, sharding=sh.walkers),
        log_abs=spec((n_walkers,), dtype, sharding=sh.log_abs),
        width=spec((), dtype, sharding=sh.width),
        step=spec((), np.int32, sharding=sh.step),
        key=spec((2,), np.uint32, sharding=sh.key),
    )


def initial_state(wf: Wavefunction, n_walkers: int, seed: int, mesh) -> EvalState:
    """The checkpoint's walkers (repeated or cut to ``n_walkers``) on ``mesh``."""
    saved = np.asarray(parallel.to_host(wf.walkers))
    walkers = saved[np.arange(n_walkers) % saved.shape[0]]
    key = jax.random.fold_in(jax.random.PRNGKey(seed), 0xE7A1)
    state = EvalState(
        walkers=walkers,
        log_abs=np.zeros((n_walkers,), saved.dtype),
        width=np.asarray(wf.width, saved.dtype),
        step=np.zeros((), np.int32),
        key=np.asarray(key),
    )
    return parallel.to_global(state, state_shardings(mesh))
