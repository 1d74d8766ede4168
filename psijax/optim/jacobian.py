"""The per-walker jacobian J = d log|psi(r_w)| / d params of a natural-gradient step.

SPRING (psijax/optim/spring.py) uses J only through three products, with C = I - 1 1^T / W
the walker mean's removal: C J v (a vector per walker), x^T C J (a vector of parameters)
and the Gram matrix C J J^T C (walkers x walkers). The centered forms are computed from
centered columns of J, not by centering a product, so that a large mean derivative is not
lost to float32 round-off (tests/test_spring.py puts a mean of 3 on unit noise).

``Leaves`` holds J as the backward pass gives it, one block ``[walkers, P_l]`` per parameter
leaf (in ``ravel_pytree`` order), the fastest form when it fits: the products are sums over
the leaves, and the whole ``[walkers, P]`` array is never assembled (docs/benchmarks.md,
"SPRING's jacobian without the copy"). A weight ``w: [din, dout]`` that the network
applies to each of K rows of a walker (an electron-wise dense layer, tapped through
``psijax.ansatz.taps``) may come instead as a ``Factored`` block, the layer's inputs and
backward signals, from which the products follow without its rows: ``leaves`` chooses it
where that halves the Gram matrix's work (few electrons; docs/benchmarks.md, "SPRING's
jacobian in factors"). ``Dense`` holds J whole, ``[walkers, P]`` (flattened
like ``ravel_pytree(params)``), the form of a column block on a walker-sharded mesh.
``Blocked`` never forms it: C J v is one forward-mode pass over
the walkers, x^T C J one backward pass, and the Gram matrix the sum over ``n_blocks``
equal ranges of the flattened parameters of (C J_b)(C J_b)^T, each J_b (``[walkers, P_b]``)
formed and dropped in turn (a loop). Its peak memory is about one block, ``walkers x P /
n_blocks``, plus ``chunk x P`` for the gradients of one chunk of walkers (``chunk_size``),
for n_blocks + 3 passes over the walkers instead of one (the blocks, a forward-mode pass,
and two backward passes: SPRING's and the step's gradient): the mode for a jacobian that does
not fit a device (``--jacobian-blocks``; docs/benchmarks.md, "SPRING's memory across
devices").
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from psijax.ansatz import taps as taps_lib
from psijax.parallel.batching import map_walkers
from psijax.types import Array, LogAbs, Params


class Dense(NamedTuple):
    """J as an array ``[walkers, P]``."""

    rows: Array

    @property
    def dtype(self):
        return self.rows.dtype

    def centered_matvec(self, v: Array) -> Array:
        return _center(self.rows) @ v

    def centered_rmatvec(self, x: Array) -> Array:
        return x @ _center(self.rows)  # row-major: ~10-50x faster on XLA CPU than rows.T @ x

    def centered_gram(self, dtype) -> Array:
        rows = _center(self.rows).astype(dtype)  # XLA fuses the centering into the product
        return rows @ rows.T


class Factored(NamedTuple):
    """The jacobian block of a dense layer's weight ``w: [din, dout]`` applied to K rows of
    every walker, in factors: walker w's row is ``sum_k inputs[w, k] (x) signals[w, k]``
    (``psijax.ansatz.taps``), flattened like ``w``. Its Gram matrix is ``sum_{k, l}
    (x_wk . x_vl)(g_wk . g_vl)``: (W K)^2 (din + dout) multiply-adds against W^2 din dout
    for the rows formed, and the rows (``W din dout``) are never written."""

    inputs: Array  # [walkers, K, din]
    signals: Array  # [walkers, K, dout]

    @property
    def shape(self) -> tuple[int, int]:
        return self.inputs.shape[0], self.inputs.shape[2] * self.signals.shape[2]

    def dense(self) -> Array:
        return jnp.einsum("wki,wko->wio", self.inputs, self.signals).reshape(self.shape)

    def matvec(self, v: Array) -> Array:
        """J v for ``v`` flattened like ``w``."""
        v = v.reshape(self.inputs.shape[2], self.signals.shape[2])
        return jnp.einsum("wko,wko->w", self.inputs @ v, self.signals)

    def rmatvec(self, x: Array) -> Array:
        """x^T J, flattened like ``w``."""
        weighted = self.inputs * x[:, None, None]
        return jnp.einsum("wki,wko->io", weighted, self.signals).reshape(-1)

    def centered_gram(self, dtype) -> Array:
        """(C J)(C J)^T, with the inputs and signals shifted by their means (x = m + dx,
        g = n + dg) before any product, so that a large mean derivative is not lost to
        float32 round-off: of the sixteen terms of (x_wk . x_vl)(g_wk . g_vl) the ones that
        depend on one walker only are removed by C (...) C exactly and are never formed;
        the others are the product of the shifted factors' Gram matrices (the (W K)^2 work)
        and eight of per-walker sums (W^2 (din + dout))."""
        w, k = self.inputs.shape[:2]
        x, g = self.inputs.astype(dtype), self.signals.astype(dtype)
        m, n = jnp.mean(x, axis=(0, 1)), jnp.mean(g, axis=(0, 1))
        dx, dg = x - m, g - n
        u, v = dx @ m, dg @ n  # [W, K]: m . dx_wk and n . dg_wk
        sx, sg = dx.sum(axis=1), dg.sum(axis=1)  # [W, din], [W, dout]
        ug = jnp.einsum("wk,wko->wo", u, dg)
        vx = jnp.einsum("wk,wki->wi", v, dx)
        flat = lambda a: a.reshape(w * k, -1)
        gram = ((flat(dx) @ flat(dx).T) * (flat(dg) @ flat(dg).T)).reshape(w, k, w, k)
        gram = gram.sum(axis=(1, 3)) + (n @ n) * (sx @ sx.T) + (m @ m) * (sg @ sg.T)
        cross = jnp.outer(u.sum(axis=1), v.sum(axis=1)) + ug @ sg.T + vx @ sx.T
        return _center(_center(gram + cross + cross.T).T)


class Leaves(NamedTuple):
    """J as one block per parameter leaf, in ``ravel_pytree`` order: ``[walkers, P_l]``, or
    a ``Factored`` block for a tapped dense layer's weight."""

    blocks: tuple[Array | Factored, ...]

    @classmethod
    def of(cls, grads, keep: Array) -> Leaves:
        """From per-walker gradients (a pytree of ``[walkers, ...]`` leaves, or ``Factored``
        blocks); rows of walkers where ``keep`` is 0 set to 0 (a non-finite row must not
        reach a sum)."""

        def rows(g):
            if isinstance(g, Factored):
                drop = lambda a: jnp.where(keep[:, None, None] > 0, a, 0.0)
                return Factored(drop(g.inputs), drop(g.signals))
            return jnp.where(keep[:, None] > 0, g.reshape(g.shape[0], -1), 0.0)

        leaves = jax.tree.leaves(grads, is_leaf=lambda g: isinstance(g, Factored))
        return cls(tuple(rows(g) for g in leaves))

    @property
    def dtype(self):
        first = self.blocks[0]
        return (first.inputs if isinstance(first, Factored) else first).dtype

    def dense(self) -> Array:
        """J whole, ``[walkers, P]`` (a copy)."""
        return jnp.concatenate([_rows(b) for b in self.blocks], axis=1)

    def _parts(self, v: Array) -> list[Array]:
        ends = np.cumsum([b.shape[1] for b in self.blocks])
        return [v[end - b.shape[1] : end] for b, end in zip(self.blocks, ends, strict=True)]

    def centered_matvec(self, v: Array) -> Array:
        parts = zip(self.blocks, self._parts(v), strict=True)
        return sum(_centered_matvec(b, part) for b, part in parts)

    def centered_rmatvec(self, x: Array) -> Array:
        return jnp.concatenate([_rmatvec(b, x, centered=True) for b in self.blocks])

    def rmatvec_like(self, params: Params, x: Array) -> Params:
        """x^T J as a pytree like ``params``."""
        leaves = jax.tree.leaves(params)
        parts = [_rmatvec(b, x).reshape(p.shape) for b, p in zip(self.blocks, leaves, strict=True)]
        return jax.tree.unflatten(jax.tree.structure(params), parts)

    def centered_gram(self, dtype) -> Array:
        return sum(_centered_gram(b, dtype) for b in self.blocks)


