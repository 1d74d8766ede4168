"""The precision of float32 matrix products, set per computation.

On a GPU, JAX's default precision for a float32 matrix product is TensorFloat-32 (inputs
rounded to 10-bit mantissas) on Ampere and later chips; on a CPU every product is full
float32 whatever is asked. psijax asks for a precision where the product's accuracy is
known to matter, and only there, by tracing that computation under
``jax.default_matmul_precision`` (never globally on import):

- ``matmul_precision`` (the ansatz's field, ``Config.matmul_precision``): everything that
  evaluates the wavefunction: the orbitals and their determinants, the Laplacian operators
  that differentiate them (their products inherit the precision of the products they
  differentiate) and the parameter gradients (a product's transpose keeps its precision);
- ``gram_precision`` (SPRING's, ``Config.gram_precision``): SPRING's products with the
  walkers x parameters jacobian (the Gram matrix and the two matrix-vector products).

Measured on an H100 (docs/benchmarks.md, "GPU"): with TensorFloat-32 in the wavefunction
log|psi| was off by 1.6 and a third of the kinetic energies by more than 1% at 16
electrons, against 4e-4 and none with full float32, so ``matmul_precision`` defaults to
``highest``. SPRING's direction was 1.2e-3 from float64 with ``high``, 1.05e-3 with
``highest`` and 6.1e-3 with TensorFloat-32, and ``high`` made the update 6x faster than
``highest`` at production sizes, so ``gram_precision`` defaults to ``high``
(``psijax.config.Config``).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator

import jax

# JAX's names (jax.default_matmul_precision); None: leave JAX's own setting
PRECISIONS = ("default", "high", "highest")


@contextlib.contextmanager
def scope(precision: str | None) -> Iterator[None]:
    """Trace what runs inside with float32 products at ``precision`` (None: unchanged)."""
    if precision is None:
        yield
        return
    with jax.default_matmul_precision(precision):
        yield


def of_ansatz(method: Callable) -> Callable:
    """An ansatz method traced under the ansatz's ``matmul_precision`` field."""

    @functools.wraps(method)
    def traced(self, *args, **kwargs):
        with scope(self.matmul_precision):
            return method(self, *args, **kwargs)

    return traced


def products(closed) -> list:
    """The ``precision`` of every ``dot_general`` in a traced program (a ClosedJaxpr),
    nested programs included, in program order."""
    found: list = []

    def visit(jaxpr) -> None:
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "dot_general":
                found.append(eqn.params.get("precision"))
            for value in eqn.params.values():
                for sub in value if isinstance(value, tuple | list) else (value,):
                    inner = getattr(sub, "jaxpr", sub)  # a ClosedJaxpr holds a Jaxpr
                    if hasattr(inner, "eqns"):
                        visit(inner)

    visit(closed.jaxpr)
    return found


def of_jaxpr(closed) -> str | None:
    """The one precision every float32 product of a traced function asks for, by name, or
    None when they ask for none or for several. A Laplacian operator that re-traces a
    function (folx's forward Laplacian) forms its derivatives' products at this precision."""
    found = set(products(closed))
    if len(found) != 1:
        return None
    (pair,) = found
    if not isinstance(pair, tuple) or len(set(pair)) != 1:
        return None
    name = getattr(pair[0], "name", "").lower()
    return name if name in PRECISIONS else None
