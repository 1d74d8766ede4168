"""The `psijax train` command end to end, and its answers to bad input."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest

from psijax import config as config_lib
from psijax.cli import main
from psijax.errors import InputError

TINY = ["--steps", "6", "--walkers", "16", "--pretrain-steps", "2", "--burn-in-steps", "2",
        "--mcmc-moves", "2", "--determinants", "1", "--quiet"]  # fmt: skip


@pytest.fixture(scope="module")
def h2_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "h2"
    cfg = out.parent / "tiny.toml"
    cfg.write_text('layers = [[8, 4]]\noptimizer = "adam"\n')
    code = main(["train", "--system", "H2", "--config", str(cfg), "--out", str(out), *TINY])
    return code, out


def test_train_writes_metrics_summary_and_plot(h2_run):
    code, out = h2_run
    assert code == 0
    with open(out / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 6 and {"step", "energy", "variance", "acceptance"} <= set(rows[0])
    summary = json.loads((out / "summary.json").read_text())
    for key in ("system", "energy", "energy_error", "steps", "walkers", "seconds", "exact"):
        assert key in summary
    assert summary["exact"] == pytest.approx(-1.174476)
    assert -2.0 < summary["energy"] < 0.0 and summary["energy_error"] > 0
    assert (out / "energy.png").stat().st_size > 1000


def test_refuses_to_overwrite_a_run_and_leaves_it_untouched(h2_run, capsys):
    _, out = h2_run
    files = lambda: {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    before = files()
    code = main(["train", "--system", "H2", "--out", str(out), *TINY])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "--force" in err and len(err.splitlines()) == 1
    assert files() == before


BAD = [
    (["--system", "Xx 0 0 0"], "element"),
    (["--system", "H 0 0 0; H 0 0 0"], "apart"),
    (["--system", "Li", "--spin", "0"], "spin"),
    (["--system", "H", "--charge", "1"], "electron"),
    (["--steps", "0"], "steps"),
    (["--walkers", "-4"], "walkers"),
    (["--devices", "64"], "devices"),
    (["--optimizer", "kfac"], "optimizer"),
    (["--laplacian", "magic"], "laplacian"),
    (["--system", "missing.xyz"], "xyz"),
]


@pytest.mark.parametrize("flags,word", BAD, ids=[w for _, w in BAD])
def test_bad_input_is_one_line_exit_2(flags, word, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "psijax.cli", "train", "--out", str(tmp_path / "r"), *flags],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert word in lines[0].lower()
    assert not (tmp_path / "r" / "metrics.csv").exists()


def test_config_file_rejects_unknown_keys_and_wrong_types(tmp_path):
    bad_key = tmp_path / "a.toml"
    bad_key.write_text("stepz = 3\n")
    with pytest.raises(InputError, match="unknown config key 'stepz'"):
        config_lib.load(bad_key)
    bad_type = tmp_path / "b.json"
    bad_type.write_text('{"walkers": "many"}')
    with pytest.raises(InputError, match="walkers"):
        config_lib.load(bad_type)


def test_walkers_must_split_evenly_over_devices():
    from psijax import parallel

    with pytest.raises(InputError, match="multiple of 4"):
        parallel.check_walkers(10, parallel.make_mesh(4))


def test_python_api_train_is_the_function_even_after_submodules_load():
    import psijax
    import psijax.training.job

    assert callable(psijax.train)
