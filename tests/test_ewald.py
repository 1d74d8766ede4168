"""Lattices and Ewald sums: Madelung constants against the literature, point-charge cells
against pyscf.pbc, independence of the splitting parameter, the invariances of a walker's
periodic Coulomb energy, and its split into three parts against the all-charge sum."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from psijax import laplacian
from psijax.errors import InputError
from psijax.hamiltonian import Walker
from psijax.hamiltonian.ewald import (
    PeriodicCoulomb,
    electron_electron,
    electron_nucleus,
    ewald_sum,
    point_charge_energy,
)
from psijax.system import ELEMENTS, Lattice, parse_lattice

# Madelung energies per particle of one-component lattices (point charges q in a uniform
# neutralising background), in units of q^2 / r_s, r_s the Wigner-Seitz radius.
# bcc and fcc: D. A. Baiko, A. Y. Potekhin and D. G. Yakovlev, Phys. Rev. E 64, 057402
# (2001), who give zeta to 12 digits. Simple cubic: the potential at a charge from its
# images and background is -2.837297479480619... q / L for a cube of side L (the cubic
# "jellium" lattice sum; J. M. Borwein, M. L. Glasser, R. C. McPhedran, J. G. Wan and
# I. J. Zucker, Lattice Sums Then and Now, Cambridge University Press, 2013), so per
# particle -2.837297479480619 / 2 / (4 pi / 3)^(1/3) q^2 / r_s.
SC_POTENTIAL = -2.837297479480619
ONE_COMPONENT = {
    "sc": SC_POTENTIAL / 2 / (4 * math.pi / 3) ** (1 / 3),
    "bcc": -0.895929255682,
    "fcc": -0.895873615195,
}
PRIMITIVE = {
    "sc": np.eye(3),
    "bcc": 0.5 * np.array([[-1.0, 1, 1], [1, -1, 1], [1, 1, -1]]),
    "fcc": 0.5 * np.array([[0.0, 1, 1], [1, 0, 1], [1, 1, 0]]),
}
# the sites of each lattice in its conventional cube of side 1
CONVENTIONAL = {
    "sc": np.zeros((1, 3)),
    "bcc": np.array([[0.0, 0, 0], [0.5, 0.5, 0.5]]),
    "fcc": np.array([[0.0, 0, 0], [0, 0.5, 0.5], [0.5, 0, 0.5], [0.5, 0.5, 0]]),
}
# rocksalt: E = -M / d per ion pair, d the nearest-neighbour distance; M to 18 digits
# (OEIS A085469, the Madelung constant of NaCl)
NACL = 1.747564594633182190


@pytest.fixture(autouse=True, scope="module")
def _x64():
    with jax.enable_x64(True):
        yield


def lattice_of(matrix) -> Lattice:
    return Lattice(tuple(map(tuple, np.asarray(matrix, float))))


# ------------------------------------------------------------------------------ lattices
def test_reciprocal_vectors_volume_and_wigner_seitz_radius():
    lattice = lattice_of([[5.1, 0.3, -0.2], [1.7, 4.6, 0.4], [-0.9, 1.3, 6.2]])
    np.testing.assert_allclose(lattice.reciprocal @ lattice.matrix.T, 2 * np.pi * np.eye(3),
                               atol=1e-13)  # fmt: skip
    a1, a2, a3 = lattice.matrix
    assert lattice.volume == pytest.approx(abs(np.dot(a1, np.cross(a2, a3))), rel=1e-14)
    rs = lattice.wigner_seitz_radius(7)
    assert 7 * 4 * np.pi / 3 * rs**3 == pytest.approx(lattice.volume, rel=1e-14)
    # a left-handed cell has the same volume
    assert lattice_of(-lattice.matrix).volume == pytest.approx(lattice.volume, rel=1e-14)


def test_lattice_text_in_bohr_and_angstrom():
    fcc = parse_lattice("0 5 5; 5 0 5\n5, 5, 0")
    assert fcc.vectors == ((0, 5, 5), (5, 0, 5), (5, 5, 0))
    assert fcc.volume == pytest.approx(250.0, rel=1e-14)
    angstrom = parse_lattice("1 0 0; 0 1 0; 0 0 1", unit="angstrom")
    assert angstrom == Lattice.from_angstrom([[1, 0, 0], [0, 1, 0], [0, 0, 1]])
    assert angstrom.vectors[0][0] == pytest.approx(1 / 0.529177210903, rel=1e-14)


@pytest.mark.parametrize(
    "text, problem",
    [
        ("1 0 0; 0 1 0", "has 2 vectors"),
        ("1 0 0; 0 1 0; 0 0 1; 1 1 1", "has 4 vectors"),
        ("1 0 0; 0 1; 0 0 1", "a2 '0 1' is not 3 finite numbers"),
        ("1 0 0; 0 1 0; 0 0 x", "a3 '0 0 x' is not 3 finite numbers"),
        ("1 0 0; 0 1 0; 0 0 inf", "not 3 finite numbers"),
        ("1 0 0; 0 1 0; 1 1 0", "coplanar"),
        ("1 0 0; 0 1 0; 1 1 1e-10", "coplanar"),
        ("0 0 0; 0 1 0; 0 0 1", "a1 is zero"),
    ],
)
def test_a_bad_lattice_is_one_line_naming_the_problem(text, problem):
    with pytest.raises(InputError, match=problem) as caught:
        parse_lattice(text)
    assert "\n" not in str(caught.value) and "; " in str(caught.value)  # the fix follows


def test_bad_units_and_shapes():
    with pytest.raises(InputError, match="unknown unit 'furlong'"):
        parse_lattice("1 0 0; 0 1 0; 0 0 1", unit="furlong")
    with pytest.raises(InputError, match="3 vectors, got 2"):
        Lattice(((1, 0, 0), (0, 1, 0)))
    with pytest.raises(InputError, match="not a positive length"):
        Lattice.cubic(-1.0)


def test_minimum_image_is_the_shortest_image():
    """Against a brute-force search over 17^3 images, in NumPy and in JAX; and wrap puts
    positions in the cell without changing them modulo the lattice."""
    lattice = lattice_of([[4.0, 0.0, 0.0], [1.5, 3.8, 0.0], [-1.1, 0.9, 4.4]])
    d = np.random.default_rng(0).uniform(-15, 15, (200, 3))  # up to 5 cells away
    n = np.array(np.meshgrid(*[np.arange(-8, 9)] * 3, indexing="ij")).reshape(3, -1).T
    images = d[:, None, :] + (n @ lattice.matrix)[None]
    shortest = np.min(np.linalg.norm(images, axis=-1), axis=1)
    np.testing.assert_allclose(np.linalg.norm(lattice.minimum_image(d), axis=-1), shortest,
                               rtol=1e-12)  # fmt: skip
    np.testing.assert_allclose(lattice.minimum_image(jnp.asarray(d)), lattice.minimum_image(d),
                               atol=1e-12)  # fmt: skip
    frac = lattice.wrap(d) @ np.linalg.inv(lattice.matrix)
    assert np.all((frac >= 0) & (frac < 1))
    moved = (d - lattice.wrap(d)) @ np.linalg.inv(lattice.matrix)
    np.testing.assert_allclose(moved, np.rint(moved), atol=1e-12)


# --------------------------------------------------------------------- Madelung constants
@pytest.mark.parametrize("name", list(ONE_COMPONENT))
def test_one_component_madelung_constants(name):
    """The primitive cell's Madelung constant, and the energy per charge of the
    conventional cube (several charges per cell), against the literature."""
    primitive = lattice_of(PRIMITIVE[name] * 3.7)
    rs = primitive.wigner_seitz_radius(1)
    assert primitive.madelung() / 2 * rs == pytest.approx(ONE_COMPONENT[name], abs=1e-11)
    sites = CONVENTIONAL[name] * 3.7
    cube = Lattice.cubic(3.7)
    per_charge = point_charge_energy(cube, np.ones(len(sites)), sites) / len(sites)
    assert per_charge * rs == pytest.approx(ONE_COMPONENT[name], abs=1e-11)


def test_simple_cubic_potential_in_units_of_the_side():
    side = 2.3
    assert Lattice.cubic(side).madelung() * side == pytest.approx(SC_POTENTIAL, abs=1e-12)


def test_rocksalt_madelung_constant():
    """Na+ and Cl- in the conventional cube (8 ions) and in the primitive fcc cell (2)."""
    a = 5.2
    fcc = CONVENTIONAL["fcc"] * a
    ions = np.concatenate([fcc, fcc + np.array([a / 2, 0, 0])])
    charges = np.array([1.0] * 4 + [-1.0] * 4)
    d = a / 2
    cube = point_charge_energy(Lattice.cubic(a), charges, ions)
    assert -cube / 4 * d == pytest.approx(NACL, abs=1e-12)
    primitive = lattice_of(PRIMITIVE["fcc"] * a)
    pair = point_charge_energy(primitive, [1.0, -1.0], [[0, 0, 0], [d, 0, 0]])
    assert -pair * d == pytest.approx(NACL, abs=1e-12)


# ------------------------------------------------------------------------ against pyscf
def pyscf_energy(lattice: Lattice, charges, positions) -> float:
    """pyscf.pbc's Ewald energy of the nuclei of a cell: the same charged-cell convention."""
    from pyscf.pbc import gto

    cell = gto.Cell()
    cell.atom = [(ELEMENTS[int(z) - 1], tuple(p)) for z, p in zip(charges, positions, strict=True)]
    cell.a = lattice.matrix
    cell.unit = "Bohr"
    cell.basis = "sto-3g"
    cell.spin = int(sum(charges)) % 2
    cell.precision = 1e-12
    cell.verbose = 0
    cell.build()
    return float(cell.energy_nuc())


