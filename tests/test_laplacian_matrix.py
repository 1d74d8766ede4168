"""The compatibility matrix: every Laplacian operator, in every batching and sharding
context psijax supports, for the value and the parameter gradient of the mean local
kinetic energy, agrees with the dense Hessian trace in float64.

Tolerance: rtol = atol = 1e-9. Every method is exact arithmetic up to rounding;
in float64 (eps 2.2e-16) the methods differ by < 1e-12 on these networks (the
Hessian and the forward/loop methods sum the same terms in different orders
through ~10 layers of tanh and an LU). 1e-9 keeps three orders of margin while
any real mistake (a missing term, a wrong walker, a gradient summed over devices
twice) is off by 1e-3 or more.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from psijax import laplacian
from psijax.ansatz import FermiNet
from psijax.batching import map_walkers

TOL = 1e-9
N_WALKERS = 16
CHUNK = 3  # does not divide the 4 walkers per device: exercises lax.map's remainder
NUCLEI = ((0.0, 0.0, 0.0), (0.0, 0.0, 1.4))
NETWORKS = {
    # A sum of two full determinants (signed logsumexp over slogdets).
    "multidet": FermiNet(2, 1, NUCLEI, layers=((4, 2),), n_determinants=2),
    # A single product of up and down determinants (plain slogdet).
    "det": FermiNet(2, 1, NUCLEI, layers=((6, 3), (6, 3)), n_determinants=1, full_det=False),
}
OPERATORS = {
    "hessian": laplacian.Hessian(),
    "loop": laplacian.Loop(),
    "forward": laplacian.Forward(),
    "forward-sparse": laplacian.ForwardSparse(threshold=0.6),
}
CONTEXTS = ["none", "auto", "shard_map", "explicit"]
BATCHING = ["single", "vmap", "chunked"]


@pytest.fixture(autouse=True, scope="module")
def _x64():
    with jax.enable_x64(True):
        yield


def kinetic(net, op, params, walkers, batching):
    """Local kinetic energy -1/2 (lap + |grad|^2) of log|psi| for each walker."""

    def one(p, x):
        _, g, lap = op(functools.partial(net.log_abs, p))(x)
        return -0.5 * (lap + jnp.sum(g**2))

    if batching == "single":
        return jnp.stack([one(params, walkers[i]) for i in range(walkers.shape[0])])
    chunk_size = CHUNK if batching == "chunked" else None
    return map_walkers(one, params, walkers, chunk_size=chunk_size)


def mean_kinetic(net, op, params, walkers, batching, axis=None):
    """(mean kinetic energy, per-walker kinetic energies); the mean spans all devices."""
    k = kinetic(net, op, params, walkers, batching)
    mean = jnp.mean(k)
    return (mean if axis is None else jax.lax.pmean(mean, axis)), k


def run(net, op, params, walkers, batching, context, mode):
    """Per-walker kinetic energies, and for mode 'grad' also d mean / d params.

    Mode 'value' compiles the forward evaluation alone (the path of evaluation
    runs); mode 'grad' compiles value and gradient in one program (training).
    """
    if mode == "value":
        fn = functools.partial(kinetic, net, op, batching=batching)
    else:
        fn = _value_and_grad(net, op, batching, axis=None)
    if context == "none":
        return jax.jit(fn)(params, walkers)
    axis_type = AxisType.Explicit if context == "explicit" else AxisType.Auto
    mesh = jax.make_mesh((4,), ("walkers",), axis_types=(axis_type,))
    # One walker at a time on an Explicit mesh: JAX cannot slice one walker out of a
    # sharded batch (ShardingTypeError), so single walkers live replicated there.
    spec = P() if (batching == "single" and context == "explicit") else P("walkers")
    walkers = jax.device_put(walkers, NamedSharding(mesh, spec))
    params = jax.device_put(params, NamedSharding(mesh, P()))
    if context == "shard_map":
        if mode == "grad":
            fn = _value_and_grad(net, op, batching, axis="walkers")
        out_specs = P("walkers") if mode == "value" else (P("walkers"), P())
        fn = jax.shard_map(fn, mesh=mesh, in_specs=(P(), P("walkers")), out_specs=out_specs)
    with jax.set_mesh(mesh):
        return jax.jit(fn)(params, walkers)


def _value_and_grad(net, op, batching, axis):
    loss = functools.partial(mean_kinetic, net, op, batching=batching, axis=axis)

    def fn(params, walkers):
        (_, values), grad = jax.value_and_grad(loss, has_aux=True)(params, walkers)
        return values, grad

    return fn


@functools.cache
def problem(net_name, n_walkers=N_WALKERS):
    net = NETWORKS[net_name]
    with jax.enable_x64(True):
        params = net.init(jax.random.PRNGKey(0), jnp.float64)
        walkers = jax.random.normal(jax.random.PRNGKey(1), (N_WALKERS, net.n_electrons, 3))
        walkers = (walkers.astype(jnp.float64) * 1.5)[:n_walkers]
        ref = jax.device_get(run(net, laplacian.Hessian(), params, walkers, "vmap", "none", "grad"))
    return net, params, walkers, ref


def assert_matches(out, ref):
    for a, b in zip(jax.tree.leaves(out), jax.tree.leaves(ref), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=TOL, atol=TOL)


def cells():
    for op in OPERATORS:
        for context in CONTEXTS:
            yield "multidet", op, "vmap", context, "value"
            for batching in BATCHING:
                yield "multidet", op, batching, context, "grad"
            yield "det", op, "vmap", context, "grad"


@pytest.mark.parametrize("net_name,op_name,batching,context,mode", list(cells()))
def test_matrix_cell(net_name, op_name, batching, context, mode):
    # Unrolled one-walker calls make a long trace: 4 walkers, one per device.
    n_walkers = 4 if batching == "single" else N_WALKERS
    net, params, walkers, ref = problem(net_name, n_walkers)
    out = run(net, OPERATORS[op_name], params, walkers, batching, context, mode)
    assert_matches(out, ref[0] if mode == "value" else ref)


def test_operator_results_have_documented_shapes():
    net, params, walkers, _ = problem("multidet")
    for op in OPERATORS.values():
        value, grad, lap = jax.jit(op(functools.partial(net.log_abs, params)))(walkers[0])
        assert value.shape == () and lap.shape == () and grad.shape == walkers[0].shape


def test_sparse_forward_inside_shard_map_returns_instead_of_exiting():
    """folx alone calls exit() here (compatibility.md #1); psijax must return."""
    net, params, walkers, ref = problem("det")
    out = run(
        net, laplacian.ForwardSparse(threshold=2), params, walkers, "vmap", "shard_map", "grad"
    )
    assert_matches(out, ref)


def test_forward_sparse_rejects_nonpositive_threshold():
    with pytest.raises(ValueError, match="Forward"):
        laplacian.ForwardSparse(threshold=0)
