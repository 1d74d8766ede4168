"""The sampler behind one interface: burn-in, pretraining, training and evaluation all
move walkers through ``Sampler.step``.

A sampler owns its adaptive state (for Metropolis the proposal width, kept in
``TrainState.width`` so that checkpoints keep their layout) and hands back statistics
(``acceptance``) for the metrics. Another sampler is one class with ``init``/``step``;
the steps that use it do not change.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Protocol

import jax
import jax.numpy as jnp

from psijax.mcmc import BatchLogAbs, MCMCStats, adapt_width, metropolis
from psijax.types import Array, PyTree, Walkers


class Sampler(Protocol):
    def init(self, dtype=jnp.float32) -> PyTree:
        """The adaptive state before any move."""

    def step(
        self, key: Array, log_abs: BatchLogAbs, walkers: Walkers, log_abs_walkers: Array,
        state: PyTree,
    ) -> tuple[Walkers, Array, PyTree, MCMCStats]:  # fmt: skip
        """One round of moves from ``walkers`` (whose log|psi| is ``log_abs_walkers``):
        (walkers, their log|psi|, new state, statistics)."""


@dataclasses.dataclass(frozen=True)
class Metropolis:
    """``n_moves`` all-electron Gaussian Metropolis moves per step; the width adapts
    towards ``target`` acceptance (``psijax.mcmc.adapt_width``)."""

    n_moves: int = 10
    initial_width: float = 0.1
    target: float = 0.5
    adapt: bool = True  # False: a fixed width (evaluation, sampling a loaded wavefunction)

    def init(self, dtype=jnp.float32) -> Array:
        return jnp.asarray(self.initial_width, dtype)

    def step(self, key, log_abs, walkers, log_abs_walkers, state):
        walkers, log_abs_walkers, stats = metropolis(
            key, log_abs, walkers, log_abs_walkers, state, self.n_moves
        )
        if self.adapt:
            state = adapt_width(state, stats.acceptance, target=self.target)
        return walkers, log_abs_walkers, state, stats


@functools.partial(jax.jit, static_argnames=("sampler", "log_abs", "n_steps"))
def burn_in(
    key: Array, sampler: Sampler, log_abs: BatchLogAbs, walkers: Walkers, state: PyTree,
    *, n_steps: int,
) -> tuple[Walkers, Array, PyTree]:  # fmt: skip
    """``n_steps`` sampler steps; returns (walkers, log|psi|, sampler state).

    ``log_abs`` is static (hashed by identity): pass the same function to reuse the
    compilation.
    """

    def body(i: Array, carry):
        x, logp, s = carry
        x, logp, s, _ = sampler.step(jax.random.fold_in(key, i), log_abs, x, logp, s)
        return x, logp, s

    state = jax.tree.map(lambda s: jnp.asarray(s, walkers.dtype), state)
    return jax.lax.fori_loop(0, n_steps, body, (walkers, log_abs(walkers), state))
