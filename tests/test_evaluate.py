"""Evaluation of a trained run: psijax.load, psijax.evaluate, RUN/eval/ and psijax report."""

import csv
import json
import re
import shutil
import signal
import time

import h5py
import jax
import numpy as np
import pytest

import psijax
from psijax import hamiltonian, laplacian
from psijax.parallel.batching import map_walkers
from psijax.run.loop import SYNC_EVERY
from psijax.rundir.report import report
from psijax.statistics import StopRule
from psijax.statistics.blocking import blocking_estimate

from close import assert_close, assert_energies_close, column
from eval_runs import snapshot, trained_run
from runs import metrics, start
from runs import psijax as run_cli


def test_load_gives_the_same_wavefunction_on_any_device_count(tmp_path):
    run = trained_run(tmp_path)
    one = psijax.load(run, devices=1)
    assert one.molecule.symbols == ("H", "H") and one.step == 6
    walkers = np.asarray(one.walkers)
    local_energy = hamiltonian.molecular(one.molecule, laplacian.Forward()).local_energy(
        one.network
    )
    reference = jax.jit(lambda p, w: map_walkers(local_energy, p, w))(one.params, walkers)
    for devices in (1, 3):  # 16 walkers do not split over 3 devices: replicated then
        wf = psijax.load(run, devices=devices)
        assert wf.mesh.devices.size == devices
        np.testing.assert_allclose(np.asarray(wf.walkers), walkers)
        psi = wf.log_psi(walkers)
        # float32 sums in another order: relative to each array's scale (a walker's
        # log|psi| or local energy can be near 0)
        assert_close(psi.log_abs, one.log_abs(walkers), rtol=1e-5)
        assert set(np.unique(np.asarray(psi.sign))) <= {-1.0, 1.0}
        assert_close(wf.local_energy(walkers), reference, rtol=1e-4)
    single = one.log_psi(walkers[0])
    batch = np.asarray(one.log_abs(walkers))
    assert single.log_abs.shape == ()
    assert_close(single.log_abs, batch[0], rtol=1e-5, scale=np.abs(batch).max())
    sampled = one.sample(3, seed=1)
    assert sampled.shape == walkers.shape and np.all(np.isfinite(sampled))
    assert not np.allclose(np.asarray(sampled), walkers)


def test_evaluate_writes_eval_and_never_touches_the_training_files(tmp_path):
    run = trained_run(tmp_path)
    before = snapshot(run)
    result = psijax.evaluate(run, steps=24, burn_in=4, progress=False)
    after = snapshot(run)
    assert {k: v for k, v in after.items() if not k.startswith("eval/")} == before
    out = run / "eval"
    assert sorted(p.name for p in out.iterdir()) == [
        ".psijax.lock", "checkpoints", "eval.png", "metrics.csv", "summary.json", "walkers.h5"
    ]  # fmt: skip
    with open(out / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows] == list(range(24))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["steps"] == 24
    columns = ["energy", "kinetic", "electron_nucleus", "electron_electron", "nucleus_nucleus"]
    columns += ["s2", "dipole_x", "dipole_y", "dipole_z", "variance"]
    for name in columns:
        series = np.asarray([float(r[name]) for r in rows])
        est = blocking_estimate(series)
        entry = summary["estimates"][name]
        assert entry["mean"] == pytest.approx(est.mean) and entry["error"] == pytest.approx(
            est.error
        )
        assert entry["n_samples"] == 24 and entry["autocorrelation_time"] > 0
    parts = sum(
        summary["estimates"][k]["mean"]
        for k in ("kinetic", "electron_nucleus", "electron_electron", "nucleus_nucleus")
    )
    assert parts == pytest.approx(summary["estimates"]["energy"]["mean"], abs=1e-5)
    with h5py.File(out / "walkers.h5") as h5:
        local = h5["local_energy"][...]
    assert local.shape == (24, 16)
    assert_energies_close(local.mean(axis=1), column(rows, "energy"), column(rows, "variance"),
                          rtol=1e-5)  # fmt: skip
    assert result.estimates["energy"].mean == pytest.approx(summary["estimates"]["energy"]["mean"])
    assert summary["training"]["energy"] is not None


