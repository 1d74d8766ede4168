"""Crystals as a run's system: the input and its refusals, the nuclei's Ewald energy and the
Hartree-Fock orbitals at Gamma against pyscf.pbc, the crystal FermiNet (periodic in every
electron, antisymmetric, its Laplacian), and training, resuming, evaluating and loading."""

from __future__ import annotations

import csv
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import psijax
from psijax import config as config_lib
from psijax import hamiltonian, registry, system
from psijax.ansatz.crystal import CrystalFermiNet, displacement_features
from psijax.ansatz.periodic import pair_features
from psijax.cli.main import main
from psijax.hamiltonian.ewald import PeriodicCoulomb
from psijax.system import Crystal, scf

from close import assert_energies_close, column

# LiH in the rocksalt structure, its primitive (fcc) cell: a = 4.0834 angstrom
HALF = 4.0834 / 2
LIH = dict(system=f"Li 0 0 0; H {HALF} 0 0", unit="angstrom",
           lattice=f"0 {HALF} {HALF}; {HALF} 0 {HALF}; {HALF} {HALF} 0")  # fmt: skip
TINY = dict(layers=[[16, 4]], determinants=2)


def lih_config(**values) -> config_lib.Config:
    return config_lib.from_dict({**LIH, **values})


def argv(**values) -> list[str]:
    return [x for k, v in {**LIH, **values}.items() for x in (f"--{k.replace('_', '-')}", v)]