TRICLINIC = [[5.1, 0.3, -0.2], [1.7, 4.6, 0.4], [-0.9, 1.3, 6.2]]


@pytest.mark.parametrize(
    "matrix, charges, positions",
    [
        (np.eye(3) * 6.0, [2, 1], [[0, 0, 0], [1.5, 2.0, 2.5]]),
        (PRIMITIVE["fcc"] * 7.0, [3, 1], [[0, 0, 0], [3.5, 0, 0]]),
        (PRIMITIVE["bcc"] * 5.5, [1], [[0.3, 0.1, 0.2]]),
        (TRICLINIC, [3, 4, 1], [[0.1, 0.2, 0.3], [2.0, 1.1, 3.3], [4.0, 3.9, 1.0]]),
    ],
    ids=["cubic", "fcc", "bcc-one", "triclinic"],
)
def test_point_charge_cells_agree_with_pyscf(matrix, charges, positions):
    lattice = lattice_of(matrix)
    ours = point_charge_energy(lattice, charges, positions)
    assert ours == pytest.approx(pyscf_energy(lattice, charges, positions), rel=1e-10)


@st.composite
def cells(draw):
    """A cell near a cube of side 4-9 bohr, each entry skewed by up to 40% of the side,
    and 1-4 charges of 1-5 at random fractional positions."""
    side = draw(st.floats(4.0, 9.0))
    skew = np.array(draw(st.lists(st.floats(-0.4, 0.4), min_size=9, max_size=9))).reshape(3, 3)
    lattice = lattice_of(side * (np.eye(3) + skew))
    n = draw(st.integers(1, 4))
    charges = draw(st.lists(st.integers(1, 5), min_size=n, max_size=n))
    frac = np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=3 * n, max_size=3 * n)))
    return lattice, charges, frac.reshape(n, 3) @ lattice.matrix


