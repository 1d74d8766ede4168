"""Molecule construction, presets, units, file formats, pyscf round trip and input errors."""

import csv
import dataclasses
import io
import math
from pathlib import Path

import numpy as np
import pytest

from psijax import system
from psijax.errors import InputError
from psijax.system import BOHR_PER_ANGSTROM, Molecule

# The reference systems and energies (Hartree; non-relativistic, fixed nuclei, bond lengths in
# bohr along z) with their sources: the presets must carry exactly these.
REFERENCE_CSV = """\
system,atoms,bond_bohr,charge,spin,exact,ferminet,source_exact
H,H,,0,1,-0.5,,analytic
He,He,,0,0,-2.903724,,Pekeris/Drake high-precision variational
Li,Li,,0,1,-7.478060,-7.47798,high-precision variational (Hylleraas-type)
Be,Be,,0,0,-14.667356,-14.66733,explicitly correlated Gaussians (Komasa)
B,B,,0,1,-24.65391,-24.65370,estimated exact (Chakravorty et al. 1993)
C,C,,0,2,-37.8450,-37.84471,estimated exact (Chakravorty et al. 1993)
N,N,,0,3,-54.5892,-54.58882,estimated exact (Chakravorty et al. 1993)
O,O,,0,2,-75.0673,-75.06655,estimated exact (Chakravorty et al. 1993)
Ne,Ne,,0,0,-128.9376,-128.9366,estimated exact (Chakravorty et al. 1993)
H2,H H,1.4,0,0,-1.174476,,Kolos-Wolniewicz type calculations
LiH,Li H,3.015,0,0,-8.070548,-8.07050,explicitly correlated calculations
Li2,Li Li,5.051,0,0,-14.9954,-14.99475,estimated exact
N2,N N,2.068,0,0,-109.5423,-109.5388,estimated exact
"""
REFERENCE = list(csv.DictReader(io.StringIO(REFERENCE_CSV)))
Z = {"H": 1, "He": 2, "Li": 3, "Be": 4, "B": 5, "C": 6, "N": 7, "O": 8, "Ne": 10}


def test_presets_list_all_reference_systems():
    assert set(system.PRESETS) == {row["system"] for row in REFERENCE}
    assert len(system.PRESETS) == 13


@pytest.mark.parametrize("row", REFERENCE, ids=[row["system"] for row in REFERENCE])
def test_preset_matches_reference_row(row):
    mol = system.preset(row["system"])
    symbols = tuple(row["atoms"].split())
    assert mol.symbols == symbols
    assert mol.name == row["system"]
    assert mol.charge == int(row["charge"]) and mol.spin == int(row["spin"])
    assert mol.n_electrons == sum(Z[s] for s in symbols) - mol.charge
    assert mol.n_up - mol.n_down == mol.spin and mol.n_up + mol.n_down == mol.n_electrons
    assert mol.exact_energy == float(row["exact"])
    assert system.presets.SOURCES[row["system"]] == row["source_exact"]
    np.testing.assert_array_equal(mol.nuclear_positions[0], [0.0, 0.0, 0.0])
    if row["bond_bohr"]:
        np.testing.assert_array_equal(mol.nuclear_positions[1], [0.0, 0.0, float(row["bond_bohr"])])
    assert mol.nuclear_positions.shape == (len(symbols), 3)


def test_preset_electron_counts():
    counts = {
        name: (system.preset(name).n_up, system.preset(name).n_down) for name in system.PRESETS
    }
    assert counts == {
        "H": (1, 0), "He": (1, 1), "Li": (2, 1), "Be": (2, 2), "B": (3, 2), "C": (4, 2),
        "N": (5, 2), "O": (5, 3), "Ne": (5, 5), "H2": (1, 1), "LiH": (2, 2), "Li2": (3, 3),
        "N2": (7, 7),
    }  # fmt: skip


def test_preset_lookup_is_case_insensitive():
    assert system.preset("lih") == system.preset("LIH") == system.preset(" LiH ")
    assert system.resolve("n2").name == "N2"


def test_lih_bond_and_nuclear_arrays():
    mol = system.preset("LiH")
    bond = np.linalg.norm(mol.nuclear_positions[1] - mol.nuclear_positions[0])
    assert bond == pytest.approx(3.015, abs=1e-12)
    assert mol.nuclear_charges.dtype == np.float64
    np.testing.assert_array_equal(mol.nuclear_charges, [3.0, 1.0])


