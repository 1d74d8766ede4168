"""Equations of constants evaluated with numpy.

While it traces, the forward Laplacian's interpreter (``_folx``) evaluates the equations
of a network that do not depend on the walker (index grids, masks, triangles, their
casts), so that folx sees their values as constants. Evaluated by JAX, each equation
compiles a small XLA program of its own: 17 of them, about 0.3 s, in tracing N2's
training step. ``evaluate`` computes the same values with numpy where the operation is
exact data movement, comparison or integer arithmetic, or IEEE arithmetic of one
operation (which numpy and XLA round alike), and leaves every other equation to JAX.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.extend
import numpy as np

Literal = jax.extend.core.Literal


def evaluate(eqn, invals: Sequence) -> list[np.ndarray] | None:
    """The outputs of ``eqn`` at the concrete ``invals``, each in its output's dtype; None
    where numpy does not compute that equation as XLA does."""
    rule = _RULES.get(eqn.primitive.name)
    plain = all(isinstance(v.aval.dtype, np.dtype) for v in (*eqn.invars, *eqn.outvars))
    if rule is None or not plain:  # (PRNG keys and other extended dtypes: JAX's)
        return None
    args = [np.asarray(v, var.aval.dtype) for v, var in zip(invals, eqn.invars, strict=True)]
    try:
        out = rule(*args, **eqn.params)
    except TypeError:  # a parameter this rule does not know (a newer JAX): JAX's
        return None
    if out is None:
        return None
    outs = out if eqn.primitive.multiple_results else [out]
    return [np.asarray(o, var.aval.dtype) for o, var in zip(outs, eqn.outvars, strict=True)]


def _run(closed, args: Sequence) -> list[np.ndarray] | None:
    """A closed jaxpr at ``args``, every equation by ``evaluate``; None if one is not."""
    jaxpr = closed.jaxpr
    env = dict(zip(jaxpr.constvars, closed.consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))
    read = lambda v: v.val if isinstance(v, Literal) else env[v]
    for eqn in jaxpr.eqns:
        out = evaluate(eqn, [read(v) for v in eqn.invars])
        if out is None:
            return None
        env.update(zip(eqn.outvars, out, strict=True))
    return [read(v) for v in jaxpr.outvars]


def _iota(*, dtype, shape, dimension, **_):
    axes = range(len(shape))
    along = np.arange(shape[dimension]).reshape([-1 if d == dimension else 1 for d in axes])
    return np.broadcast_to(along, shape).astype(dtype)


def _broadcast_in_dim(x, *, shape, broadcast_dimensions, **_):
    expanded = [1] * len(shape)
    for axis, d in zip(broadcast_dimensions, x.shape, strict=True):
        expanded[axis] = d
    return np.broadcast_to(x.reshape(expanded), shape)


def _convert(x, *, new_dtype, **_):
    """Integers and booleans to any type, floats to floats and complex numbers, complex to
    complex, rounded as XLA rounds; None for floats to integers, where XLA saturates and
    numpy does not, and for complex numbers to real ones (numpy warns)."""
    if np.issubdtype(x.dtype, np.floating) and not np.issubdtype(new_dtype, np.inexact):
        return None
    if np.issubdtype(x.dtype, np.complexfloating) and not np.issubdtype(
        new_dtype, np.complexfloating
    ):
        return None
    return x.astype(new_dtype)


def _mul(x, y, *, out_dtype=None):
    """A product; None for complex numbers (several operations, which XLA may fuse)."""
    if out_dtype is not None or np.iscomplexobj(x) or np.iscomplexobj(y):
        return None
    return x * y


def _select_n(which, *cases):
    return np.choose(which.astype(np.int32), cases)


_RULES = {
    "iota": _iota,
    "broadcast_in_dim": _broadcast_in_dim,
    "convert_element_type": _convert,
    "select_n": _select_n,
    "jit": lambda *args, jaxpr, **_: _run(jaxpr, args),
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "mul": _mul,
    "neg": lambda x: -x,
    "eq": lambda x, y: x == y,
    "ne": lambda x, y: x != y,
    "lt": lambda x, y: x < y,
    "le": lambda x, y: x <= y,
    "gt": lambda x, y: x > y,
    "ge": lambda x, y: x >= y,
    "and": lambda x, y: x & y,
    "or": lambda x, y: x | y,
    "not": lambda x: ~x,
}
