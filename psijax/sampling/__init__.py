"""Sampling |psi|^2: the ``Sampler`` interface, Metropolis, burn-in and initial walkers."""

from psijax.sampling.base import (
    BatchLogAbs,
    Sampler,
    burn_in,
    move,
    reset_lost_walkers,
    values_of,
)  # fmt: skip
from psijax.sampling.metropolis import MCMCStats, Metropolis, adapt_width, metropolis
from psijax.sampling.walkers import electrons_per_atom, init_walkers

__all__ = [
    "BatchLogAbs", "MCMCStats", "Metropolis", "Sampler", "adapt_width", "burn_in",
    "electrons_per_atom", "init_walkers", "metropolis", "move", "reset_lost_walkers",
    "values_of",
]  # fmt: skip
