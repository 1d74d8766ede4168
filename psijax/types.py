"""Shared types: the wavefunction value, shape aliases and protocols.

Shapes are written in names: a walker is one configuration of all electrons,
``Float[Array, "electron 3"]`` in bohr; a batch of walkers adds a leading axis.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import jax

Array = jax.Array
PyTree = Any
Params = PyTree

# One walker: electron positions in bohr, shape [n_electrons, 3].
Walker = Array
# Many walkers: shape [n_walkers, n_electrons, 3].
Walkers = Array


class Psi(NamedTuple):
    """psi = sign * exp(log_abs); sign is +-1 for real wavefunctions."""

    sign: Array
    log_abs: Array


class WavefunctionApply(Protocol):
    """``apply(params, r) -> Psi`` for one walker ``r: [n_electrons, 3]``."""

    def __call__(self, params: Params, r: Walker) -> Psi: ...


# log|psi| of one walker: ``log_abs(params, r)``.
LogAbs = Callable[[Params, Walker], Array]

# What a jitted step reports, by name: scalars, or per-walker arrays [walker, ...].
Metrics = dict[str, Array]

# shape -> standard normal numbers: how an ansatz's init draws its random arrays
Normal = Callable[[tuple[int, ...]], Array]

# A scalar function of one walker, e.g. ``lambda r: apply(params, r).log_abs``.
ScalarFn = Callable[[Walker], Array]


class TrainState(NamedTuple):
    """Everything a training step reads and writes; one pytree, donated each step."""

    params: Params
    opt_state: PyTree
    walkers: Walkers  # [walkers, electrons, 3], sharded along the walker axis
    log_abs: Array  # [walkers] log|psi| of the walkers under the params that sampled them
    sampler: PyTree  # the sampler's state (``Sampler.init``; Metropolis: its width, bohr)
    step: Array  # int32
    key: Array  # PRNG key for the next step


# The imaginary part of E_L among a local energy's per-walker extra outputs (``with_aux``)
# for a complex psi: the VMC gradient weights arg psi's derivatives by it
# (``psijax.hamiltonian.base.ComplexLocalEnergy``, ``psijax.optim.gradient``).
IMAGINARY = "energy_imaginary"
