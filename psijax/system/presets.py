"""Preset systems: atoms and diatomics at reference geometries with their exact energies."""

from __future__ import annotations

# name: (symbols, bond length in bohr or None, charge, spin, exact energy in Hartree):
# non-relativistic, fixed nuclei, the best known exact or estimated-exact values (sources
# in SOURCES), nuclei on the z axis.
REFERENCES: dict[str, tuple[tuple[str, ...], float | None, int, int, float]] = {
    "H": (("H",), None, 0, 1, -0.5),
    "He": (("He",), None, 0, 0, -2.903724),
    "Li": (("Li",), None, 0, 1, -7.478060),
    "Be": (("Be",), None, 0, 0, -14.667356),
    "B": (("B",), None, 0, 1, -24.65391),
    "C": (("C",), None, 0, 2, -37.8450),
    "N": (("N",), None, 0, 3, -54.5892),
    "O": (("O",), None, 0, 2, -75.0673),
    "Ne": (("Ne",), None, 0, 0, -128.9376),
    "H2": (("H", "H"), 1.4, 0, 0, -1.174476),
    "LiH": (("Li", "H"), 3.015, 0, 0, -8.070548),
    "Li2": (("Li", "Li"), 5.051, 0, 0, -14.9954),
    "N2": (("N", "N"), 2.068, 0, 0, -109.5423),
}
PRESETS: tuple[str, ...] = tuple(REFERENCES)
PRESET_OF = {name.lower(): name for name in PRESETS}
SOURCES = {
    "H": "analytic",
    "He": "Pekeris/Drake high-precision variational",
    "Li": "high-precision variational (Hylleraas-type)",
    "Be": "explicitly correlated Gaussians (Komasa)",
    "B": "estimated exact (Chakravorty et al. 1993)",
    "C": "estimated exact (Chakravorty et al. 1993)",
    "N": "estimated exact (Chakravorty et al. 1993)",
    "O": "estimated exact (Chakravorty et al. 1993)",
    "Ne": "estimated exact (Chakravorty et al. 1993)",
    "H2": "Kolos-Wolniewicz type calculations",
    "LiH": "explicitly correlated calculations",
    "Li2": "estimated exact",
    "N2": "estimated exact",
}
# Single neutral atoms with an effective core potential, (element, ECP table): (spin, the
# estimated exact energy in that ECP, Hartree), as the ECP's authors published it
# (Annaberdiyev et al., J. Chem. Theory Comput. 16, 1482 (2020)). psijax's own CCSD(T)/CBS
# plus full CI references (benchmarks/ecp_reference.py) agree within 0.7 mHa.
ECP_REFERENCES: dict[tuple[str, str], tuple[int, float]] = {
    ("C", "ccecp"): (2, -5.4175),
    ("Al", "ccecp"): (1, -1.937523),
    ("S", "ccecp"): (2, -10.0974),
    ("Cl", "ccecp"): (1, -14.9267),
}
ECP_SOURCE = "estimated exact in the same ECP, Annaberdiyev et al. 2020"
