"""Pretraining on Hartree-Fock: pyscf energies and orbitals, the loss, and that fitting works."""

import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from pyscf import scf

from psijax.ansatz import FermiNet
from psijax.ansatz.head import _weighted_grams
from psijax.errors import InputError
from psijax.sampling import init_walkers
from psijax.system import preset
from psijax.system.scf import HartreeFock, hartree_fock, hf_orbitals
from psijax.training.pretrain import pretrain, pretrain_loss

TINY = {"layers": ((8, 4),), "n_determinants": 2}


def tiny_net(mol, full_det=True):
    return FermiNet(mol.n_up, mol.n_down, mol.coords, full_det=full_det, **TINY)


# ----------------------------------------------------------------------------- Hartree-Fock
def test_hartree_fock_energies_and_occupations():
    h2 = hartree_fock(preset("H2"))
    rhf = scf.RHF(preset("H2").to_pyscf("sto-6g")).kernel()
    assert h2.converged
    assert abs(h2.energy - rhf) < 1e-6  # closed shell: UHF falls onto RHF
    assert abs(h2.energy - (-1.125324)) < 1e-5  # H2/STO-6G at R = 1.4 bohr
    lih = hartree_fock(preset("LiH"))
    assert (lih.n_up, lih.n_down) == (2, 2) and lih.coeff_up.shape == (6, 2)
    li = hartree_fock(preset("Li"))
    assert (li.n_up, li.n_down) == (2, 1) and li.energy < -7.3


def test_unconverged_hartree_fock_warns_in_the_log(caplog):
    for _ in range(2):  # the second run is given the kept solution, and warned as well
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="psijax.system.scf"):
            hf = hartree_fock(preset("LiH"), max_cycle=2)
        assert not hf.converged
        assert "did not converge" in caplog.text


def test_a_process_solves_a_molecule_once_and_its_solution_is_read_only():
    lih = hartree_fock(preset("LiH"))
    assert hartree_fock(preset("LiH")) is lih  # an equal molecule: the kept solution
    assert hartree_fock(preset("LiH"), "cc-pvdz") is not lih
    with pytest.raises(ValueError, match="read-only"):
        lih.coeff_up[0, 0] = 1.0


