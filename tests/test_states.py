"""Several states in one wavefunction (NES-VMC): the total wavefunction, its energy matrix
and the states' energies, against the hydrogen atom's exact spectrum."""

from __future__ import annotations

import csv
import dataclasses
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from psijax import hamiltonian, laplacian
from psijax.ansatz.states import States
from psijax.errors import InputError
from psijax.estimators.states import StatesObserved
from psijax.hamiltonian.states import MATRIX, local_energy
from psijax.statistics import states as state_stats
from psijax.statistics.states import matrix_names
from psijax.system import preset
from psijax.types import Psi

from close import assert_close, column

H = preset("H")


@pytest.fixture(autouse=True, scope="module")
def _x64():
    with jax.enable_x64(True):
        yield


@dataclasses.dataclass(frozen=True)
class HydrogenMix:
    """psi(r) = sum_a c_a phi_a(r) over the exact 1s, 2s, 2px, 2py, 2pz orbitals: any K
    mixtures of them span K exact eigenstates when they span the first K orbitals."""

    n_up: int = 1
    n_down: int = 0

    def init(self, key, dtype=jnp.float64):
        return {"c": jax.random.normal(key, (5,), dtype)}

    def apply(self, params, r):
        x = r[0]
        d = jnp.sqrt(jnp.sum(x**2))
        phi = jnp.stack([
            2 * jnp.exp(-d), (2 - d) * jnp.exp(-d / 2) / (2 * jnp.sqrt(2.0)),
            *(x[k] * jnp.exp(-d / 2) / (2 * jnp.sqrt(6.0)) for k in range(3)),
        ])  # fmt: skip
        value = params["c"] @ phi
        return Psi(jnp.sign(value), jnp.log(jnp.abs(value)))

    def log_abs(self, params, r):
        return self.apply(params, r).log_abs

    def describe(self):
        return "hydrogen orbitals"


EXACT = np.array([-0.5, -0.125, -0.125, -0.125, -0.125])


def _walkers(key, n, k):
    return 3.0 * jax.random.normal(key, (n, k, 3), jnp.float64)


def test_total_wavefunction_is_the_determinant_of_the_states():
    net = States(HydrogenMix(), 3)
    params = net.init(jax.random.PRNGKey(0))
    r = _walkers(jax.random.PRNGKey(1), 1, 3)[0]
    direct = np.array([[float(jnp.exp(net.base.log_abs(net.state(params, i), r[j : j + 1])))
                        * float(net.base.apply(net.state(params, i), r[j : j + 1]).sign)
                        for j in range(3)] for i in range(3)])  # fmt: skip
    psi = net.apply(params, r)
    det = np.linalg.det(direct)
    assert float(psi.sign) == np.sign(det)
    assert float(psi.log_abs) == pytest.approx(np.log(abs(det)), rel=1e-12)
    # swapping two copies flips the sign: the states are antisymmetric in the copies
    swapped = r[jnp.array([1, 0, 2])]
    assert float(net.apply(params, swapped).sign) == -np.sign(det)


@pytest.mark.parametrize("k", [1, 2, 5])
def test_exact_states_give_a_constant_energy_matrix_with_the_spectrum(k):
    """Mixtures of the lowest K hydrogen orbitals: E_L is the same at every walker, and its
    eigenvalues are the exact energies (the 1s and the n = 2 shell)."""
    base = HydrogenMix()
    net = States(base, k)
    params = {"c": jax.random.normal(jax.random.PRNGKey(2), (k, 5), jnp.float64)}
    params["c"] = params["c"].at[:, k:].set(0.0)  # the span of the first K orbitals
    energy = local_energy(hamiltonian.molecular(H, laplacian.Forward()), net)
    walkers = _walkers(jax.random.PRNGKey(3), 16, k)
    matrices = jax.vmap(energy.matrix, in_axes=(None, 0))(params, walkers)
    np.testing.assert_allclose(matrices, np.broadcast_to(matrices[0], matrices.shape), atol=1e-8)
    np.testing.assert_allclose(state_stats.energies(matrices[0]), EXACT[:k], atol=1e-9)
    trace, aux = energy.with_aux(params, walkers[0])
    assert float(trace) == pytest.approx(EXACT[:k].sum(), abs=1e-9)
    np.testing.assert_allclose(aux[MATRIX], matrices[0])
    parts = energy.matrices(params, walkers[0])
    total = sum(parts[c] for c in energy.columns if c != "energy")
    np.testing.assert_allclose(parts["energy"], total, atol=1e-9)