def interleaved(real: Leaves, imaginary: Leaves) -> Leaves:
    """A complex psi's J: per walker its row of d log|psi| / d params, then its row of
    d arg psi / d params (``[2 W, P_l]`` per leaf, a walker's two rows next to each other
    so that walker-sharded rows stay on their device), each half centered over the walkers
    first. SPRING's products then center nothing more (the halves' means are zero) and
    solve the real least-squares problem of Re and Im of the complex jacobian: its Gram
    matrix is Re(O O^dagger)'s, its solution complex SR's (``psijax.optim.gradient``)."""

    def pair(a: Array, b: Array) -> Array:
        w, p = a.shape
        return jnp.stack([_center(a), _center(b)], axis=1).reshape(2 * w, p)

    return Leaves(tuple(pair(_rows(a), _rows(b)) for a, b in zip(real.blocks, imaginary.blocks,
                                                                 strict=True)))  # fmt: skip


def _rows(block: Array | Factored) -> Array:
    return block.dense() if isinstance(block, Factored) else block


def _centered_matvec(block: Array | Factored, v: Array) -> Array:
    """C J_block v."""
    if isinstance(block, Factored):
        return _center(block.matvec(v))
    return _center(block) @ v


def _centered_gram(block: Array | Factored, dtype) -> Array:
    """(C J_block)(C J_block)^T."""
    if isinstance(block, Factored):
        return block.centered_gram(dtype)
    rows = _center(block).astype(dtype)
    return rows @ rows.T