@pytest.mark.parametrize("name", ["Li", "LiH"])
def test_hartree_fock_orbitals_match_pyscf(name):
    mol = preset(name)
    hf = hartree_fock(mol)
    mf = scf.UHF(mol.to_pyscf("sto-6g"))
    mf.init_guess = "minao"
    mf.kernel()
    occupied = [c[:, o > 0] for c, o in zip(mf.mo_coeff, mf.mo_occ, strict=True)]
    # no degenerate occupied level here: pyscf's orbitals up to each one's sign
    for mine, theirs in zip((hf.coeff_up, hf.coeff_down), occupied, strict=True):
        theirs *= np.sign(np.sum(mine * theirs, axis=0))
        np.testing.assert_allclose(mine, theirs, atol=1e-8)
    r = np.random.default_rng(0).normal(size=(5, mol.n_electrons, 3)) * 1.5
    up, down = hf.orbitals(r)
    assert up.shape == (5, mol.n_up, mol.n_up) and down.shape == (5, mol.n_down, mol.n_down)
    for w in range(5):
        ao = hf.mol.eval_gto("GTOval_sph", r[w])  # [electron, ao]
        np.testing.assert_allclose(up[w], ao[: mol.n_up] @ occupied[0], rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(down[w], ao[mol.n_up :] @ occupied[1], rtol=1e-8, atol=1e-10)
    with pytest.raises(ValueError, match="shape"):
        hf.orbitals(r[:, :-1])


# ------------------------------------------------------------------------------------- loss
@pytest.mark.parametrize("full_det", [True, False])
def test_loss_against_numpy(full_det):
    mol = preset("Li")  # 2 up, 1 down: the blocks have different sizes
    net = tiny_net(mol, full_det)
    params = net.init(jax.random.key(0))
    walkers = init_walkers(jax.random.key(1), mol, 3)
    up, down = hartree_fock(mol).orbitals(np.asarray(walkers))
    loss = jax.jit(pretrain_loss, static_argnums=0)(net, params, walkers, up, down)
    batched = jax.jit(jax.vmap(net.orbitals, (None, 0)))(params, walkers)
    orbitals = [np.asarray(batched[i]) for i in (0, -1)]
    if full_det:
        target = np.zeros((3, 3, 3))
        target[:, :2, :2], target[:, 2:, 2:] = up, down
        want = np.mean(np.sum((orbitals[0] - target[:, None]) ** 2, axis=(-2, -1)))
    else:
        want = sum(
            np.mean(np.sum((o - t[:, None]) ** 2, axis=(-2, -1)))
            for o, t in zip(orbitals, (up, down), strict=True)
        )
    np.testing.assert_allclose(float(loss), want, rtol=1e-5)


# ------------------------------------------------------------------------------ pretraining
def test_pretraining_reduces_the_loss_and_keeps_the_walker_sharding():
    mol = preset("LiH")
    net = tiny_net(mol)
    params = net.init(jax.random.key(0))
    mesh = jax.make_mesh((4,), ("walkers",))  # Explicit axes: JAX's default
    sharding = NamedSharding(mesh, P("walkers"))
    walkers = jax.device_put(init_walkers(jax.random.key(1), mol, 64), sharding)
    seen = []
    new_params, new_walkers, losses = pretrain(
        jax.random.key(2),
        net,
        params,
        mol,
        walkers,
        steps=30,
        learning_rate=1e-2,
        callback=lambda step, loss: seen.append((step, loss)),
    )
    up, down = hartree_fock(mol).orbitals(np.asarray(walkers))
    before = float(pretrain_loss(net, params, walkers, up, down))
    assert losses.shape == (30,) and np.all(np.isfinite(losses))
    assert np.mean(losses[-5:]) < 0.1 * before, (before, losses)
    assert [s for s, _ in seen] == list(range(30))
    np.testing.assert_allclose([v for _, v in seen], losses, rtol=1e-6)
    assert new_walkers.shape == walkers.shape and new_walkers.dtype == walkers.dtype
    assert new_walkers.sharding.is_equivalent_to(sharding, 3)
    assert not np.allclose(new_walkers, walkers)
    assert jax.tree.structure(new_params) == jax.tree.structure(params)


@pytest.mark.parametrize(("name", "full_det"), [("LiH", False), ("H", True), ("H", False)])
def test_split_determinants_and_one_electron(name, full_det):
    mol = preset(name)
    net = tiny_net(mol, full_det)
    params = net.init(jax.random.key(0))
    walkers = init_walkers(jax.random.key(1), mol, 16)
    new_params, new_walkers, losses = pretrain(
        jax.random.key(2), net, params, mol, walkers, steps=3, learning_rate=1e-2
    )
    assert losses.shape == (3,) and np.all(np.isfinite(losses))
    assert new_walkers.shape == walkers.shape and bool(jnp.all(jnp.isfinite(new_walkers)))
    moved = jax.tree.map(lambda a, b: not np.allclose(a, b), new_params, params)
    assert any(jax.tree.leaves(moved))


@pytest.mark.parametrize(
    "atoms,spin,ecp",
    [("Al 0 0 0", 1, "ccecp"), ("Cl 0 0 0", 1, "ccecp"), ("Ne 0 0 0", 0, None),
     ("N 0 0 0; N 0 0 2.07", 0, None), ("Na 0 0 0; Cl 0 0 4.4", 0, "ccecp")],
)  # fmt: skip
def test_with_an_ecp_the_head_is_fitted_to_every_walker_of_a_default_run(atoms, spin, ecp):
    """The loss's gradient takes the fitted head as fixed, its true gradient only where the
    head is fitted to the walkers the loss is taken over: with an ECP, a fit to part of them
    overfitted that part and pretraining diverged (Al at 1024 walkers, fitted to 256).
    All-electron runs fit 256 (fitted to all, Be trained worse)."""
    from psijax.system import resolve, sizing
    from psijax.training import pretrain as pretraining

    molecule = resolve(atoms, spin=spin, ecp=ecp)
    fitted = pretraining.fit_walkers_for(molecule)
    if ecp:
        assert sizing.walkers_for(molecule) <= fitted == pretraining.ECP_FIT_WALKERS
    else:
        assert fitted == pretraining.FIT_WALKERS == 256


def test_pretraining_on_two_devices_follows_one_device():
    """The head's fit on several devices sees the same inputs as on one (computed from the
    gathered walkers, not each device's share), so the runs agree to rounding. At the
    default sizes a fit from inputs that differ in their last bits moved the walkers onto
    other paths within 10 steps (losses 2e-2 apart here, 6e-2 and walkers 2.3 bohr apart in
    a plain script); smaller networks hide it."""
    mol = preset("LiH")
    net = FermiNet(mol.n_up, mol.n_down, mol.coords, n_determinants=16)  # psijax's defaults
    params = net.init(jax.random.key(0))
    runs = []
    for n in (1, 2):
        mesh = jax.make_mesh((n,), ("walkers",), devices=jax.devices()[:n])
        walkers = jax.device_put(
            init_walkers(jax.random.key(1), mol, 256), NamedSharding(mesh, P("walkers"))
        )
        _, moved, losses = pretrain(jax.random.key(2), net, params, mol, walkers, steps=10)
        runs.append((losses, np.asarray(moved)))
    (losses_1, walkers_1), (losses_2, walkers_2) = runs
    np.testing.assert_allclose(losses_2, losses_1, rtol=1e-3)
    np.testing.assert_allclose(walkers_2, walkers_1, atol=1e-4)


def test_a_network_without_head_inputs_is_pretrained_by_adam_alone(monkeypatch):
    from psijax.training import pretrain as pretrain_lib

    mol = preset("LiH")
    net = tiny_net(mol)
    assert pretrain_lib.fits_head(net)
    monkeypatch.setattr(pretrain_lib, "fits_head", lambda net: False)
    params = net.init(jax.random.key(0))
    walkers = init_walkers(jax.random.key(1), mol, 16)
    new, _, losses = pretrain(jax.random.key(2), net, params, mol, walkers, steps=20)
    assert np.mean(losses[-5:]) < 0.5 * losses[0]
    # the envelopes were not set to HF decays (lithium's 1s: 2.4): 20 Adam steps of 1e-2
    assert float(jnp.max(jnp.abs(new["orbitals"]["up_sigma"] - 1.0))) < 0.25
    moved = jax.tree.map(lambda a, b: not np.allclose(a, b), new, params)
    assert moved["orbitals"]["up"]["w"]  # Adam moved the projection itself


def test_zero_steps_returns_the_inputs_and_bad_molecule_is_refused():
    mol = preset("H")
    net = tiny_net(mol)
    params = net.init(jax.random.key(0))
    walkers = init_walkers(jax.random.key(1), mol, 4)
    p, w, losses = pretrain(jax.random.key(2), net, params, mol, walkers, steps=0)
    assert p is params and w is walkers and losses.shape == (0,)
    with pytest.raises(ValueError, match="electrons"):
        pretrain(jax.random.key(2), net, params, preset("Li"), walkers, steps=1)


@pytest.mark.parametrize(
    ("atoms", "basis", "spin", "cart"),
    [
        ("Li 0 0 0; H 0 0 3.015", "sto-6g", 0, False),
        ("C 0 0 0; O 0 0 2.1", "cc-pvdz", 0, False),  # d shells: cartesian -> spherical
        ("N 0 0 0", "cc-pvtz", 3, False),  # f shells, two contractions per shell
        ("C 0 0 0; O 0 0 2.1", "6-31g*", 0, True),  # cartesian d
    ],
)
def test_jax_hf_orbitals_match_pyscf(atoms, basis, spin, cart):
    from pyscf import gto

    jax.config.update("jax_enable_x64", True)
    try:
        mol = gto.M(atom=atoms, basis=basis, unit="bohr", spin=spin, cart=cart, verbose=0)
        rng = np.random.default_rng(0)
        n = mol.nelectron
        n_up, n_down = (n + spin) // 2, (n - spin) // 2
        hf = HartreeFock(
            mol, rng.normal(size=(mol.nao, n_up)), rng.normal(size=(mol.nao, n_down)), 0.0
        )
        r = rng.normal(size=(3, n, 3)) * 1.5
        want = hf.orbitals(r)
        got = jax.jit(hf_orbitals(hf))(jnp.asarray(r))
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)
    finally:
        jax.config.update("jax_enable_x64", False)


