"""Walker-independent equations evaluated with numpy (psijax.laplacian._host_eval): the
values JAX computes, in its dtypes; float-to-integer casts, operations without a numpy rule
and PRNG keys left to JAX; and the forward Laplacian of a network with constant masks the
same to the bit either way."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from psijax.laplacian import Forward, ForwardSparse, _host_eval


def _grid_masks(x):
    n = x.shape[0]
    upper = jnp.triu(jnp.ones((n, n)), 1)  # a jit of iota, add, ge, broadcast, select_n
    rows, cols = jnp.arange(n)[:, None], jnp.arange(n)[None, :]
    same = (rows == cols).astype(jnp.float32) - 0.5 * (rows < cols)
    flags = jnp.logical_not(rows > cols) | (rows != 2)
    return upper, same, flags, (rows * 3 - cols).astype(jnp.float16), -rows


def test_host_evaluation_is_jax_evaluation():
    closed = jax.make_jaxpr(_grid_masks)(jnp.zeros((5, 3)))
    got = _host_eval._run(closed, [np.zeros((5, 3), np.float32)])
    assert got is not None, "an equation of the masks fell back to JAX"
    expected = jax.core.eval_jaxpr(closed.jaxpr, closed.consts, jnp.zeros((5, 3)))
    for g, e in zip(got, expected, strict=True):
        assert isinstance(g, np.ndarray) and g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_array_equal(g, np.asarray(e))


def test_float_to_integer_casts_unknown_operations_and_keys_are_left_to_jax():
    closed = jax.make_jaxpr(lambda x: x.astype(jnp.int32))(jnp.float32(3e9))
    (eqn,) = closed.jaxpr.eqns
    assert _host_eval.evaluate(eqn, [np.float32(3e9)]) is None  # XLA saturates, numpy not
    exp = jax.make_jaxpr(jnp.exp)(1.0).jaxpr.eqns[0]
    assert _host_eval.evaluate(exp, [np.float32(1.0)]) is None  # no rule: JAX's
    key = jax.random.key(0)
    (spread,) = jax.make_jaxpr(lambda k: jnp.broadcast_to(k, (3,)))(key).jaxpr.eqns
    assert _host_eval.evaluate(spread, [key]) is None  # an extended dtype


def _masked(x):
    """A function of 6 electrons whose pair sum runs over the upper triangle."""
    pairs = jnp.sum((x[:, None] - x[None]) ** 2, -1)
    upper = jnp.triu(jnp.ones_like(pairs), 1)
    index = jnp.arange(x.shape[0], dtype=jnp.float32)
    return jnp.sum(upper * jnp.tanh(pairs + 0.1)) + jnp.sum(jnp.exp(-x[:, 0] * index))


@pytest.mark.parametrize("op", [Forward(), ForwardSparse(6)], ids=["forward", "sparse"])
def test_same_laplacian_to_the_bit_with_host_evaluation(monkeypatch, op):
    calls = []
    evaluate = _host_eval.evaluate
    monkeypatch.setattr(_host_eval, "evaluate", lambda *a: calls.append(1) or evaluate(*a))
    x = jax.random.normal(jax.random.PRNGKey(5), (6, 3))
    on_host = op(_masked)(x)
    assert calls, "the Laplacian's constants no longer reach the host evaluation"
    monkeypatch.setattr(_host_eval, "evaluate", lambda *a: None)  # every equation by JAX
    by_jax = op(_masked)(x)
    for a, b in zip(on_host, by_jax, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
