"""The Python API a new user reaches for: molecules as objects, TrainResult, on_step, and flags
generated from the config (every field a flag, the same errors, a dry run writing nothing)."""

from __future__ import annotations

import dataclasses
import json
import re
import tomllib

import numpy as np
import pytest

import psijax
from psijax import config as config_lib
from psijax import system
from psijax.cli import flags, main
from psijax.cli.main import build_parser
from psijax.training.job import make_config

TINY = dict(
    layers=((8, 4),), determinants=1, walkers=8, pretrain_steps=0, burn_in_steps=2,
    mcmc_moves=2, optimizer="adam", progress=False,
)  # fmt: skip


def test_every_config_field_is_a_flag_with_its_default_in_the_help():
    parser = build_parser()
    train = parser._subparsers._group_actions[0].choices["train"]
    by_dest = {a.dest: a for a in train._actions}
    for field in dataclasses.fields(config_lib.Config):
        assert field.name in flags.HELP, f"no --help text for {field.name}"
        action = by_dest[field.name]
        assert action.option_strings == [flags.flag_of(field.name)]
        assert "(default: " in action.help
    assert "{spring,march,adam}" in train.format_help()


def test_flags_parse_into_the_same_values_as_a_config_file():
    args = build_parser().parse_args(
        ["train", "--layers", "16x4,8x2", "--clip-scale", "3", "--chunk-size", "4",
         "--eval-fraction", "0.5", "--decay-steps", "200", "--learning-rate", "0.1"]
    )  # fmt: skip
    given = flags.overrides(args)
    from_file = config_lib.from_dict(
        dict(layers=[[16, 4], [8, 2]], clip_scale=3.0, chunk_size=4, eval_fraction=0.5,
             decay_steps=200.0, learning_rate=0.1)
    )  # fmt: skip
    assert config_lib.from_dict(given) == from_file
    json_layers = build_parser().parse_args(["train", "--layers", "[[16, 4], [8, 2]]"])
    assert json_layers.layers == ((16, 4), (8, 2))


def test_walkers_are_sized_by_the_heaviest_nucleus_and_by_effective_core_potentials(tmp_path):
    from psijax import system
    from psijax.system import sizing

    assert config_lib.Config().walkers is None  # left to the molecule until a job sizes it
    sized = lambda **given: sizing.for_system(make_config(**given)).walkers
    assert sized(system="H2") == sized(system="LiH") == sized(system="Li") == 256
    assert sized(system="Be") == sized(system="B") == 512
    assert sized(system="C") == sized(system="N2") == 1024
    assert sized(system="Li 0 0 0; H 0 0 3.015") == 256  # by the nuclei, not by the name
    assert sized(system="C 0 0 0", spin=2, ecp="ccecp") == sizing.ECP_WALKERS
    assert sized(system="C 0 0 0", spin=2, ecp="ccecp", walkers=64) == 64
    assert sized(system="Be", walkers=128) == 128  # given: kept
    config_file = tmp_path / "c.toml"
    config_file.write_text('[system]\nsystem = "C 0 0 0"\nspin = 2\necp = "ccecp"\n')
    assert sizing.for_system(config_lib.load(config_file)).walkers == sizing.ECP_WALKERS
    assert sizing.walkers_for(system.preset("Ne")) == 1024
    # a saved run keeps the number it wrote, whatever today's default
    saved = config_lib.to_dict(config_lib.Config(ecp="ccecp", walkers=256))
    (tmp_path / "config.json").write_text(json.dumps(saved))
    assert config_lib.load_saved(tmp_path / "config.json").walkers == 256