SETTINGS = settings(max_examples=12, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])  # fmt: skip


@SETTINGS
@given(cell=cells())
def test_drawn_cells_agree_with_pyscf_for_any_splitting(cell):
    """pyscf to 1e-10 relative; two splitting parameters 20 times apart to 1e-10."""
    lattice, charges, positions = cell
    # not a nearly flat cell (the skew drawn collapsing it), no two charges on each other
    assume(lattice.volume > 0.2 * float(np.prod(np.linalg.norm(lattice.matrix, axis=1))))
    r = np.asarray(positions)
    d = np.linalg.norm(lattice.minimum_image(r[:, None] - r[None]), axis=-1)
    assume(np.min(d + 1e3 * np.eye(len(r))) > 0.5)
    ours = point_charge_energy(lattice, charges, positions)
    assert ours == pytest.approx(pyscf_energy(lattice, charges, positions), rel=1e-10)
    a = ewald_sum(lattice, len(charges)).alpha
    for alpha in (0.3 * a, 6.0 * a):
        again = point_charge_energy(lattice, charges, positions, alpha=alpha)
        assert again == pytest.approx(ours, rel=1e-10, abs=1e-12)


# ------------------------------------------------------------------- a walker's energy
LATTICE = lattice_of(TRICLINIC)
NUCLEI = PeriodicCoulomb(LATTICE, (3.0, 1.0), ((0.1, 0.2, 0.3), (2.0, 1.1, 3.3)))


def walker(n: int = 4, seed: int = 0) -> jax.Array:
    frac = jax.random.uniform(jax.random.PRNGKey(seed), (n, 3), jnp.float64, -1.0, 2.0)
    return frac @ jnp.asarray(LATTICE.matrix)


