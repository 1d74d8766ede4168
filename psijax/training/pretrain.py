"""Supervised pretraining of an ansatz's orbitals on Hartree-Fock orbitals.

Hartree-Fock runs once on the host (``psijax.system.scf``). Each pretraining step evaluates
the occupied HF orbitals at the current walkers, fits the network's orbital matrices to them
with one optax step, then moves the walkers by sampling the *network's* |psi|^2, so that the
fit covers the region the network will be trained on afterwards.

The HF orbitals are evaluated in JAX (``scf.hf_orbital_basis``), so a whole chunk of steps is
one compiled loop on the device: no host round trip per step, and walkers sharded over
devices or processes never leave them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding, PartitionSpec

from psijax import registry
from psijax.ansatz.base import Ansatz
from psijax.config import Config
from psijax.parallel.batching import auto_chunk, map_walkers
from psijax.sampling import Sampler
from psijax.system import Molecule
from psijax.system.scf import HartreeFock, hartree_fock, hf_orbital_basis
from psijax.types import Array, Params, Walkers

logger = logging.getLogger(__name__)


# ------------------------------------------------------------------------------ loss, step
def pretrain_loss(
    net: Ansatz, params: Params, walkers: Walkers, targets_up: Array, targets_down: Array
) -> Array:
    """Mean over walkers and determinants of sum_ij (network orbital - HF target)_ij^2.

    full_det: the target of every determinant is [[Phi_up, 0], [0, Phi_down]] (N x N);
    otherwise each spin block is compared with its own target and the two losses add.
    """
    orbitals = map_walkers(net.orbitals, params, walkers)  # each [W, k, ., .]
    dtype = orbitals[0].dtype
    up, down = targets_up.astype(dtype), targets_down.astype(dtype)
    if net.full_det:  # padding keeps the walker sharding of the targets
        top = jnp.pad(up, ((0, 0), (0, 0), (0, net.n_down)))
        bottom = jnp.pad(down, ((0, 0), (0, 0), (net.n_up, 0)))
        targets = [jnp.concatenate([top, bottom], axis=-2)]
    else:
        targets = [t for t, count in ((up, net.n_up), (down, net.n_down)) if count]
    losses = [
        jnp.mean(jnp.sum((o - t[:, None]) ** 2, axis=(-2, -1)))
        for o, t in zip(orbitals, targets, strict=True)
    ]
    return sum(losses[1:], losses[0])


# Pretraining steps per compiled call; the callback sees their losses after each call.
CHUNK = 25
# Past its steps, pretraining goes on while the loss still falls: while the mean loss of the
# newest WINDOW steps is below FALLING times the mean of the WINDOW before. N2's loss was
# 1.25 after 200 steps and training then started 14.1 Ha above Hartree-Fock; this rule
# stopped at 650 steps, loss 0.085, 1.9 Ha above (docs/benchmarks.md, "N2 at the defaults").
WINDOW = 100
FALLING = 0.9
MOVES = 5  # sampler moves per pretraining step
# Adam's step size. 1e-2 against the earlier 3e-3, default rule otherwise (2026-11-25,
# docs/benchmarks.md "N2 at the defaults"): N2's loss after the extension 0.16 / 0.045
# (500 / 525 steps) against 0.085 (650), its first 10 training energies 1.08 / 0.93 Ha
# above Hartree-Fock against 1.9; LiH 0.00087 in 450 steps against 0.0037 in 525, its
# first energies at Hartree-Fock's instead of 0.1 Ha above.
LEARNING_RATE = 1e-2
WIDTH = 0.2  # bohr: the initial proposal width of pretraining's sampler


def sampler_of(config: Config) -> Sampler:
    """Pretraining's sampler: the run's (``config.sampler``), with pretraining's moves and
    initial width."""
    return registry.sampler(config, n_moves=MOVES, initial_width=WIDTH)


def _make_chunk(
    net: Ansatz,
    optimizer: optax.GradientTransformation,
    targets: Callable[[Walkers], tuple[Array, Array]],
    sampler: Sampler,
    chunk: int | None,
) -> Callable[..., tuple[Params, optax.OptState, Walkers, Any, Array]]:
    """Jitted: steps ``start .. start + count - 1`` (count <= CHUNK) of fit and move.

    Returns (params, opt_state, walkers, sampler state, losses [CHUNK], of which ``count``
    are set).
    """

    @jax.jit
    def run(key, start, count, params, opt_state, walkers, sampler_state, coefficients):
        def body(j, carry):
            params, opt_state, walkers, sampler_state, losses = carry
            up, down = targets(walkers, coefficients)
            loss, grads = jax.value_and_grad(pretrain_loss, argnums=1)(
                net, params, walkers, up, down
            )
            updates, opt_state = optimizer.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
            log_abs = lambda x: map_walkers(net.log_abs, params, x, chunk_size=chunk)
            walkers, _, sampler_state, _ = sampler.step(
                jax.random.fold_in(key, start + j), log_abs, walkers, log_abs(walkers),
                sampler_state,
            )  # fmt: skip
            loss = loss.astype(losses.dtype)
            return params, opt_state, walkers, sampler_state, losses.at[j].set(loss)

        losses = jnp.zeros((CHUNK,), walkers.dtype)
        carry = (params, opt_state, walkers, sampler_state, losses)
        return jax.lax.fori_loop(0, count, body, carry)

    return run


# ------------------------------------------------------------------------------------ loop
def _replicate(tree: Any, sharding: jax.sharding.Sharding) -> Any:
    """`tree` replicated over the mesh of a NamedSharding; unchanged for other shardings."""
    if isinstance(sharding, NamedSharding):
        return jax.device_put(tree, NamedSharding(sharding.mesh, PartitionSpec()))
    return tree


def pretrain(
    key: Array,
    net: Ansatz,
    params: Params,
    molecule: Molecule,
    walkers: Walkers,
    *,
    steps: int,
    basis: str = "sto-6g",
    learning_rate: float | None = None,
    sampler: Sampler | None = None,
    callback: Callable[[int, float], None] | None = None,
    on_chunk: Callable[[int], None] | None = None,
    hf: HartreeFock | None = None,
    max_steps: int | None = None,
) -> tuple[Params, Walkers, np.ndarray]:
    """Fit the network's orbitals to UHF orbitals for `steps` Adam steps, sampling as it goes,
    and on, up to `max_steps` (None: `steps`), while the loss still falls (``still_falling``).

    Walkers [W, N, 3] (bohr) keep their sharding. `callback(step, loss)` runs for every step,
    in order, after each chunk of `CHUNK` steps (one host sync per chunk); `on_chunk(done)`
    then, with the number of steps done (a heartbeat for ``psijax.run.watch``).
    `hf` is the UHF solution to fit (computed here when not given); `sampler` moves the
    walkers (``sampler_of``: the default config's, with pretraining's moves and width).
    Returns (params, walkers, losses [steps] as numpy).
    """
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    if (net.n_up, net.n_down) != (molecule.n_up, molecule.n_down):
        raise ValueError(
            f"the network has {net.n_up} up and {net.n_down} down electrons but the molecule "
            f"has {molecule.n_up} and {molecule.n_down}; build the ansatz from the molecule"
        )
    if steps == 0:
        return params, walkers, np.zeros((0,), np.float64)
    hf = hf if hf is not None else hartree_fock(molecule, basis)
    sampler = sampler if sampler is not None else sampler_of(Config())
    optimizer = optax.adam(LEARNING_RATE if learning_rate is None else learning_rate)
    opt_state = optimizer.init(params)
    walkers = jnp.asarray(walkers)
    sharding = walkers.sharding
    chunk = auto_chunk(walkers.shape[0], len(sharding.device_set))
    targets, coefficients = hf_orbital_basis(hf)
    run = _make_chunk(net, optimizer, targets, sampler, chunk)
    coefficients = _replicate(
        jax.tree.map(lambda c: np.asarray(c, walkers.dtype), coefficients), sharding
    )
    # Parameters and the sampler's state come back replicated on the walkers' mesh: put
    # them there now so that the first chunk compiles the same program as all the others.
    params, opt_state, sampler_state = _replicate(
        (params, opt_state, sampler.init(walkers.dtype)), sharding
    )
    losses: list[np.ndarray] = []
    limit = max_steps if extends(steps, max_steps) else steps
    start = 0
    while start < steps or (start < limit and still_falling(np.concatenate(losses))):
        count = min(CHUNK, (steps if start < steps else limit) - start)
        params, opt_state, walkers, sampler_state, chunk = run(
            key, start, count, params, opt_state, walkers, sampler_state, coefficients
        )
        chunk = np.asarray(jax.device_get(chunk[:count]), dtype=np.float64)
        losses.append(chunk)
        if callback is not None:
            for j, loss in enumerate(chunk):
                callback(start + j, float(loss))
        start += count
        if on_chunk is not None:
            on_chunk(start)
    return params, walkers, np.concatenate(losses)


def extends(steps: int, max_steps: int | None) -> bool:
    """Whether a pretraining of ``steps`` may go on up to ``max_steps``: only from two
    windows of steps on, where ``still_falling`` can judge."""
    return max_steps is not None and max_steps > steps >= 2 * WINDOW


def still_falling(losses: np.ndarray) -> bool:
    """Whether the mean of the newest ``WINDOW`` losses is below ``FALLING`` times the mean
    of the ``WINDOW`` before (False with fewer than two windows: a pretraining of fewer
    than 200 steps is never extended)."""
    if len(losses) < 2 * WINDOW:
        return False
    newest, before = losses[-WINDOW:].mean(), losses[-2 * WINDOW : -WINDOW].mean()
    return bool(newest < FALLING * before)
