"""Metropolis-Hastings sampling of |psi|^2 over batches of walkers, with adaptive step width.

``Metropolis`` is the sampler (``psijax.sampling.Sampler``): ``n_moves`` all-electron Gaussian
moves per step (``metropolis``), its state the proposal width, adapted towards a target
acceptance (``adapt_width``). Walkers are ``[walker, electron, 3]`` in bohr. Every random draw
covers the whole batch at once, so with JAX's partitionable threefry the samples are the same
whatever the device layout of the walkers.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from psijax.sampling.base import BatchLogAbs
from psijax.types import Array, Walkers


class MCMCStats(NamedTuple):
    """Statistics of one call of `metropolis`."""

    acceptance: Array  # scalar: accepted / proposed moves, over all walkers and moves


@dataclasses.dataclass(frozen=True)
class Metropolis:
    """``n_moves`` all-electron Gaussian Metropolis moves per step; the width adapts
    towards ``target`` acceptance (``psijax.sampling.adapt_width``)."""

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


def metropolis(
    key: Array,
    log_abs: BatchLogAbs,
    walkers: Walkers,
    log_abs_walkers: Array,
    width: Array,
    n_moves: int,
) -> tuple[Walkers, Array, MCMCStats]:
    """`n_moves` all-electron Gaussian moves of std `width` (bohr) per walker.

    Accepts with probability min(1, |psi(new)|^2 / |psi(old)|^2); a proposal with a
    non-finite log|psi| is always rejected, and a walker whose own log|psi| is not finite
    takes any finite proposal. Returns (walkers, their log|psi|, stats).
    """
    dtype = walkers.dtype
    width = jnp.asarray(width, dtype)
    log_abs_walkers = jnp.asarray(log_abs_walkers)
    n_walkers = walkers.shape[0]

    def move(i: Array, carry: tuple[Array, Array, Array]) -> tuple[Array, Array, Array]:
        x, logp, n_accepted = carry
        k_step, k_accept = jax.random.split(jax.random.fold_in(key, i))
        proposal = x + width * jax.random.normal(k_step, x.shape, dtype)
        logp_new = log_abs(proposal).astype(logp.dtype)
        log_u = jnp.log(jax.random.uniform(k_accept, (n_walkers,), logp.dtype))
        better = log_u < 2.0 * (logp_new - logp)
        accept = jnp.isfinite(logp_new) & (better | ~jnp.isfinite(logp))
        x = jnp.where(accept[:, None, None], proposal, x)
        logp = jnp.where(accept, logp_new, logp)
        return x, logp, n_accepted + jnp.sum(accept, dtype=jnp.int32)

    init = (walkers, log_abs_walkers, jnp.zeros((), jnp.int32))
    walkers, log_abs_walkers, n_accepted = jax.lax.fori_loop(0, n_moves, move, init)
    acceptance = n_accepted.astype(dtype) / max(n_walkers * n_moves, 1)
    return walkers, log_abs_walkers, MCMCStats(acceptance=acceptance)


def adapt_width(
    width: Array,
    acceptance: Array,
    *,
    target: float = 0.5,
    rate: float = 0.1,
    min_width: float = 0.01,
    max_width: float = 2.0,
) -> Array:
    """width * exp(rate * (acceptance - target) / target), clipped to [min_width, max_width].

    Higher acceptance than the target widens the moves, lower narrows them; the factor per
    call lies in [exp(-rate), exp(rate * (1 - target) / target)].
    """
    width = jnp.asarray(width)
    step = rate * (jnp.asarray(acceptance, width.dtype) - target) / target
    return jnp.clip(width * jnp.exp(step), min_width, max_width).astype(width.dtype)


def from_config(config, **settings) -> Metropolis:
    """``config.mcmc_moves`` moves per step; ``settings`` override the other fields."""
    return Metropolis(**{"n_moves": config.mcmc_moves, **settings})
