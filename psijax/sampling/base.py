"""The sampler behind one interface: burn-in, pretraining, training and evaluation all
move walkers through ``Sampler.step``.

A sampler owns its adaptive state, any pytree of arrays (for Metropolis the proposal
width), which training, evaluation, checkpoints and ``psijax.load`` carry as it is
(``TrainState.sampler``), and hands back statistics (``acceptance``) for the metrics.
Another sampler is one class with ``init``/``step``/``width`` and one registry entry; the
steps that use it do not change.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol

import jax
import jax.numpy as jnp

from psijax.ansatz import slogdet
from psijax.types import Array, PyTree, Walkers

# log|psi| of a batch of walkers: [walker, electron, 3] -> [walker].
BatchLogAbs = Callable[[Walkers], Array]


def values_of(log_abs: BatchLogAbs) -> BatchLogAbs:
    """``log_abs`` traced for its values only (``psijax.ansatz.slogdet.values``: small
    determinants by a faster elimination): how ``move`` and ``burn_in`` call it, and how
    their callers should evaluate the walkers' own log|psi|, so that a move compares
    values computed alike."""

    def traced(walkers: Walkers) -> Array:
        with slogdet.values():
            return log_abs(walkers)

    return traced


class Sampler(Protocol):
    def init(self, dtype=jnp.float32) -> PyTree:
        """The adaptive state before any move: any pytree of arrays."""

    def width(self, state: PyTree) -> Array:
        """The proposal's scale in bohr (a scalar) in ``state``: the metrics' ``width``."""

    def step(
        self, key: Array, log_abs: BatchLogAbs, walkers: Walkers, log_abs_walkers: Array,
        state: PyTree,
    ) -> tuple[Walkers, Array, PyTree, Any]:  # fmt: skip
        """One round of moves from ``walkers`` (whose log|psi| is ``log_abs_walkers``):
        (walkers, their log|psi|, new state, statistics with an ``acceptance``).

        A sampler that also takes ``rows=(offset, total)`` (``walkers`` are those rows of
        a batch of ``total`` and draw that batch's random numbers for them) and has
        ``merge(states) -> state`` (the state after equal groups moved, from each
        group's) can run in walker groups (``psijax.training.execution``)."""


@functools.partial(jax.jit, static_argnames=("sampler", "log_abs", "n_steps", "lead", "lead_steps"))
def burn_in(
    key: Array, sampler: Sampler, log_abs: BatchLogAbs, walkers: Walkers, state: PyTree,
    *, n_steps: int, lead: Sampler | None = None, lead_steps: int = 0,
) -> tuple[Walkers, Array, PyTree]:  # fmt: skip
    """``lead_steps`` steps of the sampler ``lead`` (from its initial state; none without
    ``lead``), then ``n_steps`` steps of ``sampler`` from ``state``; returns (walkers,
    log|psi|, ``sampler``'s state). A lead that equilibrates faster than ``sampler``
    (``psijax.training.start``: steps scaled to the nearest nucleus) brings the walkers to
    the density, ``sampler``'s own steps then adapt its state.

    ``log_abs`` is static (hashed by identity): pass the same function to reuse the
    compilation.
    """

    log_abs = values_of(log_abs)

    def run(steps: int, chosen: Sampler, key: Array, carry):
        def body(i: Array, carry):
            x, logp, s, _ = chosen.step(jax.random.fold_in(key, i), log_abs, *carry)
            return x, logp, s

        return jax.lax.fori_loop(0, steps, body, carry)

    as_dtype = lambda state: jax.tree.map(lambda s: jnp.asarray(s, walkers.dtype), state)
    logp = log_abs(walkers)
    if lead is not None and lead_steps:  # its keys: a branch no step index reaches
        lead_key = jax.random.fold_in(key, LEAD_STREAM)
        walkers, logp, _ = run(lead_steps, lead, lead_key, (walkers, logp, as_dtype(lead.init())))
    return run(n_steps, sampler, key, (walkers, logp, as_dtype(state)))


# burn_in's lead sampler draws from fold_in(key, LEAD_STREAM), past any step index.
LEAD_STREAM = 2**31 - 1


def reset_lost_walkers(walkers: Array, log_abs: Array) -> tuple[Array, Array, Array]:
    """Walkers whose position or log|psi| is not finite restart from a finite walker.

    Each lost walker takes the place of the first healthy one (MCMC separates the copies
    again); with no healthy walker left nothing changes, the energy is nan and the step is
    rejected. Returns (walkers, log|psi|, number reset).
    """
    healthy = jnp.all(jnp.isfinite(walkers), axis=(1, 2)) & jnp.isfinite(log_abs)
    donor = jnp.argmax(healthy)
    lost = ~healthy & jnp.any(healthy)
    walkers = jnp.where(lost[:, None, None], walkers[donor], walkers)
    log_abs = jnp.where(lost, log_abs[donor], log_abs)
    return walkers, log_abs, jnp.sum(lost)


def move(
    sampler: Sampler, key: Array, log_abs: BatchLogAbs, walkers: Walkers, log_abs_walkers: Array,
    state: PyTree, rows: tuple[Array, int] | None = None,
) -> tuple[Walkers, Array, PyTree, Any, Array]:  # fmt: skip
    """One sampler step, then every lost walker restarted from a healthy one: (walkers,
    their log|psi|, sampler state, its statistics, walkers reset). What training's and
    evaluation's steps do to their walkers. ``rows=(offset, total)`` (a ``Metropolis``
    sampler's): the walkers are those rows of a larger batch, and move as they would in it
    (``psijax.sampling.metropolis``)."""
    extra = {} if rows is None else {"rows": rows}
    walkers, log_abs_walkers, state, stats = sampler.step(
        key, values_of(log_abs), walkers, log_abs_walkers, state, **extra
    )
    walkers, log_abs_walkers, n_reset = reset_lost_walkers(walkers, log_abs_walkers)
    return walkers, log_abs_walkers, state, stats, n_reset
