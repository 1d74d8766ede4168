"""folx's sparse sums, their index sets found with numpy instead of one XLA program each.

When folx's forward Laplacian sums over an axis of a value whose jacobian is sparse, it
finds which inputs each output depends on with ``jnp.vectorize(jnp.unique)`` on concrete
index arrays, under ``jax.ensure_compile_time_eval``: every call compiles and runs a small
XLA program for its shapes. Tracing the training step of N2 or butadiene (the
``ForwardSparse`` operator) compiled 170 of them that way (260 small programs in all,
5.4-5.9 s of a 13 s trace on a 2-core CPU, before XLA sees the step). folx's own Hessian
code already finds such sets with numpy.

The same holds for folx's bookkeeping of its index masks in ``folx.utils`` (padding masks
to one length, squeezing their unit axes, reading their rank): tracing N2's step compiled
64 programs for ``jnp.concatenate``, ``jnp.squeeze`` and ``jnp.array`` on numpy masks.

``active()`` (around psijax's own forward Laplacians: ``psijax.laplacian._folx``) gives
folx's ``jvp`` module a ``jnp`` whose ``unique`` and ``vectorize`` compute the same sets
with numpy when handed numpy arrays, and its ``utils`` module one whose ``concatenate``,
``squeeze`` and ``array`` do the same data movement with numpy; everything else, and every
traced value, goes to ``jax.numpy`` itself. The sets and masks are the same integers, so
the Laplacian is the same to the bit. Outside it folx's modules are as folx ships them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from psijax.laplacian._scoped import ScopedSwap


def unique_rows(a: np.ndarray, size: int, fill_value=None) -> np.ndarray:
    """``jnp.vectorize(partial(jnp.unique, size=size, fill_value=fill_value),
    signature='(n)->(m)')(a)`` in numpy: each row's sorted distinct values, the first
    ``size`` of them, padded with ``fill_value`` (None: the row's smallest value)."""
    a = np.asarray(a)  # in jax.numpy's dtype for it (int32 unless x64 is on)
    a = np.sort(a.astype(jax.dtypes.canonicalize_dtype(a.dtype), copy=False), axis=-1)
    if a.shape[-1] == 0 and fill_value is None:  # as jnp.unique says it
        raise ValueError("unique of an empty row with a size needs a fill_value")
    new = np.ones(a.shape, dtype=bool)
    new[..., 1:] = a[..., 1:] != a[..., :-1]
    position = np.cumsum(new, axis=-1) - 1
    fill = a[..., :1] if fill_value is None else np.asarray(fill_value, a.dtype)
    out = np.broadcast_to(fill, (*a.shape[:-1], size)).astype(a.dtype, copy=True)
    keep = new & (position < size)
    rows = np.nonzero(keep)[:-1]
    out[(*rows, position[keep])] = a[keep]
    return out


class _JaxNumpy:
    """``jax.numpy`` for folx's ``jvp`` module, with numpy's sets for numpy arrays."""

    def __getattr__(self, name: str):
        return getattr(jnp, name)

    @staticmethod
    def unique(a, *args, **kwargs):
        plain = not args and set(kwargs) <= {"size", "fill_value"}
        if plain and isinstance(a, np.ndarray) and a.ndim == 1 and kwargs.get("size"):
            return unique_rows(a, kwargs["size"], kwargs.get("fill_value"))
        return jnp.unique(a, *args, **kwargs)

    @staticmethod
    def vectorize(fn, *args, **kwargs):
        rows = (
            isinstance(fn, functools.partial)
            and fn.func is _JaxNumpy.unique
            and not fn.args
            and fn.keywords.get("size") is not None
            and set(fn.keywords) <= {"size", "fill_value"}
            and not args
            and kwargs == {"signature": "(n)->(m)"}
        )
        if not rows:
            return jnp.vectorize(fn, *args, **kwargs)
        on_jax = jnp.vectorize(functools.partial(jnp.unique, **fn.keywords), **kwargs)

        def apply(a):
            if isinstance(a, np.ndarray) and a.ndim >= 1:
                return unique_rows(a, fn.keywords["size"], fn.keywords.get("fill_value"))
            return on_jax(a)

        return apply


def _host(a) -> bool:
    return type(a) is np.ndarray


def _canonical(a: np.ndarray) -> np.ndarray:
    """``a`` in the dtype jax.numpy gives it (int32 for int64 unless x64 is on)."""
    return a.astype(jax.dtypes.canonicalize_dtype(a.dtype), copy=False)


class _UtilsNumpy:
    """``jax.numpy`` for folx's ``utils`` module, moving numpy masks with numpy."""

    def __getattr__(self, name: str):
        return getattr(jnp, name)

    @staticmethod
    def concatenate(arrays, axis=0, *args, **kwargs):
        arrays = list(arrays)
        if args or kwargs or not arrays or not all(map(_host, arrays)):
            return jnp.concatenate(arrays, axis, *args, **kwargs)
        if len({a.dtype for a in arrays}) > 1:  # jax.numpy's promotion rules, not numpy's
            return jnp.concatenate(arrays, axis)
        return _canonical(np.concatenate(arrays, axis))

    @staticmethod
    def squeeze(a, axis=None):
        if not _host(a):
            return jnp.squeeze(a, axis)
        return _canonical(np.squeeze(a, axis))

    @staticmethod
    def array(a, *args, **kwargs):
        if args or kwargs or not _host(a):
            return jnp.array(a, *args, **kwargs)
        return _canonical(a.copy())


def _swap_in() -> Callable[[], None]:
    """Give the folx modules that use ``jax.numpy`` itself the shims; what undoes it."""
    try:
        from folx import jvp, utils
    except ImportError:  # pragma: no cover - folx is a dependency
        return lambda: None
    changed = []
    for module, shim in ((jvp, _JaxNumpy), (utils, _UtilsNumpy)):
        if getattr(module, "jnp", None) is jnp:  # a jnp someone else put there stays
            module.jnp = shim()
            changed.append(module)

    def undo() -> None:
        for module in changed:
            module.jnp = jnp

    return undo


# folx's ``jvp`` and ``utils`` modules with the numpy-backed ``jnp`` inside while a scope is
# open (``with active():``); as they were once the last open scope, of any thread, closes.
# folx code that another thread runs meanwhile gets the same sets and masks, with numpy.
active = ScopedSwap(_swap_in)