def test_nuclear_repulsion():
    assert system.preset("H2").nuclear_repulsion == pytest.approx(1 / 1.4, rel=1e-14)
    assert system.preset("He").nuclear_repulsion == 0.0
    assert system.preset("N2").nuclear_repulsion == pytest.approx(49 / 2.068, rel=1e-14)


def test_from_atom_string_separators_case_and_atomic_numbers():
    ref = system.preset("LiH")
    for text in ("Li 0 0 0; H 0 0 3.015", "li 0 0 0\nH 0 0 3.015\n", "LI,0,0,0;1 0 0 3.015;"):
        assert system.from_atom_string(text) == ref
    assert system.from_atom_string(ref.atom_string()) == ref


def test_from_atom_string_default_spin_is_lowest():
    assert system.from_atom_string("Li 0 0 0").spin == 1
    assert system.from_atom_string("Li 0 0 0", charge=1).spin == 0
    assert system.from_atom_string("O 0 0 0").spin == 0  # not the preset's triplet
    assert system.from_atom_string("O 0 0 0", spin=2).exact_energy == -75.0673


def test_exact_energy_needs_preset_geometry_charge_and_spin():
    assert system.from_atom_string("H 1 2 3; H 1 3.4 3").exact_energy == -1.174476  # moved
    assert system.from_atom_string("H 0 0 3.015; Li 0 0 0").exact_energy == -8.070548
    assert system.from_atom_string("H 0 0 0; H 0 0 1.5").exact_energy is None
    assert system.from_atom_string("He 0 0 0", charge=1, spin=1).exact_energy is None
    assert system.from_atom_string("F 0 0 0").exact_energy is None


def test_an_ecp_atom_has_the_exact_energy_of_its_ecp_in_its_ground_state():
    """Single neutral atoms with a published estimated-exact energy in their ECP compare with
    it; an all-electron atom, another spin or charge, a molecule or another table do not."""
    cl = lambda **kw: system.resolve("Cl 1 2 3", **kw).exact_energy
    assert cl(spin=1, ecp="ccecp") == -14.9267  # anywhere in space
    assert cl(spin=3, ecp="ccecp") is None and cl(spin=1) is None
    assert cl(spin=1, ecp="lanl2dz") is None  # another table
    assert system.resolve("Cl 0 0 0", charge=-1, spin=0, ecp="ccecp").exact_energy is None
    assert system.resolve("C 0 0 0", spin=2, ecp="ccecp").exact_energy == -5.4175
    assert system.resolve("Al 0 0 0", spin=1, ecp="ccecp").exact_energy == -1.937523
    assert system.resolve("S 0 0 0", spin=2, ecp="ccecp").exact_energy == -10.0974
    assert system.resolve("S 0 0 0; S 0 0 3.6", ecp="ccecp").exact_energy is None
    assert system.resolve("O 0 0 0", spin=2, ecp="ccecp").exact_energy is None  # not tabulated


def test_angstrom_conversion():
    assert math.isclose(BOHR_PER_ANGSTROM, 1.8897261246, rel_tol=1e-10)
    for unit in ("angstrom", "A", "ang", "Angstrom", "ANG"):
        mol = system.from_atom_string("H 0 0 0; H 0 0 0.74", unit=unit)
        assert mol.coords[1][2] == pytest.approx(0.74 / 0.529177210903, rel=1e-14)
    for unit in ("bohr", "B", "Bohr"):
        assert system.from_atom_string("H 0 0 0; H 0 0 1.4", unit=unit) == system.preset("H2")


def test_from_xyz(tmp_path):
    path = tmp_path / "water.xyz"
    path.write_text("3\nwater, angstrom\nO 0 0 0.1173\nH 0 0.7572 -0.4692\nh 0 -0.7572 -0.4692\n\n")
    mol = system.from_xyz(path)
    assert mol.symbols == ("O", "H", "H") and mol.name == "water"
    assert (mol.n_electrons, mol.spin) == (10, 0)
    np.testing.assert_allclose(mol.coords[1], np.array([0, 0.7572, -0.4692]) * BOHR_PER_ANGSTROM)
    cation = system.from_xyz(str(path), charge=1)
    assert (cation.n_electrons, cation.spin, cation.n_up, cation.n_down) == (9, 1, 5, 4)
    assert system.resolve(str(path)) == mol


