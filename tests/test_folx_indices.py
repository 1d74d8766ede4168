"""folx's sparse index sets and index masks in numpy (psijax.laplacian._folx_indices): the
same sets as jnp.unique's (empty rows included), the same masks as jax.numpy's, reached by
folx's sparse sums, and the same Laplacian to the bit."""

import contextlib
import functools
import threading

import folx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from folx import jvp as folx_jvp
from folx import utils as folx_utils

from psijax.laplacian import ForwardSparse, _folx_indices


@pytest.mark.parametrize("shape", [(5,), (3, 7), (2, 4, 9), (6, 1), (4, 0)])
@pytest.mark.parametrize("size", [1, 3, 12])
@pytest.mark.parametrize("fill_value", [None, -1])
def test_unique_rows_is_jnp_unique_per_row(shape, size, fill_value):
    a = np.random.default_rng(sum(shape) + size).integers(0, 6, size=shape)
    if a.size == 0 and fill_value is None:  # jnp.unique refuses it; so does the numpy one
        with pytest.raises(ValueError, match="fill_value"):
            _folx_indices.unique_rows(a, size, fill_value)
        return
    expected = jnp.vectorize(
        functools.partial(jnp.unique, size=size, fill_value=fill_value), signature="(n)->(m)"
    )(a)
    got = _folx_indices.unique_rows(a, size, fill_value)
    assert got.dtype == np.asarray(expected).dtype
    np.testing.assert_array_equal(got, np.asarray(expected))


def _f(x):
    """A function of 6 electrons whose forward Laplacian sums sparse jacobians over
    electrons: one-electron features, pair terms and a determinant."""
    w = jnp.linspace(-1.0, 1.0, 12).reshape(3, 4)
    h = jnp.tanh(x @ w)  # [n, 4]
    pairs = jnp.sum(jnp.tanh(jnp.sum((x[:, None] - x[None]) ** 2, -1) + 0.1), axis=1)
    orbitals = jnp.exp(-jnp.sum(x**2, -1))[:, None] * jnp.cos(jnp.arange(6.0) * h[:, :1])
    return jnp.sum(h) + jnp.sum(pairs) + jnp.linalg.slogdet(orbitals + jnp.eye(6))[1]


def test_same_laplacian_to_the_bit_with_numpy_sets(monkeypatch):
    calls, masks = [], []
    rows, canonical = _folx_indices.unique_rows, _folx_indices._canonical
    monkeypatch.setattr(_folx_indices, "unique_rows", lambda *a: calls.append(1) or rows(*a))
    monkeypatch.setattr(_folx_indices, "_canonical", lambda a: masks.append(1) or canonical(a))
    x = jax.random.normal(jax.random.PRNGKey(3), (6, 3))
    op = ForwardSparse(6)
    with_numpy = jax.jit(lambda y: op(_f)(y))(x)  # a new function: traced anew
    assert calls, "folx's sparse sums no longer reach the numpy sets"
    assert masks, "folx's index masks no longer reach numpy"
    n_calls = len(calls)
    monkeypatch.setattr(_folx_indices, "active", contextlib.nullcontext)  # folx as shipped
    with_jax = jax.jit(lambda y: op(_f)(y))(x)
    assert len(calls) == n_calls
    for a, b in zip(with_numpy, with_jax, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # folx called directly, by a user beside psijax: jax.numpy's own sets
    jax.jit(folx.forward_laplacian(lambda y: _f(y.reshape(6, 3)), sparsity_threshold=6))(
        x.reshape(-1)
    )
    assert len(calls) == n_calls, "folx used psijax's numpy sets outside psijax's Laplacian"


def test_folx_is_as_shipped_outside_psijaxs_laplacian():
    """The shims live only while psijax's forward Laplacian traces, in every thread: nested
    scopes and scopes on several threads leave folx's modules with jax.numpy itself."""
    assert folx_jvp.jnp is jnp and folx_utils.jnp is jnp
    with _folx_indices.active():
        assert isinstance(folx_jvp.jnp, _folx_indices._JaxNumpy)
        assert isinstance(folx_utils.jnp, _folx_indices._UtilsNumpy)
        with _folx_indices.active():
            pass
        assert isinstance(folx_jvp.jnp, _folx_indices._JaxNumpy)  # the outer scope still holds
    assert folx_jvp.jnp is jnp and folx_utils.jnp is jnp
    inside, started = threading.Barrier(3), threading.Event()

    def trace():
        with _folx_indices.active():
            inside.wait(timeout=30)
            started.wait(timeout=30)

    threads = [threading.Thread(target=trace) for _ in range(2)]
    for t in threads:
        t.start()
    inside.wait(timeout=30)  # both threads inside their scopes
    assert isinstance(folx_jvp.jnp, _folx_indices._JaxNumpy)
    started.set()
    for t in threads:
        t.join(timeout=30)
    assert folx_jvp.jnp is jnp and folx_utils.jnp is jnp
    jax.jit(lambda y: ForwardSparse(6)(_f)(y))(jnp.ones((6, 3)))  # and after psijax's own Laplacian
    assert folx_jvp.jnp is jnp and folx_utils.jnp is jnp


@pytest.mark.parametrize("shapes", [[(3, 4), (3, 2)], [(2, 1, 5), (2, 3, 5)], [(4,), (0,)]])
def test_numpy_masks_are_jax_numpys(shapes):
    shim = _folx_indices._UtilsNumpy()
    rng = np.random.default_rng(len(shapes[0]))
    arrays = [rng.integers(-1, 9, size=s) for s in shapes]  # int64: canonicalized as jax does
    axis = 1 if len(shapes[0]) > 1 else 0
    pairs = [
        (shim.concatenate(arrays, axis=axis), jnp.concatenate(arrays, axis=axis)),
        (shim.squeeze(arrays[0][:, None], (1,)), jnp.squeeze(arrays[0][:, None], (1,))),
        (shim.array(arrays[1]), jnp.array(arrays[1])),
    ]
    for got, expected in pairs:
        assert isinstance(got, np.ndarray)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_array_equal(got, np.asarray(expected))
    traced = jax.jit(lambda x: shim.concatenate([x, x]))(jnp.ones(3))  # traced: jax.numpy
    np.testing.assert_array_equal(traced, np.ones(6))
