"""Energy statistics, robust clipping and the VMC gradient estimator.

The gradient of E = <E_L> under |psi|^2 is

    dE/dtheta = 2 < (E_L - E) d log|psi| / dtheta >,

and for a complex psi, with E_L = e + i e' and arg psi = phi,

    dE/dtheta = 2 < (e - E) d log|psi| / dtheta + (e' - <e'>) d phi / dtheta >

(the real part of 2 < (E_L - E)^* d log psi / dtheta >; ``vmc_weights_imaginary``),

written as a ``jax.custom_jvp`` so that ``jax.grad`` never differentiates
through the Laplacian. Local energies are clipped around the median at
``clip_scale`` mean absolute deviations, and non-finite ones are dropped from
every statistic and from the gradient instead of poisoning them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from psijax.parallel.batching import map_walkers
from psijax.types import IMAGINARY, Array, Params


class EnergyStats(NamedTuple):
    """Statistics of one batch of local energies (Hartree)."""

    energy: Array  # mean of the finite local energies
    variance: Array  # their variance
    centered: Array  # [walkers] clipped E_L minus its mean, 0 where E_L is not finite
    finite: Array  # [walkers] 1.0 where E_L is finite, else 0.0
    n_nonfinite: Array  # walkers whose E_L was nan or inf (a float, for custom_jvp)
    # Means over the finite walkers of what a local energy with ``with_aux`` gives beside
    # E_L (the energy matrix of several states); empty otherwise.
    aux: dict = {}  # noqa: RUF012 - never mutated
    # [walkers] a complex psi's Im E_L, clipped like E_L, minus its mean (0 where E_L is
    # not finite); None for a real psi
    centered_imaginary: Array | None = None


def energy_stats(
    local_energies: Array, clip_scale: float | None = 5.0, aux: dict | None = None
) -> EnergyStats:
    """Mean, variance and the clipped, centered local energies of one batch; ``aux``
    (per-walker arrays ``[walkers, ...]``) is averaged over the walkers of finite E_L."""
    finite = jnp.isfinite(local_energies)
    n_finite = jnp.maximum(jnp.sum(finite), 1)
    e = jnp.where(finite, local_energies, 0.0)
    # With no finite walker at all the energy is nan, so the step is rejected.
    mean = jnp.where(jnp.any(finite), jnp.sum(e) / n_finite, jnp.nan)
    variance = jnp.sum(jnp.where(finite, (e - mean) ** 2, 0.0)) / n_finite
    centered = _clipped_centered(local_energies, finite, n_finite, clip_scale)
    n_nonfinite = (local_energies.size - jnp.sum(finite)).astype(local_energies.dtype)
    aux = dict(aux or {})
    imaginary = aux.pop(IMAGINARY, None)
    if imaginary is not None:
        imaginary = _clipped_centered(imaginary, finite, n_finite, clip_scale)
    means = {}
    for name, values in aux.items():
        keep = finite.reshape(-1, *([1] * (values.ndim - 1)))
        means[name] = jnp.sum(jnp.where(keep, values, 0.0), axis=0) / n_finite
    return EnergyStats(
        mean, variance, centered, finite.astype(e.dtype), n_nonfinite, means, imaginary
    )


def _clipped_centered(values: Array, finite: Array, n_finite: Array, clip_scale) -> Array:
    """``values`` of the finite walkers clipped around their median at ``clip_scale`` mean
    absolute deviations, minus their mean; 0 elsewhere."""
    v = jnp.where(finite, values, 0.0)
    if clip_scale is not None:
        median = jnp.nanmedian(jnp.where(finite, values, jnp.nan))
        spread = jnp.sum(jnp.where(finite, jnp.abs(v - median), 0.0)) / n_finite
        v = jnp.clip(v, median - clip_scale * spread, median + clip_scale * spread)
    mean = jnp.sum(jnp.where(finite, v, 0.0)) / n_finite
    return jnp.where(finite, v - mean, 0.0)


def vmc_weights_imaginary(stats: EnergyStats) -> Array:
    """A complex psi's weights of d arg psi / dtheta in the gradient (module docstring),
    2 (e' - <e'>) / n_finite, as ``vmc_weights`` are of d log|psi| / dtheta."""
    n_finite = jnp.maximum(stats.centered.shape[0] - stats.n_nonfinite, 1.0)
    return (2.0 / n_finite) * stats.centered_imaginary


def vmc_weights(stats: EnergyStats) -> Array:
    """The VMC gradient's walker weights ``w``: dE/dtheta = sum_i w_i d log|psi_i|/dtheta
    = J^T w with w_i = 2 (E_L,i - E) / n_finite (clipped E_L; 0 for a dropped walker).
    Every way psijax forms the gradient (the jacobian's rows, its blocks, one backward
    pass, ``make_energy_loss``'s rule) weights the walkers by these."""
    n_finite = jnp.maximum(stats.centered.shape[0] - stats.n_nonfinite, 1.0)
    return (2.0 / n_finite) * stats.centered


def make_local_energies(
    local_energy: Callable[..., Array], *, chunk_size: int | None = None
) -> Callable[..., tuple[Array, dict | None]]:
    """``energies(params, walkers, key=None) -> (E_L per walker, aux or None)``.

    A local energy that ``needs_key`` (``psijax.hamiltonian``) gets one key per walker,
    split from ``key``; any other is called as ``local_energy(params, r)``. One with a
    ``with_aux(params, r, key) -> (E_L, {name: array})`` method is called through it, and
    its extra outputs per walker come as ``aux``. ``rows=(offset, total)``: the walkers
    are those rows of a batch of ``total``, and take that batch's keys for their rows.
    """
    random = bool(getattr(local_energy, "needs_key", False))
    with_aux = getattr(local_energy, "with_aux", None)
    call = with_aux if with_aux is not None else local_energy

    def energies_of(params: Params, walkers: Array, key: Array | None = None, rows=None):
        if not random:
            out = map_walkers(call, params, walkers, chunk_size=chunk_size)
        else:
            if key is None:
                raise ValueError("this local energy draws random numbers: give the loss a key")
            keys = jax.random.split(key, walkers.shape[0] if rows is None else rows[1])
            if rows is not None:
                keys = jax.lax.dynamic_slice_in_dim(keys, rows[0], walkers.shape[0])
            one = lambda p, walker_key: call(p, *walker_key)
            out = map_walkers(one, params, (walkers, keys), chunk_size=chunk_size)
        return out if with_aux is not None else (out, None)

    return energies_of


def make_energy_loss(
    log_abs: Callable[[Params, Array], Array],
    local_energy: Callable[..., Array],
    *,
    clip_scale: float | None = 5.0,
    chunk_size: int | None = None,
    phase: Callable[[Params, Array], Array] | None = None,
) -> Callable[..., tuple[Array, EnergyStats]]:
    """``loss(params, walkers, key=None) -> (energy, stats)`` whose gradient is the VMC
    estimator. Use with ``jax.value_and_grad(loss, has_aux=True)``. The local energies are
    ``make_local_energies``'; the stats carry the walker means of a ``with_aux`` local
    energy's extra outputs (``EnergyStats.aux``). A complex psi gives its ``phase(params,
    r)`` (arg psi) and a local energy whose extra outputs hold Im E_L (``IMAGINARY``).
    """
    energies_of = make_local_energies(local_energy, chunk_size=chunk_size)

    @jax.custom_jvp
    def _loss(params: Params, walkers: Array, key: Array | None) -> tuple[Array, EnergyStats]:
        energies, aux = energies_of(params, walkers, key)
        stats = energy_stats(energies, clip_scale, aux)
        return stats.energy, stats

    def loss(params: Params, walkers: Array, key: Array | None = None):
        return _loss(params, walkers, key)

    @_loss.defjvp
    def loss_jvp(primals, tangents):
        params, walkers, key = primals
        energy, stats = _loss(params, walkers, key)
        batch_log_abs = lambda p: map_walkers(log_abs, p, walkers)
        _, d_log_abs = jax.jvp(batch_log_abs, (params,), (tangents[0],))
        d_energy = jnp.sum(jnp.where(stats.finite > 0, vmc_weights(stats) * d_log_abs, 0.0))
        if phase is not None and stats.centered_imaginary is not None:
            batch_phase = lambda p: map_walkers(phase, p, walkers)
            _, d_phase = jax.jvp(batch_phase, (params,), (tangents[0],))
            weights = vmc_weights_imaginary(stats)
            d_energy = d_energy + jnp.sum(jnp.where(stats.finite > 0, weights * d_phase, 0.0))
        return (energy, stats), (d_energy, jax.tree.map(jnp.zeros_like, stats))

    return loss