def test_from_pyscf_round_trip():
    for name in ("H", "N", "LiH", "N2"):
        mol = system.preset(name)
        pyscf_mol = mol.to_pyscf()
        assert pyscf_mol.nelec == (mol.n_up, mol.n_down)
        assert pyscf_mol.unit.lower().startswith("b")
        assert system.from_pyscf(pyscf_mol) == mol
    bent = system.from_atom_string("O 0 0 0.2; H 0 1.4 -0.9; H 0 -1.4 -0.9", charge=-1, spin=1)
    assert system.from_pyscf(bent.to_pyscf(basis="sto-3g")) == bent
    assert system.resolve(bent.to_pyscf()) == bent


def test_from_pyscf_angstrom_input():
    from pyscf import gto

    pyscf_mol = gto.M(atom="H 0 0 0; H 0 0 0.74", unit="Angstrom", basis="sto-3g", verbose=0)
    mol = system.from_pyscf(pyscf_mol)
    ours = system.from_atom_string("H 0 0 0; H 0 0 0.74", unit="angstrom")
    assert mol.symbols == ours.symbols
    # pyscf's bohr (CODATA 2010, 0.52917721092 angstrom) differs from ours (CODATA 2018) by 3e-11.
    np.testing.assert_allclose(mol.nuclear_positions, ours.nuclear_positions, rtol=1e-9, atol=0)


def test_resolve_overrides_and_passthrough():
    li = system.preset("Li")
    assert system.resolve(li) is li
    cation = system.resolve("Li", charge=1)
    assert (cation.charge, cation.spin, cation.exact_energy, cation.name) == (1, 0, None, None)
    quartet = system.resolve("li", spin=3)
    assert (quartet.n_up, quartet.n_down, quartet.exact_energy) == (3, 0, None)
    assert system.resolve("Li", charge=0, spin=1).exact_energy == -7.478060
    assert system.resolve("Li 0 0 0; H 0 0 5.7", unit="angstrom").coords[1][2] == pytest.approx(
        5.7 * BOHR_PER_ANGSTROM
    )
    assert system.resolve("C 0 0 0").spin == 0 and system.resolve("C").spin == 2


def test_molecule_is_frozen_hashable_and_name_blind():
    a = system.preset("H2")
    b = dataclasses.replace(a, name="hydrogen")
    assert a == b and hash(a) == hash(b)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.charge = 1  # type: ignore[misc]
    direct = Molecule(("h", "H"), (1, 1), ([0, 0, 0], np.array([0, 0, 1.4])), 0, 0)
    assert direct == a and direct.symbols == ("H", "H")


def test_fingerprint_is_short_stable_and_discriminating():
    a = system.preset("LiH")
    fp = a.fingerprint()
    assert len(fp) == 16 and int(fp, 16) >= 0
    assert fp == system.from_atom_string("Li -0.0 0 0; H 0 0 3.0150000001").fingerprint()
    others = [
        system.from_atom_string("Li 0 0 0; H 0 0 3.016"),
        system.from_atom_string("H 0 0 0; Li 0 0 3.015"),
        dataclasses.replace(a, charge=1, spin=1),
        dataclasses.replace(a, spin=2),
    ]
    assert len({fp, *(m.fingerprint() for m in others)}) == 1 + len(others)


def test_molecules_do_not_import_jax():
    """Parsing and checking a molecule needs no JAX: only the JAX orbitals of scf.py (and
    their Bloch sums, bloch.py), the cell's folding of JAX arrays (lattice.py) and the
    electron gas's plane-wave determinant (electron_gas.py) import it."""
    for path in Path(system.__file__).parent.glob("*.py"):
        if path.name not in ("scf.py", "bloch.py", "lattice.py", "electron_gas.py"):
            source = path.read_text()
            assert "import jax" not in source and "from jax" not in source, path.name


def _mol(text: str, **kw):
    return lambda tmp: system.from_atom_string(text, **kw)


def _resolve(text: str, **kw):
    return lambda tmp: system.resolve(text, **kw)


def _xyz(content: str | None):
    def make(tmp: Path):
        path = tmp / "mol.xyz"
        if content is not None:
            path.write_text(content)
        return system.from_xyz(path)

    return make


