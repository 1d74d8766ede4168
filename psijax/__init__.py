"""psijax: neural-network wavefunctions by variational Monte Carlo on current JAX."""

from psijax.config import Config
from psijax.system import Molecule
from psijax.types import Psi, TrainState

__version__ = "0.1.0"


def train(config=None, **overrides):
    """Train a FermiNet on a molecule; see ``psijax.vmc.train`` and ``psijax.config.Config``."""
    from psijax.vmc import train as _train

    return _train(config, **overrides)


__all__ = ["Config", "Molecule", "Psi", "TrainState", "__version__", "train"]