@pytest.mark.slow
def test_evaluation_is_the_same_on_one_and_four_devices(tmp_path):
    run = trained_run(tmp_path)
    a = psijax.evaluate(run, steps=6, burn_in=2, devices=1, progress=False)
    b = psijax.evaluate(run, steps=6, burn_in=2, devices=4, progress=False, force=True)
    assert_energies_close(b.energies, a.energies, column(metrics(a.out), "variance"), rtol=1e-4)


def test_target_error_stops_once_the_error_bar_is_small_enough(tmp_path):
    run = trained_run(tmp_path)
    reached = psijax.evaluate(run, target_error=10.0, burn_in=0, progress=False)
    # It stops at the first check (every SYNC_EVERY steps) whose energies pass the rule:
    # the error bar is far below 10 Ha at once, the drift test decides which check that is
    # (the walkers come unequilibrated from training: burn_in=0).
    n = len(reached.energies)
    rule = StopRule(10.0, fraction=1.0)
    assert reached.reached_target and n % SYNC_EVERY == 0 and rule.check(reached.energies).stop
    earlier = range(SYNC_EVERY, n, SYNC_EVERY)
    assert not any(rule.check(reached.energies[:k]).stop for k in earlier)
    assert reached.summary["estimates"]["energy"]["error"] < 10.0
    capped = psijax.evaluate(run, target_error=1e-9, steps=40, burn_in=0, progress=False,
                             force=True)  # fmt: skip
    assert capped.reached_target is False and len(capped.energies) == 40


def test_report_reprints_the_summary_and_redraws_the_plots(tmp_path):
    run = trained_run(tmp_path)
    result = psijax.evaluate(run, steps=8, burn_in=0, progress=False, observables=["spin"])
    (run / "eval" / "eval.png").unlink()
    (run / "energy.png").unlink()
    text = report(run)
    assert (run / "eval" / "eval.png").is_file() and (run / "energy.png").is_file()
    assert f"energy                  {result.summary['energy_text']} Ha" in text
    assert "s2" in text and "dipole" not in text


@pytest.mark.slow
def test_the_evaluate_and_report_commands(tmp_path):
    run = trained_run(tmp_path)
    done = run_cli("evaluate", run, "--steps", "5", "--burn-in-steps", "1", "--quiet")
    assert done.returncode == 0, done.stderr
    assert "energy " in done.stdout and "walkers.h5" in done.stdout
    shown = run_cli("report", run)
    assert shown.returncode == 0, shown.stderr
    assert "evaluation              5 steps x 16 walkers" in shown.stdout


@pytest.mark.slow
def test_a_resumed_evaluation_equals_the_uninterrupted_one(tmp_path):
    """Checkpoints at steps 4 and 8; the one at 8 is lost (as after a kill between the rows
    and the checkpoint): resuming drops rows 4-7 and walkers.h5 rows, and redoes them."""
    run = trained_run(tmp_path)
    whole = psijax.evaluate(run, steps=10, burn_in=2, progress=False)
    with open(run / "eval" / "metrics.csv", newline="") as f:
        expected = [{k: v for k, v in r.items() if k != "seconds"} for r in csv.DictReader(f)]
    psijax.evaluate(run, steps=8, burn_in=2, checkpoint_every=4, progress=False, force=True)
    shutil.rmtree(run / "eval" / "checkpoints" / "8")
    with pytest.raises(ValueError, match="seed cannot change when resuming"):
        psijax.evaluate(run, steps=10, seed=5, resume=True, progress=False)
    resumed = psijax.evaluate(run, steps=10, resume=True, progress=False)
    with open(run / "eval" / "metrics.csv", newline="") as f:
        got = [{k: v for k, v in r.items() if k != "seconds"} for r in csv.DictReader(f)]
    assert got == expected
    np.testing.assert_array_equal(resumed.energies, whole.energies)
    with h5py.File(run / "eval" / "walkers.h5") as h5:
        assert h5["local_energy"].shape == (10, 16)