BAD_INPUTS = {
    "empty string": (_mol(""), "no atoms"),
    "only separators": (_mol(" ; \n ;"), "no atoms"),
    "unknown element": (_mol("H 0 0 0; Xx 0 0 1"), "unknown element 'Xx' in atom 2"),
    "atomic number too big": (_mol("37 0 0 0"), "unknown element '37'"),
    "too few fields": (_mol("H 0 0"), "3 fields"),
    "too many fields": (_mol("H 0 0 0 1"), "5 fields"),
    "non-numeric coordinate": (_mol("H 0 zero 0"), "not a number"),
    "nan coordinate": (_mol("H 0 nan 0"), "not finite"),
    "inf coordinate": (_mol("H 0 0 -inf"), "not finite"),
    "no electrons left": (_mol("H 0 0 0", charge=1), "leaves 0 electrons"),
    "negative electrons": (_mol("He 0 0 0", charge=5), "at most 1"),
    "spin parity": (_mol("Li 0 0 0", spin=0), "must be odd"),
    "spin parity even": (_mol("He 0 0 0", spin=1), "must be even"),
    "spin too large": (_mol("He 0 0 0", spin=4), "-2 <= spin <= 2"),
    "spin too negative": (_mol("H 0 0 0", spin=-3), "cannot be negative"),
    "coincident nuclei": (_mol("H 0 0 0; Li 1 1 1; H 0 0 0.0005"), "atoms 1 (H) and 3 (H)"),
    "unknown unit": (_mol("H 0 0 0", unit="nm"), "unknown unit 'nm'"),
    "unknown unit resolve": (_resolve("H2", unit="furlong"), "'bohr' or 'angstrom'"),
    "unknown preset": (_resolve("Foo"), "neither a preset"),
    "unknown preset direct": (lambda tmp: system.preset("Xe2"), "unknown preset"),
    "preset bad charge": (_resolve("H", charge=1), "leaves 0 electrons"),
    "preset bad spin": (_resolve("N2", spin=1), "must be even"),
    "xyz missing": (_xyz(None), "does not exist"),
    "xyz empty": (_xyz("\n\n"), "is empty"),
    "xyz bad count": (_xyz("two\ncomment\nH 0 0 0\nH 0 0 1\n"), "number of atoms"),
    "xyz zero count": (_xyz("0\ncomment\n"), "number of atoms"),
    "xyz truncated": (_xyz("3\ncomment\nH 0 0 0\nH 0 0 0.74\n"), "declares 3 atoms but has 2"),
    "xyz extra atoms": (_xyz("1\ncomment\nH 0 0 0\nH 0 0 0.74\n"), "declares 1 atoms but has 2"),
    "xyz bad element": (_xyz("1\n\nQq 0 0 0\n"), "on line 3 of"),
    "xyz bad coordinate": (_xyz("2\n\nH 0 0 0\nH 0 0 x\n"), "'x' on line 4"),
    "xyz missing resolve": (_resolve("nowhere/missing.xyz"), "does not exist"),
    "bad system type": (lambda tmp: system.resolve(3.0), "cannot make a molecule from a float"),
    "direct bad charge type": (
        lambda tmp: Molecule(("H",), (1.0,), ((0.0, 0.0, 0.0),), 0.5, 1),  # type: ignore[arg-type]
        "whole number",
    ),
    "direct bad position": (
        lambda tmp: Molecule(("H",), (1.0,), ((0.0, 0.0),), 0, 1),  # type: ignore[arg-type]
        "3 finite numbers",
    ),
    "direct fractional Z": (
        lambda tmp: Molecule(("H",), (1.5,), ((0.0, 0.0, 0.0),), 0, 1),
        "positive whole number",
    ),
}


@pytest.mark.parametrize("case", BAD_INPUTS, ids=list(BAD_INPUTS))
def test_bad_input_raises_one_line_input_error(case, tmp_path):
    make, keyword = BAD_INPUTS[case]
    with pytest.raises(InputError) as info:
        make(tmp_path)
    message = str(info.value)
    assert "\n" not in message
    assert keyword in message
    assert ";" in message, "the message should name the problem; then the fix"


def test_coincident_nuclei_tolerance():
    ok = system.from_atom_string("H 0 0 0; H 0 0 0.002")
    assert math.isclose(ok.nuclear_repulsion, 500.0)
