"""Varying-manual-axes (vma) helpers for code that runs inside ``shard_map``.

Inside ``shard_map`` every value records the mesh axes it varies over. Values
created in the body (zeros, an identity row, a loop carry) vary over none, and
loops, ``linearize`` and transposes reject a mix. ``like_varying`` fixes that.
Outside ``shard_map`` both functions are no-ops.
"""

from __future__ import annotations

import jax

from psijax.types import Array


def varying_axes(x: Array) -> frozenset[str]:
    """Mesh axes ``x`` varies over inside ``shard_map`` (empty elsewhere).

    JAX 0.8 records them in ``aval.vma``; JAX 0.10 keeps them in
    ``aval.manual_axis_type.varying`` and has no ``vma`` (compatibility.md #2).
    """
    aval = jax.typeof(x)
    manual = getattr(aval, "manual_axis_type", None)
    if manual is not None:
        return frozenset(manual.varying)
    return frozenset(getattr(aval, "vma", None) or ())


def like_varying(x: Array, like: Array) -> Array:
    """``x`` marked as varying over every mesh axis that ``like`` varies over."""
    missing = varying_axes(like) - varying_axes(x)
    if not missing:
        return x
    return jax.lax.pcast(x, tuple(sorted(missing)), to="varying")
