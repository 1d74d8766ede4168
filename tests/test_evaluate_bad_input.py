"""Malformed `psijax evaluate` / `psijax report` inputs: one line, exit 2, no file changed."""

import json
import shutil

import pytest

from psijax import cli

from eval_runs import snapshot, trained_run
from runs import psijax as run_cli


def _setup(tmp_path, case):
    """(argv, directory to watch) for one bad input."""
    run = trained_run(tmp_path)
    if case == "missing":
        return ["evaluate", str(tmp_path / "nowhere")], tmp_path
    if case == "file":
        (tmp_path / "a-file").write_text("x")
        return ["evaluate", str(tmp_path / "a-file")], tmp_path
    if case == "not-a-run":
        (tmp_path / "empty").mkdir()
        return ["evaluate", str(tmp_path / "empty")], tmp_path
    if case == "no-checkpoint":
        shutil.rmtree(run / "checkpoints")
        return ["evaluate", str(run)], tmp_path
    if case == "other-molecule":
        config = json.loads((run / "config.json").read_text())
        (run / "config.json").write_text(json.dumps({**config, "system": "LiH"}))
        return ["evaluate", str(run), "--steps", "2"], tmp_path
    if case == "eval-is-a-file":
        (run / "eval").write_text("notes\n")
        return ["evaluate", str(run), "--steps", "2"], tmp_path
    if case == "eval-exists":
        (run / "eval").mkdir()
        (run / "eval" / "summary.json").write_text("{}")
        return ["evaluate", str(run), "--steps", "2"], tmp_path
    flags = {
        "unknown-observable": ["--observables", "energy", "spinn"],
        "negative-steps": ["--steps", "-5"],
        "steps-not-a-number": ["--steps", "ten"],
        "walkers-uneven": ["--walkers", "6"],  # 4 devices in the tests
        "negative-target": ["--target-error=-1e-3"],
        "too-many-devices": ["--devices", "99"],
        "negative-burn-in": ["--burn-in-steps", "-1"],
        "resume-nothing": ["--resume"],
        "resume-and-force": ["--resume", "--force"],
    }
    if case in flags:
        return ["evaluate", str(run), *flags[case]], tmp_path
    if case == "report-missing":
        return ["report", str(tmp_path / "nowhere")], tmp_path
    if case == "report-not-a-run":
        (tmp_path / "empty").mkdir()
        return ["report", str(tmp_path / "empty")], tmp_path
    if case == "report-no-metrics":
        (run / "metrics.csv").unlink()
        return ["report", str(run)], tmp_path
    raise AssertionError(case)


CASES = {
    "missing": "is not a directory",
    "file": "is not a directory",
    "not-a-run": "holds no psijax run",
    "no-checkpoint": "has no checkpoint yet",
    "other-molecule": "belongs to a run with another molecule",
    "eval-exists": "already holds an evaluation; pass --force",
    "eval-is-a-file": "is a file, not a directory; move it away",
    "unknown-observable": "unknown observable 'spinn'",
    "negative-steps": "steps=-5 must be a whole number >= 2",
    "steps-not-a-number": "'ten' is not a whole number",
    "walkers-uneven": "walkers=6 cannot be split evenly over 4 devices",
    "negative-target": "target_error=-0.001 must be a positive number",
    "too-many-devices": "devices=99 but 4 are available",
    "negative-burn-in": "burn_in=-1 must be a whole number >= 0",
    "resume-nothing": "holds no evaluation to resume; start one without --resume",
    "resume-and-force": "--resume and --force contradict each other",
    "report-missing": "is not a directory",
    "report-not-a-run": "holds no psijax run",
    "report-no-metrics": "fewer than two steps of metrics",
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_gives_one_line_and_exit_2_and_changes_nothing(tmp_path, capsys, case):
    argv, watched = _setup(tmp_path, case)
    before = snapshot(watched)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("psijax: error: "), err
    assert CASES[case] in err, err
    assert snapshot(watched) == before


def test_the_command_exits_2_for_a_run_without_a_checkpoint(tmp_path):
    run = trained_run(tmp_path)
    shutil.rmtree(run / "checkpoints")
    before = snapshot(tmp_path)
    done = run_cli("evaluate", run)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "has no checkpoint yet" in done.stderr
    assert snapshot(tmp_path) == before
