"""Optimisers as optax-style transformations that declare the extra inputs they need:
Adam and the SPRING natural gradient."""

from psijax.optim.adam import adam
from psijax.optim.base import Optimizer, needs_of
from psijax.optim.march import MarchState, march
from psijax.optim.schedules import inverse_decay
from psijax.optim.spring import SpringState, spring

__all__ = [
    "MarchState", "Optimizer", "SpringState", "adam", "inverse_decay", "march", "needs_of",
    "spring",
]  # fmt: skip