def total(term: PeriodicCoulomb, r) -> float:
    return float(sum(term.parts(r)))


def test_the_parts_add_up_to_the_energy_of_all_charges():
    r = walker()
    charges = [*NUCLEI.nuclear_charges, *[-1.0] * r.shape[0]]
    positions = np.concatenate([np.asarray(NUCLEI.nuclear_positions), np.asarray(r)])
    expected = point_charge_energy(LATTICE, charges, positions)
    assert total(NUCLEI, r) == pytest.approx(expected, rel=1e-12)
    _, v_ee, v_nn = NUCLEI.parts(r)
    assert float(v_ee) == pytest.approx(point_charge_energy(LATTICE, -np.ones(4), r), rel=1e-12)
    assert float(v_nn) == pytest.approx(
        point_charge_energy(LATTICE, NUCLEI.nuclear_charges, NUCLEI.nuclear_positions), rel=1e-14
    )


def test_the_walker_parts_do_not_depend_on_the_splitting():
    r = walker()
    a = ewald_sum(LATTICE, 6).alpha
    values = []
    for alpha in (0.25 * a, 4.0 * a):
        ewald = ewald_sum(LATTICE, 6, alpha)
        values.append([float(electron_electron(ewald, r)),
                       float(electron_nucleus(ewald, r, NUCLEI.nuclear_charges,
                                              NUCLEI.nuclear_positions))])  # fmt: skip
    np.testing.assert_allclose(values[0], values[1], rtol=1e-10)


def test_invariances():
    """Translating every charge, permuting electrons, and moving one electron by a lattice
    vector leave every part unchanged."""
    r = walker()
    parts = np.array(NUCLEI.parts(r))
    shift = np.array([0.7, -1.3, 2.2])
    moved = PeriodicCoulomb(
        LATTICE, NUCLEI.nuclear_charges, tuple(np.asarray(NUCLEI.nuclear_positions) + shift)
    )
    np.testing.assert_allclose(np.array(moved.parts(r + shift)), parts, rtol=1e-11)
    np.testing.assert_allclose(np.array(NUCLEI.parts(r[::-1])), parts, rtol=1e-12)
    lattice_vector = jnp.asarray(np.array([2, -1, 3]) @ LATTICE.matrix)
    np.testing.assert_allclose(np.array(NUCLEI.parts(r.at[1].add(lattice_vector))), parts,
                               rtol=1e-11)  # fmt: skip


def test_a_lone_charge_in_its_background_is_half_the_madelung_constant():
    term = PeriodicCoulomb(LATTICE)
    v_en, v_ee, v_nn = term.parts(walker(1))
    assert float(v_ee) == pytest.approx(LATTICE.madelung() / 2, rel=1e-12)
    assert float(v_en) == 0.0 and float(v_nn) == 0.0


def test_jit_vmap_float32_and_the_term_interface():
    """One walker's term under jit and vmap; float32 agrees with float64 to float32's
    rounding; the term's components are the molecular Coulomb term's."""
    walkers = jnp.stack([walker(seed=s) for s in range(3)])
    term = jax.jit(jax.vmap(lambda r: NUCLEI(Walker(None, None, r, laplacian.Forward()))))
    exact = term(walkers)
    assert NUCLEI.components == ("electron_nucleus", "electron_electron", "nucleus_nucleus")
    assert set(exact) == set(NUCLEI.components)
    for s in range(3):
        np.testing.assert_allclose([exact[c][s] for c in NUCLEI.components],
                                   NUCLEI.parts(walkers[s]), rtol=1e-12)  # fmt: skip
    with jax.enable_x64(False):
        single = term(walkers.astype(jnp.float32))
    for c in exact:
        assert single[c].dtype == jnp.float32
        np.testing.assert_allclose(single[c], exact[c], rtol=2e-5, atol=2e-5)


def test_bad_nuclei():
    with pytest.raises(InputError, match="2 nuclear charges at 1 positions"):
        PeriodicCoulomb(LATTICE, (1.0, 1.0), ((0, 0, 0),))
    image = tuple(LATTICE.matrix[0])
    with pytest.raises(InputError, match="charges 1 and 2 are 0 bohr apart"):
        PeriodicCoulomb(LATTICE, (1.0, 1.0), ((0, 0, 0), image))
    with pytest.raises(InputError, match="splitting parameter"):
        ewald_sum(LATTICE, 1, alpha=-1.0)