def test_steps_are_sized_by_the_electrons_that_move():
    from psijax.system import sizing

    assert config_lib.Config().steps is None  # left to the molecule until a job sizes it
    steps = lambda **given: sizing.for_system(make_config(**given)).steps
    assert steps(system="H2") == steps(system="LiH") == steps(system="Li") == 1500
    assert steps(system="B") == steps(system="C") == 3000
    assert steps(system="Be") == 3000  # four electrons, but a nucleus of Z = 4
    assert steps(system="N") == steps(system="N2") == steps(system="O") == 5000  # from Z = 7
    assert steps(system="O 0 0 0", spin=2, ecp="ccecp") == 3000  # six valence electrons
    assert steps(system="He 0 0 0; He 0 0 5") == 1500  # four electrons, light nuclei
    assert steps(system="C 0 0 0", spin=2, ecp="ccecp") == 1500  # four valence electrons
    # an all-electron nucleus beside an ECP one keeps its own rule
    assert steps(system="N 0 0 0; Cl 0 0 3.8", ecp="Cl:ccecp") == 5000
    assert steps(system="H 0 0 0; Al 0 0 3.1", ecp="ccecp") == 1500  # 4 valence electrons
    assert steps(system="B", steps=200) == 200  # given: kept
    assert "3000" in sizing.describe_steps() and "5000 above Z = 6" in sizing.describe_steps()
    # K states: K - 1 times the ground state's (at least 1.5 times), in whole hundreds
    assert steps(system="H", states=5) == 6000 and steps(system="He", states=3) == 3000
    assert steps(system="LiH", states=2) == 2300 and steps(system="B", states=2) == 4500
    assert steps(system="Be", states=2) == 4500
    assert "--states K" in sizing.describe_steps()
    half = 4.0834 / 2  # LiH's rocksalt cell (angstrom): a crystal takes twice the steps
    cell = f"0 {half} {half}; {half} 0 {half}; {half} {half} 0"
    crystal = dict(system=f"Li 0 0 0; H {half} 0 0", unit="angstrom", lattice=cell)
    assert steps(**crystal) == 3000 and "crystal" in sizing.describe_steps()


def test_clipping_is_sized_by_effective_core_potentials(tmp_path):
    from psijax.system import sizing
    from psijax.training.job import step_config

    assert config_lib.Config().clip_scale is None  # left to the molecule until a job sizes it
    clip = lambda **given: sizing.for_system(make_config(**given)).clip_scale
    assert clip(system="LiH") == clip(system="N2") == 5.0
    assert clip(system="C 0 0 0", spin=2, ecp="ccecp") == 100.0
    assert clip(system="Na 0 0 0; Cl 0 0 4.4", ecp="Cl:ccecp") == 100.0
    assert clip(system="C 0 0 0", spin=2, ecp="ccecp", clip_scale=3) == 3.0  # given: kept
    assert step_config(config_lib.Config()).clip_scale == 5.0  # unsized: never unclipped
    # a saved run keeps the value it wrote, whatever today's default
    saved = config_lib.to_dict(config_lib.Config(ecp="ccecp", clip_scale=5.0))
    (tmp_path / "config.json").write_text(json.dumps(saved))
    assert config_lib.load_saved(tmp_path / "config.json").clip_scale == 5.0


def test_several_states_pretrain_on_a_basis_with_diffuse_functions():
    from psijax.system import sizing

    assert config_lib.Config().basis is None  # left to the job until it sizes it
    basis = lambda **given: sizing.for_system(make_config(**given)).basis
    assert basis(system="He") == basis(system="LiH") == "sto-6g"
    assert basis(system="He", states=3) == basis(system="LiH", states=2) == "aug-cc-pvdz"
    assert basis(system="He", states=3, basis="cc-pvdz") == "cc-pvdz"  # given: kept
    # an ECP atom keeps its ECP's own basis, which an all-electron one would contradict
    assert basis(system="C 0 0 0", spin=2, ecp="ccecp", states=2) == "sto-6g"


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert re.match(r"psijax \d+\.\d+\.\d+ \(jax \S+, folx \S+\)$", capsys.readouterr().out)