# ------------------------------------------------------------------- length of pretraining
def test_the_relative_residual_is_the_loss_over_the_targets_norm():
    from psijax.training.pretrain import relative_residual

    residual = relative_residual(np.array([2e-3, 4e-3]), np.array([10.0, 30.0]))
    assert residual == pytest.approx(1.5e-4)
    assert relative_residual(np.array([1.0]), np.array([0.0])) == 0.0  # nothing to fit


def test_pretraining_goes_on_while_the_orbitals_are_off_up_to_its_limit(monkeypatch):
    from psijax.training import pretrain as pretrain_lib

    mol = preset("LiH")
    net = tiny_net(mol)
    params = net.init(jax.random.key(0))
    walkers = init_walkers(jax.random.key(1), mol, 16)
    run = lambda **kw: pretrain(jax.random.key(2), net, params, mol, walkers, steps=10,
                                learning_rate=1e-2, **kw)[2]  # fmt: skip
    monkeypatch.setattr(pretrain_lib, "CHUNK", 5)
    monkeypatch.setattr(pretrain_lib, "EXTEND_FROM", 10)
    monkeypatch.setattr(pretrain_lib, "TOLERANCE", 0.0)  # never close enough
    assert run().shape == (10,)  # no limit: exactly its steps
    assert run(max_steps=40).shape == (40,)  # never close enough: up to the limit
    monkeypatch.setattr(pretrain_lib, "EXTEND_FROM", 11)
    assert run(max_steps=40).shape == (10,)  # too short a pretraining to extend
    monkeypatch.setattr(pretrain_lib, "EXTEND_FROM", 10)
    monkeypatch.setattr(pretrain_lib, "TOLERANCE", np.inf)  # always close enough
    assert run(max_steps=40).shape == (10,)


