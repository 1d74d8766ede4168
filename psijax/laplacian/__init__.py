"""Laplacian operators for scalar functions of one walker, for any JAX model.

An operator ``op`` turns ``f: x -> ()`` into ``op(f): x -> (f(x), grad f(x), lap f(x))``
with shapes ``()``, ``x.shape``, ``()``. Parameters are closed over
(``functools.partial(log_psi, params)``), so ``jax.grad`` with respect to them works
through every operator. ``f`` may be complex-valued (``x`` must be real): the gradient
and Laplacian are then those of ``Re f`` plus ``i`` times those of ``Im f``.

Every operator is correct and differentiable, for any function built from JAX
primitives, with no mesh, under ``jit`` with walkers sharded on an Auto mesh, on
Explicit meshes (batched by ``jax.vmap`` or ``psijax.parallel.batching.map_walkers``) and
inside ``shard_map``. docs/laplacian.md says which to pick; docs/compatibility.md
lists the upstream defects psijax works around, each with a minimal reproducer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from psijax.laplacian._explicit import Derivatives
from psijax.laplacian.operators import Forward, ForwardSparse, Hessian, Loop
from psijax.types import Array, ScalarFn


class LaplacianOperator(Protocol):
    """``op(f)(x) -> (f(x), grad_f(x), lap_f(x))`` for one walker ``x``."""

    def __call__(self, f: ScalarFn) -> Callable[[Array], Derivatives]: ...


SPARSE_FROM = 9  # electrons from which default_operator tracks sparsity


def default_operator(n_electrons: int) -> LaplacianOperator:
    """The fastest correct operator for a walker of ``n_electrons`` (docs/benchmarks.md).

    Up to 8 electrons the dense forward Laplacian is fastest or tied, for the value and
    the parameter gradient, and compiled 2-4x faster than the sparse one (measured before
    the sparse sums' index sets moved to numpy: ``_folx_indices``). From 9 on, folx's
    sparsity tracking (above 6 input coordinates it stops) pays: at 16 electrons
    (FermiNet 4 x (256, 32), 128 walkers, float32) the gradient of the mean kinetic energy
    took 6.1 s with ``ForwardSparse(6)`` against 8.3 s with ``Forward()`` (and 9.2 s with
    folx's own sparse forward Laplacian).
    """
    return Forward() if n_electrons < SPARSE_FROM else ForwardSparse(6)


__all__ = [
    "Derivatives",
    "Forward",
    "ForwardSparse",
    "Hessian",
    "LaplacianOperator",
    "Loop",
    "default_operator",
]
