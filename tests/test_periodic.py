"""The electron gas as a run's system: its input, its Hamiltonian's terms, the periodic
FermiNet (periodic in every electron, antisymmetric, starting as the plane-wave
determinant), and training, resuming, evaluating and loading a run of it."""

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
from psijax.ansatz.periodic import PeriodicFermiNet
from psijax.cli.main import main
from psijax.errors import InputError
from psijax.hamiltonian.ewald import PeriodicCoulomb
from psijax.system import ElectronGas

from close import assert_energies_close, column

HF_14_RS5 = -0.8125487031  # the plane-wave determinant's energy (tests/test_electron_gas.py)
TINY = dict(layers=[[16, 4]], determinants=2)


def gas_config(**values) -> config_lib.Config:
    return config_lib.from_dict({"system": "heg", "electrons": 14, "rs": 5.0, **values})


@pytest.mark.parametrize(
    "flags, problem",
    [
        (["--rs", "-5"], "rs=-5.0 must be positive"),
        (["--electrons", "12"], "6 up and 6 down, not closed shells"),
        (["--spin", "14"], "14 up and 0 down, not closed shells"),
        (["--spin", "1"], "spin 1 is impossible with 14 electrons"),
        (["--ecp", "ccecp"], "--ecp has no meaning for the electron gas"),
        (["--basis", "sto-3g"], "--basis has no meaning for the electron gas"),
        (["--charge", "1"], "--charge has no meaning for the electron gas"),
        (["--states", "2"], "the electron gas is solved for its ground state only"),
        (["--ansatz", "psiformer"], "has no periodic form"),
        (["--pretrain-steps", "100"], "the electron gas takes no pretraining"),
    ],
)
def test_bad_gas_input_is_one_line_and_writes_nothing(flags, problem, tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "--system", "heg", "--electrons", "14", "--rs", "5", *flags]
    assert main([*argv, "--out", str(out), "--steps", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert problem in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_gas_words_belong_to_the_gas(tmp_path, capsys):
    assert main(["train", "--system", "H2", "--rs", "5", "--out", str(tmp_path / "r")]) == 2
    assert "--electrons and --rs describe the electron gas" in capsys.readouterr().err
    assert main(["train", "--system", "heg", "--rs", "5", "--out", str(tmp_path / "r")]) == 2
    assert "give e.g. --electrons 14 --rs 5" in capsys.readouterr().err


def test_relax_and_scan_refuse_the_gas(tmp_path, capsys):
    out = tmp_path / "relax"
    gas = ["--system", "heg", "--electrons", "14", "--rs", "5", "--out", str(out)]
    assert main(["relax", *gas]) == 2
    assert "the electron gas has none" in capsys.readouterr().err and not out.exists()
    assert main(["scan", *gas, "--bond", "1-2", "--lengths", "1:2:3"]) == 2
    assert "the electron gas has none" in capsys.readouterr().err and not out.exists()


def test_dry_run_shows_the_cell_and_hartree_fock(tmp_path, capsys):
    argv = ["train", "--system", "heg", "--electrons", "14", "--rs", "5", "--layers", "16x4",
            "--dry-run", "--out", str(tmp_path / "run")]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "14 electrons (7 up, 7 down)" in text
    assert "cube of side 19.425650 bohr, volume 7330.382858 bohr^3; rs = 5 bohr" in text
    assert "xi = -0.1460593352 Ha" in text  # -2.8372974795 / L
    assert "E = -0.8125487 Ha per cell, -0.0580392 Ha per electron" in text
    assert "periodic FermiNet" in text and "no pretraining" in text
    assert "pretrain_steps = 0" in text and not (tmp_path / "run").exists()


def test_the_gas_takes_the_periodic_terms_and_ansatz():
    config = gas_config(**TINY)
    gas = system.for_config(config)
    assert gas == ElectronGas(7, 7, 5.0) and gas.lattice is not None
    terms = registry.hamiltonian_terms(gas, config)
    assert [type(t) for t in terms] == [hamiltonian.Kinetic, PeriodicCoulomb]
    molecule = system.for_config(config_lib.Config(system="H2"))
    assert PeriodicCoulomb not in [type(t) for t in registry.hamiltonian_terms(molecule, config)]
    assert isinstance(registry.ansatz(gas, config), PeriodicFermiNet)
    polarised = system.for_config(gas_config(electrons=7, spin=7))
    assert (polarised.n_up, polarised.n_down) == (7, 0)


@pytest.mark.parametrize("full_det", [True, False])
def test_psi_is_periodic_in_every_electron_and_antisymmetric(full_det):
    config = gas_config(electrons=8, spin=6, full_det=full_det, **TINY)  # 7 up, 1 down
    gas = system.for_config(config)
    net = registry.ansatz(gas, config)
    rng = np.random.default_rng(7)
    with jax.enable_x64(True):
        params = net.init(jax.random.PRNGKey(3), jnp.float64)
        apply = jax.jit(jax.vmap(lambda r: net.apply(params, r)))
        r = rng.uniform(0.0, gas.length, (6, 8, 3))
        shifted = r.copy()
        for w in range(6):  # each walker: a drawn electron moved by a drawn lattice vector
            shifted[w, rng.integers(8)] += rng.integers(-2, 3, 3) @ gas.lattice.matrix
        swapped = r[:, [1, 0, *range(2, 8)]]  # two up electrons exchanged
        base, moved, exchanged = apply(r), apply(shifted), apply(swapped)
    np.testing.assert_allclose(moved.log_abs, base.log_abs, rtol=0, atol=1e-10)
    np.testing.assert_array_equal(moved.sign, base.sign)
    np.testing.assert_allclose(exchanged.log_abs, base.log_abs, rtol=0, atol=1e-10)
    np.testing.assert_array_equal(exchanged.sign, -base.sign)


def test_the_network_starts_as_the_plane_wave_determinant():
    """Without the Jastrow factor and with its projections at zero, the network is the
    plane-wave determinant times the number of determinants; at its start (projections
    0.01 of FermiNet's) log|psi| differed from the determinant's by 0.012-0.025 (standard
    deviation over walkers) and the kinetic local energy by at most 0.008 Ha at 16 uniform
    walkers (three seeds): the bounds are 4 and 6 times those."""
    config = gas_config(jastrow=False, layers=[[16, 4], [16, 4]], determinants=2)
    gas = system.for_config(config)
    net = registry.ansatz(gas, config)
    with jax.enable_x64(True):
        params = net.init(jax.random.PRNGKey(0), jnp.float64)
        zero = {**params, "orbitals": jax.tree.map(jnp.zeros_like, params["orbitals"])}
        local = hamiltonian.for_config(gas, config).local_energy(net)
        r = jax.random.uniform(jax.random.PRNGKey(1), (16, 14, 3), jnp.float64) * gas.length
        pw = jax.vmap(lambda x: gas.determinant().apply(None, x))(r)
        fn = jax.jit(jax.vmap(lambda p, x: (net.apply(p, x), local.parts(p, x)["kinetic"]),
                              (None, 0)))  # fmt: skip
        (psi0, t0), (psi, t) = fn(zero, r), fn(params, r)
    np.testing.assert_allclose(psi0.log_abs - pw.log_abs, np.log(2.0), rtol=0, atol=1e-10)
    np.testing.assert_array_equal(psi0.sign, pw.sign)
    np.testing.assert_allclose(t0, gas.kinetic_energy(), rtol=1e-9)
    assert np.std(np.asarray(psi.log_abs - pw.log_abs)) < 0.1
    np.testing.assert_array_equal(psi.sign, pw.sign)
    assert np.max(np.abs(np.asarray(t) - gas.kinetic_energy())) < 0.05


def test_laplacian_operators_agree_on_the_periodic_network():
    """The default (sparse forward) Laplacian against the dense Hessian's trace, float64,
    for 7 + 1 electrons."""
    config = gas_config(electrons=8, spin=6, **TINY)
    gas = system.for_config(config)
    net = registry.ansatz(gas, config)
    with jax.enable_x64(True):
        params = net.init(jax.random.PRNGKey(5), jnp.float64)
        r = jax.random.uniform(jax.random.PRNGKey(6), (3, 8, 3), jnp.float64) * gas.length
        kinetic = {}
        for name in ("forward-sparse", "hessian"):
            terms = hamiltonian.for_config(gas, config, registry.laplacian(name, 8))
            local = terms.local_energy(net)
            kinetic[name] = jax.jit(jax.vmap(lambda x, e=local: e.parts(params, x)["kinetic"]))(r)
    np.testing.assert_allclose(kinetic["forward-sparse"], kinetic["hessian"], rtol=1e-9)


def test_train_resume_evaluate_and_load(tmp_path):
    out = tmp_path / "heg"
    settings = dict(system="heg", electrons=14, rs=5.0, walkers=32, out=str(out),
                    burn_in_steps=20, checkpoint_every=3, progress=False, **TINY)  # fmt: skip
    first = psijax.train(steps=4, **settings)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["electrons"] == 14 and summary["energy_per"] == "cell"
    assert summary["energy_per_electron"] == pytest.approx(summary["energy"] / 14)
    assert summary["rs"] == 5.0 and summary["cell_volume"] == pytest.approx(7330.382858)
    # the first step's walkers sample the plane-wave determinant (times the cusp factor)
    rows = (out / "metrics.csv").read_text().splitlines()
    energy, variance = (float(x) for x in rows[1].split(",")[1:3])
    assert abs(energy - HF_14_RS5) < 5 * np.sqrt(variance / 32)
    resumed = psijax.train(out=str(out), resume=True, steps=6, progress=False)
    assert len(resumed.energies) == 6
    np.testing.assert_allclose(resumed.energies[:4], first.energies, rtol=1e-6)
    evaluation = psijax.evaluate(out, steps=4, walkers=32, burn_in=2, progress=False)
    assert np.all(np.isfinite(evaluation.energies))
    assert {"energy", "kinetic", "electron_electron", "s2"} <= set(evaluation.estimates)
    assert not any(k.startswith(("dipole", "force")) for k in evaluation.estimates)
    evaluated = json.loads((out / "eval" / "summary.json").read_text())
    assert evaluated["energy_per"] == "cell" and evaluated["electrons"] == 14
    energy = evaluated["estimates"]["energy"]
    assert evaluated["energy_per_electron"] == pytest.approx(energy["mean"] / 14)
    assert evaluated["energy_per_electron_error"] == pytest.approx(energy["error"] / 14)
    from psijax.rundir.report import report

    assert "per electron" in report(out)
    wf = psijax.load(out)
    assert isinstance(wf.molecule, ElectronGas) and wf.step == 6
    energies = np.asarray(wf.local_energy(wf.walkers[:4]))
    shifted = np.asarray(wf.walkers[:4]) + wf.molecule.lattice.matrix[2]
    np.testing.assert_allclose(wf.local_energy(shifted), energies, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(wf.log_abs(shifted), wf.log_abs(wf.walkers[:4]), atol=1e-4)
    with pytest.raises(InputError, match="dipole"):
        wf.local_values(wf.walkers[:2], ["dipole"])


def test_one_and_two_devices_give_the_same_steps(tmp_path):
    """The gas's walkers sharded over two devices take the same steps as on one (float32
    sums in another order)."""
    rows = {}
    for n in (1, 2):
        out = tmp_path / f"heg-{n}"
        psijax.train(system="heg", electrons=14, rs=5.0, walkers=32, out=str(out), steps=3,
                     devices=n, burn_in_steps=5, progress=False, **TINY)  # fmt: skip
        rows[n] = list(csv.DictReader((out / "metrics.csv").read_text().splitlines()))
    assert_energies_close(column(rows[2], "energy"), column(rows[1], "energy"),
                          column(rows[1], "variance"), rtol=1e-4)  # fmt: skip
