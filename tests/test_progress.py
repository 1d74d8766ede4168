"""The progress display on its own: a fake terminal, a pipe, the running estimate."""

from __future__ import annotations

import io
import re

import numpy as np

from psijax.run.progress import Progress, describe_estimate, running_estimate
from psijax.statistics.blocking import blocking_estimate


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def metrics(energy: float) -> dict[str, float]:
    return {"energy": energy, "variance": 0.01, "acceptance": 0.5, "rejected": 0.0}


def test_a_terminal_gets_one_live_line_cut_to_its_width_and_no_blank_lines():
    term = Terminal()
    show = Progress(3, stream=term, exact=-1.0, eval_fraction=1.0, columns=lambda: 40)
    show.note("phase one")  # no live line yet: no blank line before it
    show.phase("training", 3)
    for i in range(3):
        show._last = 0.0  # every step due (no wait for the 0.2 s refresh)
        show.step(i, metrics(-1.0 - 0.01 * i))
    show.note("done")
    show.close()
    text = term.getvalue()
    assert text.startswith("phase one\ntraining (3 steps)\n")
    assert "\n\n" not in text and text.endswith("done\n")
    lines = [seg.removeprefix("\033[K").split("\n")[0] for seg in text.split("\r")[1:]]
    assert len(lines) == 3 and all(len(line) <= 39 for line in lines)
    assert lines[-1] == "step 3/3  E=-1.0100(58)  (naive, 3 step"


def test_a_pipe_gets_whole_lines_with_the_estimate_and_the_naive_label():
    pipe = io.StringIO()
    show = Progress(20, stream=pipe, exact=-1.0, eval_fraction=1.0)
    rng = np.random.default_rng(0)
    energies = -1.0 + 0.01 * rng.normal(size=20)
    for i, e in enumerate(energies):
        show.step(i, metrics(float(e)))
    lines = pipe.getvalue().splitlines()
    assert "\r" not in pipe.getvalue() and len(lines) == 2  # the first step and the last
    assert "E=" not in lines[0]  # one value: no estimate yet
    want = blocking_estimate(energies)
    assert f"E={want}" in lines[-1] and "naive" not in lines[-1]
    diff = 1000 * (want.mean + 1.0)
    assert f"vs exact {diff:+.2f} mHa" in lines[-1]


def test_fewer_than_16_values_are_labelled_naive_in_the_line_and_the_report():
    show = Progress(10, stream=io.StringIO(), eval_fraction=1.0)
    for i in range(10):
        show.step(i, metrics(-1.0 - 0.001 * (i % 3)))
    assert "(naive, 10 steps)" in show.stream.getvalue().splitlines()[-1]
    est = running_estimate([-1.0, -1.1, -1.05, float("nan")], 1.0)
    assert est.n_samples == 3
    assert re.match(
        r"naive error of the last 3 steps: too few for blocking", describe_estimate(est)
    )
    long = running_estimate(np.linspace(-1, -1.1, 40), 1.0)
    assert describe_estimate(long) == "blocking analysis of the last 40 steps"


def test_a_resumed_runs_estimate_includes_the_steps_before_the_resume(tmp_path, capsys):
    """The progress line of a resumed run estimates over every step of the run (the kept
    rows too), not only the steps since the resume."""
    import psijax

    from runs import TINY

    out = str(tmp_path / "run")
    psijax.train(**TINY, steps=20, eval_fraction=1.0, out=out, progress=False)
    capsys.readouterr()
    psijax.train(out=out, resume=True, steps=22)
    lines = [line for line in capsys.readouterr().err.splitlines() if "step 22/22" in line]
    assert lines and "E=" in lines[-1], lines
    # over all 22 steps: a blocking estimate (2 steps' would be labelled naive)
    assert "naive" not in lines[-1], lines[-1]
