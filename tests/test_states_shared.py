"""Several states from one network (``SharedStates``): each state is one group of the
network's determinants; the K x K energy matrix from one Laplacian per copy equals every
state's own local energy at every copy, with an ECP as without, under every operator."""

from __future__ import annotations

import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from psijax import config as config_lib
from psijax import hamiltonian, laplacian, registry, system
from psijax.ansatz.states import SharedStates
from psijax.hamiltonian.states import local_energy
from psijax.types import Psi


@pytest.fixture(autouse=True, scope="module")
def _x64():
    with jax.enable_x64(True):
        yield


def _shared(system_name: str, k: int, **overrides):
    config = config_lib.Config(
        system=system_name,
        states=k,
        layers=((12, 4), (12, 4)),
        determinants=2 * k + 1,
        **overrides,
    )
    molecule = (
        system.resolve(system_name, ecp=config.ecp) if config.ecp else system.resolve(system_name)
    )
    net = registry.ansatz(molecule, config)
    # the network's determinants shared out: two each, the one left over unused
    assert isinstance(net, SharedStates) and net.determinants_per_state == 2
    assert net.base.n_determinants == 2 * k
    return net, molecule, config


def _walker(net, seed: int, scale: float = 1.5):
    return scale * jax.random.normal(jax.random.PRNGKey(seed), (net.n_electrons, 3), jnp.float64)


def test_each_state_is_its_group_of_determinants_and_its_view():
    net, _, _ = _shared("LiH", 3)
    params = net.init(jax.random.PRNGKey(0), jnp.float64)
    r = _walker(net, 1)
    values = net.matrix(params, r)
    x = net.copies(r)
    for i in range(3):
        one = net.state(params, i)
        assert jax.tree.map(jnp.shape, net.with_state(params, i, one)) == jax.tree.map(
            jnp.shape, params
        )
        back = net.with_state(params, i, one)
        assert all(jax.tree.leaves(jax.tree.map(jnp.array_equal, back, params)))
        for j in range(3):
            alone = net.state_net.apply(one, x[j])  # pretraining's view of state i
            np.testing.assert_allclose(values.log_abs[i, j], alone.log_abs, rtol=1e-12)
            assert values.sign[i, j] == alone.sign
    # the states differ: each group has its own orbitals
    assert len(set(np.round(np.asarray(values.log_abs[:, 0]), 8))) == 3


def _state_energy(net, hamil, params, x, i, key):
    """The ordinary local energy of state ``i`` alone at copy ``x``."""
    apply = lambda p, y: jax.tree.map(lambda a: a[i], net.each(p, y))
    psi = hamiltonian.base.PsiFunctions(lambda p, y: apply(p, y).log_abs, apply)
    return hamil.local_energy(psi).parts(params, x, key)


@pytest.mark.parametrize(
    "system_name, overrides",
    [("LiH", {}), ("C 0 0 0", {"ecp": "ccecp", "spin": 2})],
    ids=["all-electron", "ecp"],
)
@pytest.mark.parametrize("op", [laplacian.Forward(), laplacian.ForwardSparse(4), laplacian.Loop()])
def test_energy_matrix_terms_are_each_states_local_energy_at_each_copy(system_name, overrides, op):
    k = 2
    net, molecule, config = _shared(system_name, k, **overrides)
    hamil = hamiltonian.for_config(molecule, config, laplacian.Hessian())
    params = net.init(jax.random.PRNGKey(2), jnp.float64)
    r = _walker(net, 3, 0.7 if overrides.get("ecp") else 1.5)  # inside the ECP's core
    key = jax.random.PRNGKey(4)
    shared = hamiltonian.for_config(molecule, config, op)
    pairs = jax.jit(local_energy(shared, net).pairs)(params, r, key)
    keys = jax.random.split(key, k)  # one key per copy, as the pairs draw them
    x = net.copies(r)
    state_energy = jax.jit(functools.partial(_state_energy, net, hamil), static_argnums=2)
    for i in range(k):
        for j in range(k):
            want = state_energy(params, x[j], i, keys[j] if hamil.needs_key else None)
            for name, value in want.items():
                scale = max(1.0, abs(float(want["energy"])))
                assert abs(float(pairs[name][i, j]) - float(value)) <= 1e-8 * scale, (name, i, j)
    if overrides.get("ecp"):
        assert "ecp_nonlocal" in pairs and np.all(np.asarray(pairs["ecp_nonlocal"]) != 0)


def test_a_run_saved_before_shared_networks_reads_as_separate(tmp_path):
    values = config_lib.to_dict(config_lib.Config(system="He", states=2))
    values.pop("states_network")
    (tmp_path / "config.json").write_text(json.dumps(values))
    saved = config_lib.load_saved(tmp_path / "config.json")
    assert saved.states_network == "separate"
    assert config_lib.Config(system="He", states=2).states_network == "shared"
    net = registry.ansatz(system.resolve("He"), saved)
    assert type(net).__name__ == "States"
    assert "states_network" not in config_lib.identity(config_lib.Config(system="He"))


def test_the_separate_networks_give_the_same_matrix_as_their_each():
    config = config_lib.Config(
        system="LiH", states=2, layers=((8, 4),), determinants=1, states_network="separate"
    )
    net = registry.ansatz(system.resolve("LiH"), config)
    params = net.init(jax.random.PRNGKey(5), jnp.float64)
    r = _walker(net, 6)
    values = net.matrix(params, r)
    for j, x in enumerate(net.copies(r)):
        each = net.each(params, x)
        np.testing.assert_allclose(values.log_abs[:, j], each.log_abs, rtol=1e-12)
        assert isinstance(each, Psi)