def test_python_api_evaluate_and_load_are_functions_after_submodules_load():
    import psijax.evaluation.job
    import psijax.wavefunction

    assert callable(psijax.evaluate) and callable(psijax.load)


@pytest.mark.slow
def test_two_processes_evaluate_like_one(tmp_path):
    """Two processes of two devices (PSIJAX_* variables) give one process's chain."""
    import os
    import socket
    import subprocess

    from runs import command, env

    run = trained_run(tmp_path)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = command("evaluate", run, "--steps", "4", "--burn-in-steps", "1", "--quiet")
    procs = []
    for i in (1, 0):  # the worker first: it waits for the coordinator
        variables = {
            **env(devices=2), "PSIJAX_COORDINATOR": f"127.0.0.1:{port}",
            "PSIJAX_NUM_PROCESSES": "2", "PSIJAX_PROCESS_ID": str(i),
        }  # fmt: skip
        procs.append(subprocess.Popen(argv, env=variables, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))  # fmt: skip
    outputs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, err
    assert "energy" in outputs[1][0] and "energy" not in outputs[0][0]
    with open(run / "eval" / "metrics.csv", newline="") as f:
        two = column(csv.DictReader(f), "energy")
    one = psijax.evaluate(run, steps=4, burn_in=1, devices=4, progress=False, force=True)
    assert_energies_close(two, one.energies, column(metrics(one.out), "variance"), rtol=1e-5)
    assert os.path.isfile(run / "eval" / "walkers.h5")


@pytest.mark.slow
def test_sigterm_stops_an_evaluation_with_a_checkpoint_and_the_resume_goes_on(tmp_path):
    """As in training: SIGTERM writes a checkpoint at the step reached, the last line says
    how to continue, and the resumed evaluation appends to the rows already written."""
    run = trained_run(tmp_path)
    proc = start("evaluate", run, "--steps", "100000", "--burn-in-steps", "1",
                 "--checkpoint-every", "1000000", "--quiet")  # fmt: skip
    rows = run / "eval" / "metrics.csv"
    deadline = time.monotonic() + 240
    while not rows.is_file() or len(metrics(run / "eval")) < 3:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert "Traceback" not in stderr
    message = stderr.strip().splitlines()[-1]
    found = re.fullmatch(
        r"psijax: SIGTERM received: checkpoint written at step (\d+); continue with: "
        rf"psijax evaluate {re.escape(str(run))} --resume",
        message,
    )
    assert found, message
    step = int(found.group(1))
    assert [int(r["step"]) for r in metrics(run / "eval")] == list(range(step))
    resumed = run_cli("evaluate", run, "--resume", "--steps", str(step + 2), "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert [int(r["step"]) for r in metrics(run / "eval")] == list(range(step + 2))


def test_a_walker_with_one_nonfinite_value_is_left_out_of_every_mean():
    """A force (or any column) that is nan at one walker whose energy is finite would make
    the step's mean nan and lose the step: that walker drops out of every column alike."""
    import jax.numpy as jnp

    from psijax import parallel, sampling
    from psijax.evaluation import step as eval_step

    log_abs = lambda params, r: -jnp.sum(r**2)

    def local_values(params, r):
        x = jnp.sum(r)
        return {"energy": x, "other": jnp.where(x > 0, jnp.nan, x * 2)}

    mesh = parallel.make_mesh(1)
    sampler = sampling.Metropolis()
    walkers = np.linspace(-1, 1, 8 * 3, dtype=np.float32).reshape(8, 1, 3)
    state = eval_step.initial_state(log_abs, {}, walkers, sampler.init(), 8, 0, mesh)
    step = eval_step.make_eval_step(log_abs, local_values, sampler, mesh, None,
                                    lambda means, n: means)  # fmt: skip
    _, metrics = step({}, state)
    energy = np.asarray(metrics["local_energy"])
    kept = energy <= 0
    assert 0 < kept.sum() < 8 and int(metrics["nonfinite_walkers"]) == (~kept).sum()
    np.testing.assert_allclose(float(metrics["energy"]), energy[kept].mean(), rtol=1e-5)
    np.testing.assert_allclose(float(metrics["other"]), 2 * energy[kept].mean(), rtol=1e-5)
