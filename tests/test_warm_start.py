"""A run started from another run's wavefunction (``init_from``), its nuclei moved: the
parameters are that run's, the walkers move with their nearest nucleus, pretraining is
skipped; a run that does not fit is refused before anything is written."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import psijax
from psijax import config as config_lib
from psijax import parallel, system
from psijax.errors import InputError
from psijax.training import saved, warm

from runs import TINY
from runs import psijax as run_cli

STRETCHED = "H 0 0 0; H 0 0 1.8"  # TINY's H2 (1.4 bohr) with its second nucleus moved


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    out = tmp_path_factory.mktemp("warm") / "h2"
    psijax.train(**TINY, steps=4, seed=3, out=str(out), progress=False)
    return out


def test_walkers_follow_their_nearest_nucleus():
    old = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 2.0]])
    new = np.array([[0.0, 0.0, 0.0], [0.0, 0.5, 3.0]])
    walkers = np.array([[[0.1, 0.0, 0.2], [0.0, 0.1, 1.7]]])  # one electron near each
    moved = warm.follow_nuclei(walkers, old, new)
    np.testing.assert_array_equal(moved[0, 0], walkers[0, 0])
    np.testing.assert_allclose(moved[0, 1], walkers[0, 1] + [0.0, 0.5, 1.0])


def test_the_start_is_the_other_runs_wavefunction_with_its_nuclei_moved(source):
    config = config_lib.from_dict({**TINY, "system": STRETCHED, "walkers": 24})
    molecule = system.for_config(config)
    mesh = parallel.make_mesh(None)
    warm.check(str(source), molecule, config)
    params, walkers = warm.start(str(source), molecule, config, mesh)
    before = saved.restore(source, mesh).state
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(before.params), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    old = np.asarray(parallel.to_host(before.walkers), np.float64)
    expected = warm.follow_nuclei(
        old, np.array([[0, 0, 0], [0, 0, 1.4]]), np.array([[0, 0, 0], [0, 0, 1.8]])
    )
    got = np.asarray(parallel.to_host(walkers))
    assert got.shape == (24, 2, 3)  # 16 walkers repeated up to this run's 24
    np.testing.assert_allclose(got, expected[np.arange(24) % 16], rtol=1e-6, atol=1e-6)


def test_a_warm_run_trains_without_pretraining(source, tmp_path, capsys):
    out = tmp_path / "stretched"
    result = psijax.train(
        **{**TINY, "system": STRETCHED}, steps=4, init_from=str(source), out=str(out)
    )
    text = capsys.readouterr()
    assert f"starting from the wavefunction of {source}" in text.out + text.err
    assert "pretraining on Hartree-Fock" not in text.out + text.err
    assert np.isfinite(result.energy.mean)
    assert config_lib.load_saved(out / "config.json").init_from == str(source)


def test_a_run_that_does_not_fit_is_refused_and_nothing_is_written(source, tmp_path):
    out = tmp_path / "other"
    wider = {**TINY, "system": STRETCHED, "layers": [[16, 4]]}
    with pytest.raises(InputError, match="another network than this run's"):
        psijax.train(**wider, steps=4, init_from=str(source), out=str(out), progress=False)
    lih = {**TINY, "system": "LiH"}
    with pytest.raises(InputError, match="same atoms in the same order"):
        psijax.train(**lih, steps=4, init_from=str(source), out=str(out), progress=False)
    done = run_cli("train", "--system", "H2", "--init-from", tmp_path / "none", "--out", out)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "is not a directory" in done.stderr
    assert not (tmp_path / "none").exists() and not out.exists()
