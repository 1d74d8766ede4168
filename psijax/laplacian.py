"""Laplacian operators for scalar functions of one walker.

An operator ``op`` turns ``f: [n_electrons, 3] -> ()`` into
``op(f): x -> (f(x), grad f(x), lap f(x))`` with shapes ``()``, ``x.shape``, ``()``.
Parameters are closed over (``functools.partial(log_psi, params)``), so
``jax.grad`` with respect to them works through every operator.

Every operator is correct and differentiable with no mesh, under ``jit`` with
walkers sharded on an Auto mesh, inside ``shard_map`` and on Explicit meshes
(through ``psijax.batching``). The workarounds that make this true are listed in
docs/compatibility.md, each with a minimal reproducer of the upstream defect.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Protocol

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
from folx.api import FwdLaplArray
from folx.interpreter import eval_jaxpr_with_forward_laplacian, init_forward_laplacian_state

from psijax._vma import like_varying
from psijax.types import Array, ScalarFn

Result = tuple[Array, Array, Array]


class LaplacianOperator(Protocol):
    """``op(f)(x) -> (f(x), grad_f(x), lap_f(x))`` for one walker ``x``."""

    def __call__(self, f: ScalarFn) -> Callable[[Array], Result]: ...


@dataclasses.dataclass(frozen=True)
class Hessian:
    """Trace of the dense Hessian: O((3N)^2) memory, the reference for tests."""

    def __call__(self, f: ScalarFn) -> Callable[[Array], Result]:
        def apply(x: Array) -> Result:
            flat_f = _flat(f, x.shape)
            value, grad = jax.value_and_grad(flat_f)(x.reshape(-1))
            lap = jnp.trace(jax.hessian(flat_f)(x.reshape(-1)))
            return value, grad.reshape(x.shape), lap

        return apply


@dataclasses.dataclass(frozen=True)
class Loop:
    """FermiNet-style: one Hessian-vector product per coordinate in a ``fori_loop``.

    Memory of one backward pass; time ~3N gradient evaluations. ``jax.linearize``
    shares the primal work of the gradient across the loop.
    """

    def __call__(self, f: ScalarFn) -> Callable[[Array], Result]:
        def apply(x: Array) -> Result:
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

            lap = jax.lax.fori_loop(0, flat.size, body, like_varying(jnp.zeros((), x.dtype), flat))
            return value, grad.reshape(x.shape), lap

        return apply


@dataclasses.dataclass(frozen=True)
class Forward:
    """folx's dense forward Laplacian: value, gradient and Laplacian in one pass."""

    def __call__(self, f: ScalarFn) -> Callable[[Array], Result]:
        return _folx(f, sparsity_threshold=0)


@dataclasses.dataclass(frozen=True)
class ForwardSparse:
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

    def __call__(self, f: ScalarFn) -> Callable[[Array], Result]:
        return _folx(f, sparsity_threshold=self.threshold)


def _folx(f: ScalarFn, sparsity_threshold: float) -> Callable[[Array], Result]:
    """folx's forward Laplacian, traced so that it also works inside ``shard_map``.

    ``folx.forward_laplacian`` traces ``f`` on the (mesh-varying) walker, so the
    jaxpr casts every constant to varying; with sparsity on, folx then evaluates
    those casts eagerly, fails, and calls ``exit()`` (compatibility.md #1). Here the
    jaxpr is traced on an abstract, non-varying walker instead and handed to
    folx's interpreter: constants stay constants, and JAX inserts the casts when
    folx's rules combine them with the varying walker.
    """

    def apply(x: Array) -> Result:
        flat = x.reshape(-1)
        n = flat.size
        threshold = (
            int(sparsity_threshold * n) if sparsity_threshold < 1 else int(sparsity_threshold)
        )
        abstract = jax.ShapeDtypeStruct(flat.shape, flat.dtype)
        closed = jax.make_jaxpr(_flat(f, x.shape))(abstract)
        if threshold > 0:
            # folx evaluates constant-only operations eagerly to track sparsity; JAX
            # cannot evaluate a jit eagerly under a Manual context mesh (set_mesh +
            # shard_map, compatibility.md #4), so fold those constants first.
            closed = jax.make_jaxpr(fold_constants(closed))(abstract)
        state = init_forward_laplacian_state(flat, sparsity=threshold > 0, weights=1.0)
        (out,) = eval_jaxpr_with_forward_laplacian(
            closed.jaxpr, closed.consts, *state, sparsity_threshold=threshold
        )
        if not isinstance(out, FwdLaplArray):  # f does not depend on x
            return out, jnp.zeros_like(x), jnp.zeros_like(out)
        grad = out.jacobian.dense_array.reshape(x.shape)
        return out.x, grad, out.laplacian

    return apply


def fold_constants(closed: jax.extend.core.ClosedJaxpr) -> Callable[..., list[Array]]:
    """A function re-tracing ``closed`` with every constant-only equation evaluated.

    Evaluation happens at trace time under an empty context mesh, where eager
    execution works even inside ``shard_map``; equations that touch a traced
    input (the walker, or parameters under ``jit``/``grad``) are re-bound as is.
    """
    no_mesh = jax.sharding.AbstractMesh((), ())

    def run(*args: Array) -> list[Array]:
        env: dict = dict(zip(closed.jaxpr.constvars, closed.consts, strict=True))
        env.update(zip(closed.jaxpr.invars, args, strict=True))
        read = lambda v: v.val if isinstance(v, jax.extend.core.Literal) else env[v]
        for eqn in closed.jaxpr.eqns:
            invals = [read(v) for v in eqn.invars]
            subfuns, params = _bind_params(eqn)
            if any(isinstance(v, jax.core.Tracer) for v in invals):
                out = eqn.primitive.bind(*subfuns, *invals, **params)
            else:  # as host arrays: a constant must not carry the context mesh along
                invals = [np.asarray(v) if isinstance(v, jax.Array) else v for v in invals]
                with jax.ensure_compile_time_eval(), jax.sharding.use_abstract_mesh(no_mesh):
                    out = jax.tree.map(np.asarray, eqn.primitive.bind(*subfuns, *invals, **params))
            env.update(
                zip(eqn.outvars, out if eqn.primitive.multiple_results else [out], strict=True)
            )
        return [read(v) for v in closed.jaxpr.outvars]

    return run


def _bind_params(eqn) -> tuple[tuple, dict]:
    """(subfunctions, parameters) to re-bind ``eqn``; JAX 0.9.2 changed the format."""
    bound = eqn.primitive.get_bind_params(eqn.params)
    return ((), bound) if isinstance(bound, dict) else bound


def _flat(f: ScalarFn, shape: tuple[int, ...]) -> Callable[[Array], Array]:
    return lambda flat: f(flat.reshape(shape))


OPERATORS: dict[str, type] = {
    "forward": Forward,
    "forward-sparse": ForwardSparse,
    "loop": Loop,
    "hessian": Hessian,
}


def default_operator(n_electrons: int, *, differentiable: bool = False) -> LaplacianOperator:
    """The fastest correct operator for a walker of ``n_electrons`` (docs/benchmarks.md)."""
    del n_electrons, differentiable
    return Forward()
