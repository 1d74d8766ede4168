"""Complex-valued functions through every Laplacian operator: value, gradient and Laplacian
of log psi of complex networks (plane waves with a twist, complex orbital weights, complex
slogdet, det and logsumexp, a phase term; tests/network_grammar.py), and the parameter
gradient of a real function of them, against the dense Hessians of the real and imaginary
parts (``laplacian_cells.DenseParts``) in float64, in every batching and sharding context.

- ``test_complex_matrix_group``: each (batching, context, mode) of ``COMPLEX_CI_GROUPS``,
  all four operators, on one of three complex networks that between them combine the
  determinants by ``slogdet``, ``det`` and ``logsumexp`` (``benchmarks/laplacian_matrix.py
  --complex`` runs every cell on many drawn networks);
- ``test_gradient_matches_finite_differences``: the gradient of one cell against central
  finite differences of its values, independent of any automatic differentiation;
- folx's ``slogdet`` in psijax's scope: JAX's tangents for complex matrices, folx's own
  function for real ones, folx as shipped outside it;
- ``custom_jvp`` functions of complex values that are not holomorphic (a phase, JAX's own
  ``slogdet`` under ``jax.disable_jit``) through the forward Laplacian;
- shapes and dtypes of the results, and psijax's refusal of a complex input.

Tolerance: ``laplacian_cells.RTOL`` (1e-8 of the output's largest entry), see there.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from folx import slogdet as folx_slogdet
from jax.flatten_util import ravel_pytree

from psijax.errors import UnsupportedError
from psijax.laplacian import _folx_complex

from laplacian_cells import (
    COMPLEX_CI_GROUPS,
    OPERATORS,
    RTOL,
    DenseParts,
    error,
    mismatch,
    program,
    real_loss,
    reference,
    run,
)  # fmt: skip
from network_grammar import Network, seeded_spec, walkers

N_WALKERS = 16
BOUNDS = {"max_electrons": 3, "max_layers": 1, "complex_valued": True}
# Three seeded complex networks with several signed determinants (so that the sign of a
# complex determinant reaches log psi), chosen among those that compile fastest, which
# between them combine the determinants in each way (combine, complex orbitals, phase term):
NETWORKS = {
    2957: ("slogdet", "twist", True),  # 3 up, plane waves with a twist, the kind
    2496: ("det", "both", False),  # 2 up, twist and complex weights
    3105: ("logsumexp", "matmul", False),  # 1 up 1 down, complex weights
}


@pytest.fixture(autouse=True, scope="module")
def _x64():
    with jax.enable_x64(True):
        yield


@functools.cache
def network(index: int):
    """(network, params, walkers) of the ``index``-th of ``NETWORKS``."""
    seed, drawn = list(NETWORKS.items())[index]
    spec = seeded_spec(seed, **BOUNDS)
    assert (spec.combine, spec.complex_orbitals, spec.phase) == drawn, spec
    assert spec.n_determinants > 1 and spec.signed_weights, spec
    net = Network(spec)
    with jax.enable_x64(True):
        params = net.init(jax.random.PRNGKey(seed))
        return net, params, walkers(net, params, N_WALKERS, seed)


@functools.cache
def problem(index: int):
    """(network, params, walkers, dense reference) of the ``index``-th of ``NETWORKS``."""
    net, params, w = network(index)
    with jax.enable_x64(True):
        return net, params, w, reference(net.log_psi, params, w)


@pytest.mark.parametrize("batching,context,mode", COMPLEX_CI_GROUPS)
def test_complex_matrix_group(batching, context, mode):
    net, params, w, ref = problem(COMPLEX_CI_GROUPS.index((batching, context, mode)) % 3)
    for op in OPERATORS:
        out = run(net.log_psi, OPERATORS[op], batching, context, mode, params, w)
        err = error(out, ref, mode)
        assert err <= RTOL, f"{op} {batching} {context} {mode} on [{net.spec}]: error {err:.2e}"


def test_gradient_matches_finite_differences():
    """The forward Laplacian's parameter gradient (the path that was silently wrong) against
    central differences of its own values, every parameter one at a time. The values are
    the dense reference's to 1e-13, so this checks the gradient with no autodiff in the
    reference."""
    net, params, w = network(0)
    op = OPERATORS["forward"]
    flat, unravel = ravel_pytree(params)
    loss = jax.jit(lambda q: real_loss(program(net.log_psi, op, "vmap", "value", None)(q, w)))
    grad = jax.jit(jax.grad(lambda q: loss(unravel(q))))(flat)
    step = 1e-5
    differences = np.empty(flat.size)
    for i in range(flat.size):
        shift = jnp.zeros_like(flat).at[i].set(step)
        differences[i] = (loss(unravel(flat + shift)) - loss(unravel(flat - shift))) / (2 * step)
    # central differences: truncation ~ step^2 |f'''| and rounding ~ 1e-16 |f| / step
    scale = np.max(np.abs(differences))
    np.testing.assert_allclose(np.asarray(grad), differences, rtol=0, atol=1e-6 * scale)


def test_folx_complex_in_psijaxs_scope():
    """In psijax's scope folx's slogdet has JAX's tangents for a complex matrix (the sign's
    tangent is i sign Im(d log det), not d log det) and is folx's own for a real one; outside
    it folx's module is as shipped."""
    shipped = folx_slogdet.slogdet
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    a = jax.lax.complex(*(jax.random.normal(k, (2, 3, 3)) for k in keys[:2]))
    da = jax.lax.complex(*(jax.random.normal(k, (2, 3, 3)) for k in keys[2:]))
    expected = jax.jvp(jnp.linalg.slogdet, (a,), (da,))
    with _folx_complex.active():
        patched = folx_slogdet.slogdet
        assert patched is not shipped
        got = jax.jvp(patched, (a,), (da,))
        real = jnp.real(a)
        assert str(jax.make_jaxpr(patched)(real)) == str(jax.make_jaxpr(shipped)(real))
    assert folx_slogdet.slogdet is shipped
    for g, e in zip(jax.tree.leaves(got), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-12, atol=1e-12)
    OPERATORS["forward"](lambda r: jnp.linalg.slogdet(r * (1 + 1j))[1])(jnp.eye(3) + 0.5)
    assert folx_slogdet.slogdet is shipped  # and after psijax's own Laplacian


