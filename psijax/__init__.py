"""psijax: neural-network wavefunctions by variational Monte Carlo on current JAX."""

from psijax.types import Psi

__version__ = "0.1.0"
__all__ = ["Psi", "__version__"]
