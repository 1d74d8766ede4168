"""The four Laplacian operators: ``Hessian``, ``Loop``, ``Forward``, ``ForwardSparse``.

Each is a frozen dataclass; ``op(f)(x) -> (f(x), grad f(x), lap f(x))`` for one
walker ``x``. The context handling is shared (``_Operator.__call__``): on a mesh
with Explicit axes the computation runs with those axes switched to Auto
(``_explicit``); inside ``shard_map`` each operator keeps JAX's varying-axes types
consistent itself (``Loop`` casts its tangents, the forward operators trace on the
varying walker, ``_folx``).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp

from psijax.laplacian._explicit import Derivatives, on_auto_axes
from psijax.laplacian._folx import forward_laplacian
from psijax.parallel.vma import like_varying
from psijax.types import Array, ScalarFn


class _Operator(abc.ABC):
    """Shared context handling; subclasses implement ``_apply(f, x)`` only."""

    def __call__(self, f: ScalarFn) -> Callable[[Array], Derivatives]:
        def apply(x: Array) -> Derivatives:
            return on_auto_axes(self._apply, f, x)

        return apply

    @abc.abstractmethod
    def _apply(self, f: ScalarFn, x: Array) -> Derivatives: ...


@dataclasses.dataclass(frozen=True)
class Hessian(_Operator):
    """Trace of the dense Hessian: O((3N)^2) memory, the reference for tests."""

    def _apply(self, f: ScalarFn, x: Array) -> Derivatives:
        flat_f = _flat(f, x.shape)
        value, grad = jax.value_and_grad(flat_f)(x.reshape(-1))
        lap = jnp.trace(jax.hessian(flat_f)(x.reshape(-1)))
        return value, grad.reshape(x.shape), lap


@dataclasses.dataclass(frozen=True)
class Loop(_Operator):
    """FermiNet-style: one Hessian-vector product per coordinate in a ``fori_loop``.

    Memory of one backward pass; time ~3N gradient evaluations. ``jax.linearize``
    shares the primal work of the gradient across the loop.
    """

    def _apply(self, f: ScalarFn, x: Array) -> Derivatives:
        flat_f = _flat(f, x.shape)
        flat = x.reshape(-1)
        value = f(x)
        grad, hvp = jax.linearize(jax.grad(flat_f), flat)
        eye = jnp.eye(flat.size, dtype=flat.dtype)

        def body(i: Array, acc: Array) -> Array:
            # The tangent must vary over the same mesh axes as the primal
            # inside shard_map, or linearize rejects it (compatibility.md #2).
            tangent = like_varying(eye[i], flat)
            return acc + hvp(tangent)[i]

        zero = like_varying(jnp.zeros((), x.dtype), flat)
        lap = jax.lax.fori_loop(0, flat.size, body, like_varying(zero, value))
        return value, grad.reshape(x.shape), lap


@dataclasses.dataclass(frozen=True)
class Forward(_Operator):
    """folx's dense forward Laplacian: value, gradient and Laplacian in one pass."""

    def _apply(self, f: ScalarFn, x: Array) -> Derivatives:
        return forward_laplacian(f, x, sparsity_threshold=0)


@dataclasses.dataclass(frozen=True)
class ForwardSparse(_Operator):
    """folx's forward Laplacian with electron sparsity propagation.

    Attributes:
        threshold: an absolute number of input coordinates (> 1) or a fraction
            of them (0 < threshold < 1) above which folx stops tracking sparsity.
    """

    threshold: float = 0.6

    def __post_init__(self) -> None:
        if not self.threshold > 0:
            raise ValueError(
                f"ForwardSparse(threshold={self.threshold}) needs a threshold > 0; "
                "use Forward() for the dense forward Laplacian"
            )

    def _apply(self, f: ScalarFn, x: Array) -> Derivatives:
        n = x.size
        t = self.threshold
        return forward_laplacian(f, x, sparsity_threshold=int(t * n) if t < 1 else int(t))


def _flat(f: ScalarFn, shape: tuple[int, ...]) -> Callable[[Array], Array]:
    return lambda flat: f(flat.reshape(shape))
