"""MARCH against its formula, written out densely in float64 with numpy: SPRING's step in
the metric of each parameter's moving score variance; refused with jacobian blocks."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_spring import reference

from psijax import optim
from psijax.errors import UnsupportedError
from psijax.optim.jacobian import Blocked, Factored, Leaves


def march_reference(jacobians, centered, *, lr, damping, momentum, max_norm, beta, eps):
    """Every step's update: SPRING's for the columns scaled by (v_hat + eps)^(-1/4)."""
    variance, previous, steps = 0.0, np.zeros(jacobians[0].shape[1]), []
    for t, (jac, e) in enumerate(zip(jacobians, centered, strict=True), start=1):
        c = jac - jac.mean(axis=0)
        variance = beta * variance + (1 - beta) * (c * c).mean(axis=0)
        scale = (variance / (1 - beta**t) + eps) ** -0.25
        step, psi = reference(jac * scale, e, previous / scale, lr=lr, damping=damping,
                              momentum=momentum, max_norm=np.inf)  # fmt: skip
        phi = scale * psi
        step = lr / (1 + (t - 1) / 1000.0) * phi  # the learning rate's default decay
        steps.append(step * min(1.0, max_norm / np.linalg.norm(step)))
        previous = phi
    return steps


@pytest.mark.parametrize("max_norm", [1e3, 1e-3])  # the cap inactive, then active
def test_update_matches_the_formula(max_norm):
    rng = np.random.default_rng(1)
    n, p = 12, 30
    params = {"a": jnp.zeros((5, 4)), "b": jnp.zeros((10,))}
    # columns of very different spread: the metric must tell them apart
    spread = np.exp(rng.normal(size=p))
    jacobians = [rng.normal(size=(n, p)) * spread + 3.0 for _ in range(3)]
    centered = [e - e.mean() for e in rng.normal(size=(3, n))]
    settings = dict(damping=1e-3, momentum=0.9, max_norm=max_norm, beta=0.9, eps=1e-8)
    opt = optim.march(learning_rate=0.1, **settings)
    state = opt.init(params)
    want = march_reference(jacobians, centered, lr=0.1, **settings)
    with jax.enable_x64(True):
        for jac, e, expected in zip(jacobians, centered, want, strict=True):
            updates, state = opt.update(params, state, params, jacobian=jnp.asarray(jac),
                                        centered_energies=jnp.asarray(e))  # fmt: skip
            got = jax.flatten_util.ravel_pytree(updates)[0]
            np.testing.assert_allclose(got, expected, rtol=1e-8, atol=1e-12 * abs(expected).max())
    spring_step = reference(jacobians[0], centered[0], np.zeros(p), lr=0.1, damping=1e-3,
                            momentum=0.9, max_norm=max_norm)[0]  # fmt: skip
    assert not np.allclose(want[0], spring_step)  # the metric changes the step


def test_jacobian_blocks_are_refused_by_name():
    opt = optim.march()
    params = {"a": jnp.zeros(3)}
    blocked = Blocked.__new__(Blocked)  # its products are never reached
    with pytest.raises(UnsupportedError, match=r"march .* --jacobian-blocks"):
        opt.update(params, opt.init(params), params, jacobian=blocked,
                   centered_energies=jnp.zeros(4))  # fmt: skip


def test_leaves_and_factored_blocks_give_the_dense_update():
    """The jacobian as training passes it, ``Leaves`` (one plain block, one
    ``Factored``), gives the update of the same jacobian whole."""
    rng = np.random.default_rng(2)
    n, k, din, dout = 10, 3, 4, 5
    params = {"a": jnp.zeros((7,)), "w": jnp.zeros((din, dout))}
    opt = optim.march(learning_rate=0.1, momentum=0.9, beta=0.9)
    states = [opt.init(params), opt.init(params)]
    with jax.enable_x64(True):
        for _ in range(2):  # the second step uses the first's variance and direction
            plain = jnp.asarray(rng.normal(size=(n, 7)) + 2.0)
            factored = Factored(jnp.asarray(rng.normal(size=(n, k, din))),
                                jnp.asarray(rng.normal(size=(n, k, dout))))  # fmt: skip
            e = rng.normal(size=n)
            e = jnp.asarray(e - e.mean())
            whole = jnp.concatenate([plain, factored.dense()], axis=1)
            got = []
            for i, jac in enumerate([Leaves((plain, factored)), whole]):
                updates, states[i] = opt.update(params, states[i], params, jacobian=jac,
                                                centered_energies=e)  # fmt: skip
                got.append(jax.flatten_util.ravel_pytree(updates)[0])
            np.testing.assert_allclose(got[0], got[1], rtol=1e-10,
                                       atol=1e-12 * np.abs(got[1]).max())  # fmt: skip
