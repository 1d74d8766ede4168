"""Supervised pretraining of an ansatz's orbitals on Hartree-Fock orbitals.

Hartree-Fock runs once on the host (``psijax.system.scf``). Each pretraining step evaluates
the occupied HF orbitals at the current walkers, fits the network's orbital matrices to them,
then moves the walkers by sampling Hartree-Fock's |psi|^2: the density the network is fitted
to approach, fixed, and cheap (Gaussians and two small determinants; the network's density
would take three network evaluations a step). For networks on the shared orbital head the
fit is variable projection: the head's projection, in which the orbitals are linear, is solved
by least squares at every step, and one Adam step moves the rest (features, envelopes);
the envelopes start decaying as their HF orbitals do. Other networks take Adam steps on
every parameter.

The HF orbitals are evaluated in JAX (``scf.hf_orbital_basis``), so a whole chunk of steps is
one compiled loop on the device: no host round trip per step, and walkers sharded over
devices or processes never leave them.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding, PartitionSpec

from psijax import precision, registry
from psijax.ansatz.base import Ansatz, MolecularAnsatz
from psijax.config import Config
from psijax.parallel import cpu_codegen
from psijax.parallel.batching import map_walkers, on_every_device
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
    return _orbital_loss(net, map_walkers(net.orbitals, params, walkers), targets_up, targets_down)


def _orbital_loss(net: Ansatz, orbitals: list[Array], targets_up: Array, targets_down: Array):
    """``pretrain_loss`` of the orbital matrices ``orbitals`` (each [W, k, ., .])."""
    targets = _targets(net, targets_up, targets_down, orbitals[0].dtype)
    losses = [  # a target for all determinants [W, ., .] or one per determinant [W, k, ., .]
        jnp.mean(jnp.sum((o - (t if t.ndim == o.ndim else t[:, None])) ** 2, axis=(-2, -1)))
        for o, t in zip(orbitals, targets, strict=True)
    ]
    return sum(losses[1:], losses[0])


def _targets(net: Ansatz, up: Array, down: Array, dtype) -> list[Array]:
    """The HF orbitals [W, n_up, n_up] and [W, n_down, n_down] (or [W, k, ., .], one pair
    per determinant) laid out as the network's orbital matrices without their determinant
    axis (or with it)."""
    up, down = up.astype(dtype), down.astype(dtype)
    if net.full_det:  # padding keeps the walker sharding of the targets
        lead = [(0, 0)] * (up.ndim - 1)
        top = jnp.pad(up, (*lead, (0, net.n_down)))
        bottom = jnp.pad(down, (*lead, (net.n_up, 0)))
        return [jnp.concatenate([top, bottom], axis=-2)]
    return [t for t, count in ((up, net.n_up), (down, net.n_down)) if count]


def fits_head(net: Ansatz) -> bool:
    """Whether pretraining solves ``net``'s orbital projection by least squares (networks
    built on the shared ``OrbitalHead`` that give its inputs, ``head_inputs``) instead of
    leaving it to Adam."""
    return isinstance(net, MolecularAnsatz) and callable(getattr(net, "_features", None))


def fit_head(net: MolecularAnsatz, params: Params, walkers: Walkers, up: Array, down: Array):
    """``params`` with the orbital head's projection the least-squares fit to the HF
    orbitals ``up``, ``down`` at ``walkers`` (``OrbitalHead.fit``)."""
    h, r_ae = map_walkers(net.head_inputs, params, walkers)
    return _fitted(net, params, h, r_ae, up, down)


def _fitted(net: MolecularAnsatz, params: Params, h, r_ae, up: Array, down: Array) -> Params:
    """``fit_head`` at the head's inputs ``h``, ``r_ae`` of the walkers."""
    targets = _targets(net, up, down, h.dtype)
    return {**params, "orbitals": net.head.fit(params["orbitals"], h, r_ae, targets, RIDGE)}


