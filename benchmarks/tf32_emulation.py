"""TensorFloat-32 products emulated on any device: a function whose float32 matrix products
round their inputs as an Ampere or Hopper GPU does at JAX's default precision.

``tf32(f)`` traces ``f`` and evaluates its program with the inputs of every float32
``dot_general`` that asks for no precision, or for ``default`` or ``high``, rounded to
TensorFloat-32's 10-bit mantissa (to nearest, ties to even), the product then taken in full
float32; nested programs (jit, scan, custom derivatives, linear solves) likewise. Products
that ask for ``highest`` (jax.numpy.linalg's own, psijax's under ``matmul_precision``) are
left alone, as the GPU leaves them. An upper bound of a GPU's rounding: XLA computes some
products (matrix-vector, tiny ones) without tensor cores even at the default precision.
Used by benchmarks/precision.py.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.extend import core


def round_tf32(x):
    """``x`` rounded to TensorFloat-32 (10 mantissa bits), to nearest, ties to even."""
    if x.dtype != jnp.float32:
        return x
    bits = jax.lax.bitcast_convert_type(x, jnp.uint32)
    half = jnp.uint32(0xFFF) + ((bits >> 13) & 1)
    return jax.lax.bitcast_convert_type((bits + half) & jnp.uint32(0xFFFFE000), jnp.float32)


def tf32(f):
    """``f`` with its float32 products in emulated TensorFloat-32 (module doc)."""

    def emulated(*args):
        closed = jax.make_jaxpr(f)(*args)
        out = _evaluate(closed.jaxpr, closed.consts, *jax.tree.leaves(args))
        return jax.tree.unflatten(jax.tree.structure(jax.eval_shape(f, *args)), out)

    return emulated


def _rounded(precision) -> bool:
    """Whether a GPU computes a float32 product of this precision in TensorFloat-32."""
    if precision is None:
        return True
    names = {getattr(p, "name", str(p)) for p in (precision if isinstance(precision, tuple)
                                                   else (precision,))}  # fmt: skip
    return names <= {"DEFAULT", "HIGH"}


def _transformed(closed):
    avals = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in closed.jaxpr.invars]
    return jax.make_jaxpr(functools.partial(_evaluate, closed.jaxpr, closed.consts))(*avals)


def _param(value):
    if isinstance(value, core.ClosedJaxpr):
        return _transformed(value)
    if isinstance(value, core.Jaxpr):
        return _transformed(core.ClosedJaxpr(value, [])).jaxpr
    if isinstance(value, tuple) and any(
        isinstance(v, core.ClosedJaxpr | core.Jaxpr) for v in value
    ):
        items = [_param(v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    return value


def _evaluate(jaxpr, consts, *args):
    env = dict(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))
    read = lambda v: v.val if isinstance(v, core.Literal) else env[v]
    for eqn in jaxpr.eqns:
        values = [read(v) for v in eqn.invars]
        if eqn.primitive.name == "dot_general" and _rounded(eqn.params.get("precision")):
            values = [round_tf32(x) for x in values]
        bound = eqn.primitive.get_bind_params({k: _param(v) for k, v in eqn.params.items()})
        subfuns, bound = bound if isinstance(bound, tuple) else ((), bound)  # older JAX: a pair
        with eqn.ctx.manager:
            out = eqn.primitive.bind(*subfuns, *values, **bound)
        env.update(zip(eqn.outvars, out if eqn.primitive.multiple_results else [out], strict=True))
    return [read(v) for v in jaxpr.outvars]