@pytest.mark.parametrize(
    "extra, problem",
    [
        (dict(ecp="ccecp"), "effective core potentials are not built for periodic cells"),
        (dict(charge="1"), "a crystal's cell must be neutral"),
        (dict(states="2"), "a crystal is solved for its ground state only"),
        (dict(lattice="0 2 2; 2 0 2"), "lattice"),
        (dict(lattice="1 0 0; 0 1 0; 0 0 0"), "lattice vector a3 is zero"),
        (dict(system=f"H 0 0 0; H {2 * HALF} {2 * HALF} 0"), "apart"),  # on an image
        (dict(ansatz="psiformer"), "has no periodic form"),
    ],
)
def test_bad_crystal_input_is_one_line_and_writes_nothing(extra, problem, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", *argv(**extra), "--out", str(out), "--steps", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert problem in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_relax_and_scan_refuse_a_crystal(tmp_path, capsys):
    out = tmp_path / "curve"
    assert main(["relax", *argv(), "--out", str(out)]) == 2
    assert "a crystal's forces are not built" in capsys.readouterr().err and not out.exists()
    scan = ["scan", *argv(), "--bond", "1-2", "--lengths", "1.9:2.1:3", "--out", str(out)]
    assert main(scan) == 2
    assert "a scan of a crystal is not built" in capsys.readouterr().err and not out.exists()


def test_a_lattice_is_not_for_the_gas(tmp_path, capsys):
    gas = ["--system", "heg", "--electrons", "14", "--rs", "5", "--lattice", "1 0 0; 0 1 0; 0 0 1"]
    assert main(["train", *gas, "--out", str(tmp_path / "r")]) == 2
    assert "leave --lattice out" in capsys.readouterr().err


def test_the_nuclei_energy_and_hartree_fock_orbitals_are_pyscf_pbc_s():
    """The nuclei's Ewald energy against pyscf.pbc's, and the occupied orbitals evaluated
    in JAX (Bloch sums in real and reciprocal space, d shells included) against pyscf.pbc's
    own, at positions anywhere (outside the cell too): 1e-8 of the orbitals' scale."""
    crystal = system.for_config(lih_config())
    assert isinstance(crystal, Crystal) and crystal.n_electrons == 4
    cell = crystal.to_pyscf("cc-pvdz")
    nuclei = PeriodicCoulomb.of(crystal).nucleus_nucleus
    assert nuclei == pytest.approx(cell.energy_nuc(), rel=1e-10)
    hf = scf.hartree_fock(crystal, "cc-pvdz")
    assert hf.converged and hf.energy < cell.energy_nuc()
    r = np.random.default_rng(0).normal(size=(5, 4, 3)) * 6.0
    with jax.enable_x64(True):
        up, down = scf.hf_orbitals(hf)(jnp.asarray(r))
        moved = r + np.random.default_rng(1).integers(-2, 3, (5, 4, 1)) * crystal.lattice.matrix[0]
        up_moved, _ = scf.hf_orbitals(hf)(jnp.asarray(moved))
    ao = cell.pbc_eval_gto("GTOval_sph", r.reshape(-1, 3)).reshape(5, 4, -1)
    expected = [ao[:, :2] @ hf.coeff_up, ao[:, 2:] @ hf.coeff_down]
    scale = max(np.abs(e).max() for e in expected)
    for got, want in zip((up, down), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-8 * scale)
    np.testing.assert_allclose(up_moved, up, rtol=0, atol=1e-12 * scale)


def test_dry_run_shows_the_cell_and_its_hartree_fock(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", *argv(), "--layers", "16x4", "--dry-run", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "crystal: 2 atoms (Li H) and 4 electrons (2 up, 2 down) per cell" in text
    assert "volume 114.86" in text and "Ewald energy -3.39447716" in text
    assert "UHF/sto-6g at Gamma, per cell E = -8.4251" in text
    assert "envelopes of periodic distances to 2 nuclei" in text and not out.exists()


def test_the_crystal_takes_the_periodic_terms_and_ansatz():
    config = lih_config(**TINY)
    crystal = system.for_config(config)
    terms = registry.hamiltonian_terms(crystal, config)
    assert [type(t) for t in terms] == [hamiltonian.Kinetic, PeriodicCoulomb]
    assert terms[1].nuclear_charges == (3.0, 1.0)
    assert isinstance(registry.ansatz(crystal, config), CrystalFermiNet)
    assert registry.observable("forces", crystal) is None  # no periodic forces


def test_the_periodic_distance_to_a_nucleus_is_the_distance_near_it():
    """d = |r| + O(|r|^7) in a skewed (fcc) cell: within 1e-5 relative up to a thirtieth of
    the shortest lattice vector (measured 4e-6), 3e-3 up to a tenth (2.5e-3), where the
    electron gas's first-order distance is off by 20 times as much (0.9% and 7.4%); exactly
    |a_i| / 2 at the middle of each vector."""
    vectors = system.for_config(lih_config()).lattice.matrix
    to_phase = 2.0 * np.pi * np.linalg.inv(vectors)
    rng = np.random.default_rng(0)
    directions = rng.normal(size=(50, 3))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    shortest = np.linalg.norm(vectors, axis=1).min()
    for reach, rtol in ((shortest / 30, 1e-5), (shortest / 10, 3e-3)):
        r = directions * reach * rng.uniform(0.5, 1.0, size=(50, 1))
        with jax.enable_x64(True):
            _, d2 = displacement_features(jnp.asarray(r @ to_phase), vectors)
            _, first = pair_features(jnp.asarray(r @ to_phase), vectors)
        exact = np.linalg.norm(r, axis=1)
        np.testing.assert_allclose(np.sqrt(d2), exact, rtol=rtol)
        assert np.max(np.abs(np.sqrt(first) / exact - 1)) > 20 * rtol
    with jax.enable_x64(True):
        _, mid = displacement_features(jnp.asarray(0.5 * vectors @ to_phase), vectors)
    np.testing.assert_allclose(np.sqrt(mid), np.linalg.norm(vectors, axis=1) / 2, rtol=1e-12)


@pytest.mark.parametrize("full_det", [True, False])
def test_psi_is_periodic_in_every_electron_and_antisymmetric(full_det):
    config = lih_config(full_det=full_det, **TINY)
    crystal = system.for_config(config)
    net = registry.ansatz(crystal, config)
    rng = np.random.default_rng(7)
    with jax.enable_x64(True):
        params = net.init(jax.random.PRNGKey(3), jnp.float64)
        apply = jax.jit(jax.vmap(lambda r: net.apply(params, r)))
        r = rng.normal(size=(6, 4, 3)) * 3.0
        shifted = r.copy()
        for w in range(6):  # each walker: a drawn electron moved by a drawn lattice vector
            shifted[w, rng.integers(4)] += rng.integers(-2, 3, 3) @ crystal.lattice.matrix
        swapped = r[:, [1, 0, 2, 3]]  # the two up electrons exchanged
        base, moved, exchanged = apply(r), apply(shifted), apply(swapped)
    np.testing.assert_allclose(moved.log_abs, base.log_abs, rtol=0, atol=1e-10)
    np.testing.assert_array_equal(moved.sign, base.sign)
    np.testing.assert_allclose(exchanged.log_abs, base.log_abs, rtol=0, atol=1e-10)
    np.testing.assert_array_equal(exchanged.sign, -base.sign)


def test_laplacian_operators_agree_on_the_crystal_network():
    """The default (forward) Laplacian against the dense Hessian's trace, float64."""
    config = lih_config(**TINY)
    crystal = system.for_config(config)
    net = registry.ansatz(crystal, config)
    with jax.enable_x64(True):
        params = net.init(jax.random.PRNGKey(5), jnp.float64)
        r = jax.random.normal(jax.random.PRNGKey(6), (3, 4, 3), jnp.float64) * 3.0
        kinetic = {}
        for name in ("forward", "hessian"):
            terms = hamiltonian.for_config(crystal, config, registry.laplacian(name, 4))
            local = terms.local_energy(net)
            kinetic[name] = jax.jit(jax.vmap(lambda x, e=local: e.parts(params, x)["kinetic"]))(r)
    np.testing.assert_allclose(kinetic["forward"], kinetic["hessian"], rtol=1e-9)


def test_train_resume_evaluate_and_load(tmp_path):
    out = tmp_path / "lih"
    crystal = system.for_config(lih_config())
    settings = dict(walkers=32, out=str(out), pretrain_steps=3, pretrain_max_steps=3,
                    checkpoint_every=3, progress=False, **TINY)  # fmt: skip
    first = psijax.train(system=crystal, steps=4, **settings)  # from Python: a Crystal
    saved = json.loads((out / "config.json").read_text())
    assert system.for_config(config_lib.from_dict(saved)) == crystal
    summary = json.loads((out / "summary.json").read_text())
    assert summary["energy_per"] == "cell" and summary["electrons"] == 4
    assert summary["cell_volume"] == pytest.approx(crystal.lattice.volume)
    resumed = psijax.train(out=str(out), resume=True, steps=6, progress=False)
    np.testing.assert_allclose(resumed.energies[:4], first.energies, rtol=1e-6)
    evaluation = psijax.evaluate(out, steps=4, walkers=32, burn_in=2, progress=False)
    assert np.all(np.isfinite(evaluation.energies))
    assert {"energy", "kinetic", "electron_nucleus", "nucleus_nucleus"} <= set(evaluation.estimates)
    assert not any(k.startswith(("dipole", "force")) for k in evaluation.estimates)
    wf = psijax.load(out)
    assert isinstance(wf.molecule, Crystal) and wf.step == 6
    walkers = np.asarray(wf.walkers[:4])
    shifted = walkers + crystal.lattice.matrix[1]
    np.testing.assert_allclose(wf.log_abs(shifted), wf.log_abs(walkers), atol=1e-4)
    np.testing.assert_allclose(wf.local_energy(shifted), wf.local_energy(walkers), rtol=1e-3)


def test_one_and_two_devices_give_the_same_steps(tmp_path):
    """A crystal's walkers sharded over two devices take the same steps as on one (float32
    sums in another order; pretraining fits on the same walkers on any device count)."""
    rows = {}
    for n in (1, 2):
        out = tmp_path / f"lih-{n}"
        psijax.train(**LIH, walkers=32, out=str(out), steps=3, devices=n, pretrain_steps=3,
                     pretrain_max_steps=3, burn_in_steps=5, progress=False, **TINY)  # fmt: skip
        rows[n] = list(csv.DictReader((out / "metrics.csv").read_text().splitlines()))
    assert_energies_close(column(rows[2], "energy"), column(rows[1], "energy"),
                          column(rows[1], "variance"), rtol=1e-4)  # fmt: skip


def test_pretraining_at_512_walkers_sees_the_orbitals_it_evaluates():
    """Pretraining's loop evaluates the Bloch-summed orbitals at its walkers and, inside the
    sampler's loop, at the proposals: with the reciprocal-space sum as a dot of a constant
    table, jaxlib 0.10's CPU backend computed the first as garbage at 512 walkers (losses
    inf, then NaN). The first step's loss is the one outside any loop, to rounding."""
    from psijax.sampling.walkers import init_walkers
    from psijax.training import pretrain

    config = lih_config(**TINY)
    crystal = system.for_config(config)
    net = registry.ansatz(crystal, config)
    hf = scf.hartree_fock(crystal, "sto-6g")
    params = pretrain.envelope_decays(net, net.init(jax.random.PRNGKey(1)), hf)
    walkers = jnp.asarray(init_walkers(jax.random.PRNGKey(0), crystal, 512))
    up, down = scf.hf_orbitals(hf)(walkers)
    _, first, _ = jax.jit(
        lambda p: pretrain.fit_and_gradient(net, p, walkers, up, down, walkers.sharding)
    )(params)
    _, _, losses = pretrain.pretrain(jax.random.PRNGKey(2), net, params, crystal, walkers,
                                     steps=2, hf=hf)  # fmt: skip
    assert np.all(np.isfinite(losses))
    np.testing.assert_allclose(losses[0], first, rtol=1e-4)
