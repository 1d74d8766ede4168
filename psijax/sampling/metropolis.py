"""Metropolis-Hastings sampling of |psi|^2 over batches of walkers, with adaptive step width.

``Metropolis`` is the sampler (``psijax.sampling.Sampler``): ``n_moves`` all-electron Gaussian
moves per step (``metropolis``), its state the proposal width, adapted towards a target
acceptance (``adapt_width``). Given the nuclei, each electron's step is scaled by its
distance to the nearest nucleus (``step_scale``), so that core electrons take short steps
and valence electrons long ones in the same move; the acceptance then carries the
proposal's asymmetry (Metropolis-Hastings). Walkers are ``[walker, electron, 3]`` in bohr.
Every random draw covers the whole batch at once, so with JAX's partitionable threefry the
samples are the same whatever the device layout of the walkers.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from psijax.sampling.base import BatchLogAbs
from psijax.system.lattice import Lattice
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
    rate: float = 0.1  # adapt_width's rate: the width changes at most by exp(rate) per step
    # Positions of the nuclei (bohr) that scale each electron's step; None: one width for all.
    nuclei: tuple[tuple[float, float, float], ...] | None = None
    # A crystal's cell: the distance to a nucleus is to its nearest image.
    lattice: Lattice | None = None

    def init(self, dtype=jnp.float32) -> Array:
        return jnp.asarray(self.initial_width, dtype)

    def width(self, state) -> Array:
        return state

    def merge(self, states):
        """The width after equal groups of walkers moved, from each group's adapted one:
        their geometric mean, the width the whole batch's acceptance gives
        (``adapt_width`` is exponential in the acceptance)."""
        return jnp.exp(jnp.mean(jnp.log(jnp.stack(states))))

    def step(self, key, log_abs, walkers, log_abs_walkers, state, rows=None):
        walkers, log_abs_walkers, stats = metropolis(
            key, log_abs, walkers, log_abs_walkers, state, self.n_moves, self.nuclei, rows,
            self.lattice,
        )  # fmt: skip
        if self.adapt:
            state = adapt_width(state, stats.acceptance, target=self.target, rate=self.rate)
        return walkers, log_abs_walkers, state, stats


def metropolis(
    key: Array,
    log_abs: BatchLogAbs,
    walkers: Walkers,
    log_abs_walkers: Array,
    width: Array,
    n_moves: int,
    nuclei=None,
    rows: tuple[Array, int] | None = None,
    lattice: Lattice | None = None,
) -> tuple[Walkers, Array, MCMCStats]:
    """`n_moves` all-electron Gaussian moves of std `width` (bohr) per walker, each
    electron's std times ``step_scale`` when ``nuclei`` ``[atoms, 3]`` (bohr) are given
    (to their nearest images in ``lattice``, a crystal's cell).

    Accepts with probability min(1, |psi(new)|^2 q(old | new) / (|psi(old)|^2 q(new | old)))
    for the proposal density q (symmetric without ``nuclei``); a proposal with a non-finite
    log|psi| is always rejected, and a walker whose own log|psi| is not finite takes any
    finite proposal. Returns (walkers, their log|psi|, stats).

    ``rows=(offset, total)``: ``walkers`` are rows ``offset ...`` of a batch of ``total``
    walkers, and draw that batch's random numbers for their rows, so that they move exactly
    as they would in the whole batch (``psijax.training.execution``).
    """
    dtype = walkers.dtype
    width = jnp.asarray(width, dtype)
    log_abs_walkers = jnp.asarray(log_abs_walkers)
    n_walkers = walkers.shape[0]
    nuclei = None if nuclei is None else jnp.asarray(nuclei, dtype)

    def move(i: Array, carry: tuple[Array, Array, Array]) -> tuple[Array, Array, Array]:
        x, logp, n_accepted = carry
        k_step, k_accept = jax.random.split(jax.random.fold_in(key, i))
        noise = _draw(jax.random.normal, k_step, x.shape, dtype, rows)
        if nuclei is None:
            proposal, log_q = x + width * noise, 0.0
        else:
            step = width * step_scale(x, nuclei, lattice)  # [walker, electron]
            proposal = x + step[..., None] * noise
            ratio = step / (width * step_scale(proposal, nuclei, lattice))  # forward / backward
            # log q(old | new) - log q(new | old), Gaussian in 3 dimensions per electron
            squared = jnp.sum(noise**2, axis=-1)
            log_q = jnp.sum(3.0 * jnp.log(ratio) + 0.5 * squared * (1 - ratio**2), axis=-1)
        logp_new = log_abs(proposal).astype(logp.dtype)
        log_u = jnp.log(_draw(jax.random.uniform, k_accept, (n_walkers,), logp.dtype, rows))
        better = log_u < 2.0 * (logp_new - logp) + log_q
        accept = jnp.isfinite(logp_new) & (better | ~jnp.isfinite(logp))
        x = jnp.where(accept[:, None, None], proposal, x)
        logp = jnp.where(accept, logp_new, logp)
        return x, logp, n_accepted + jnp.sum(accept, dtype=jnp.int32)

    init = (walkers, log_abs_walkers, jnp.zeros((), jnp.int32))
    walkers, log_abs_walkers, n_accepted = jax.lax.fori_loop(0, n_moves, move, init)
    acceptance = n_accepted.astype(dtype) / max(n_walkers * n_moves, 1)
    return walkers, log_abs_walkers, MCMCStats(acceptance=acceptance)


def _draw(sample, key: Array, shape: tuple, dtype, rows: tuple[Array, int] | None) -> Array:
    """``sample(key, shape, dtype)``, or rows ``offset ...`` of it drawn for ``total`` rows."""
    if rows is None:
        return sample(key, shape, dtype)
    offset, total = rows
    whole = sample(key, (total, *shape[1:]), dtype)
    return jax.lax.dynamic_slice_in_dim(whole, offset, shape[0])


# ``step_scale``: an electron's distance to the nearest nucleus (bohr), clipped to this range.
# From 0.5, not lower: core electrons then move as with one width for all, valence ones up to
# 4x further. Evaluating a trained N2 (400 steps), the energy's autocorrelation time was 1.1
# steps against 1.5 with one width, and 1.8 with the range from 0.1 (its core electrons'
# steps too short: the kinetic energy's time 7.9 against 2.5; docs/benchmarks.md,
# "Sampling: steps scaled to the nearest nucleus").
STEP_SCALE = (0.5, 2.0)


def step_scale(x: Array, nuclei: Array, lattice: Lattice | None = None) -> Array:
    """Each electron's step factor: its distance to the nearest nucleus (the nearest image
    of one, given a crystal's ``lattice``), clipped to ``STEP_SCALE``. x: ``[walker,
    electron, 3]``, nuclei: ``[atoms, 3]`` -> ``[walker, electron]``. The density changes
    on a scale of 1/Z near a nucleus of charge Z and of bohrs in the valence, where one
    width for all electrons, set by the cores, moves the valence electrons slowly."""
    d = x[..., None, :] - nuclei
    if lattice is not None:
        d = lattice.minimum_image(d)
    distance = jnp.sqrt(jnp.sum(d**2, axis=-1))
    return jnp.clip(jnp.min(distance, axis=-1), *STEP_SCALE)


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


def from_config(config, molecule, **settings) -> Metropolis:
    """``config.mcmc_moves`` moves per step of one width for every electron; ``settings``
    override the other fields."""
    return Metropolis(**{"n_moves": config.mcmc_moves, **settings})


def scaled_from_config(config, molecule, **settings) -> Metropolis:
    """``config.mcmc_moves`` moves per step, each electron's step scaled by its distance to
    the nearest of ``molecule``'s nuclei, or of their images in a crystal (one width for
    all without nuclei: the electron gas); ``settings`` override the other fields."""
    nuclei = molecule.coords or None
    lattice = getattr(molecule, "lattice", None) if nuclei else None
    fields = {"n_moves": config.mcmc_moves, "nuclei": nuclei, "lattice": lattice}
    return Metropolis(**{**fields, **settings})
