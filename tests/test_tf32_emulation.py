"""The TensorFloat-32 emulation that docs/benchmarks.md's precision figures rest on
(benchmarks/tf32_emulation.py): the rounding, which products it touches, nested programs."""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from tf32_emulation import round_tf32, tf32


def test_rounding_keeps_ten_mantissa_bits_to_nearest_even():
    one = np.float32(1.0)
    ulp = 2.0**-10  # TensorFloat-32's spacing at 1
    cases = {
        1 + ulp / 4: 1.0,  # below half: down
        1 + ulp * 3 / 4: 1 + ulp,  # above half: up
        1 + ulp / 2: 1.0,  # a tie: to the even mantissa
        1 + ulp * 3 / 2: 1 + 2 * ulp,
        -(1 + ulp * 3 / 4): -(1 + ulp),
    }
    for x, want in cases.items():
        assert float(round_tf32(jnp.float32(x))) == want, x
    assert float(round_tf32(one)) == 1.0
    x = jax.random.normal(jax.random.PRNGKey(0), (1000,))
    rel = np.abs(np.asarray(round_tf32(x)) - np.asarray(x)) / np.abs(np.asarray(x))
    assert rel.max() <= 2.0**-11 and rel.max() > 2.0**-13


def test_unmarked_products_take_rounded_inputs_and_highest_ones_do_not():
    a = jax.random.normal(jax.random.PRNGKey(1), (8, 8))
    b = jax.random.normal(jax.random.PRNGKey(2), (8, 8))
    plain = lambda a, b: jnp.tanh(a @ b)
    want = jnp.tanh(jnp.dot(round_tf32(a), round_tf32(b), precision="highest"))
    np.testing.assert_array_equal(jax.jit(tf32(plain))(a, b), want)
    marked = lambda a, b: jnp.tanh(jnp.dot(a, b, precision="highest"))
    np.testing.assert_array_equal(jax.jit(tf32(marked))(a, b), marked(a, b))


def test_products_inside_nested_programs_and_derivatives_are_rounded():
    a = jax.random.normal(jax.random.PRNGKey(1), (8, 8))
    b = jax.random.normal(jax.random.PRNGKey(2), (8, 8))

    def f(a, b):
        inner = jax.jit(lambda x: x @ b)
        y, _ = jax.lax.scan(lambda c, _: (jnp.tanh(inner(c)), None), a, None, length=2)
        return jnp.sum(y)

    grad = jax.grad(f)
    got, want = np.asarray(jax.jit(tf32(grad))(a, b)), np.asarray(grad(a, b))
    error = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert 1e-5 < error < 1e-2, error  # rounded (float32 alone: ~1e-7), and still the gradient