def fit_and_gradient(
    net: MolecularAnsatz, params: Params, walkers: Walkers, up: Array, down: Array, sharding,
    fit_walkers: int | None = None,
) -> tuple[Params, Array, Params]:  # fmt: skip
    """One pretraining step's fit and loss: (``params`` with the head fitted, the loss
    there, its gradient in every parameter).

    The head's inputs (features and distances) do not depend on the head: the loss is taken
    from them, and its gradient reaches the features through their pullback. The fit sees
    the first ``fit_walkers`` walkers (``fit_walkers_for``; None: ``FIT_WALKERS``). On one
    device it takes the loss's inputs, one evaluation of the network for both; on several,
    their walkers are gathered on every device and their inputs computed there, so that
    every device fits alike and as one device does (inputs computed apart on each device's
    share differ in the last bits, which the fit amplifies).
    """
    fit_walkers = FIT_WALKERS if fit_walkers is None else fit_walkers
    with precision.scope(net.matmul_precision):  # as net.orbitals traces its products
        inputs = lambda p: map_walkers(net.head_inputs, p, walkers)
        (h, r_ae), pullback = jax.vjp(inputs, params)
        if len(sharding.device_set) == 1:  # (an Explicit mesh still types them as split)
            shared = on_every_device((h, r_ae, up, down), sharding)
            params = _fitted(net, params, *(jax.lax.stop_gradient(x[:fit_walkers]) for x in shared))
        else:
            gathered = on_every_device((walkers, up, down), sharding)
            params = fit_head(net, params, *(x[:fit_walkers] for x in gathered))

        def loss_of(head: Params, h: Array, r_ae: Array) -> Array:
            orbitals = jax.vmap(net.head.orbitals, (None, 0, 0))(head, h, r_ae)
            return _orbital_loss(net, orbitals, up, down)

        loss, (d_head, d_h, d_r) = jax.value_and_grad(loss_of, argnums=(0, 1, 2))(
            params["orbitals"], h, r_ae
        )
        (grads,) = pullback((d_h, d_r))
    grads = {**grads, "orbitals": jax.tree.map(jnp.add, grads["orbitals"], d_head)}
    return params, loss, grads


def envelope_decays(net: MolecularAnsatz, params: Params, hf: HartreeFock) -> Params:
    """``params`` with each orbital's envelope decaying as its Hartree-Fock orbital does
    far from the nuclei, exp(-sqrt(2 |e|) r) for orbital energy e (at least DECAY_FLOOR):
    a 1s core orbital of nitrogen (e = -15.7 Ha) then starts at exponent 5.6, not 1.
    ``params`` unchanged when ``hf`` has no orbital energies."""
    if hf.spectrum is None:
        return params
    energies = np.concatenate([hf.spectrum[0].occupied, hf.spectrum[1].occupied])
    decays = np.sqrt(np.maximum(-2 * energies, DECAY_FLOOR**2))
    return {**params, "orbitals": net.head.with_decays(params["orbitals"], decays)}


def _optimizer(net: Ansatz, params: Params, learning_rate: float):
    """Adam on every parameter, except the head's projections when they are solved for."""
    adam = optax.adam(learning_rate)
    if not fits_head(net):
        return adam
    labels = jax.tree_util.tree_map_with_path(
        lambda path, _: "solved" if _is_projection(path) else "adam", params
    )
    return optax.multi_transform({"adam": adam, "solved": optax.set_to_zero()}, labels)


def _is_projection(path) -> bool:
    keys = [getattr(k, "key", None) for k in path]
    return len(keys) == 3 and keys[0] == "orbitals" and keys[2] == "w"


# Pretraining steps per compiled call; the callback sees their losses after each call.
CHUNK = 25
# Past its steps, pretraining goes on while the network's orbitals are off Hartree-Fock's
# by more than TOLERANCE of the targets' own squared norm (about 0.7% in root mean square):
# the mean loss of the newest chunk against the mean squared norm of its targets. Solving
# the head by least squares (``fit_head``) with envelopes decaying as the HF orbitals do
# (``envelope_decays``), N2 gets there in 75 steps and its first 10 training energies
# average within 0.15 Ha of Hartree-Fock's (three seeds; docs/benchmarks.md, "N2's
# launch"). LiH, Li and Be get there in 50.
TOLERANCE = 5e-5
# Pretraining of fewer steps than this is taken as asked, never extended.
EXTEND_FROM = 50
# Sampler moves per pretraining step, by Hartree-Fock's density with steps scaled to the
# nearest nucleus (``sampler_of``). With 2, N2's walkers were still short of the cores after
# 100 steps (the targets' mean squared norm 31 against 48-52 at equilibrium), and the fit
# ran 100 steps instead of 75 (docs/benchmarks.md, "N2's launch").
MOVES = 5
# Adam's step size. 1e-2 against the earlier 3e-3, default rule otherwise (2026-11-25,
# docs/benchmarks.md "N2 at the defaults"): N2's loss after the extension 0.16 / 0.045
# (500 / 525 steps) against 0.085 (650), its first 10 training energies 1.08 / 0.93 Ha
# above Hartree-Fock against 1.9; LiH 0.00087 in 450 steps against 0.0037 in 525, its
# first energies at Hartree-Fock's instead of 0.1 Ha above.
LEARNING_RATE = 1e-2
WIDTH = 0.2  # bohr: the initial proposal width of pretraining's sampler
# The least-squares fit's ridge, relative to each column's mean squared design entry. It
# bounds the problem's condition, which amplifies rounding: at 1e-3 a run on two devices
# drifted from one device's 5x more than at 3e-3; at 1e-2 N2 needed 150-175 steps instead
# of 125 to reach TOLERANCE.
RIDGE = 3e-3
# The head is fitted to the first FIT_WALKERS walkers, gathered on every device: its sums
# over walkers then add in the same order on any number of devices (split over devices,
# their order changed the fitted weights by 5e-5 relative: rounding amplified by the
# least-squares problem's condition), and its cost is bounded at any number of walkers.
FIT_WALKERS = 256
# With an ECP, ECP_FIT_WALKERS: every walker of a default run. The loss's gradient takes
# the fitted head as fixed, its true gradient only where the head is fitted to the loss's
# own walkers; fitted to 256 of 1024, Al with ccECP diverged after 325 steps on both seeds
# (training then began near 0 Ha instead of Hartree-Fock's -1.88 and ended 52 mHa above
# its reference) and S and Cl stalled 100-150x higher. All-electron runs keep 256: fitted to
# all 512 of Be's walkers, the loss ended 4x lower, but the trainings began nearer STO-6G's
# Hartree-Fock energy and ended 0.4-1.0 mHa higher on three seeds (docs/benchmarks.md,
# "Pretraining's fit").
ECP_FIT_WALKERS = 1024
# The slowest initial envelope decay (1/bohr), for orbitals of energy near or above zero.
DECAY_FLOOR = 0.5


