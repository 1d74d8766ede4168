"""Every float32 product of a computation asks for the precision psijax sets for it.

A CPU computes every float32 product in full float32 whatever is asked, so what can be
checked here is what is asked: the precision of every ``dot_general`` in the traced
program, nested programs included. On a GPU an unmarked product runs in TensorFloat-32
(docs/benchmarks.md, "GPU").
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from psijax import config as config_lib
from psijax import optim, precision
from psijax.ansatz import FermiNet, PsiFormer
from psijax.errors import InputError
from psijax.hamiltonian import kinetic_energy
from psijax.optim.jacobian import blocked

from laplacian_cells import OPERATORS

HIGHEST = (jax.lax.Precision.HIGHEST, jax.lax.Precision.HIGHEST)


def products(fn, *args) -> list:
    """The ``precision`` of every ``dot_general`` in ``fn``'s program, nested ones too."""
    found = precision.products(jax.make_jaxpr(fn)(*args))
    assert found, "the program has no products: the test checks nothing"
    return found


def network(kind: str, matmul_precision: str | None):
    if kind == "ferminet":
        return FermiNet(2, 1, ((0.0, 0.0, 0.0),), layers=((8, 4),), n_determinants=2,
                        matmul_precision=matmul_precision)  # fmt: skip
    return PsiFormer(2, 1, ((0.0, 0.0, 0.0),), layers=1, heads=2, head_dim=4,
                     n_determinants=2, matmul_precision=matmul_precision)  # fmt: skip


WALKER = jnp.arange(9.0).reshape(3, 3) / 9.0


@pytest.mark.parametrize("kind", ["ferminet", "psiformer"])
@pytest.mark.parametrize("op", list(OPERATORS))
def test_the_laplacian_and_its_gradient_keep_the_ansatz_precision(kind, op):
    """folx re-traces the network and adds products of its own: they ask for the network's
    precision too, in the kinetic energy and in its parameter gradient."""
    net = network(kind, "highest")
    params = net.init(jax.random.PRNGKey(0))
    kinetic = lambda p, r: kinetic_energy(OPERATORS[op], net.log_abs, p, r)
    assert set(products(kinetic, params, WALKER)) == {HIGHEST}
    assert set(products(jax.grad(kinetic), params, WALKER)) == {HIGHEST}


def test_without_a_precision_the_network_leaves_jax_setting_alone():
    net = network("ferminet", None)
    params = net.init(jax.random.PRNGKey(0))
    kinetic = lambda p, r: kinetic_energy(OPERATORS["forward"], net.log_abs, p, r)
    # unmarked, but for those jax.numpy.linalg marks itself
    assert set(products(kinetic, params, WALKER)) == {None, HIGHEST}
    with jax.default_matmul_precision("highest"):  # a user's own setting then holds
        assert set(products(kinetic, params, WALKER)) == {HIGHEST}


@pytest.mark.parametrize("form", ["dense", "blocked"])
def test_spring_products_ask_for_the_gram_precision(form):
    """SPRING's products with the jacobian at ``gram_precision``; a blocked jacobian's
    products re-run the network, whose own products keep the network's precision."""
    net = network("ferminet", "default")
    params = net.init(jax.random.PRNGKey(0))
    walkers = jax.random.normal(jax.random.PRNGKey(1), (8, 3, 3))
    centered = jnp.linspace(-1.0, 1.0, 8)
    opt = optim.spring(learning_rate=0.1, gram_precision="highest")
    state = opt.init(params)

    def update(params, walkers):
        if form == "dense":
            rows = jax.vmap(jax.grad(net.log_abs), in_axes=(None, 0))(params, walkers)
            jac = jnp.concatenate([g.reshape(8, -1) for g in jax.tree.leaves(rows)], axis=1)
        else:
            jac = blocked(net.log_abs, params, walkers, jnp.ones(8), 2, None)
        return opt.update(params, state, params, jacobian=jac, centered_energies=centered)[0]

    found = set(products(update, params, walkers))
    default = (jax.lax.Precision.DEFAULT, jax.lax.Precision.DEFAULT)
    assert found == {HIGHEST, default}  # SPRING's own, the network's


def test_of_jaxpr_names_one_precision_or_none():
    a = jnp.ones((3, 3))
    traced = lambda: jax.make_jaxpr(lambda x: (x @ x) @ x)(a)
    with jax.default_matmul_precision("highest"):
        assert precision.of_jaxpr(traced()) == "highest"
    assert precision.of_jaxpr(traced()) is None

    def mixed(x):
        with jax.default_matmul_precision("highest"):
            y = x @ x
        return y @ x

    assert precision.of_jaxpr(jax.make_jaxpr(mixed)(a)) is None


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="a CPU's products only")
def test_precisions_change_nothing_on_a_cpu():
    """What the CPU computes is what is asked for above; the energies agree to the bit."""
    values = []
    for setting in ("default", "highest"):
        net = network("ferminet", setting)
        params = net.init(jax.random.PRNGKey(0))
        values.append(np.asarray(jax.jit(net.log_abs)(params, WALKER)))
    assert values[0] == values[1]


@pytest.mark.parametrize("key", ["matmul_precision", "gram_precision"])
def test_an_unknown_precision_is_refused_with_the_choices(key):
    with pytest.raises(InputError, match=rf"{key}='tf32' is unknown; use one of default"):
        config_lib.from_dict({key: "tf32"})
