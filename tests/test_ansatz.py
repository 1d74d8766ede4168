"""Every ansatz through the ``Ansatz`` interface: antisymmetry, translation invariance,
the Laplacian matrix against the dense Hessian (PsiFormer), pretraining and a training
step without recompiles, and the registry agreeing with the config's choices."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from psijax import config as config_lib
from psijax import hamiltonian, laplacian, optim, parallel, registry, sampling, system
from psijax.ansatz import Ansatz, FermiNet, PsiFormer
from psijax.run.loop import run_steps
from psijax.training.pretrain import pretrain
from psijax.training.state import train_state
from psijax.training.step import StepConfig, make_step

from laplacian_cells import OPERATORS, RTOL, error, reference, run

NUCLEI = ((0.0, 0.0, -0.7), (0.3, 0.1, 0.8))


def ansaetze(n_up: int, n_down: int, nuclei=NUCLEI) -> dict[str, Ansatz]:
    """Small instances of every ansatz and head variant."""
    return {
        "ferminet": FermiNet(n_up, n_down, nuclei, layers=((8, 4), (8, 4)), n_determinants=3),
        "ferminet-blocks-no-jastrow": FermiNet(
            n_up, n_down, nuclei, layers=((8, 4),), n_determinants=2, full_det=False, jastrow=False
        ),
        "psiformer": PsiFormer(
            n_up, n_down, nuclei, layers=2, heads=2, head_dim=4, n_determinants=3
        ),
        "psiformer-layernorm-blocks": PsiFormer(
            n_up,
            n_down,
            nuclei,
            layers=1,
            heads=2,
            head_dim=4,
            n_determinants=2,
            full_det=False,
            layer_norm=True,
        ),
        "psiformer-no-jastrow": PsiFormer(
            n_up, n_down, nuclei, layers=1, heads=1, head_dim=4, n_determinants=1, jastrow=False
        ),
    }


# every variant with both spins populated; the one-spin and minority-up cases on two
CASES = [(name, (3, 2)) for name in ansaetze(3, 2)] + [
    (name, spins)
    for spins in ((2, 0), (1, 3))
    for name in ("ferminet", "ferminet-blocks-no-jastrow", "psiformer")
]


def _walker(n: int, seed: int = 3) -> jax.Array:
    return jax.random.normal(jax.random.PRNGKey(seed), (n, 3), jnp.float64) * 1.2


@pytest.mark.parametrize("name,spins", CASES)
def test_exchange_of_same_spin_electrons_flips_the_sign_only(name, spins):
    net = ansaetze(*spins)[name]
    assert isinstance(net, Ansatz)
    n_up, n_down = spins
    with jax.enable_x64(True):
        params = net.init(jax.random.PRNGKey(0), jnp.float64)
        r = _walker(n_up + n_down)
        apply = jax.jit(net.apply)
        psi = apply(params, r)
        assert np.isfinite(psi.log_abs) and psi.sign in (-1.0, 1.0)
        pairs = [(0, 1)] * (n_up > 1) + [(n_up, n_up + 1)] * (n_down > 1)
        assert pairs
        for i, j in pairs:
            perm = np.arange(n_up + n_down)
            perm[[i, j]] = perm[[j, i]]
            swapped = apply(params, r[perm])
            assert swapped.sign == -psi.sign, (i, j)
            np.testing.assert_allclose(swapped.log_abs, psi.log_abs, rtol=1e-12)


@pytest.mark.parametrize("name", list(ansaetze(2, 1)))
def test_a_common_translation_changes_nothing(name):
    """Both ansaetze see electron-nucleus and electron-electron vectors only. Neither is
    rotation invariant: their inputs are vectors in the lab frame (as in FermiNet and
    PsiFormer), so a common rotation is not tested."""
    shift = np.array([0.4, -1.3, 2.2])
    moved = tuple(tuple(float(c) for c in np.add(x, shift)) for x in NUCLEI)
    net, net_moved = ansaetze(2, 1)[name], ansaetze(2, 1, moved)[name]
    with jax.enable_x64(True):
        params = net.init(jax.random.PRNGKey(0), jnp.float64)
        r = _walker(3)
        a = net.apply(params, r)
        b = net_moved.apply(params, r + shift)
        assert a.sign == b.sign
        np.testing.assert_allclose(b.log_abs, a.log_abs, rtol=1e-12)


@functools.cache
def psiformer_problem():
    net = PsiFormer(2, 1, NUCLEI, layers=1, heads=2, head_dim=4, n_determinants=2,
                    layer_norm=True)  # fmt: skip
    with jax.enable_x64(True):
        params = net.init(jax.random.PRNGKey(5), jnp.float64)
        w = jax.random.normal(jax.random.PRNGKey(6), (4, 3, 3), jnp.float64)
        ref = reference(net.log_abs, params, w)
    return net, params, w, ref


# Attention, LayerNorm and the Jastrow through every operator, value and gradient; inside
# shard_map (the context that breaks first in the field, and on new JAX releases: a compat
# test) the forward operators. The other batchings and contexts are the engine's, covered on
# generated networks by tests/test_laplacian_matrix.py.
CELLS = [
    # hessian is the reference; loop is generic JAX, covered on attention networks by
    # tests/test_laplacian_matrix.py
    ("vmap", "none", "grad", ("forward", "forward-sparse")),
    pytest.param(
        "map_walkers", "shard_map", "grad", ("forward", "forward-sparse"),
        marks=pytest.mark.compat,
    ),
]  # fmt: skip


@pytest.mark.parametrize("batching,context,mode,ops", CELLS)
def test_psiformer_laplacian_agrees_with_the_dense_hessian(batching, context, mode, ops):
    """Operators on a small PsiFormer (attention, LayerNorm, Jastrow), in float64."""
    with jax.enable_x64(True):
        net, params, w, ref = psiformer_problem()
        for op in ops:
            out = run(net.log_abs, OPERATORS[op], batching, context, mode, params, w)
            err = error(out, ref, mode)
            assert err <= RTOL, f"{op} {batching} {context} {mode}: error {err:.2e}"


def test_pretraining_fits_psiformer_orbitals():
    mol = system.preset("LiH")
    net = PsiFormer(mol.n_up, mol.n_down, mol.coords, layers=1, heads=2, head_dim=4,
                    n_determinants=2)  # fmt: skip
    params = net.init(jax.random.key(0))
    walkers = sampling.init_walkers(jax.random.key(1), mol, 32)
    _, _, losses = pretrain(
        jax.random.key(2), net, params, mol, walkers, steps=30, learning_rate=1e-2
    )
    assert np.all(np.isfinite(losses))
    assert np.mean(losses[-5:]) < 0.5 * losses[0], losses


@pytest.mark.parametrize("optimizer", ["spring", "adam"])
def test_psiformer_trains_on_four_devices_without_recompiling(optimizer):
    mol = system.preset("LiH")
    net = PsiFormer(mol.n_up, mol.n_down, mol.coords, layers=1, heads=2, head_dim=4,
                    n_determinants=2)  # fmt: skip
    opt = optim.spring() if optimizer == "spring" else optim.adam()
    mesh = parallel.make_mesh(4)
    params = net.init(jax.random.PRNGKey(0))
    walkers = sampling.init_walkers(jax.random.PRNGKey(1), mol, 16)
    state = train_state(net, opt, params, walkers, jax.random.PRNGKey(2), mesh=mesh)
    local_energy = hamiltonian.molecular(mol, laplacian.Forward()).local_energy(net)
    step = make_step(
        net.log_abs, local_energy, opt, StepConfig(), mesh, state, sampling.Metropolis(2)
    )
    energies = [m["energy"] for m in run_steps(step, state, 4)[1]]
    assert np.all(np.isfinite(energies))
    assert step._cache_size() == 1


@pytest.mark.parametrize("name", ["ferminet", "psiformer-layernorm-blocks"])
def test_initial_parameters_are_one_draw_the_same_inside_jit(name):
    """One random draw for the whole tree (a draw per array was most of the init's compile
    at launch), scaled per layer, the same values whether ``init`` runs alone or traced."""
    net = ansaetze(3, 2)[name]
    key = jax.random.PRNGKey(7)
    jaxpr = str(jax.make_jaxpr(lambda k: net.init(k, jnp.float32))(key))
    assert jaxpr.count("random_bits") == 1, "one draw of random numbers"
    params = net.init(key, jnp.float32)
    traced = jax.jit(lambda k: net.init(k, jnp.float32))(key)
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(traced), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    other = net.init(jax.random.PRNGKey(8), jnp.float32)
    weights = [
        (path, np.asarray(w), np.asarray(o))
        for (path, w), o in zip(
            jax.tree_util.tree_leaves_with_path(params), jax.tree.leaves(other), strict=True
        )
        if getattr(path[-1], "key", None) == "w"
    ]
    assert len(weights) > 2
    for path, w, o in weights:  # N(0, 1 / fan-in), and new numbers for a new key
        fan_in = w.shape[0]
        assert abs(w.std() * np.sqrt(fan_in) - 1) < 4 / np.sqrt(w.size) + 0.05, path
        assert not np.allclose(w, o), path
    firsts = {float(w.ravel()[0]) for _, w, _ in weights}  # each array its own numbers
    assert len(firsts) == len(weights)


def test_optimisers_declare_what_the_step_computes():
    assert optim.needs_of(optim.spring()) >= {"jacobian", "centered_energies"}
    assert optim.needs_of(optim.adam()) == frozenset()
    import optax

    assert optim.needs_of(optax.sgd(1e-3)) == frozenset()  # a plain optax transformation


def test_every_registry_entry_loads_and_builds():
    for table in (registry.ANSATZES, registry.OPTIMIZERS, registry.LAPLACIANS,
                  registry.SAMPLERS, registry.HAMILTONIAN, registry.OBSERVABLES):  # fmt: skip
        for entry in table.values():
            assert callable(entry.load())
    for name in registry.OPTIMIZERS:
        config = config_lib.Config(optimizer=name)
        assert registry.learning_rate(config) == registry.OPTIMIZERS[name].learning_rate > 0
        assert isinstance(registry.optimizer(config), optim.Optimizer)
    for name in registry.LAPLACIANS:
        for n in (2, 16):
            assert callable(registry.laplacian(name, n))
    mol = system.preset("LiH")
    for name, cls in (("ferminet", FermiNet), ("psiformer", PsiFormer)):
        config = config_lib.Config(ansatz=name, determinants=3, full_det=False)
        net = registry.ansatz(mol, config)
        assert isinstance(net, cls) and net.n_determinants == 3 and not net.full_det
    net = registry.ansatz(mol, config_lib.Config(ansatz="psiformer", attention_layers=3,
                                                 attention_heads=2, attention_head_dim=8,
                                                 layer_norm=True, jastrow=False))  # fmt: skip
    assert (net.layers, net.heads, net.head_dim, net.layer_norm, net.jastrow) == (
        3, 2, 8, True, False
    )  # fmt: skip


def test_checkpoint_identity_of_a_default_run_is_unchanged_by_new_fields():
    """Checkpoints written before the ansatz fields existed hold an identity without them;
    a default (FermiNet) run still matches it, any other ansatz setting does not."""
    ident = config_lib.identity(config_lib.Config())
    assert not set(config_lib.ADDED_LATER) & set(ident)
    for name, value in (("ansatz", "psiformer"), ("full_det", False)):
        changed = config_lib.identity(config_lib.Config(**{name: value}))
        assert changed[name] == value


def test_no_envelope_decays_slower_than_the_floor():
    """An envelope exponent below ``ENVELOPE_FLOOR`` acts as the floor (and learns nothing:
    its gradient is zero); above it, the envelope and its gradient are the exponent's own."""
    from psijax.ansatz.head import ENVELOPE_FLOOR, envelope

    r_ae = jnp.array([[0.5, 3.0], [12.0, 9.0]])  # [electrons, atoms]
    sigma = jnp.array([[0.05, 1.3], [-0.2, 0.8]])  # [atoms, orbitals]
    pi = jnp.array([[0.9, 1.1], [0.7, 0.4]])
    floored = jnp.array([[ENVELOPE_FLOOR, 1.3], [ENVELOPE_FLOOR, 0.8]])
    expected = jnp.einsum("imo,mo->io", jnp.exp(-r_ae[:, :, None] * floored[None]), pi)
    np.testing.assert_allclose(envelope(r_ae, sigma, pi, ENVELOPE_FLOOR), expected, rtol=1e-6)
    grad = jax.grad(lambda s: jnp.sum(envelope(r_ae, s, pi, ENVELOPE_FLOOR)))(sigma)
    assert float(grad[0, 0]) == float(grad[1, 0]) == 0.0
    assert float(grad[0, 1]) != 0.0 and float(grad[1, 1]) != 0.0


def test_only_a_neutral_or_positive_ground_state_gets_the_envelope_floor():
    """An anion's outer electron and excited states decay more slowly than the floor."""
    from psijax.ansatz.head import ENVELOPE_FLOOR

    def floor(system_name, **overrides):
        config = config_lib.Config(system=system_name, **overrides)
        molecule = system.for_config(config)
        net = registry.ansatz(molecule, config)
        return getattr(net, "base", net).head.decay_floor

    assert floor("LiH") == ENVELOPE_FLOOR
    assert floor("LiH", ansatz="psiformer") == ENVELOPE_FLOOR
    assert floor("H 0 0 0; H 0 0 1.4", charge=1, spin=1) == ENVELOPE_FLOOR
    assert floor("H", charge=-1) == 0.0
    assert floor("He", states=2) == 0.0
