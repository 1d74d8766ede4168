"""psijax: neural-network wavefunctions by variational Monte Carlo on current JAX."""

from psijax.config import Config
from psijax.system import Molecule
from psijax.types import Psi, TrainState

__version__ = "0.1.0"


def train(config=None, **overrides):
    """Train a wavefunction (FermiNet or PsiFormer) on a molecule; see ``psijax.run.train.train``
    and ``psijax.config.Config``."""
    from psijax.run.train import train as _train

    return _train(config, **overrides)


def evaluate(run, **options):
    """Evaluate a trained run with frozen parameters; see ``psijax.run.evaluate.evaluate``."""
    from psijax.run.evaluate import evaluate as _evaluate

    return _evaluate(run, **options)


def load(run, **options):
    """The trained wavefunction of a run's newest checkpoint; see ``psijax.wavefunction``."""
    from psijax.wavefunction import load as _load

    return _load(run, **options)


__all__ = [
    "Config", "Molecule", "Psi", "TrainState", "__version__", "evaluate", "load", "train",
]  # fmt: skip