# Pretraining's sampler (a registry name), whatever the run's: each electron's step scaled by
# its distance to the nearest nucleus.
SAMPLER = "scaled-metropolis"


def sampler_of(config: Config, molecule: Molecule, **settings) -> Sampler:
    """Pretraining's sampler ``SAMPLER``, whatever the run's, with pretraining's moves and
    initial width; ``settings`` override them. Its steps bring cores and valence alike to
    the density: Hartree-Fock's in pretraining, the network's at the start of burn-in."""
    settings = {"n_moves": MOVES, "initial_width": WIDTH, **settings}
    return registry.sampler(dataclasses.replace(config, sampler=SAMPLER), molecule, **settings)


def _log_abs_det(orbitals: tuple[Array, Array]) -> Array:
    """log|psi| of the target from its spin blocks' orbital matrices: one determinant's
    ([W, n, n] each), or the sum of the first and the (k // 2 + 1)-th of k ([W, k, n, n]:
    two configurations, ``pretrain_states.paired_targets``)."""
    up, down = orbitals
    if up.ndim == 3:
        return sum(jnp.linalg.slogdet(o)[1] for o in orbitals if o.shape[-1])
    (sign_a, log_a), (sign_b, log_b) = (
        _signed_log_det(up[:, i], down[:, i]) for i in (0, up.shape[1] // 2)
    )
    top = jnp.maximum(log_a, log_b)
    return top + jnp.log(jnp.abs(sign_a * jnp.exp(log_a - top) + sign_b * jnp.exp(log_b - top)))


def _signed_log_det(up: Array, down: Array) -> tuple[Array, Array]:
    parts = [jnp.linalg.slogdet(o) for o in (up, down) if o.shape[-1]]
    return jnp.prod(jnp.stack([p[0] for p in parts]), axis=0), sum(p[1] for p in parts)


def _make_chunk(
    net: Ansatz,
    optimizer: optax.GradientTransformation,
    targets: Callable[[Walkers], tuple[Array, Array]],
    sampler: Sampler,
    sharding: jax.sharding.Sharding,
    fit_walkers: int,
) -> Callable[..., tuple[Params, optax.OptState, Walkers, Any, Array]]:
    """Jitted: steps ``start .. start + count - 1`` (count <= CHUNK) of fit and move.

    Returns (params, opt_state, walkers, sampler state, losses [CHUNK] and the targets'
    mean squared norms [CHUNK], of which ``count`` are set).
    """

    @functools.partial(jax.jit, compiler_options=cpu_codegen.compiler_options(brief=True))
    def run(key, start, count, params, opt_state, walkers, sampler_state, coefficients):
        hf_log_abs = lambda x: _log_abs_det(targets(x, coefficients))

        def body(j, carry):
            params, opt_state, walkers, sampler_state, losses, norms = carry
            up, down = targets(walkers, coefficients)
            if fits_head(net):
                fitted = fit_and_gradient(net, params, walkers, up, down, sharding, fit_walkers)
                params, loss, grads = fitted
            else:
                loss, grads = jax.value_and_grad(pretrain_loss, argnums=1)(
                    net, params, walkers, up, down
                )
            norm = sum(jnp.mean(jnp.sum(t**2, axis=(-2, -1))) for t in (up, down))
            updates, opt_state = optimizer.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
            walkers, _, sampler_state, _ = sampler.step(  # from the targets' own log|det|
                jax.random.fold_in(key, start + j), hf_log_abs, walkers,
                _log_abs_det((up, down)), sampler_state,
            )  # fmt: skip
            losses = losses.at[j].set(loss.astype(losses.dtype))
            norms = norms.at[j].set(norm.astype(norms.dtype))
            return params, opt_state, walkers, sampler_state, losses, norms

        zeros = jnp.zeros((CHUNK,), walkers.dtype)
        carry = (params, opt_state, walkers, sampler_state, zeros, zeros)
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
    targets_of: Callable | None = None,
    max_steps: int | None = None,
    ready: Callable[[], None] | None = None,
) -> tuple[Params, Walkers, np.ndarray]:
    """Fit the network's orbitals to UHF orbitals for `steps` steps, sampling as it goes,
    and on, up to `max_steps` (None: `steps`), while the orbitals are off by more than
    ``TOLERANCE`` (``relative_residual`` of the newest chunk).

    Walkers [W, N, 3] (bohr) keep their sharding. `callback(step, loss)` runs for every step,
    in order, after each chunk of `CHUNK` steps (one host sync per chunk); `on_chunk(done)`
    then, with the number of steps done (a heartbeat for ``psijax.run.watch``); `ready()`
    once the fit's program is compiled, before its first step (nothing compiles after it).
    `hf` is the UHF solution to fit (computed here when not given); ``targets_of`` makes
    other targets of its orbitals (``pretrain_states.paired_targets``); `sampler` moves the
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
    sampler = sampler if sampler is not None else sampler_of(Config(), molecule)
    if fits_head(net):
        params = envelope_decays(net, params, hf)
    optimizer = _optimizer(net, params, LEARNING_RATE if learning_rate is None else learning_rate)
    opt_state = jax.jit(optimizer.init)(params)  # one program, not one per parameter
    walkers = jnp.asarray(walkers)
    sharding = walkers.sharding
    targets, coefficients = hf_orbital_basis(hf)
    if targets_of is not None:
        targets = targets_of(targets)
    run = _make_chunk(net, optimizer, targets, sampler, sharding, fit_walkers_for(molecule))
    coefficients = _replicate(
        jax.tree.map(lambda c: np.asarray(c, walkers.dtype), coefficients), sharding
    )
    # Parameters and the sampler's state come back replicated on the walkers' mesh: put
    # them there now so that the first chunk compiles the same program as all the others.
    params, opt_state, sampler_state = _replicate(
        (params, opt_state, sampler.init(walkers.dtype)), sharding
    )
    run = run.lower(
        key, 0, CHUNK, params, opt_state, walkers, sampler_state, coefficients
    ).compile()
    if ready is not None:
        ready()
    losses: list[np.ndarray] = []
    limit = max_steps if extends(steps, max_steps) else steps
    start, residual = 0, np.inf
    while start < steps or (start < limit and residual > TOLERANCE):
        count = min(CHUNK, (steps if start < steps else limit) - start)
        params, opt_state, walkers, sampler_state, chunk, norms = run(
            key, start, count, params, opt_state, walkers, sampler_state, coefficients
        )
        chunk, norms = np.asarray(jax.device_get((chunk, norms)), np.float64)[:, :count]
        losses.append(chunk)
        residual = relative_residual(chunk, norms)
        if callback is not None:
            for j, loss in enumerate(chunk):
                callback(start + j, float(loss))
        start += count
        if on_chunk is not None:
            on_chunk(start)
    return params, walkers, np.concatenate(losses)


def fit_walkers_for(molecule: Molecule) -> int:
    """How many walkers the head is fitted to (``FIT_WALKERS``, ``ECP_FIT_WALKERS``)."""
    return ECP_FIT_WALKERS if molecule.ecp else FIT_WALKERS


def extends(steps: int, max_steps: int | None) -> bool:
    """Whether a pretraining of ``steps`` may go on up to ``max_steps`` (from
    ``EXTEND_FROM`` steps on)."""
    return max_steps is not None and max_steps > steps >= EXTEND_FROM


def relative_residual(losses: np.ndarray, norms: np.ndarray) -> float:
    """The mean loss over the mean squared norm of the targets (0 for zero targets)."""
    norm = float(np.mean(norms))
    return float(np.mean(losses)) / norm if norm > 0 else 0.0
