"""Operators on Explicit meshes, whatever the batching around them.

Under ``jax.set_mesh`` with an Explicit walker axis, a user's plain ``jax.vmap``
of an operator hands it a walker whose batch dimension is explicitly sharded.
folx's rules and the loop Laplacian contain gathers and reshapes that JAX's
explicit-sharding rules refuse in that setting (docs/compatibility.md #3). So an
operator called in a context whose mesh has Explicit axes runs its computation
with those axes switched to Auto (``jax.sharding.auto_axes``), where GSPMD
places the work, and hands back its outputs on the Explicit axes again.

Inside ``auto_axes`` every array must live on the Auto mesh, including the
arrays the function closes over (its parameters). Those that psijax can see, in
``functools.partial`` arguments, closure cells and bound ``self`` pytrees, are
passed through ``auto_axes`` as arguments; an explicitly sharded array hidden
anywhere else is refused up front with an ``UnsupportedError`` naming the fix.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

import jax
from jax.sharding import AxisType, PartitionSpec

from psijax.errors import UnsupportedError
from psijax.types import Array, ScalarFn

Derivatives = tuple[Array, Array, Array]


def explicit_axes() -> tuple[str, ...]:
    """Names of the Explicit axes of the context mesh (empty without a mesh)."""
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty:
        return ()
    types_ = dict(zip(mesh.axis_names, mesh.axis_types, strict=True))
    return tuple(name for name, kind in types_.items() if kind == AxisType.Explicit)


def on_auto_axes(
    apply: Callable[[ScalarFn, Array], Derivatives], f: ScalarFn, x: Array
) -> Derivatives:
    """``apply(f, x)``, with the context mesh's Explicit axes switched to Auto."""
    axes = explicit_axes()
    if not axes:
        return apply(f, x)
    leaves, rebuild = _open(f, depth=0)
    _refuse_hidden_explicit(f, x, leaves)

    def inner(x: Array, leaves: list) -> Derivatives:
        return apply(rebuild(leaves), x)

    out = (PartitionSpec(), PartitionSpec(), PartitionSpec())
    return jax.sharding.auto_axes(inner, axes=axes, out_sharding=out)(x, leaves)


# ----------------------------------------------------------------- opening closures
_MAX_DEPTH = 8


def _open(obj: Any, depth: int) -> tuple[list, Callable[[list], Any]]:
    """(array leaves reachable from ``obj``, a function rebuilding ``obj`` from new leaves).

    Follows ``functools.partial`` (function, arguments), Python closures (cells),
    bound methods (``self``) and pytrees; anything else is kept as it is.
    """
    keep = [], lambda _: obj
    if depth > _MAX_DEPTH:
        return keep
    if isinstance(obj, jax.Array):
        return [obj], lambda new: new[0]
    if isinstance(obj, functools.partial):
        leaves, rebuild = _open_all([obj.func, obj.args, obj.keywords], depth)
        return leaves, lambda new: _partial(*rebuild(new))
    if isinstance(obj, types.MethodType):
        leaves, rebuild = _open_all([obj.__func__, obj.__self__], depth)
        return leaves, lambda new: types.MethodType(*rebuild(new))
    if isinstance(obj, types.FunctionType):
        if not obj.__closure__:
            return keep
        contents = [_cell_contents(c) for c in obj.__closure__]
        leaves, rebuild = _open_all(contents, depth)
        return leaves, lambda new: _with_cells(obj, rebuild(new))
    flat, treedef = jax.tree.flatten(obj)
    if len(flat) == 1 and flat[0] is obj:  # an opaque leaf: a string, a class, a module...
        return keep
    leaves, rebuild = _open_all(flat, depth)
    return leaves, lambda new: jax.tree.unflatten(treedef, rebuild(new))


def _open_all(objs: list, depth: int) -> tuple[list, Callable[[list], list]]:
    opened = [_open(o, depth + 1) for o in objs]
    sizes = [len(leaves) for leaves, _ in opened]

    def rebuild(new: list) -> list:
        out, start = [], 0
        for (_, fn), size in zip(opened, sizes, strict=True):
            out.append(fn(new[start : start + size]))
            start += size
        return out

    return [leaf for leaves, _ in opened for leaf in leaves], rebuild


def _partial(func, args, keywords) -> functools.partial:
    return functools.partial(func, *args, **keywords)


_EMPTY = object()


def _cell_contents(cell) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell (a variable assigned later)
        return _EMPTY


def _with_cells(fn: types.FunctionType, contents: list) -> types.FunctionType:
    if all(new is _cell_contents(c) for new, c in zip(contents, fn.__closure__, strict=True)):
        return fn
    cells = tuple(
        old if new is _EMPTY else types.CellType(new)
        for new, old in zip(contents, fn.__closure__, strict=True)
    )
    out = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, cells)
    out.__kwdefaults__ = fn.__kwdefaults__
    return out


def _refuse_hidden_explicit(f: ScalarFn, x: Array, seen: list) -> None:
    """Raise if ``f`` uses an explicitly sharded array that ``_open`` did not find."""
    closed = jax.make_jaxpr(f)(x)
    ids = {id(leaf) for leaf in seen}
    for const in closed.consts:
        if id(const) in ids or not isinstance(const, jax.Array):
            continue
        sharding = getattr(jax.typeof(const), "sharding", None)
        mesh = getattr(sharding, "mesh", None)
        if mesh is None or mesh.empty:
            continue
        if any(kind == AxisType.Explicit for kind in mesh.axis_types):
            raise UnsupportedError(
                "a Laplacian operator is called on an Explicit mesh axis with a function "
                f"that reaches a {jax.typeof(const).str_short()} array on that mesh through "
                "something psijax cannot open (a global, an object attribute); pass such "
                "arrays as arguments, e.g. op(functools.partial(fn, params)), or batch with "
                "psijax.parallel.batching.map_walkers, or call the operator inside jax.shard_map"
            )
