"""psijax: neural-network wavefunctions by variational Monte Carlo on current JAX."""

from importlib.metadata import PackageNotFoundError as _NotInstalled
from importlib.metadata import version as _version

from psijax.parallel import cpu_blas as _cpu_blas
from psijax.parallel import cpu_pool as _cpu_pool

# Batched LU in pieces XLA's CPU pool cannot deadlock on, or else (before JAX makes its CPU
# backend) a pool of one thread: see psijax.parallel.cpu_lapack and cpu_pool.
_cpu_pool.one_thread()
# LAPACK's BLAS on one thread, so that its idle workers do not take XLA's cores (cpu_blas).
_cpu_blas.one_thread()

from psijax.config import Config  # noqa: E402
from psijax.system import Molecule  # noqa: E402
from psijax.types import Psi, TrainState  # noqa: E402

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


def load(run, **options):
    """The trained wavefunction of a run's newest checkpoint; see ``psijax.wavefunction``."""
    from psijax.wavefunction import load as _load

    return _load(run, **options)


__all__ = [
    "Config", "Molecule", "Psi", "TrainState", "__version__", "evaluate", "load", "train",
]  # fmt: skip