def test_the_config_gives_pretraining_ten_times_its_steps_at_most():
    from psijax.config import Config, pretrain_limit

    assert pretrain_limit(Config()) == 500
    assert pretrain_limit(Config(pretrain_steps=300, pretrain_max_steps=500)) == 500
    assert pretrain_limit(Config(pretrain_steps=300, pretrain_max_steps=0)) == 300
    with pytest.raises(InputError, match="pretrain_max_steps=-1"):
        Config(pretrain_max_steps=-1)


# ---------------------------------------------------- the head's least squares, envelopes
def _head_inputs(name: str, full_det: bool):
    """A tiny float64 network of preset ``name``, its parameters and the head's inputs at
    16 walkers (call with x64 enabled)."""
    mol = preset(name)
    net = tiny_net(mol, full_det)
    params = net.init(jax.random.key(0), jnp.float64)
    walkers = init_walkers(jax.random.key(1), mol, 16).astype(jnp.float64)
    h, r_ae = jax.vmap(net.head_inputs, (None, 0))(params, walkers)
    return mol, net, params, h, r_ae


@pytest.mark.parametrize(("name", "full_det"), [("Li", True), ("Li", False), ("H", False)])
def test_the_head_fit_recovers_orbitals_the_head_can_represent(name, full_det):
    """Targets made by the head itself from some projection: the fit from other weights
    gives them back, in every spin block and layout."""
    jax.config.update("jax_enable_x64", True)
    try:
        _, net, params, h, r_ae = _head_inputs(name, full_det)
        true = dict(params["orbitals"])
        for i, spin in enumerate(s for s in ("up", "down") if s in true):
            w = true[spin]["w"]
            one = jax.random.normal(jax.random.key(7 + i), (w.shape[0], w.shape[1] // 2))
            true[spin] = {"w": jnp.tile(one, (1, 2))}  # both determinants alike
        wanted = jax.vmap(net.head.orbitals, (None, 0, 0))(true, h, r_ae)
        targets = [m[:, 0] for m in wanted]  # [W, n, n] per block, determinant axis dropped
        fitted = net.head.fit(params["orbitals"], h, r_ae, targets, ridge=1e-12)
        got = jax.vmap(net.head.orbitals, (None, 0, 0))(fitted, h, r_ae)
        for g, t in zip(got, targets, strict=True):
            np.testing.assert_allclose(g, jnp.broadcast_to(t[:, None], g.shape), atol=1e-8)
    finally:
        jax.config.update("jax_enable_x64", False)


@pytest.mark.parametrize("full_det", [True, False])
def test_the_head_fit_recovers_a_target_per_determinant(full_det):
    """Targets with a determinant axis (a state started on two configurations): each
    determinant is fitted to its own, and the pretraining loss takes them so (zero there)."""
    from psijax.training.pretrain import _orbital_loss

    jax.config.update("jax_enable_x64", True)
    try:
        mol, net, params, h, r_ae = _head_inputs("Li", full_det)
        true = dict(params["orbitals"])
        for i, spin in enumerate(s for s in ("up", "down") if s in true):
            true[spin] = {"w": jax.random.normal(jax.random.key(7 + i), true[spin]["w"].shape)}
        targets = jax.vmap(net.head.orbitals, (None, 0, 0))(true, h, r_ae)  # [W, k, ., .]
        assert not np.allclose(targets[0][:, 0], targets[0][:, 1])
        fitted = net.head.fit(params["orbitals"], h, r_ae, targets, ridge=1e-12)
        got = jax.vmap(net.head.orbitals, (None, 0, 0))(fitted, h, r_ae)
        for g, t in zip(got, targets, strict=True):
            np.testing.assert_allclose(g, t, atol=1e-8)
        # the loss of the same target for every determinant, given once or per determinant
        up = targets[0][:, 0, : mol.n_up, : mol.n_up]
        down = targets[-1][:, 0, -mol.n_down :, -mol.n_down :]
        k = net.n_determinants
        each = [jnp.repeat(t[:, None], k, axis=1) for t in (up, down)]
        np.testing.assert_allclose(
            _orbital_loss(net, got, *each), _orbital_loss(net, got, up, down), rtol=1e-12
        )
    finally:
        jax.config.update("jax_enable_x64", False)


def test_the_weighted_grams_are_the_einsum_of_the_rows():
    """The head fit's Gram matrices, formed from their upper triangle, equal the plain
    weighted sum of the rows' outer products in every entry (both triangles)."""
    rng = np.random.default_rng(0)
    weights, feats = rng.random((30, 5)), rng.normal(size=(30, 4))
    got = _weighted_grams(jnp.asarray(weights), jnp.asarray(feats))
    want = np.einsum("sc,sf,sg->cfg", weights, feats, feats)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_the_head_fit_minimises_the_pretraining_loss(monkeypatch):
    """At the fit the loss's gradient in the projection vanishes (Hartree-Fock targets,
    which the head cannot represent exactly), without the ridge."""
    from psijax.training import pretrain as pretrain_lib
    from psijax.training.pretrain import fit_head

    monkeypatch.setattr(pretrain_lib, "RIDGE", 1e-12)
    jax.config.update("jax_enable_x64", True)
    try:
        mol = preset("LiH")
        net = tiny_net(mol)
        params = net.init(jax.random.key(0), jnp.float64)
        walkers = init_walkers(jax.random.key(1), mol, 32).astype(jnp.float64)
        up, down = hartree_fock(mol).orbitals(np.asarray(walkers))
        grad = lambda p: jax.grad(pretrain_loss, argnums=1)(net, p, walkers, up, down)
        fitted = fit_head(net, params, walkers, up, down)
        before, after = grad(params)["orbitals"]["up"]["w"], grad(fitted)["orbitals"]["up"]["w"]
        assert float(jnp.max(jnp.abs(after))) < 1e-3 * float(jnp.max(jnp.abs(before)))
        assert pretrain_loss(net, fitted, walkers, up, down) < pretrain_loss(
            net, params, walkers, up, down
        )
    finally:
        jax.config.update("jax_enable_x64", False)


@pytest.mark.parametrize("full_det", [True, False])
def test_envelopes_start_decaying_as_their_hartree_fock_orbitals(full_det):
    from psijax.system.scf import Spectrum
    from psijax.training.pretrain import DECAY_FLOOR, envelope_decays

    mol = preset("Li")  # 2 up, 1 down
    net = tiny_net(mol, full_det)
    params = net.init(jax.random.key(0))
    hf = hartree_fock(mol)
    up, down = (s.occupied for s in hf.spectrum)
    assert up[0] < -2  # lithium's 1s
    new = envelope_decays(net, params, hf)["orbitals"]
    decay = lambda e: np.sqrt(-2 * e)
    columns = {"up": np.r_[up, down], "down": np.r_[up, down]} if full_det else {
        "up": up, "down": down}  # fmt: skip
    for spin, energies in columns.items():
        sigma = np.asarray(new[spin + "_sigma"])  # [atoms, determinants * columns]
        want = np.tile(decay(energies), net.n_determinants)
        np.testing.assert_allclose(sigma, np.broadcast_to(want, sigma.shape), rtol=1e-6)
    unbound = Spectrum(np.array([-4.0, 0.3]), up[:0], np.zeros((hf.mol.nao, 0)))
    sigma = envelope_decays(net, params, HartreeFock(
        hf.mol, hf.coeff_up, hf.coeff_down, hf.energy, spectrum=(unbound, hf.spectrum[1])
    ))["orbitals"]["up_sigma"]  # fmt: skip
    assert float(sigma[0, 1]) == pytest.approx(DECAY_FLOOR)  # an unbound orbital: the floor
    no_spectrum = HartreeFock(hf.mol, hf.coeff_up, hf.coeff_down, hf.energy)
    assert envelope_decays(net, params, no_spectrum) is params


def test_pretraining_moves_the_walkers_by_hartree_focks_density(monkeypatch):
    mol = preset("H")
    net = tiny_net(mol)
    params = net.init(jax.random.key(0))

    def no_network(*_):
        raise AssertionError("pretraining's sampler evaluated the network")

    monkeypatch.setattr(type(net), "log_abs", no_network)
    walkers = init_walkers(jax.random.key(1), mol, 1024)
    _, walkers, _ = pretrain(jax.random.key(2), net, params, mol, walkers, steps=40)
    r = np.linalg.norm(np.asarray(walkers)[:, 0] - np.asarray(mol.coords[0]), axis=-1)
    # <r> and its spread under |phi|^2 of the UHF 1s orbital, by radial quadrature
    grid = np.linspace(1e-4, 15.0, 6001)
    points = np.zeros((grid.size, 1, 3))
    points[:, 0, 2] = grid
    up, _ = hartree_fock(mol).orbitals(points + np.asarray(mol.coords[0]))
    density = up[:, 0, 0] ** 2 * grid**2
    mean = np.trapezoid(density * grid, grid) / np.trapezoid(density, grid)
    spread = np.sqrt(np.trapezoid(density * grid**2, grid) / np.trapezoid(density, grid) - mean**2)
    assert abs(r.mean() - mean) < 4 * spread / np.sqrt(r.size), (r.mean(), mean)
