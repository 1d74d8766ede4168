"""Laplacian operators on functions with several outputs (several states of one network):
every output's value, gradient and Laplacian, and the parameter gradient through them,
against each output's dense Hessian in float64, batched by vmap and under shard_map."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from psijax import laplacian
from psijax.parallel.batching import map_walkers

OPERATORS = [laplacian.Hessian(), laplacian.Loop(), laplacian.Forward(),
             laplacian.ForwardSparse(3)]  # fmt: skip


@pytest.fixture(autouse=True, scope="module")
def _x64():
    with jax.enable_x64(True):
        yield


def network(params, x):
    """Three outputs sharing a trunk, each through its own determinant: [3]."""
    h = jnp.tanh(x @ params["w"])  # [n, 8], shared
    envelope = jnp.exp(-jnp.sum(x**2, -1))[None, :, None]
    orbitals = jnp.einsum("nf,sfm->snm", h, params["heads"]) * envelope
    return jnp.linalg.slogdet(orbitals)[1] + jnp.sum(h**2)  # [3]


def _params(seed):
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    return {"w": jax.random.normal(k1, (3, 8)), "heads": 0.5 * jax.random.normal(k2, (3, 8, 4))}


def _reference(params, x):
    """Each output by its own dense Hessian."""
    one = lambda i: laplacian.Hessian()(lambda y: network(params, y)[i])(x)
    parts = [one(i) for i in range(3)]
    return tuple(jnp.stack(p) for p in zip(*parts, strict=True))


def _scale(a):
    return max(1.0, float(jnp.max(jnp.abs(a))))


@pytest.mark.parametrize("op", OPERATORS, ids=lambda op: type(op).__name__)
def test_each_output_gets_its_value_gradient_and_laplacian(op):
    params = _params(0)
    xs = jax.random.normal(jax.random.PRNGKey(1), (5, 4, 3))
    got = jax.jit(jax.vmap(lambda x: op(functools.partial(network, params))(x)))(xs)
    want = jax.jit(jax.vmap(functools.partial(_reference, params)))(xs)
    assert [g.shape for g in got] == [(5, 3), (5, 3, 4, 3), (5, 3)]
    for g, w in zip(got, want, strict=True):
        assert float(jnp.max(jnp.abs(g - w))) <= 1e-10 * _scale(w)


@pytest.mark.parametrize("op", OPERATORS, ids=lambda op: type(op).__name__)
def test_the_parameter_gradient_through_every_output(op):
    xs = jax.random.normal(jax.random.PRNGKey(2), (4, 4, 3))
    weights = jnp.array([1.0, -0.5, 2.0])

    def loss(params, derivatives):
        values = map_walkers(lambda p, x: derivatives(p, x), params, xs)
        _, grad, lap = values
        return jnp.mean((lap + jnp.sum(grad**2, axis=(-2, -1))) @ weights)

    got = jax.jit(jax.grad(loss), static_argnums=1)(
        _params(3), lambda p, x: op(functools.partial(network, p))(x)
    )
    want = jax.jit(jax.grad(loss), static_argnums=1)(_params(3), _reference)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert float(jnp.max(jnp.abs(g - w))) <= 1e-9 * _scale(w)


@pytest.mark.parametrize("op", OPERATORS[1:], ids=lambda op: type(op).__name__)
def test_several_outputs_under_shard_map(op):
    mesh = jax.make_mesh((4,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
    params = _params(4)
    xs = jax.random.normal(jax.random.PRNGKey(5), (4, 4, 3))

    @jax.jit
    def laps(params, xs):
        inner = lambda x: op(functools.partial(network, params))(x)[2]
        spec = jax.sharding.PartitionSpec("data")
        return jax.shard_map(jax.vmap(inner), mesh=mesh, in_specs=spec, out_specs=spec)(xs)

    with jax.set_mesh(mesh):
        got = laps(params, xs)
    want = jax.vmap(functools.partial(_reference, params))(xs)[2]
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-10, atol=1e-10)
