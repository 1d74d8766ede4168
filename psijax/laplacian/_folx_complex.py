"""What folx needs for complex values: ``slogdet``'s sign and ``custom_jvp`` functions.

**slogdet.**
folx's forward-Laplacian rules for ``slogdet`` and ``det`` (``folx.slogdet``) compute the
value of the determinant with a ``jax.custom_jvp`` function of their own,
``folx.slogdet.slogdet``, and carry the walker derivatives alongside. The parameter
gradient through the Laplacian differentiates that value too: the derivatives of the
sign and of ``log|det A|`` with respect to the parameters. For a complex ``A`` folx's
rule gives, as the tangent of the sign, the tangent of ``log det A`` itself ("not the
real jvp but a cached value", from a time when folx took it apart later) where it is
``i sign Im(d log det A)``. Nothing reads the sign's tangent in the forward Laplacian
itself, so values come out right, and so do gradients in which the sign cancels (``log``
of it); through ``sign * exp(log|det|)`` (a sum of determinants, ``det``) every parameter
that reaches the matrix gets a wrong gradient, silently. For a real ``A`` the sign is
piecewise constant and folx's tangent for it is zero, which is right.

``active()`` (around psijax's own forward Laplacians: ``psijax.laplacian._folx``) gives
folx's ``slogdet`` module a ``slogdet`` whose tangents are right for complex matrices and
which is folx's own function for real ones (the same program). Outside it folx is as
shipped (docs/compatibility.md).

**custom_jvp functions of complex values** go to folx as functions of their real and
imaginary parts (``on_real_parts``), which ``psijax.laplacian._folx`` does for every such
equation that depends on the walker.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from psijax.laplacian._scoped import ScopedSwap
from psijax.types import Array


@jax.custom_jvp
def complex_slogdet(a: Array) -> tuple[Array, Array]:
    """(sign, log|det a|) of complex matrices ``a`` ``[..., n, n]``."""
    sign, log_abs = jnp.linalg.slogdet(a)
    return sign, log_abs


@complex_slogdet.defjvp
def _complex_slogdet_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    sign, log_abs = complex_slogdet(a)
    # d log det a = tr(a^-1 da): its real part moves log|det a|, its imaginary part the
    # phase of the sign, sign = exp(i phase)
    d_log_det = jnp.einsum("...ij,...ji->...", jnp.linalg.inv(a), da)
    return (sign, log_abs), (1j * sign * jnp.imag(d_log_det), jnp.real(d_log_det))


def _slogdet_for(folx_slogdet):
    def slogdet(a: Array) -> tuple[Array, Array]:
        if jnp.iscomplexobj(a):
            return complex_slogdet(a)
        return folx_slogdet(a)

    return slogdet


def _swap_in() -> Callable[[], None]:
    """folx's ``slogdet`` module with psijax's ``slogdet`` inside; what undoes it."""
    try:
        from folx import slogdet as module
    except ImportError:  # pragma: no cover - folx is a dependency
        return lambda: None
    shipped = getattr(module, "slogdet", None)
    if not isinstance(shipped, jax.custom_jvp):  # not folx's own: whatever is there stays
        return lambda: None
    module.slogdet = _slogdet_for(shipped)

    def undo() -> None:
        module.slogdet = shipped

    return undo


# folx's ``slogdet`` module with psijax's ``slogdet`` inside while a scope is open
# (``with active():``); as it was once the last open scope, of any thread, closes.
active = ScopedSwap(_swap_in)


def walker_complex(invals: list, flags: list[bool]) -> list[bool]:
    """Which inputs of an equation are complex and depend on the walker (``flags``)."""
    return [flag and jnp.iscomplexobj(v) for v, flag in zip(invals, flags, strict=True)]


def on_real_parts(bind: Callable[[list], list], invals: list, split: list[bool]) -> list:
    """A walker-dependent ``custom_jvp`` function of complex values (``bind`` applies it),
    as a function of the real and imaginary parts of the inputs ``split`` marks, with the
    same derivatives.

    folx takes the forward Laplacian of a function it has no rule for from the function's
    first and second derivatives with respect to its inputs, complex ones as if the
    function were holomorphic in them: right for a product or ``exp``, wrong for
    ``z / |z|`` or the sign of a complex ``slogdet`` (JAX's own ``slogdet`` is such a
    function wherever it is not a named ``jit``, e.g. under ``jax.disable_jit``). As a
    function of real and imaginary parts it has real inputs, which folx takes right; its
    derivatives are still the function's own (``jax.jvp`` of it, with its custom rule).
    """

    def call(*parts):
        it = iter(parts)
        return bind([jax.lax.complex(next(it), next(it)) if s else next(it) for s in split])

    on_parts = jax.custom_jvp(call)
    on_parts.defjvp(lambda primals, tangents: jax.jvp(call, primals, tangents))
    parts = [(jnp.real(v), jnp.imag(v)) if s else (v,) for v, s in zip(invals, split, strict=True)]
    return list(on_parts(*(p for pair in parts for p in pair)))