def test_the_trace_is_the_local_energy_of_the_total_wavefunction():
    """tr E_L = sum_j (H_j Psi) / Psi, computed the other way: the Laplacian of the whole
    determinant over all K copies (here with states that are not eigenstates)."""
    net = States(HydrogenMix(), 3)
    params = net.init(jax.random.PRNGKey(4))
    energy = local_energy(hamiltonian.molecular(H, laplacian.Forward()), net)
    r = _walkers(jax.random.PRNGKey(5), 1, 3)[0]
    log_abs = lambda x: net.log_abs(params, x)
    grad = jax.grad(log_abs)(r)
    hess = jax.hessian(lambda x: log_abs(x.reshape(3, 3)))(r.reshape(-1))
    kinetic = -0.5 * (jnp.trace(hess) + jnp.sum(grad**2))
    potential = -jnp.sum(1.0 / jnp.linalg.norm(r, axis=-1))
    assert float(energy(params, r)) == pytest.approx(float(kinetic + potential), rel=1e-9)


def test_estimate_recovers_the_energies_and_their_spread():
    rng = np.random.default_rng(0)
    v = rng.normal(size=(3, 3))
    exact = np.array([-1.0, -0.5, -0.2])
    mean = v @ np.diag(exact) @ np.linalg.inv(v)
    noise = 0.01 * rng.normal(size=(4000, 3, 3))
    got = state_stats.estimate(mean + noise)
    for est, e in zip(got, exact, strict=True):
        assert abs(est.mean - e) < 4 * est.error
        assert 0 < est.error < 0.01


# ------------------------------------------------------------------ transition dipoles
def test_transition_dipole_and_oscillator_strength_of_1s_2pz():
    """States 1s and 2pz (exact): |<1s|z|2pz>|^2 = (128 sqrt(2) / 243)^2 and the oscillator
    strength 2/3 * 3/8 * that, from the dipole matrices averaged over |det Psi|^2
    (importance-sampled: both copies from r^2 exp(-r/2) with uniform directions)."""
    net = States(HydrogenMix(), 2)
    c = np.zeros((2, 5))
    c[0, 0], c[1, 4] = 1.0, 1.0  # 1s, 2pz
    params = {"c": jnp.asarray(c)}
    energy = local_energy(hamiltonian.molecular(H, laplacian.Forward()), net)
    observed = StatesObserved(2, H, True, energy)
    local = jax.jit(jax.vmap(observed.local, in_axes=(None, 0)))
    log_psi = jax.jit(jax.vmap(net.log_abs, in_axes=(None, 0)))
    rng = np.random.default_rng(0)
    found = []
    for _ in range(20):  # twenty independent estimates give the statistical error
        # 20,000 walkers a batch: batched 2 x 2 solves below jaxlib's threshold for
        # splitting them over XLA's CPU pool
        radius = rng.gamma(3.0, 2.0, size=(20_000, 2))
        direction = rng.normal(size=(20_000, 2, 3))
        direction /= np.linalg.norm(direction, axis=-1, keepdims=True)
        r = jnp.asarray(radius[..., None] * direction)
        log_w = 2 * np.asarray(log_psi(params, r)) + np.sum(radius / 2, axis=1)  # |Psi|^2 / q
        w = np.exp(log_w - log_w.max())
        values = local(params, r)
        means = {
            name: np.average(np.stack([np.asarray(values[m]) for m in
                             matrix_names(name, 2)], axis=1), axis=0,
                             weights=w).reshape(2, 2)
            for name in ("energy", "dipole_x", "dipole_y", "dipole_z")
        }  # fmt: skip
        found.append(state_stats.spectrum(means, ("dipole_x", "dipole_y", "dipole_z")))
    e0, e1, _, d2, f, f_sum = np.mean(found, axis=0)
    d2_error, f_error = np.std(found, axis=0, ddof=1)[3:5] / np.sqrt(len(found))
    assert f_sum == f
    exact_d2 = (128 * np.sqrt(2) / 243) ** 2
    assert (e0, e1) == pytest.approx((-0.5, -0.125), abs=1e-8)
    assert d2_error < 0.02 * exact_d2 and abs(d2 - exact_d2) < 4 * d2_error
    assert abs(f - 2 / 3 * 0.375 * exact_d2) < 4 * f_error


