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


def test_the_final_report_names_steps_that_carry_the_error_bar(tmp_path):
    """A walker deep in the local energy's tail for two steps: the report names them under
    the energy (and says nothing for a run without such steps)."""
    from types import SimpleNamespace

    import numpy as np

    from psijax.cli.main import final_lines
    from psijax.statistics import tail_estimate

    energies = -1.1745 + 1e-4 * np.random.default_rng(0).normal(size=400)
    result = lambda e: SimpleNamespace(
        config=config_lib.Config(system="H2", steps=400), energy=tail_estimate(e, 0.3),
        energies=e, states=None, exact=None, seconds=1.0, out=tmp_path,
    )  # fmt: skip
    assert not any(line.startswith("tail") for line in final_lines(result(energies)))
    energies[[370, 371]] += 0.2
    lines = final_lines(result(energies))
    assert lines[1].startswith("energy")
    assert lines[2].startswith("tail        steps 370, 371 carry ")
    # over fewer than TAIL_NOTE_STEPS steps it says nothing (noise alone qualifies at times)
    short = energies[:300].copy()  # 90 steps in the estimate, two of them far out
    short[[280, 281]] += 0.2
    assert not any(line.startswith("tail") for line in final_lines(result(short)))
