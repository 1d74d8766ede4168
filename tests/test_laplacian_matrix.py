"""The compatibility matrix, on generated networks: every Laplacian operator, in every
batching and sharding context psijax supports, for the per-walker kinetic energy and
its parameter gradient, agrees with the dense Hessian trace in float64.

Networks are drawn from the grammar in tests/network_grammar.py (dense layers,
einsum, pooling over electrons, attention, layer norm, scan/fori_loop, abs/sqrt/
sign/where/max..., unequal spin blocks with 1x1 determinants and empty channels,
envelopes, signed multi-determinant sums, Jastrow factors). The cells are those of
tests/laplacian_cells.py: 4 operators x 4 batchings x 4 contexts x {value, grad}
(120 cells: the user's own lax.map is not run on Explicit meshes, where JAX refuses
it before any operator is called).

- ``test_matrix_group``: each (batching, context, mode) of ``CI_GROUPS`` on its own
  seeded network, all four operators (see ``CI_GROUPS`` for the selection; the
  gradient cells check the value too).
- ``test_generated_networks``: hypothesis draws a network and a cell (derandomized,
  a bounded number of examples); ``benchmarks/laplacian_matrix.py`` runs the full
  product on many networks.
- Regression tests for the two failures reported in the issue tracker, and the
  up-front refusal of an explicitly sharded array psijax cannot reroute.

Tolerance: ``laplacian_cells.RTOL`` (1e-8 of the output's largest entry), see there.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from psijax import laplacian
from psijax.errors import UnsupportedError

from laplacian_cells import (
    CI_GROUPS,
    GROUPS,
    N_DEVICES,
    OPERATORS,
    RTOL,
    error,
    reference,
    run,
)  # fmt: skip
from network_grammar import Network, Spec, draw_spec, seeded_spec, walkers

# The oldest and newest JAX (scripts/compat.sh) run every regression test here and, of the
# matrix, the gradient through psijax's and the user's batching in the two sharded
# contexts that break first across releases; every ``CI_GROUPS`` group runs on the suite's JAX.
COMPAT_GROUPS = {
    (batching, context, "grad")
    for batching in ("vmap", "map_walkers")
    for context in ("explicit", "shard_map")
}

N_WALKERS = 16


@pytest.fixture(autouse=True, scope="module")
def _x64():
    with jax.enable_x64(True):
        yield


@functools.cache
def problem(spec: Spec, seed: int):
    net = Network(spec)
    with jax.enable_x64(True):
        params = net.init(jax.random.PRNGKey(seed))
        w = walkers(net, params, N_WALKERS, seed)
        ref = reference(net.log_abs, params, w)
    return net, params, w, ref


def check_cell(spec: Spec, seed: int, op: str, batching: str, context: str, mode: str) -> None:
    net, params, w, ref = problem(spec, seed)
    out = run(net.log_abs, OPERATORS[op], batching, context, mode, params, w)
    err = error(out, ref, mode)
    assert err <= RTOL, f"{op} {batching} {context} {mode} on [{spec}]: error {err:.2e}"


# Networks in CI: at most 3 electrons and 2 feature layers (compile time grows with
# both); the benchmark draws up to 5 electrons and 3 layers.
BOUNDS = {"max_electrons": 3, "max_layers": 2}


@pytest.mark.parametrize(
    "batching,context,mode",
    [pytest.param(*g, marks=pytest.mark.compat) if g in COMPAT_GROUPS else g for g in CI_GROUPS],
)
def test_matrix_group(batching, context, mode):
    seed = GROUPS.index((batching, context, mode))
    spec = seeded_spec(seed, **BOUNDS)
    for op in OPERATORS:
        if op == "hessian" and (batching, context) == ("vmap", "none"):
            continue  # the reference itself: the same program, nothing to compare
        check_cell(spec, seed, op, batching, context, mode)


@st.composite
def networks(draw) -> Spec:
    return draw_spec(lambda _, options: draw(st.sampled_from(options)), **BOUNDS)


@settings(
    max_examples=2,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    spec=networks(),
    cell=st.sampled_from([(op, *group) for group in GROUPS for op in OPERATORS]),
)
def test_generated_networks(spec, cell):
    check_cell(spec, 1000, *cell)


# ------------------------------------------------------------------ reported failures
def slater_jastrow(params, r):
    """Two determinants (2 up, 1 down) with signed weights and a Jastrow factor.

    The signs of slogdet (walker-dependent, no derivative) are multiplied by the sign
    of a determinant weight (a parameter): inside shard_map folx's interpreter used
    to bind that product on a varying and a non-varying operand and JAX refused it.
    """
    phi = (
        jnp.tanh(r @ params["w"])
        * jnp.exp(-jnp.abs(params["a"]) * jnp.linalg.norm(r, axis=-1))[:, None]
    )
    phi = phi.reshape(3, 2, 3).transpose(1, 0, 2)
    s_up, l_up = jnp.linalg.slogdet(phi[:, :2, :2])
    s_down, l_down = jnp.linalg.slogdet(phi[:, 2:, :1])
    signs = s_up * s_down * jnp.sign(params["c"])
    logs = l_up + l_down + jnp.log(jnp.abs(params["c"]))
    shift = jax.lax.stop_gradient(jnp.max(logs))
    total = jnp.sum(signs * jnp.exp(logs - shift))
    r_ee = jnp.linalg.norm(r[0] - r[1])
    return jnp.log(jnp.abs(total)) + shift + params["j"] * r_ee / (1.0 + r_ee)


def slater_jastrow_problem():
    keys = jax.random.split(jax.random.PRNGKey(7), 3)
    params = {
        "w": jax.random.normal(keys[0], (3, 6), jnp.float64),
        "a": jnp.asarray(0.7),
        "c": jnp.asarray([1.0, -0.6]),
        "j": jnp.asarray(0.3),
    }
    w = 1.5 * jax.random.normal(keys[1], (N_WALKERS, 3, 3), jnp.float64)
    return params, w, reference(slater_jastrow, params, w)


@pytest.mark.compat
@pytest.mark.parametrize("op", ["forward", "forward-sparse"])
@pytest.mark.parametrize("mode", ["value", "grad"])
def test_signed_determinant_weights_inside_shard_map(op, mode):
    params, w, ref = slater_jastrow_problem()
    out = run(slater_jastrow, OPERATORS[op], "vmap", "shard_map", mode, params, w)
    assert error(out, ref, mode) <= RTOL


@pytest.mark.compat
@pytest.mark.parametrize("op", list(OPERATORS))
def test_user_vmap_on_an_explicit_mesh(op):
    params, w, ref = slater_jastrow_problem()
    out = run(slater_jastrow, OPERATORS[op], "vmap", "explicit", "grad", params, w)
    assert error(out, ref, "grad") <= RTOL


def explicit_mesh_inputs():
    params, w, ref = slater_jastrow_problem()
    mesh = jax.make_mesh((N_DEVICES,), ("walkers",), axis_types=(AxisType.Explicit,))
    params = jax.device_put(params, NamedSharding(mesh, P()))
    w = jax.device_put(w, NamedSharding(mesh, P("walkers")))
    return mesh, params, w, ref


class Model:
    """A pytree whose bound method closes over its parameters through ``self``."""

    def __init__(self, params):
        self.params = params

    def log_abs(self, r):
        return slater_jastrow(self.params, r)


jax.tree_util.register_pytree_node(Model, lambda m: ((m.params,), None), lambda _, c: Model(*c))


@pytest.mark.compat
@pytest.mark.parametrize("form", ["lambda", "nested partial", "bound method of a pytree"])
def test_explicit_mesh_reroutes_closures(form):
    """Parameters reached through a closure, a partial of a partial or ``self`` work."""
    mesh, params, w, ref = explicit_mesh_inputs()
    op = laplacian.Forward()

    def fn(p, x):
        if form == "lambda":
            f = lambda r: slater_jastrow(p, r)
        elif form == "nested partial":
            f = functools.partial(functools.partial(slater_jastrow), p)
        else:
            f = Model(p).log_abs
        _, g, lap = op(f)(x)
        return -0.5 * (lap + jnp.sum(g**2))

    with jax.set_mesh(mesh):
        out = jax.jit(jax.vmap(fn, in_axes=(None, 0)))(params, w)
    np.testing.assert_allclose(np.asarray(out), ref[0], rtol=RTOL, atol=RTOL * np.abs(ref[0]).max())


HIDDEN: dict = {}  # a global psijax cannot reroute


@pytest.mark.compat
def test_explicit_array_out_of_reach_is_refused_up_front():
    mesh, params, w, _ = explicit_mesh_inputs()
    HIDDEN["params"] = params

    def fn(x):
        _, _, lap = laplacian.Forward()(lambda r: slater_jastrow(HIDDEN["params"], r))(x)
        return lap

    with jax.set_mesh(mesh), pytest.raises(UnsupportedError, match=r"functools\.partial"):
        jax.jit(jax.vmap(fn))(w)
    HIDDEN.clear()


@pytest.mark.compat
def test_operator_results_have_documented_shapes():
    params, w, _ = slater_jastrow_problem()
    for op in OPERATORS.values():
        value, grad, lap = jax.jit(op(functools.partial(slater_jastrow, params)))(w[0])
        assert value.shape == () and lap.shape == () and grad.shape == w[0].shape


@pytest.mark.compat
def test_function_independent_of_the_walker():
    for op in OPERATORS.values():
        value, grad, lap = jax.jit(op(lambda r: jnp.float64(2.5)))(jnp.ones((2, 3)))
        assert float(value) == 2.5 and float(lap) == 0.0 and not np.any(np.asarray(grad))


@pytest.mark.compat
def test_forward_sparse_rejects_nonpositive_threshold():
    with pytest.raises(ValueError, match="Forward"):
        laplacian.ForwardSparse(threshold=0)


def test_a_dense_fallback_of_the_sparse_laplacian_is_said_once_in_psijax_words(
    caplog, capsys, monkeypatch
):
    """folx cannot track sparsity through a concatenation with a constant; it logs that on
    every trace through a root handler of its own. psijax keeps that text off the terminal
    and says once, on its own logger, that the rest is computed densely; the value is
    exact either way. PsiFormer's own input layer avoids the case."""
    from psijax.ansatz import PsiFormer
    from psijax.laplacian import _folx

    monkeypatch.setattr(_folx, "_said", set())

    def constant_column(x):
        h = jnp.concatenate([x.reshape(4, 3), jnp.ones((4, 1), x.dtype)], axis=-1)
        return jnp.sum(jnp.tanh(h @ jnp.linspace(0.1, 1.0, 20).reshape(4, 5)) ** 2)

    x = jax.random.normal(jax.random.PRNGKey(0), (4, 3))
    dense = laplacian.Hessian()(constant_column)(x)
    for scale in (1.0, 2.0):  # two traces: one message
        f = lambda y, s=scale: constant_column(s * y) / s**2
        sparse = jax.jit(laplacian.ForwardSparse(0.6)(f))(x)
    np.testing.assert_allclose(sparse[2], laplacian.Hessian()(f)(x)[2], rtol=1e-10)
    plain = jax.jit(laplacian.ForwardSparse(0.6)(constant_column))(x)
    np.testing.assert_allclose(plain[2], dense[2], rtol=1e-10)
    said = [r.getMessage() for r in caplog.records if r.name == "psijax.laplacian"]
    assert len(said) == 1 and "`concatenate`" in said[0] and "computes densely" in said[0]
    assert "[folx]" not in capsys.readouterr().err
    assert not any("Could not perform" in r.getMessage() for r in caplog.records)

    net = PsiFormer(2, 2, ((0.0, 0.0, 0.0),), layers=1, heads=2, head_dim=4, n_determinants=1)
    params = net.init(jax.random.PRNGKey(1), jnp.float64)
    caplog.clear()  # folx decides while tracing: no need to compile
    jax.eval_shape(
        laplacian.ForwardSparse(6)(functools.partial(net.log_abs, params)),
        jax.random.normal(jax.random.PRNGKey(2), (4, 3)),
    )
    assert not [r for r in caplog.records if r.name == "psijax.laplacian"]