def _rmatvec(block: Array | Factored, x: Array, centered: bool = False) -> Array:
    """x^T J_block (x^T C J_block with ``centered``)."""
    if isinstance(block, Factored):
        return block.rmatvec(_center(x) if centered else x)
    return x @ (_center(block) if centered else block)


def leaves(
    log_abs: LogAbs, params: Params, walkers: Array, keep: Array, chunk_size: int | None = None
) -> Leaves:
    """J of ``log_abs`` at ``params`` over ``walkers`` as ``Leaves`` (rows where ``keep`` is
    0 set to 0). When ``log_abs`` is the ``log_abs`` of a network with ``log_abs_tapped``
    (``psijax.ansatz.taps``), every tapped weight whose factors are cheaper (``_factored``)
    comes as a ``Factored`` block: the backward pass gives the layer's signals instead of
    the weight's gradient."""
    network = getattr(log_abs, "__self__", None)
    tapped = getattr(network, "log_abs_tapped", None)
    walker = jax.ShapeDtypeStruct(walkers.shape[1:], walkers.dtype)
    paths = _factored(tapped, params, walker) if tapped is not None else {}
    if not paths:
        rows = map_walkers(jax.grad(log_abs), params, walkers, chunk_size=chunk_size)
        return Leaves.of(rows, keep)
    flat, tree = jax.tree_util.tree_flatten_with_path(params)
    is_factored = [_path(keys) in paths for keys, _ in flat]
    free = [leaf for (_, leaf), f in zip(flat, is_factored, strict=True) if not f]
    fixed = [leaf for (_, leaf), f in zip(flat, is_factored, strict=True) if f]

    def one(inputs, r: Array):
        free, fixed = inputs
        zeros = {p: jnp.zeros(shape, r.dtype) for p, shape in paths.items()}

        def value(free, perturbations):
            free, fixed_ = iter(free), iter(fixed)
            merged = [next(fixed_) if f else next(free) for f in is_factored]
            record = taps_lib.Taps(perturbations)
            out = tapped(jax.tree.unflatten(tree, merged), r, record)
            return out, record.inputs

        grad = jax.grad(value, argnums=(0, 1), has_aux=True)
        (grads, signals), inputs = grad(free, zeros)
        return grads, signals, inputs

    grads, signals, inputs = map_walkers(one, (free, fixed), walkers, chunk_size=chunk_size)
    grads, blocks = iter(grads), []
    for (keys, _), f in zip(flat, is_factored, strict=True):
        if not f:
            blocks.append(next(grads))
            continue
        x, g = inputs[_path(keys)], signals[_path(keys)]
        n = x.shape[0]
        blocks.append(Factored(x.reshape(n, -1, x.shape[-1]), g.reshape(n, -1, g.shape[-1])))
    return Leaves.of(blocks, keep)


# Factors are used where they need at most half the Gram matrix's multiply-adds. With no
# margin (1) N2's orbital projections (7 rows of 64 features into 224 orbitals, 0.98 of the
# rows' work) went into factors and made the jacobian and SPRING's products 0.94x as fast;
# at LiH a margin of 1 or 2 gave the same 2.4-2.5x (the jacobian with SPRING's products,
# jitted, 15 interleaved calls).
_MARGIN = 2


def _factored(tapped, params: Params, walker: jax.ShapeDtypeStruct) -> dict:
    """The tapped weights whose Gram matrix is cheaper in factors, (W K)^2 (din + dout)
    against W^2 din dout multiply-adds (``Factored``), by ``_MARGIN`` at least, each with
    the shape of its layer's output for one walker (the perturbation's)."""
    record = taps_lib.Taps()
    jax.eval_shape(lambda p, r: tapped(p, r, record), params, walker)
    chosen = {}
    for path, x in record.inputs.items():
        din, dout = record.weights[path]
        k = int(np.prod(x.shape[:-1]))
        if _MARGIN * k * k * (din + dout) <= din * dout:
            chosen[path] = (*x.shape[:-1], dout)
    return chosen


def _path(keys) -> tuple:
    """A ``tree_flatten_with_path`` key path as the tuple ``psijax.ansatz.taps`` names."""
    return tuple(getattr(k, "key", getattr(k, "idx", k)) for k in keys)