@jax.custom_jvp
def phase(z):
    """z / |z|, with its derivative as a custom rule: a function of complex values that is
    not holomorphic, which folx has no rule for."""
    return z / jnp.abs(z)


@phase.defjvp
def _phase_jvp(primals, tangents):
    (z,), (dz,) = primals, tangents
    size = jnp.abs(z)
    return phase(z), dz / size - z * jnp.real(jnp.conj(z) * dz) / size**3


def with_phases(w, x):
    """A complex log psi with a custom_jvp phase and a complex slogdet, of 2 particles in 3
    dimensions. folx goes wrong for a non-holomorphic function in one of its two orders of
    contraction, the one it takes for fewer complex inputs (here 4) than coordinates (6)."""
    orbitals = jnp.tanh(x @ w[:, :2]) * jnp.exp(1j * (x @ w[:, 2:]))  # [2, 2]
    sign, log_abs = jnp.linalg.slogdet(orbitals)
    return jnp.log(jnp.sum(phase(orbitals) * orbitals)) + jnp.log(sign) + log_abs


@pytest.mark.parametrize("trace", ["jit", "disable_jit"])
def test_custom_jvp_functions_of_complex_values(trace):
    """folx takes a function it has no rule for as holomorphic in complex inputs: wrong for
    a non-holomorphic ``custom_jvp`` function (``phase``), and for JAX's own ``slogdet``
    where it is not a named jit (under ``jax.disable_jit``, its sign); psijax hands such
    functions to folx as functions of real and imaginary parts. Value, gradient, Laplacian
    (and under jit the parameter gradient) of the forward Laplacian against the dense
    parts; the other operators are JAX's own derivatives."""
    w = jnp.linspace(-1.0, 1.0, 12).reshape(3, 4)
    x = jnp.linspace(-0.9, 1.3, 6).reshape(2, 3)

    def loss(w, op):
        value, grad, lap = op(functools.partial(with_phases, w))(x)
        return jnp.real(lap + jnp.sum(grad * grad)) + 0.5 * jnp.imag(lap) + 0.25 * jnp.imag(value)

    def derivatives(op):
        if trace == "disable_jit":  # eager, slow: the value, gradient and Laplacian only
            return op(functools.partial(with_phases, w))(x)
        fn = lambda w: (op(functools.partial(with_phases, w))(x), jax.grad(loss)(w, op))
        return jax.jit(fn)(w)

    with jax.disable_jit(trace == "disable_jit"):
        ref = derivatives(DenseParts())
        out = derivatives(OPERATORS["forward"])  # ForwardSparse takes the same path
    err = max(mismatch(a, b) for a, b in zip(out, ref, strict=True))
    assert err <= RTOL, f"forward under {trace}: error {err:.2e}"


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_results_are_complex_with_documented_shapes(dtype):
    """Complex value, gradient and Laplacian of the shapes docs/laplacian.md gives, in float32
    and float64 (the network's traced only: its numbers are the matrix's), and for a
    constant function."""
    net, params, w = network(2)
    x = jnp.asarray(w[0], dtype)
    params = jax.tree.map(lambda p: p.astype(dtype), params)
    complex_dtype = jnp.result_type(1j, dtype)
    for op in OPERATORS.values():
        out = jax.eval_shape(op(functools.partial(net.log_psi, params)), x)
        constant = op(lambda r: jnp.asarray(2.5 + 1j, complex_dtype))(x)
        for value, grad, lap in (out, constant):
            assert value.shape == () and lap.shape == () and grad.shape == x.shape, op
            assert {value.dtype, grad.dtype, lap.dtype} == {complex_dtype}, op
        value, grad, lap = constant
        assert complex(value) == 2.5 + 1j and complex(lap) == 0 and not np.any(grad), op


@pytest.mark.parametrize("op", list(OPERATORS))
def test_complex_input_is_refused(op):
    x = jnp.ones((2, 3), jnp.complex128)
    with pytest.raises(UnsupportedError, match=r"real input.*complex128.*real and imaginary"):
        OPERATORS[op](lambda r: jnp.sum(r**2))(x)
