"""Two processes x two CPU devices on 127.0.0.1 (gloo collectives) train like one process x
four devices: same seed, same total walkers, same energies to float tolerance; only
process 0 writes; the checkpoint they write together resumes on a single process."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from close import assert_energies_close, column
from runs import metrics, psijax, start, tiny_config


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def energies(run_dir) -> np.ndarray:
    return np.asarray([float(r["energy"]) for r in metrics(run_dir)])


@pytest.mark.compat
def test_two_processes_match_one_process_and_resume_on_one(tmp_path):
    config = tiny_config(tmp_path, steps=6, checkpoint_every=3)
    one = tmp_path / "one"
    single = psijax("train", "--config", config, "--out", one, "--quiet", devices=4)
    assert single.returncode == 0, single.stderr

    two = tmp_path / "two"
    address = f"127.0.0.1:{free_port()}"
    argv = ("train", "--config", config, "--out", two, "--quiet", "--coordinator", address)
    procs = [  # the worker first: it must wait for the coordinator
        start(*argv, "--num-processes", "2", "--process-id", str(i), devices=2) for i in (1, 0)
    ]
    outputs = [p.communicate(timeout=600) for p in procs]
    for p, (_, stderr) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, stderr
    worker_out, coordinator_out = outputs[0][0], outputs[1][0]
    # only process 0 reports (gloo itself prints connection lines on every process)
    assert "energy" in coordinator_out and "energy" not in worker_out

    # 4 devices in one process against 2 x 2 in two: float32 sums in another order
    assert_energies_close(energies(two), energies(one), column(metrics(one), "variance"),
                          rtol=1e-5)  # fmt: skip
    saved = sorted(p.name for p in (two / "checkpoints").iterdir())
    assert saved == ["3", "6"]

    resumed = psijax("train", "--resume", two, "--steps", "8", "--quiet", devices=1)
    assert resumed.returncode == 0, resumed.stderr
    assert [int(r["step"]) for r in metrics(two)] == list(range(8))


def test_an_unreachable_coordinator_is_one_line_and_exit_2(tmp_path):
    config = tiny_config(tmp_path, steps=2)
    result = psijax(
        "train", "--config", config, "--out", tmp_path / "run", "--coordinator",
        f"127.0.0.1:{free_port()}", "--num-processes", "2", "--process-id", "1",
        "--coordinator-timeout", "2",
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert "cannot reach the coordinator" in result.stderr and "start process 0" in result.stderr
    assert not (tmp_path / "run").exists()


def test_slurm_job_steps_give_jax_s_coordinator(monkeypatch):
    from psijax.parallel import distributed

    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("SLURM_NTASKS", "8")
    monkeypatch.setenv("SLURM_PROCID", "5")
    for nodes, first in [("gpu017", "gpu017"), ("gpu[003-006,9]", "gpu003"),
                         ("a1,b2", "a1"), ("n[12,14]", "n12")]:  # fmt: skip
        monkeypatch.setenv("SLURM_STEP_NODELIST", nodes)
        assert distributed._slurm() == (f"{first}:{4242 % 4096 + 61440}", 8, 5)
    monkeypatch.delenv("SLURM_PROCID")
    assert distributed._slurm() is None


@pytest.mark.compat
def test_the_mesh_spans_devices_of_several_slices(monkeypatch):
    """The GPUs of a multi-node job belong to several slices, which ``jax.make_mesh``
    refuses (NetKet issue 2260); CPU devices on loopback are all in slice 0, so the
    slices are faked here."""
    import jax

    from psijax import parallel
    from psijax.parallel import mesh as mesh_module

    class OnSlice:  # a device that reports another slice
        def __init__(self, device, index):
            self._device, self.slice_index = device, index

        def __getattr__(self, name):
            return getattr(self._device, name)

    devices = [OnSlice(d, i // 2) for i, d in enumerate(jax.devices()[:4])]
    monkeypatch.setattr(mesh_module.jax, "devices", lambda: devices)
    mesh = parallel.make_mesh()
    assert mesh.axis_names == (parallel.WALKER_AXIS,)
    assert list(mesh.devices) == devices


_FROM_LEAD = """
import sys, jax, numpy as np
jax.distributed.initialize(sys.argv[1], num_processes=2, process_id=int(sys.argv[2]))
from psijax import parallel
me = jax.process_index()
tree = {"orbitals": np.full((3, 2), np.pi + me * 1e-13), "energy": -1.5 - me, "n": np.int64(7 + me),
        "none": np.zeros((4, 0))}  # a spin without electrons
got = parallel.from_lead(tree)
assert got["none"].shape == (4, 0)
print(repr(got["orbitals"].tobytes()), repr(got["energy"]), repr(got["n"]), got["orbitals"].dtype)
"""


def test_host_values_from_process_0_reach_every_process_to_the_bit():
    """pyscf's orbitals are computed in every process and differ in the last bits; pretraining
    takes process 0's everywhere (float64 bit for bit, not rounded through float32)."""
    import subprocess
    import sys

    from runs import env

    address = f"127.0.0.1:{free_port()}"
    procs = [subprocess.Popen([sys.executable, "-c", _FROM_LEAD, address, str(i)], env=env(1),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in (1, 0)]  # fmt: skip
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    lines = [out.strip().splitlines()[-1] for out, _ in outs]
    expected = np.full((3, 2), np.pi).tobytes()
    assert lines[0] == lines[1] == f"{expected!r} np.float64(-1.5) np.int64(7) float64"