@dataclasses.dataclass(frozen=True)
class Blocked:
    """J of ``log_abs`` at ``params`` over ``walkers``, as products only (module doc).

    Rows of walkers with ``weights`` 0 are 0 (dropped walkers); ``walkers`` must be finite
    (``blocked`` puts a healthy walker in place of a lost one), so that no non-finite value
    can enter a sum through a zero weight.
    """

    log_abs: LogAbs
    params: Params
    walkers: Array
    weights: Array
    n_blocks: int
    chunk_size: int | None = None

    @property
    def dtype(self):
        return self.weights.dtype

    def _values(self, params: Params) -> Array:
        values = map_walkers(self.log_abs, params, self.walkers, chunk_size=self.chunk_size)
        return values * self.weights

    def centered_matvec(self, v: Array) -> Array:
        tangent = ravel_pytree(self.params)[1](v.astype(_dtype(self.params)))
        return _center(jax.jvp(self._values, (self.params,), (tangent,))[1])

    def rmatvec(self, x: Array) -> Array:
        """x^T J: the gradient of sum_w x_w log|psi(r_w)|, one chunk of walkers at a time
        (a scan), so that the backward pass keeps one chunk's activations, not all."""
        x = x.astype(self.weights.dtype) * self.weights
        n = x.shape[0]
        chunk = self.chunk_size if self.chunk_size and n % self.chunk_size == 0 else n
        flat, _ = ravel_pytree(self.params)

        def weighted_sum(params: Params, r: Array, w: Array) -> Array:
            return jnp.sum(w * jax.vmap(self.log_abs, in_axes=(None, 0))(params, r))

        def body(total: Array, part: tuple[Array, Array]) -> tuple[Array, None]:
            r, w = part
            return total + ravel_pytree(jax.grad(weighted_sum)(self.params, r, w))[0], None

        # chunk c holds walkers c, c + n_chunks, ...: strided like map_walkers' chunks, so
        # that every chunk is spread over the devices of a walker-sharded mesh
        strided = lambda a: jnp.swapaxes(a.reshape(chunk, n // chunk, *a.shape[1:]), 0, 1)
        parts = (strided(self.walkers), strided(x))
        return jax.lax.scan(body, jnp.zeros_like(flat), parts)[0]

    def centered_rmatvec(self, x: Array) -> Array:
        return self.rmatvec(_center(x))  # x^T C J = (C x)^T J

    def centered_gram(self, dtype) -> Array:
        """Sum over blocks of (C J_b)(C J_b)^T, in a loop: one block is alive at a time
        (unrolled, XLA kept every block's buffer alive, optimization barriers or not)."""
        n_params = ravel_pytree(self.params)[0].size
        size = -(-n_params // self.n_blocks)  # the last block is padded with zero columns
        n = self.weights.shape[0]

        def block(b: Array, total: Array) -> Array:
            rows = functools.partial(_gradient_block, self.log_abs, size, self.n_blocks)
            part = map_walkers(rows, (self.params, b), self.walkers, chunk_size=self.chunk_size)
            part = _center(part * self.weights[:, None]).astype(dtype)
            return total + part @ part.T

        return jax.lax.fori_loop(0, self.n_blocks, block, jnp.zeros((n, n), dtype))


def _gradient_block(log_abs: LogAbs, size: int, n_blocks: int, inputs, r: Array) -> Array:
    """Block ``b`` (``size`` entries) of d log|psi(r)| / d params, flattened like
    ``ravel_pytree`` and padded with zeros to ``n_blocks * size``.

    The whole gradient of one walker is formed and sliced (a backward pass per block is
    the price of the blocks); only ``[walkers, size]`` is kept.
    """
    params, b = inputs
    flat = ravel_pytree(jax.grad(log_abs)(params, r))[0]
    flat = jnp.pad(flat, (0, n_blocks * size - flat.size))
    return jax.lax.dynamic_slice(flat, (b * size,), (size,))


def blocked(
    log_abs: LogAbs,
    params: Params,
    walkers: Array,
    keep: Array,
    n_blocks: int,
    chunk_size: int | None = None,
) -> Blocked:
    """``Blocked`` J with rows of walkers where ``keep`` is 0 (or False) set to 0."""
    keep = keep.astype(bool) & jnp.all(jnp.isfinite(walkers), axis=tuple(range(1, walkers.ndim)))
    healthy = walkers[jnp.argmax(keep)]
    walkers = jnp.where(keep.reshape((-1,) + (1,) * (walkers.ndim - 1)), walkers, healthy)
    weights = keep.astype(_dtype(params))
    n_blocks = max(1, min(n_blocks, ravel_pytree(params)[0].size))
    return Blocked(log_abs, params, walkers, weights, n_blocks, chunk_size)


def _center(a: Array) -> Array:
    """``a`` minus its mean over walkers (axis 0), the mean as a row-major product."""
    n = a.shape[0]
    return a - jnp.full((n,), 1.0 / n, a.dtype) @ a if a.ndim == 2 else a - jnp.mean(a)


def _dtype(params: Params):
    return jax.tree.leaves(params)[0].dtype
