"""Metropolis-Hastings sampling of |psi|^2 over batches of walkers, with adaptive step width.

Walkers are ``[walker, electron, 3]`` in bohr, spin-up electrons first. Every random draw
covers the whole batch at once, so with JAX's partitionable threefry the samples are the same
whatever the device layout of the walkers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from psijax.system import Molecule
from psijax.types import Array, Walkers

# log|psi| of a batch of walkers: [walker, electron, 3] -> [walker].
BatchLogAbs = Callable[[Walkers], Array]


class MCMCStats(NamedTuple):
    """Statistics of one call of `metropolis`."""

    acceptance: Array  # scalar: accepted / proposed moves, over all walkers and moves


# --------------------------------------------------------------------------- initial walkers
def electrons_per_atom(molecule: Molecule) -> tuple[np.ndarray, np.ndarray]:
    """(up, down) electron counts per atom: ~Z per atom, spins alternating and balanced.

    Ions take electrons from the atoms holding the most (added to those holding the fewest);
    spins then move between atoms' pairs until the totals are exactly n_up and n_down.
    """
    z = np.rint(molecule.nuclear_charges).astype(int)
    count = z.copy()
    for _ in range(max(molecule.charge, 0)):  # cation: remove from the fullest (largest Z)
        count[np.lexsort((-z, -count))[0]] -= 1
    for _ in range(max(-molecule.charge, 0)):  # anion: add to the emptiest (smallest Z)
        count[np.lexsort((z, count))[0]] += 1
    up = count // 2
    down = count - up
    while up.sum() < molecule.n_up:  # flip a down electron where down is most in excess
        i = int(np.argmax(np.where(down > 0, down - up, np.iinfo(int).min)))
        up[i], down[i] = up[i] + 1, down[i] - 1
    while up.sum() > molecule.n_up:  # flip an up electron where up is most in excess
        i = int(np.argmax(np.where(up > 0, up - down, np.iinfo(int).min)))
        up[i], down[i] = up[i] - 1, down[i] + 1
    return up, down


def init_walkers(
    key: Array,
    molecule: Molecule,
    n_walkers: int,
    *,
    spread: float = 1.0,
    dtype: jnp.dtype = jnp.float32,
) -> Walkers:
    """Walkers ``[n_walkers, n_electrons, 3]``: nucleus + spread * N(0, 1), spin up first."""
    up, down = electrons_per_atom(molecule)
    atoms = np.arange(molecule.n_atoms)
    owner = np.concatenate([np.repeat(atoms, up), np.repeat(atoms, down)])
    centers = np.asarray(molecule.nuclear_positions[owner])
    gaussian = _gaussian_walkers
    if isinstance(key, jax.core.Tracer):  # inside jit: nested jits take no compiler options
        gaussian = _gaussian_walkers.__wrapped__
    return gaussian(key, centers, n_walkers, float(spread), jnp.dtype(dtype))


# One small program compiled at level 0: a launch-time cost, not a hot-loop one.
@functools.partial(
    jax.jit, static_argnums=(2, 3, 4), compiler_options={"xla_backend_optimization_level": 0}
)
def _gaussian_walkers(key: Array, centers: np.ndarray, n_walkers: int, spread: float, dtype):
    noise = jax.random.normal(key, (n_walkers, *centers.shape), dtype)
    return centers.astype(dtype) + jnp.asarray(spread, dtype) * noise


# ------------------------------------------------------------------------------- sampling
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
