"""The training step's metrics, metrics.csv's columns, the progress line and the docs
all come from the estimators declared in psijax.estimators."""

from __future__ import annotations

import re
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from psijax import eigenstates, hamiltonian, laplacian, optim, parallel, sampling, system
from psijax.ansatz import FermiNet
from psijax.estimators import training
from psijax.estimators.training import Column, Estimator
from psijax.run.progress import Progress
from psijax.training.state import train_state
from psijax.training.step import StepConfig, make_step

ROOT = Path(__file__).resolve().parents[1]
MOL = system.preset("H2")
NET = FermiNet(1, 1, MOL.coords, layers=((4, 2),), n_determinants=1)


def _step(estimators_=training.TRAINING):
    mesh = parallel.make_mesh(1)
    opt = optim.adam()
    params = NET.init(jax.random.PRNGKey(0))
    walkers = sampling.init_walkers(jax.random.PRNGKey(1), MOL, 8)
    state = train_state(NET, opt, params, walkers, jax.random.PRNGKey(2), mesh=mesh)
    local_energy = hamiltonian.molecular(MOL, laplacian.Forward()).local_energy(NET)
    step = make_step(
        NET.log_abs, local_energy, opt, StepConfig(), mesh, state, sampling.Metropolis(1),
        estimators=estimators_,
    )  # fmt: skip
    return step, state


def test_step_metrics_csv_and_docs_share_the_declared_columns():
    names = [c.name for c in training.columns()]
    step, state = _step()
    _, metrics = step(state)
    assert sorted(metrics) == sorted(names)  # a jitted dict comes back in key order
    assert ("step", *names, "seconds") == eigenstates.COLUMNS
    table = (ROOT / "docs" / "outputs.md").read_text().split("## metrics.csv")[1]
    documented = re.findall(r"^\| `(\w+)` \|", table.split("\n\n", 3)[2], re.M)
    assert documented == list(eigenstates.COLUMNS)


def test_an_added_estimator_reaches_the_metrics_and_a_wrong_one_fails():
    spread = Estimator(
        "spread",
        (Column("mean_radius", "bohr", "mean electron distance from the origin", "r {:.2f}"),),
        lambda v: {"mean_radius": jnp.mean(jnp.linalg.norm(v.walkers, axis=-1))},
    )
    step, state = _step((*training.TRAINING, spread))
    _, metrics = step(state)
    assert 0.1 < float(metrics["mean_radius"]) < 10
    wrong = Estimator("wrong", (Column("a", "", ""),), lambda v: {"b": v.energy.energy})
    step, state = _step((*training.TRAINING, wrong))
    with pytest.raises(ValueError, match="estimator 'wrong' gave"):
        step(state)


def test_the_progress_line_shows_the_declared_formats():
    show = Progress(10, enabled=False)
    line = show.step_text(0, {"energy": -1.1234567, "variance": 0.25, "acceptance": 0.5})
    assert "step E -1.12346  var 0.2500  acc 0.50" in line