# ------------------------------------------------------------ pretraining configurations
def test_configurations_are_the_ground_and_the_lowest_single_excitations():
    from psijax.system import scf
    from psijax.training import pretrain_states as pretrain

    hf = scf.hartree_fock(preset("LiH"), "sto-6g")
    found = pretrain.excitations(hf, 4, "sto-6g")
    gaps = [x.gap for x in found]
    assert gaps == sorted(gaps) and gaps[0] > 0
    targets = pretrain.configurations(hf, 3, "sto-6g")
    assert targets[0][0] == "ground"
    assert all(what.startswith(str(x)) for (what, *_), x in zip(targets[1:], found, strict=False))
    frozen = pretrain.excited(hf, found[0])  # the fallback: the ground state's orbitals
    x = found[0]
    coeff = frozen.coeff_up if x.spin == "up" else frozen.coeff_down
    spectrum = hf.spectrum[0 if x.spin == "up" else 1]
    np.testing.assert_allclose(coeff[:, x.occupied], spectrum.virtual_coeff[:, x.virtual])
    with pytest.raises(InputError, match=r"only 1 Hartree-Fock configuration, .* aug-cc-pvdz"):
        pretrain.excitations(scf.hartree_fock(preset("He"), "sto-6g"), 2, "sto-6g")


def test_an_excitation_and_its_spin_mirror_start_a_state_of_definite_spin():
    """A closed shell's single excitation D and its spin mirror F D (up and down swapped):
    D - F D is odd under exchanging all up with all down electrons (the M_S = 0 triplet),
    D + F D even (the singlet). A state whose mirror is no other state's start begins as
    the triplet; where both spins' excitations are states, or without pairing, a lone D."""
    from psijax.sampling import init_walkers
    from psijax.system import scf
    from psijax.training import pretrain_states as pretrain

    hf = scf.hartree_fock(preset("LiH"), "sto-6g")
    targets = pretrain.configurations(hf, 2, "sto-6g", pair=True)
    assert [mirror for *_, mirror in targets] == [0, -1] and "triplet" in targets[1][0]
    assert [m for *_, m in pretrain.configurations(hf, 3, "sto-6g", pair=True)] == [0, 0, 0]
    assert [m for *_, m in pretrain.configurations(hf, 2, "sto-6g")] == [0, 0]
    walkers = init_walkers(jax.random.key(0), preset("LiH"), 64).astype(jnp.float64)
    flipped = walkers[:, jnp.array([2, 3, 0, 1])]  # every up electron where a down one was
    orbitals, coefficients = scf.hf_orbital_basis(targets[1][1])
    for mirror in (-1, 1):
        paired = pretrain.paired_targets(orbitals, mirror, 5)

        def psi(r, paired=paired):
            up, down = paired(r, coefficients)  # [W, 5, 2, 2]: D, D, +-F D, +-F D, 0
            dets = jnp.linalg.det(up) * jnp.linalg.det(down)
            np.testing.assert_allclose(dets[:, 0], dets[:, 1])
            np.testing.assert_allclose(dets[:, 2], dets[:, 3])
            np.testing.assert_allclose(dets[:, 4], 0.0)
            return jnp.sum(dets, axis=1)

        value = psi(walkers)
        assert np.median(np.abs(value)) > 1e-6
        np.testing.assert_allclose(psi(flipped), mirror * value, rtol=1e-8, atol=1e-12)


