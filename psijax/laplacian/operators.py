"""The four Laplacian operators: ``Hessian``, ``Loop``, ``Forward``, ``ForwardSparse``.

Each is a frozen dataclass; ``op(f)(x) -> (f(x), grad f(x), lap f(x))`` for one
walker ``x``. The context handling is shared (``_Operator.__call__``): on a mesh
with Explicit axes the computation runs with those axes switched to Auto
(``_explicit``); inside ``shard_map`` each operator keeps JAX's varying-axes types
consistent itself (``Loop`` casts its tangents, the forward operators trace on the
varying walker, ``_folx``). A complex-valued ``f`` gets a complex gradient and Laplacian:
``Hessian`` and ``Loop`` differentiate ``[Re f, Im f]``, which JAX's reverse mode takes,
and the forward operators carry complex values (``_folx_complex``); a complex ``x`` is
refused.

``f`` may also return an array of shape ``S`` (several functions of one walker, such as
several states from one network): the value, gradient and Laplacian then have the shapes
``S``, ``S + x.shape`` and ``S``. The forward operators compute all of them in one pass,
sharing the work of what the outputs have in common; ``Hessian`` and ``Loop``
differentiate each output by itself.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp

from psijax.errors import UnsupportedError
from psijax.laplacian._explicit import Derivatives, on_auto_axes
from psijax.laplacian._folx import forward_laplacian
from psijax.parallel.vma import like_varying
from psijax.types import Array, ScalarFn


class _Operator(abc.ABC):
    """Shared context handling; subclasses implement ``_apply(f, x)`` only."""

    def __call__(self, f: ScalarFn) -> Callable[[Array], Derivatives]:
        def apply(x: Array) -> Derivatives:
            if jnp.iscomplexobj(x):
                raise UnsupportedError(
                    f"laplacian.{type(self).__name__}() differentiates with respect to a real "
                    f"input and got a {jnp.result_type(x)} one; pass the real and imaginary "
                    "parts of a complex input as one real array (the function's value may "
                    "be complex)"
                )
            several = jax.eval_shape(f, x).shape
            if several and not self.shares_outputs:
                return on_auto_axes(functools.partial(_each_output, self._apply, several), f, x)
            return on_auto_axes(self._apply, f, x)

        return apply

    shares_outputs = False  # whether ``_apply`` takes an f of several outputs in one pass

    @abc.abstractmethod
    def _apply(self, f: ScalarFn, x: Array) -> Derivatives: ...


@dataclasses.dataclass(frozen=True)
class Hessian(_Operator):
    """Trace of the dense Hessian: O((3N)^2) memory, the reference for tests."""

    def _apply(self, f: ScalarFn, x: Array) -> Derivatives:
        flat_f = _flat(f, x.shape)
        if jnp.iscomplexobj(jax.eval_shape(f, x)):  # Re f and Im f, in the same passes

            def gradients(y: Array) -> tuple[Array, Array]:
                grad = jax.jacrev(_real_parts(flat_f))(y)  # [2, d]
                return grad, grad

            hessians, grad = jax.jacfwd(gradients, has_aux=True)(x.reshape(-1))
            lap = jnp.trace(hessians, axis1=-2, axis2=-1)
            return f(x), _as_complex(grad).reshape(x.shape), _as_complex(lap)
        value, grad = jax.value_and_grad(flat_f)(x.reshape(-1))
        lap = jnp.trace(jax.hessian(flat_f)(x.reshape(-1)))
        return value, grad.reshape(x.shape), lap


@dataclasses.dataclass(frozen=True)
class Loop(_Operator):
    """FermiNet-style: one Hessian-vector product per coordinate in a ``fori_loop``.

    Memory of one backward pass; time ~3N gradient evaluations. ``jax.linearize``
    shares the primal work of the gradient across the loop. A complex-valued ``f`` is
    differentiated as its real and imaginary parts, both in the same passes.
    """

    def _apply(self, f: ScalarFn, x: Array) -> Derivatives:
        flat_f = _flat(f, x.shape)
        flat = x.reshape(-1)
        value = f(x)
        if jnp.iscomplexobj(value):  # the gradients of Re f and Im f, [2, d]
            grad, hvp = jax.linearize(jax.jacrev(_real_parts(flat_f)), flat)
            column = lambda m, i: m[:, i]
        else:
            grad, hvp = jax.linearize(jax.grad(flat_f), flat)
            column = lambda v, i: v[i]
        eye = jnp.eye(flat.size, dtype=flat.dtype)

        def body(i: Array, acc: Array) -> Array:
            # The tangent must vary over the same mesh axes as the primal
            # inside shard_map, or linearize rejects it (compatibility.md #2).
            tangent = like_varying(eye[i], flat)
            return acc + column(hvp(tangent), i)

        zero = like_varying(jnp.zeros(grad.shape[:-1], x.dtype), flat)
        lap = jax.lax.fori_loop(0, flat.size, body, like_varying(zero, value))
        if grad.ndim == 2:
            grad, lap = _as_complex(grad), _as_complex(lap)
        return value, grad.reshape(x.shape), lap


@dataclasses.dataclass(frozen=True)
class Forward(_Operator):
    """folx's dense forward Laplacian: value, gradient and Laplacian in one pass."""

    shares_outputs = True

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
    shares_outputs = True

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


def _each_output(
    apply: Callable[[ScalarFn, Array], Derivatives], shape: tuple[int, ...], f, x: Array
) -> Derivatives:
    """``apply`` to each output of ``f`` (of ``shape``) by itself, stacked."""
    one = lambda i: apply(lambda y: f(y).reshape(-1)[i], x)
    value, grad, lap = jax.vmap(one)(jnp.arange(math.prod(shape)))
    return value.reshape(shape), grad.reshape(*shape, *x.shape), lap.reshape(shape)


def _flat(f: ScalarFn, shape: tuple[int, ...]) -> Callable[[Array], Array]:
    return lambda flat: f(flat.reshape(shape))


def _real_parts(f: Callable[[Array], Array]) -> Callable[[Array], Array]:
    """``x -> [Re f(x), Im f(x)]``: a real function, which JAX's reverse mode takes."""

    def parts(x: Array) -> Array:
        z = f(x)
        return jnp.stack([jnp.real(z), jnp.imag(z)])

    return parts


def _as_complex(parts: Array) -> Array:
    """``[re, im, ...] -> re + i im``."""
    return jax.lax.complex(parts[0], parts[1])
