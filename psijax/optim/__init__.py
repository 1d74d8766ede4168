"""Optimisers as optax transformations: Adam and the SPRING natural gradient."""

from psijax.optim.adam import adam
from psijax.optim.schedules import inverse_decay
from psijax.optim.spring import SpringState, spring

__all__ = ["SpringState", "adam", "inverse_decay", "spring"]
