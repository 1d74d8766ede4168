"""psijax scan: the geometries (a bond stretched, the frames of an .xyz file), a curve
whose later points start from the point before, resumed point by point, and bad input
refused in one line with nothing written."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

import psijax
from psijax import config as config_lib
from psijax import curves, system
from psijax.curves import points as points_lib
from psijax.curves.scan import LATER_ERROR
from psijax.errors import InputError

from runs import TINY
from runs import psijax as run_cli


def test_a_bond_is_stretched_along_its_own_line():
    water = system.resolve("O 0 0 0; H 0 1.4 1.1; H 0 -1.4 1.1")
    lengths = points_lib.parse_lengths("1.5:2.5:3")
    assert lengths == [1.5, 2.0, 2.5]
    assert points_lib.parse_lengths("1.5,2") == [1.5, 2.0]
    stretched = curves.along_bond(water, "1-3", lengths, "bohr")
    for length, molecule in stretched:
        coords = np.asarray(molecule.coords)
        assert np.linalg.norm(coords[2] - coords[0]) == pytest.approx(length, rel=1e-12)
        np.testing.assert_array_equal(coords[:2], np.asarray(water.coords)[:2])  # others stay
        direction = coords[2] / np.linalg.norm(coords[2])
        np.testing.assert_allclose(direction, np.array([0, -1.4, 1.1]) / np.hypot(1.4, 1.1))
    angstrom = curves.along_bond(water, "1-2", [1.0], "angstrom")[0][1]
    assert np.linalg.norm(np.asarray(angstrom.coords[1])) == pytest.approx(1.8897261246, 1e-9)


def test_the_fitted_minimum_of_a_curve():
    from psijax.curves.scan import ScanPoint, fitted_minimum
    from psijax.statistics import Estimate

    def point(x, e):
        return ScanPoint(x, Estimate(e, 1e-5, 100, 1, 100, 1.0), 100, 1.0, None)

    morse = lambda r: 0.17 * (1 - np.exp(-1.03 * (r - 1.401))) ** 2 - 1.1745  # H2-like
    grid = np.linspace(1.0, 2.0, 6)
    at, energy = fitted_minimum([point(x, morse(x)) for x in grid])
    assert at == pytest.approx(1.401, abs=1e-6) and energy == pytest.approx(-1.1745, abs=1e-8)
    at, _ = fitted_minimum([point(x, morse(x)) for x in grid], bond=False)  # the polynomial
    assert at == pytest.approx(1.401, abs=0.005)
    assert fitted_minimum([point(x, morse(x)) for x in grid[3:]]) is None  # lowest at the end


def test_a_noisy_curve_s_minimum_comes_from_every_point():
    """Along a bond the Morse fit over all points (``psijax.curves.fit``) holds the minimum
    where one point's noise moves a polynomial through the lowest five; a curve that is no
    Morse curve within its error bars gets the polynomial."""
    from psijax.curves.fit import fit_curve

    # LiH-like: D = 0.097 Ha, a = 0.58 / bohr, R_e = 3.02 bohr, 8 points, 0.4 mHa noise
    x = np.linspace(2.5, 4.5, 8)
    clean = 0.097 * (1 - np.exp(-0.58 * (x - 3.02))) ** 2 - 8.0705
    misses = {"morse": [], "polynomial": []}
    for seed in range(40):
        noisy = clean + np.random.default_rng(seed).normal(0.0, 4e-4, x.size)
        err = np.full(x.size, 4e-4)
        misses["morse"].append(abs(fit_curve(x, noisy, err).at - 3.02))
        misses["polynomial"].append(abs(fit_curve(x, noisy, err, bond=False).at - 3.02))
    assert fit_curve(x, clean, np.full(x.size, 4e-4)).model == "morse"
    assert np.median(misses["morse"]) < 0.5 * np.median(misses["polynomial"])
    assert np.mean(np.array(misses["morse"]) > 0.02) <= 0.1
    # a double well: no Morse curve within its error bars
    well = 0.01 * (x - 3.0) ** 2 * (x - 4.0) ** 2 - 0.002 * x
    fit = fit_curve(x, well, np.full(x.size, 1e-5))
    assert fit.model == "polynomial"


def test_the_frames_of_an_xyz_file(tmp_path):
    path = tmp_path / "path.xyz"
    path.write_text("2\nfirst\nH 0 0 0\nH 0 0 0.7\n2\nsecond\nH 0 0 0\nH 0 0 0.9\n")
    frames = curves.frames(path)
    assert [c for c, _ in frames] == [0.0, 1.0]
    assert frames[1][1].coords[1][2] == pytest.approx(0.9 * 1.8897261246257702)
    path.write_text("2\nfirst\nH 0 0 0\nH 0 0 0.7\n2\nsecond\nH 0 0 0\nLi 0 0 0.9\n")
    with pytest.raises(InputError, match="frame 1 has atoms H Li"):
        curves.frames(path)
    path.write_text("2\nfirst\nH 0 0 0\n")
    with pytest.raises(InputError, match="promises 2 atoms and has 1"):
        curves.frames(path)


@pytest.mark.parametrize(
    "args, problem",
    [
        (["--system", "H2", "--bond", "1-3", "--lengths", "1:2:3"], "names no atom pair"),
        (["--system", "H2", "--bond", "one-two", "--lengths", "1:2:3"], "names no atom pair"),
        (["--system", "H", "--spin", "1", "--bond", "1-2", "--lengths", "1:2:3"],
         "a single atom has no bond"),
        (["--system", "H2", "--bond", "1-2", "--lengths", "0.05,1.4"], "on top of each other"),
        (["--system", "H2", "--bond", "1-2", "--lengths", "1:2"], "is not a range or a list"),
        (["--system", "H2", "--bond", "1-2"], "--bond and --lengths go together"),
    ],
    ids=["no-pair", "not-numbers", "single-atom", "on-top", "bad-range", "no-lengths"],
)  # fmt: skip
def test_bad_input_is_one_line_exit_2_and_nothing_is_written(tmp_path, args, problem):
    out = tmp_path / "scan"
    done = run_cli("scan", *args, "--out", out)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and problem in done.stderr, done.stderr
    assert not out.exists()


def test_a_scan_warm_starts_resumes_point_by_point_and_keeps_its_directory(tmp_path):
    config = config_lib.from_dict({**TINY, "steps": 6, "seed": 1})
    molecule = system.for_config(config)
    geometry = curves.along_bond(molecule, "1-2", [1.2, 1.4, 1.6], "bohr")
    out = tmp_path / "h2"
    first = psijax.scan(config, geometry, out, label="bond 1-2 (bohr)", progress=False)
    assert [p.coordinate for p in first.points] == [1.2, 1.4, 1.6]
    assert all(np.isfinite(p.energy.mean) for p in first.points)
    with open(out / "scan.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [float(r["coordinate"]) for r in rows] == [1.2, 1.4, 1.6]
    assert (out / "scan.png").stat().st_size > 0
    saved = [json.loads((out / f"point-{k:02d}" / "config.json").read_text()) for k in range(3)]
    assert saved[0]["init_from"] is None
    assert saved[1]["init_from"] == str(out / "point-00")  # each from the point before
    assert saved[2]["init_from"] == str(out / "point-01")
    assert saved[2]["target_error"] == pytest.approx(LATER_ERROR * first.points[0].energy.error)

    # the last point lost: the scan again trains only that one, the others are read
    (out / "point-02" / "summary.json").unlink()
    trained = []

    def train(point, **options):
        trained.append(point.out)
        return psijax.train(point, **options)

    again = curves.scan(config, geometry, out, label="bond 1-2 (bohr)", progress=False,
                        train=train)  # fmt: skip
    assert trained == [str(out / "point-02")]
    assert [p.energy.mean for p in again.points[:2]] == [p.energy.mean for p in first.points[:2]]

    # other points in the same directory: refused, nothing changed
    before = (out / "scan.json").read_text()
    with pytest.raises(InputError, match="holds a scan of other points"):
        curves.scan(config, geometry[:2], out, progress=False)
    assert (out / "scan.json").read_text() == before
