"""psijax: neural-network wavefunctions by variational Monte Carlo on current JAX.

Importing psijax changes nothing outside it; ``configure()`` is the process-wide set-up
(``train``, ``evaluate``, ``load`` and the CLI call it): see ``psijax.runtime``."""

from importlib.metadata import PackageNotFoundError as _NotInstalled
from importlib.metadata import version as _version

from psijax.config import Config
from psijax.runtime import configure, unconfigure
from psijax.system import Molecule
from psijax.types import Psi, TrainState

try:  # the version pyproject.toml declares, as installed
    __version__ = _version("psijax")
except _NotInstalled:  # imported from a source tree that was never installed
    __version__ = "unknown"


def train(config=None, **overrides):
    """Train a wavefunction (FermiNet or PsiFormer) on a molecule; see ``psijax.training.job.train``
    and ``psijax.config.Config``."""
    from psijax.training.job import train as _train

    return _train(config, **overrides)


def evaluate(run, **options):
    """Evaluate a trained run with frozen parameters; see ``psijax.evaluation.job.evaluate``."""
    from psijax.evaluation.job import evaluate as _evaluate

    return _evaluate(run, **options)


def scan(config, points, out, **options):
    """An energy curve: train at each geometry of ``points`` in order, each started from the
    one before; see ``psijax.curves.scan``."""
    from psijax.curves import scan as _scan

    return _scan(config, points, out, **options)


def twist_average(config, grid, out, **options):
    """The electron gas trained at each twist of a ``grid``-point Monkhorst-Pack grid (the
    cube's symmetries reduce it), its energies averaged; see ``psijax.curves.twists``."""
    from psijax.curves.twists import twist_average as _twist_average

    return _twist_average(config, grid, out, **options)


def relax(config, out, settings=None, **options):
    """A geometry optimisation: cycles of training, force evaluation and a quasi-Newton step
    of the nuclei until the forces vanish within their error bars; see
    ``psijax.curves.relax``."""
    from psijax.curves import relax as _relax

    return _relax(config, out, settings, **options)


def load(run, **options):
    """The trained wavefunction of a run's newest checkpoint; see ``psijax.wavefunction``."""
    from psijax.wavefunction import load as _load

    return _load(run, **options)


__all__ = [
    "Config", "Molecule", "Psi", "TrainState", "__version__", "configure", "evaluate", "load",
    "relax", "scan", "train", "twist_average", "unconfigure",
]  # fmt: skip