def test_excited_configuration_orbitals_are_relaxed_for_it():
    """LiH's lowest single excitation in cc-pVDZ: the relaxed configuration (maximum
    overlap UHF) lies below the same configuration on the ground state's orbitals (the
    SCF minimises over its orbitals), stays on it, and its new orbital is more compact
    than the ground state's diffuse virtual."""
    from pyscf import scf as pyscf_scf

    from psijax.system import scf
    from psijax.training import pretrain_states as pretrain

    hf = scf.hartree_fock(preset("LiH"), "cc-pvdz")
    x = pretrain.excitations(hf, 1, "cc-pvdz")[0]
    spin = 0 if x.spin == "up" else 1
    own = scf.relaxed(hf, spin, x.occupied, x.virtual)
    frozen = pretrain.excited(hf, x)
    assert own is not None and own.converged
    mf = pyscf_scf.UHF(hf.mol)

    def energy(config):  # of the determinant of config's occupied orbitals
        return mf.energy_tot(np.array([c @ c.T for c in (config.coeff_up, config.coeff_down)]))

    assert own.energy == pytest.approx(energy(own), abs=1e-8)
    assert hf.energy < own.energy < energy(frozen) - 1e-3
    overlap = hf.mol.intor("int1e_ovlp")
    for new, old in ((own.coeff_up, frozen.coeff_up), (own.coeff_down, frozen.coeff_down)):
        assert abs(np.linalg.det(old.T @ overlap @ new)) > 0.5
    r2 = hf.mol.intor("int1e_r2")
    spread = lambda c: np.diag(c.T @ r2 @ c)
    moved = own.coeff_up if spin == 0 else own.coeff_down
    before = frozen.coeff_up if spin == 0 else frozen.coeff_down
    assert np.max(spread(moved)) < 0.8 * np.max(spread(before))


# ------------------------------------------------------------------- a run end to end
TINY_STATES = dict(
    system="H", states=2, walkers=32, basis="cc-pvdz", pretrain_steps=5, burn_in_steps=3,
    layers=((8, 4),), determinants=1, mcmc_moves=2, checkpoint_every=10,
)  # fmt: skip