def test_dry_run_of_a_psiformer(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["train", "--system", "Li", "--ansatz", "psiformer", "--attention-layers", "1",
            "--attention-heads", "2", "--layer-norm", "true", "--full-det", "false",
            "--determinants", "2", "--walkers", "8", "--dry-run"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []
    assert 'ansatz = "psiformer"' in out and "layer_norm = true" in out
    assert re.search(
        r"network +PsiFormer 1 layers x 2 heads x 16 \+ LayerNorm \+ Jastrow, "
        r"2 spin-block determinants: [\d,]+ parameters",
        out,
    ), out


def test_dry_run_prints_the_job_and_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(["train", "--system", "H2", "--layers", "8x4", "--walkers", "64", "--dry-run"])
    out = capsys.readouterr().out
    assert code == 0
    assert list(tmp_path.iterdir()) == []
    assert "electrons      2: 1 up, 1 down" in out
    assert re.search(
        r"network +FermiNet \[\(8, 4\)\] \+ Jastrow, 16 full determinants: [\d,]+ parameters", out
    )
    assert "4 x cpu in 1 process(es); 16 walkers per device (64 in all)" in out
    assert re.search(r"UHF/sto-6g E = -1\.1253\d\d Ha", out)
    assert "exact energy   -1.174476 Ha" in out
    # the printed config is a config file that gives back the same run
    config_part = out.split("\n\n")[0]
    values = tomllib.loads(config_part)
    # (with what a job sizes from the molecule: H2 takes 1500 steps, STO-6G, clips at 5;
    # the ECP softening is moot without ECPs and takes its smallest value)
    sized = dict(steps=1500, basis="sto-6g", clip_scale=5.0, ecp_soft_core=0.2)
    expected = make_config(system="H2", layers=((8, 4),), walkers=64, **sized)
    assert config_lib.from_dict(values) == expected


def test_config_sections_mean_the_same_run_as_flat_keys(tmp_path):
    flat = tmp_path / "flat.toml"
    flat.write_text('system = "Li"\nwalkers = 64\nansatz = "psiformer"\nlayer_norm = true\n')
    grouped = tmp_path / "grouped.toml"
    grouped.write_text(
        '[system]\nsystem = "Li"\n[sampler]\nwalkers = 64\n'
        '[ansatz]\nansatz = "psiformer"\nlayer-norm = true\n'
    )
    assert config_lib.load(flat) == config_lib.load(grouped)
    api = make_config(system="Li", sampler={"walkers": 64},
                          ansatz={"ansatz": "psiformer", "layer_norm": True})  # fmt: skip
    assert api == config_lib.load(flat)
    sections = config_lib.sectioned(api)
    assert sections["sampler"]["walkers"] == 64 and sections["ansatz"]["layer_norm"] is True
    assert sorted(k for v in sections.values() for k in v) == sorted(config_lib.FIELDS)


def test_a_molecule_or_a_pyscf_mole_becomes_a_plain_config():
    mol = system.preset("H2")
    from_molecule = make_config(system=mol)
    from_mole = make_config(system=mol.to_pyscf("sto-3g"))
    assert from_molecule == from_mole
    assert (from_mole.charge, from_mole.spin, from_mole.unit) == (0, 0, "bohr")
    again = system.resolve(from_mole.system, charge=from_mole.charge, spin=from_mole.spin)
    assert again.fingerprint() == mol.fingerprint() and again.exact_energy == -1.174476


@pytest.mark.slow
def test_train_takes_a_pyscf_mole_and_reports_every_step(tmp_path):
    seen = []
    from pyscf import gto

    mole = gto.M(atom="H 0 0 0; H 0 0 1.4", unit="bohr", basis="sto-3g", verbose=0)
    result = psijax.train(
        system=mole, steps=5, out=str(tmp_path / "h2"), on_step=lambda i, m: seen.append((i, m)),
        **TINY,
    )  # fmt: skip
    assert [i for i, _ in seen] == [0, 1, 2, 3, 4]
    assert {"energy", "variance", "acceptance"} <= set(seen[0][1])
    assert [m["energy"] for _, m in seen] == list(result.energies)
    assert result.exact == -1.174476  # the preset's geometry is recognised
    assert isinstance(result.config, psijax.Config) and result.config.steps == 5
    assert result.out == tmp_path / "h2" and (result.out / "checkpoints").is_dir()
    walker = np.zeros((2, 3), np.float32) + np.array([[0, 0, 0.3], [0, 0.2, 1.1]], np.float32)
    assert np.isfinite(float(result.network.log_abs(result.params, walker)))
