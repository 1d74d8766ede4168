"""Driving folx's forward-Laplacian interpreter so that it works in every context.

folx interprets a jaxpr equation by equation: equations that touch the walker go
through its rules, the others are bound as they are (and, with sparsity on,
evaluated eagerly so that index arrays stay concrete). Two things break that
inside ``shard_map`` (docs/compatibility.md #1 and #7):

- a jaxpr traced on a non-varying walker has no casts, so when folx binds an
  equation that mixes a walker-dependent value carrying no derivative (the signs
  of ``slogdet``, a comparison, an integer) with a parameter-dependent one, JAX
  rejects the mix of varying and non-varying operands;
- a jaxpr traced on the varying walker has the casts (``pvary``), but casts of
  constants cannot be evaluated eagerly, and folx's sparse mode then calls
  ``exit()``.

So the jaxpr is traced on the walker as it is (JAX inserts every cast exactly
where ``jnp`` would), split into the equations that depend on the walker and
those that do not, and only the first kind is handed to folx. The others are
evaluated here first: eagerly where their inputs are concrete (so folx still sees
concrete index arrays), in the enclosing trace otherwise (parameters, casts).
folx never evaluates anything eagerly, and every equation it binds is well typed.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
from collections.abc import Callable, Iterator, Sequence

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
from folx.api import FwdLaplArray
from folx.interpreter import eval_jaxpr_with_forward_laplacian, init_forward_laplacian_state
from folx.wrapped_functions import get_laplacian

from psijax import precision
from psijax.errors import UnsupportedError
from psijax.laplacian import _folx_complex, _folx_indices, _host_eval
from psijax.types import Array, ScalarFn

Literal = jax.extend.core.Literal
ClosedJaxpr = jax.extend.core.ClosedJaxpr
_JITS = ("jit", "pjit")
_REMATS = ("checkpoint", "remat", "remat2")  # jax.checkpoint's primitive, by JAX version
# Casts of a value to varying over mesh axes exist only inside shard_map: never eager.
_CASTS = ("pvary", "pcast")


def forward_laplacian(f: ScalarFn, x: Array, sparsity_threshold: int) -> tuple[Array, Array, Array]:
    """(f(x), grad f(x), lap f(x)) by folx's forward Laplacian; see the module docstring.
    For ``f`` with outputs of shape ``S`` they have the shapes ``S``, ``S + x.shape`` and
    ``S``: one pass for all, sharing the work of everything the outputs have in common."""
    if sparsity_threshold > 0 and not _eager_evaluation_works():
        sparsity_threshold = 0  # folx's sparsity bookkeeping needs it (#4): go dense
    flat = x.reshape(-1)
    flat_f = lambda y: f(y.reshape(x.shape))
    closed = jax.make_jaxpr(flat_f)(flat)
    closed = jax.make_jaxpr(_flatten(closed))(flat)
    walker_part = _walker_part(closed, flat)
    state = init_forward_laplacian_state(flat, sparsity=sparsity_threshold > 0, weights=1.0)
    try:
        # folx's sparse index sets in numpy while it traces: no XLA program per set;
        # its slogdet with the parameter derivative of a complex determinant's sign
        with (
            _dense_fallbacks_said_once(),
            precision.scope(precision.of_jaxpr(closed)),
            _folx_indices.active(),
            _folx_complex.active(),
        ):
            (out,) = eval_jaxpr_with_forward_laplacian(
                walker_part.jaxpr, walker_part.consts, *state,
                sparsity_threshold=sparsity_threshold,
            )  # fmt: skip
    except SystemExit:  # folx ends the process when an eager evaluation fails (#1)
        raise UnsupportedError(
            "folx's sparse forward Laplacian tried to end the process while tracing this "
            "function; use laplacian.Forward() (dense) or laplacian.Loop() for it"
        ) from None
    if not isinstance(out, FwdLaplArray):  # f does not depend on x
        grad = jnp.zeros((*jnp.shape(out), *x.shape), x.dtype)
        return out, grad.astype(out.dtype) if jnp.iscomplexobj(out) else grad, jnp.zeros_like(out)
    # folx's jacobian is [input coordinates, *output shape]: the gradient of each output
    jacobian = out.jacobian.dense_array.reshape(flat.size, -1).T
    return out.x, jacobian.reshape(*out.x.shape, *x.shape), out.laplacian


def _flatten(closed: ClosedJaxpr) -> Callable[[Array], list[Array]]:
    """A function re-tracing ``closed`` with the walker-dependent nested jits inlined and
    walker-dependent scans unrolled.

    folx recurses into a jit it has no rule for anyway; inlining it here lets the split
    below see the constants inside it (jits that folx has a rule for by name, such as
    ``slogdet``, ``det``, ``inv``, ``solve``, ``softplus``, are kept). folx's own scan
    rule fails on a loop counter (``fori_loop``: a concrete initial carry that becomes a
    tracer), on walker-dependent ``xs`` and on sparsity that changes between
    iterations; unrolled, a scan is plain equations. Compile time then grows with
    the scan's length, as it would for a Python loop. folx has no rule for
    ``jax.checkpoint`` or ``lax.cond`` and would take the full Hessian of either: a
    checkpoint is inlined (it only matters to a backward pass, and the forward Laplacian
    has none), and a walker-dependent ``cond`` evaluates every branch and selects
    (``select_n``, which folx has a rule for), exact for each walker since its branch
    index is piecewise constant.
    """

    def run(x: Array) -> list[Array]:
        return _evaluate(closed.jaxpr, closed.consts, [x], [True])

    def _evaluate(jaxpr, consts: Sequence, args: Sequence, depends: Sequence[bool]) -> list:
        env = dict(zip(jaxpr.constvars, consts, strict=True))
        env.update(zip(jaxpr.invars, args, strict=True))
        dependent = {v for v, d in zip(jaxpr.invars, depends, strict=True) if d}
        producers: dict = {}  # walker-dependent concatenations and broadcasts, for _split_dot
        for eqn in jaxpr.eqns:
            invals = [_read(env, v) for v in eqn.invars]
            flags = [not isinstance(v, Literal) and v in dependent for v in eqn.invars]
            name = eqn.primitive.name
            if not any(flags):
                out = _bind(eqn, invals)
            elif name in _JITS and get_laplacian(eqn.params.get("name", "")) is None:
                sub = eqn.params["jaxpr"]
                out = _evaluate(sub.jaxpr, sub.consts, invals, flags)
            elif name == "scan" and eqn.params["length"] > 0:
                out = _unroll(eqn, invals, flags)
            elif name in _REMATS:  # no backward pass here to save memory for: inline it
                out = _evaluate(eqn.params["jaxpr"], [], invals, flags)
            elif name == "cond":
                out = _both_branches(eqn, invals, flags)
            elif name == "dot_general":
                out = _split_dot(eqn, invals, producers)
            elif name == "custom_jvp_call" and any(
                split := _folx_complex.walker_complex(invals, flags)
            ):
                out = _folx_complex.on_real_parts(functools.partial(_bind, eqn), invals, split)
            else:
                out = _bind(eqn, invals)
            if any(flags):
                dependent.update(eqn.outvars)
                if name in ("concatenate", "broadcast_in_dim"):
                    producers[eqn.outvars[0]] = (eqn, invals)
            env.update(zip(eqn.outvars, out, strict=True))
        return [_read(env, v) for v in jaxpr.outvars]

    def _both_branches(eqn, invals: list, flags: list[bool]) -> list:
        index, operands = invals[0], invals[1:]
        outs = [_evaluate(b.jaxpr, b.consts, operands, flags[1:]) for b in eqn.params["branches"]]
        if len(outs) == 1:
            return outs[0]
        return [jax.lax.select_n(index, *cases) for cases in zip(*outs, strict=True)]

    def _unroll(eqn, invals: list, flags: list[bool]) -> list:
        p = eqn.params
        body = p["jaxpr"]
        consts, carry, xs = _scan_groups(p, invals)
        const_flags, _, xs_flags = _scan_groups(p, flags)
        n_carry = len(carry)
        # Every carry may depend on the walker after the first step: say so for all.
        depends = [*const_flags, *([True] * n_carry), *xs_flags]
        steps = range(p["length"] - 1, -1, -1) if p["reverse"] else range(p["length"])
        ys = []
        for t in steps:
            x_t = [jax.lax.index_in_dim(x, t, keepdims=False) for x in xs]
            out = _evaluate(body.jaxpr, body.consts, [*consts, *carry, *x_t], depends)
            carry = out[:n_carry]
            ys.append(out[n_carry:])
        if p["reverse"]:
            ys.reverse()
        return [*carry, *(jnp.stack(y) for y in zip(*ys, strict=True))]

    return run


def _split_dot(eqn, invals: list, producers: dict) -> list:
    """A walker-dependent ``dot_general`` contracted along a concatenation whose parts
    include broadcasts: each broadcast part multiplied before it is broadcast.

    A FermiNet-style layer concatenates each electron's features with means over electrons
    broadcast to every electron, then multiplies by a weight matrix. folx propagates the
    Jacobian of the concatenation, every broadcast copy included, through the product:
    3N tangents for every copy, in the forward pass and again in the backward pass of a
    parameter gradient. Multiplying a mean once and broadcasting the product is the same
    sum in another order, and folx then carries one copy's tangents. The other parts stay
    one concatenation and one product (one pass over the product's cotangent).
    """
    (contract, _), out_sharding = eqn.params["dimension_numbers"], eqn.params.get("out_sharding")
    if out_sharding is not None:
        return _bind(eqn, invals)
    for side in (0, 1):
        var = eqn.invars[side]
        if isinstance(var, Literal) or var not in producers:
            continue
        cat, parts = producers[var]
        if cat.primitive.name != "concatenate" or cat.params["dimension"] not in contract[side]:
            continue
        axis = cat.params["dimension"]
        other_axis = contract[1 - side][contract[side].index(axis)]
        other, start = invals[1 - side], 0
        plain, pieces, small = [], [], {}  # small: full shape -> (broadcast dims, sum)
        for part_var, part in zip(cat.invars, parts, strict=True):
            size = part.shape[axis]
            piece = jax.lax.slice_in_dim(other, start, start + size, axis=other_axis)
            start += size
            term = _dot_before_broadcast(eqn, side, part_var, piece, producers)
            if term is None:
                plain.append(part)
                pieces.append(piece)
            else:
                full, y = term
                small[full] = y if full not in small else small[full] + y
        if not small:
            return _bind(eqn, invals)
        total = None
        if plain:
            part = plain[0] if len(plain) == 1 else jax.lax.concatenate(plain, axis)
            piece = pieces[0] if len(pieces) == 1 else jax.lax.concatenate(pieces, other_axis)
            (total,) = _bind(eqn, [part, piece] if side == 0 else [piece, part])
        for full, y in small.items():
            y = jax.lax.broadcast_in_dim(y, full, tuple(range(y.ndim)))
            total = y if total is None else total + y
        return [total]
    return _bind(eqn, invals)


def _dot_before_broadcast(eqn, side: int, part_var, piece, producers: dict):
    """(the product's full shape, ``dot_general`` of a part of a concatenation (operand
    ``side``) before its broadcast, with ``piece`` of the other operand), or None unless the
    part is a walker-dependent broadcast along free (not contracted, not batch) dimensions."""
    source = None if isinstance(part_var, Literal) else producers.get(part_var)
    if source is None or source[0].primitive.name != "broadcast_in_dim":
        return None
    bcast, (operand, *rest) = source
    dims, shape = bcast.params["broadcast_dimensions"], bcast.params["shape"]
    contract, batch = eqn.params["dimension_numbers"]
    free = [d for d in range(len(shape)) if d not in contract[side] and d not in batch[side]]
    reduced = [1] * len(shape)
    for i, d in enumerate(dims):
        reduced[d] = operand.shape[i]
    expanded = [d for d in range(len(shape)) if reduced[d] != shape[d]]
    if rest or not expanded or not all(d in free for d in expanded):
        return None
    operand = jax.lax.broadcast_in_dim(operand, tuple(reduced), dims)
    (y,) = _bind(eqn, [operand, piece] if side == 0 else [piece, operand])
    full = list(y.shape)
    n_lhs_free = eqn.invars[0].aval.ndim - len(contract[0]) - len(batch[0])
    offset = len(batch[side]) + (0 if side == 0 else n_lhs_free)
    for d in expanded:
        full[offset + free.index(d)] = shape[d]
    return tuple(full), y


def _scan_groups(params, values: list) -> tuple[list, list, list]:
    """A scan equation's inputs (or anything aligned with them) split into consts, carry
    and xs: JAX <= 0.11 counts the groups (``num_consts``, ``num_carry``), JAX 0.12 holds
    them in a flat tree (``ft_in``)."""
    if "ft_in" in params:
        return tuple(map(list, params["ft_in"].update(values).unpack()))
    n_consts, n_carry = params["num_consts"], params["num_carry"]
    cut = n_consts + n_carry
    return values[:n_consts], values[n_consts:cut], values[cut:]


def _walker_part(closed: ClosedJaxpr, flat: Array) -> ClosedJaxpr:
    """The equations of ``closed`` that depend on its input, with every other value
    computed now and passed in as a constant."""
    jaxpr = closed.jaxpr
    known = dict(zip(jaxpr.constvars, closed.consts, strict=True))
    depends = set(jaxpr.invars)
    walker_eqns = []
    for eqn in _live(jaxpr):
        if any(not isinstance(v, Literal) and v in depends for v in eqn.invars):
            depends.update(eqn.outvars)
            walker_eqns.append(eqn)
        else:
            out = _known(eqn, [_read(known, v) for v in eqn.invars])
            known.update(zip(eqn.outvars, out, strict=True))

    def run(y: Array) -> list[Array]:
        env = dict(known)
        env.update(zip(jaxpr.invars, [y], strict=True))
        for eqn in walker_eqns:
            out = _bind(eqn, [_read(env, v) for v in eqn.invars])
            env.update(zip(eqn.outvars, out, strict=True))
        return [_read(env, v) for v in jaxpr.outvars]

    return jax.make_jaxpr(run)(flat)


def _live(jaxpr) -> list:
    """The equations of ``jaxpr`` whose outputs are used (or that have effects), in order:
    ``_split_dot`` leaves the concatenations it splits unused."""
    used = {v for v in jaxpr.outvars if not isinstance(v, Literal)}
    live = []
    for eqn in reversed(jaxpr.eqns):
        if eqn.effects or any(v in used for v in eqn.outvars):
            live.append(eqn)
            used.update(v for v in eqn.invars if not isinstance(v, Literal))
    return live[::-1]


_NO_MESH = jax.sharding.AbstractMesh((), ())


def _known(eqn, invals: list) -> list:
    """An equation that does not depend on the walker: eagerly if its inputs are
    concrete, else staged in the enclosing trace.

    Eager evaluation happens on host copies under an empty abstract mesh: inside
    ``shard_map`` under ``set_mesh`` JAX cannot run a computation eagerly in the
    context mesh (docs/compatibility.md #4).
    """
    concrete = not any(isinstance(v, jax.core.Tracer) for v in invals)
    if concrete and eqn.primitive.name not in _CASTS:
        host = [np.asarray(v) if isinstance(v, jax.Array) else v for v in invals]
        out = _host_eval.evaluate(eqn, host)  # the same values, no program compiled
        if out is not None:
            return out
        try:
            with jax.ensure_compile_time_eval(), jax.sharding.use_abstract_mesh(_NO_MESH):
                return [np.asarray(v) for v in _bind(eqn, host)]
        except Exception:  # e.g. a sharding parameter naming a mesh axis: stage it instead
            pass
    return _bind(eqn, invals)


def _bind(eqn, invals: Sequence) -> list:
    """Bind ``eqn``'s primitive on ``invals``; always a list of outputs."""
    bound = eqn.primitive.get_bind_params(eqn.params)
    subfuns, params = ((), bound) if isinstance(bound, dict) else bound  # JAX >= 0.9.2: dict
    out = eqn.primitive.bind(*subfuns, *invals, **params)
    return list(out) if eqn.primitive.multiple_results else [out]


def _eager_evaluation_works() -> bool:
    """Whether JAX can evaluate a computation eagerly in the current context.

    folx tracks sparsity by evaluating index bookkeeping eagerly. Inside ``shard_map``
    under ``jax.set_mesh`` JAX cannot (an internal AssertionError, compatibility.md
    #4), so there ``ForwardSparse`` computes the dense forward Laplacian instead.
    """
    try:
        with jax.ensure_compile_time_eval():
            jnp.asarray(np.zeros(1, np.float32)) + 1.0
    except AssertionError:
        return False
    return True


def _read(env: dict, v):
    return v.val if isinstance(v, Literal) else env[v]


# folx logs, on the root logger through a handler of its own, each index operation whose
# sparsity pattern it cannot work out (a concatenation of a constant with the walker's
# features, data-dependent indexing), then computes that operation and everything after it
# densely. psijax says so once per operation, in its own words, on its own logger.
_FALLBACK = re.compile(r"Could not perform index operation (\w+)")
_said: set[str] = set()
logger = logging.getLogger("psijax.laplacian")


class _DenseFallbacks(logging.Filter):
    """Keeps folx's fallback records off the terminal and notes their operations."""

    def __init__(self) -> None:
        super().__init__()
        self.operations: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        match = _FALLBACK.search(str(record.msg))
        if match is None:
            return True
        self.operations.append(match.group(1))
        return False


@contextlib.contextmanager
def _dense_fallbacks_said_once() -> Iterator[None]:
    root, watch = logging.getLogger(), _DenseFallbacks()
    root.addFilter(watch)
    try:
        yield
    finally:
        root.removeFilter(watch)
    for operation in dict.fromkeys(watch.operations):  # after folx has put back the handlers
        if operation not in _said:
            _said.add(operation)
            logger.warning(
                "psijax: the sparse forward Laplacian cannot follow which inputs `%s` "
                "depends on in this function; from there on it computes densely (the "
                "result is exact, only slower; laplacian.Forward() is as fast there)",
                operation,
            )