def test_states_train_resume_evaluate_and_report(tmp_path):
    """Two states of H: metrics.csv has each state's energy and the matrix per step, the
    summary each state's estimate; a resumed run continues it; evaluation gives the
    states, the transition dipole and the oscillator strength; load and report work."""
    import json

    import psijax

    out = tmp_path / "h"
    first = psijax.train(steps=10, out=str(out), progress=False, **TINY_STATES)
    assert len(first.states) == 2 and first.states[0].mean < first.states[1].mean
    with open(out / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {"energy_state_0", "energy_state_1", "energy_matrix_1_0"} <= set(rows[0])
    m = state_stats.matrices_of([{k: float(v) for k, v in r.items()} for r in rows], 2)
    assert_close(column(rows, "energy"), np.trace(m, axis1=1, axis2=2), rtol=1e-5)
    again = psijax.train(out=str(out), resume=True, steps=20, progress=False)
    assert len(again.energies) == 20
    summary = json.loads((out / "summary.json").read_text())
    assert [s["state"] for s in summary["states"]] == [0, 1]
    assert summary["states"][1]["excitation_energy"] >= 0  # a noisy pair may be complex
    ev = psijax.evaluate(out, steps=12, burn_in=2, progress=False)
    derived = ev.summary["derived"]
    assert {"state_0_energy", "excitation_1", "oscillator_strength_0_1"} <= set(derived)
    for i in range(2):  # the spin is a default: one electron, a doublet at every walker
        assert derived[f"state_{i}_s2"]["mean"] == pytest.approx(0.75, abs=1e-6)
    assert "energy_matrix_0_0" not in ev.summary["estimates"]
    wf = psijax.load(out)
    assert wf.energy_matrix(wf.walkers[:3]).shape == (3, 2, 2)
    before = (out / "eval" / "summary.json").read_bytes()
    with pytest.raises(InputError, match="several states"):
        psijax.evaluate(out, steps=2, observables="forces", force=True, progress=False)
    assert (out / "eval" / "summary.json").read_bytes() == before  # refused: nothing lost
    from psijax.rundir.report import report

    assert "state 1" in report(out)


@pytest.mark.parametrize(
    "overrides,word",
    [(dict(states=0), "states=0"), (dict(states=40), "states=40"),
     (dict(system="He", basis="sto-6g", states=3), "only 1 Hartree-Fock configuration")],
    ids=["zero", "too-many", "small-basis"],
)  # fmt: skip
def test_bad_states_input_is_refused_before_anything_is_written(tmp_path, overrides, word):
    import psijax

    out = tmp_path / "bad"
    with pytest.raises(InputError, match=word):
        psijax.train(steps=2, out=str(out), progress=False, **{**TINY_STATES, **overrides})
    assert not out.exists()


def test_states_on_two_devices_match_one_from_the_command_line(tmp_path, monkeypatch):
    """The same K = 2 run on one device and with its walkers split over two: the same
    energy matrices step by step; the command prints each state and its excitation.

    Both runs compile at psijax's own optimisation levels (XLA's default for the training
    step), as a user's do: at the suite's level 0, with the elemental emitters
    (psijax.parallel.cpu_codegen), the one- and two-device programs round differently in
    float32, and the off-diagonal element (-0.023, a difference of terms near 0.5) differed
    by 4e-6 at the first step and 1.2e-5 at the second; at the default level by 2e-8 and
    2e-7."""
    from runs import metrics, psijax, tiny_config

    flags = os.environ.get("XLA_FLAGS", "").replace("--xla_backend_optimization_level=0", "")
    monkeypatch.setenv("XLA_FLAGS", flags.strip())
    config = tiny_config(tmp_path, system="H", states=2, basis="cc-pvdz", steps=4)
    runs = {}
    for devices in (1, 2):
        out = tmp_path / f"d{devices}"
        proc = psijax("train", "--config", config, "--out", out, "--devices", str(devices),
                      devices=devices)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert "state 1" in proc.stdout and "excitation" in proc.stdout
        runs[devices] = metrics(out)
    names = ["energy", *matrix_names("energy", 2)]
    for a, b in zip(runs[1], runs[2], strict=True):
        np.testing.assert_allclose([float(a[n]) for n in names], [float(b[n]) for n in names],
                                   rtol=1e-4, atol=1e-5)  # fmt: skip


def test_a_complex_pair_of_eigenvalues_gives_energies_not_an_error():
    """Early in training the mean matrix may have a complex pair: the energies are its real
    parts and the dipole analysis stays finite (a real eigenvector basis would be singular)."""
    rotation = np.array([[1.0, -0.3, 0.0], [0.3, 1.0, 0.0], [0.0, 0.0, -2.0]])  # eig 1 +- 0.3i
    dipole = np.arange(9.0).reshape(3, 3)
    out = state_stats.spectrum({"energy": rotation, "d": dipole}, ("d",))
    np.testing.assert_allclose(out[:3], [-2.0, 1.0, 1.0])
    assert len(out) == 3 + 2 + 2 + 2 + 1
    assert np.all(np.isfinite(out))
    noisy = rotation + 0.01 * np.random.default_rng(1).normal(size=(50, 3, 3))
    value, error, _ = state_stats.bootstrap({"energy": noisy, "d": noisy}, lambda m:
                                            state_stats.spectrum(m, ("d",)))  # fmt: skip
    assert np.all(np.isfinite(value)) and np.all(np.isfinite(error))


def test_states_on_two_processes_match_one_process(tmp_path):
    """K = 2 over two processes (one device each, gloo collectives) gives the one-process
    energy matrices step by step, and only the lead process writes and reports."""
    import socket

    from runs import metrics, psijax, start, tiny_config

    config = tiny_config(tmp_path, system="H", states=2, basis="cc-pvdz", steps=4)
    one = tmp_path / "one"
    single = psijax("train", "--config", config, "--out", one, "--quiet", devices=2)
    assert single.returncode == 0, single.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    two = tmp_path / "two"
    argv = ("train", "--config", config, "--out", two, "--quiet", "--coordinator",
            f"127.0.0.1:{port}", "--num-processes", "2")  # fmt: skip
    procs = [start(*argv, "--process-id", str(i), devices=1) for i in (1, 0)]
    outputs = [p.communicate(timeout=600) for p in procs]
    for p, (_, stderr) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, stderr
    assert "state 1" in outputs[1][0] and "state 1" not in outputs[0][0]
    names = ["energy", *matrix_names("energy", 2)]
    for a, b in zip(metrics(one), metrics(two), strict=True):
        np.testing.assert_allclose([float(a[n]) for n in names], [float(b[n]) for n in names],
                                   rtol=1e-4, atol=1e-5)  # fmt: skip
