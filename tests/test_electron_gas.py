"""The homogeneous electron gas: its cell, closed shells, the plane-wave determinant
(antisymmetric, periodic, an eigenfunction of the kinetic energy) and its Hartree-Fock
energy, analytic and sampled through the Ewald sum."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from psijax import laplacian
from psijax.errors import InputError
from psijax.hamiltonian import Hamiltonian, Kinetic
from psijax.hamiltonian.ewald import PeriodicCoulomb
from psijax.system import ElectronGas, closed_shells

# 14 electrons, unpolarised, at the Gamma point.
# rs = 1: the cc4s project's electron-gas test (github.com/cc4s/test-resources,
# ueg/rs1.0_7occ_26virt/README.org): total Hartree-Fock energy 8.4914806035 Ha, cell
# volume 58.6430628670 bohr^3, Madelung term 0.7302966760 Ha.
CC4S_RS1 = 8.4914806035
CC4S_VOLUME = 58.6430628670
CC4S_MADELUNG = 0.7302966760
# rs = 5: QMCPACK's tests/heg/heg_14_gamma (README): the non-interacting determinant's
# energy 0.627711 Ha with zero variance (the kinetic energy), and variational Monte Carlo
# of the same determinant with the Coulomb interaction, -0.812484 +- 0.000027 Ha.
QMCPACK_KINETIC = 0.627711
QMCPACK_HF, QMCPACK_HF_ERROR = -0.812484, 0.000027


@pytest.fixture(autouse=True, scope="module")
def _x64():
    with jax.enable_x64(True):
        yield


GAS = ElectronGas.unpolarised(14, 5.0)


def test_cell_and_closed_shells():
    assert closed_shells(150) == (1, 7, 19, 27, 33, 57, 81, 93, 123, 147)
    assert GAS.length == pytest.approx((4 * math.pi * 14 / 3) ** (1 / 3) * 5.0, rel=1e-15)
    assert GAS.lattice.wigner_seitz_radius(14) == pytest.approx(5.0, rel=1e-14)
    k = GAS.wavevectors(7) * GAS.length / (2 * math.pi)
    np.testing.assert_allclose(np.sum(k**2, axis=1), [0, 1, 1, 1, 1, 1, 1], atol=1e-12)
    assert GAS.spin == 0 and ElectronGas(7, 1, 2.0).spin == 6
    assert PeriodicCoulomb.of(GAS).nuclear_charges == ()


@pytest.mark.parametrize(
    "args, problem",
    [
        ((5, 7, 1.0), "n_up=5 leaves a shell of plane waves part-filled; use a closed shell"),
        ((7, 8, 1.0), "n_down=8 leaves"),
        ((0, 0, 1.0), "no electrons"),
        ((-1, 1, 1.0), "n_up must be a whole number >= 0"),
        ((7, 7, 0.0), "rs=0.0 is not positive"),
        ((7, 7, float("nan")), "rs=nan is not a number"),
    ],
)
def test_bad_electron_gases(args, problem):
    with pytest.raises(InputError, match=problem) as caught:
        ElectronGas(*args)
    assert "\n" not in str(caught.value)


def test_hartree_fock_energy_at_rs_1_against_cc4s():
    gas = ElectronGas.unpolarised(14, 1.0)
    assert gas.length**3 == pytest.approx(CC4S_VOLUME, abs=1e-9)
    # cc4s's Madelung term is -xi, xi the cell's Madelung constant (-2.8373 / L)
    assert -gas.lattice.madelung() == pytest.approx(CC4S_MADELUNG, abs=1e-10)
    assert gas.hartree_fock_energy() == pytest.approx(CC4S_RS1, abs=1e-9)


def test_hartree_fock_energy_at_rs_5_and_qmcpack():
    """The analytic energy -0.8125487031 Ha lies 2.4 of QMCPACK's error bars below its
    Monte Carlo estimate of the same determinant's energy; the kinetic energy agrees with
    QMCPACK's exact one to its 6 digits."""
    assert GAS.kinetic_energy() == pytest.approx(QMCPACK_KINETIC, abs=1e-6)
    energy = GAS.hartree_fock_energy()
    assert energy == pytest.approx(-0.8125487031, abs=1e-10)
    assert abs(energy - QMCPACK_HF) < 3 * QMCPACK_HF_ERROR
    # each part scales as a power of rs: kinetic 1/rs^2, Madelung and exchange 1/rs
    at_1 = ElectronGas.unpolarised(14, 1.0)
    assert GAS.kinetic_energy() == pytest.approx(at_1.kinetic_energy() / 25, rel=1e-14)
    assert GAS.exchange_energy() == pytest.approx(at_1.exchange_energy() / 5, rel=1e-14)


def test_polarised_gas_has_one_exchange_sum():
    """7 electrons of one spin: half the exchange of the unpolarised 14, in a cell 2^(1/3)
    times smaller (exchange goes as 1 / L); 1 electron: no exchange, Madelung only."""
    polarised = ElectronGas(7, 0, 5.0)
    assert polarised.length == pytest.approx(GAS.length / 2 ** (1 / 3), rel=1e-14)
    expected = GAS.exchange_energy() / 2 * 2 ** (1 / 3)
    assert polarised.exchange_energy() == pytest.approx(expected, rel=1e-14)
    one = ElectronGas(1, 0, 3.0)
    assert one.exchange_energy() == 0.0 and one.kinetic_energy() == 0.0
    assert one.hartree_fock_energy() == pytest.approx(one.lattice.madelung() / 2, rel=1e-14)


def walkers(n: int, dtype=jnp.float64) -> jax.Array:
    return jax.random.uniform(jax.random.PRNGKey(0), (n, 14, 3), dtype) * GAS.length


def test_determinant_is_antisymmetric_and_periodic():
    psi = jax.jit(jax.vmap(lambda r: GAS.determinant().apply(None, r)))
    r = walkers(8)
    base = psi(r)
    swapped = psi(r.at[:, [1, 4]].set(r[:, [4, 1]]))  # two up electrons
    np.testing.assert_allclose(swapped.log_abs, base.log_abs, rtol=1e-12)
    np.testing.assert_array_equal(swapped.sign, -base.sign)
    swapped = psi(r.at[:, [8, 13]].set(r[:, [13, 8]]))  # two down electrons
    np.testing.assert_array_equal(swapped.sign, -base.sign)
    for axis, cells in enumerate((-2, 1, 3)):
        for electron in (0, 9):
            moved = psi(r.at[:, electron, axis].add(GAS.length * cells))
            np.testing.assert_allclose(moved.log_abs, base.log_abs, rtol=1e-11, atol=1e-11)
            np.testing.assert_array_equal(moved.sign, base.sign)
    # a collision of two same-spin electrons is a node
    assert psi(r.at[:, 2].set(r[:, 5])).log_abs[0] < base.log_abs[0] - 20


def test_kinetic_local_energy_is_constant_and_the_float32_determinant_works():
    """The plane-wave determinant is an eigenfunction of the kinetic energy: E_L(kinetic)
    = sum |k|^2 / 2 at every walker (QMCPACK's zero-variance 0.627711 Ha at rs = 5)."""
    hamiltonian = Hamiltonian((Kinetic(), PeriodicCoulomb.of(GAS)), laplacian.Forward())
    local = hamiltonian.local_energy(GAS.determinant())
    parts = jax.jit(jax.vmap(lambda r: local.parts(None, r)))(walkers(6))
    np.testing.assert_allclose(parts["kinetic"], GAS.kinetic_energy(), rtol=1e-9)
    np.testing.assert_allclose(parts["energy"], parts["kinetic"] + parts["electron_electron"],
                               rtol=1e-12)  # fmt: skip
    with jax.enable_x64(False):
        r32 = walkers(6, jnp.float32)
        kinetic = jax.jit(jax.vmap(lambda r: local.parts(None, r)["kinetic"]))(r32)
    assert kinetic.dtype == jnp.float32
    np.testing.assert_allclose(kinetic, GAS.kinetic_energy(), rtol=1e-4)


def metropolis(gas: ElectronGas, key, n_walkers=256, width=1.0, burn=400, every=20, samples=20):
    """Walkers drawn from |psi|^2 by all-electron Gaussian moves: [samples, walker, e, 3]."""
    log_p = jax.vmap(lambda r: 2.0 * gas.determinant().log_abs(None, r))

    def move(carry, key):
        r, lp = carry
        k1, k2 = jax.random.split(key)
        new = r + width * jax.random.normal(k1, r.shape, r.dtype)
        lp_new = log_p(new)
        accept = jnp.log(jax.random.uniform(k2, lp.shape, r.dtype)) < lp_new - lp
        return (jnp.where(accept[:, None, None], new, r), jnp.where(accept, lp_new, lp)), None

    def block(carry, key):
        carry, _ = jax.lax.scan(move, carry, jax.random.split(key, every))
        return carry, carry[0]

    k0, k1, k2 = jax.random.split(key, 3)
    r = jax.random.uniform(k0, (n_walkers, gas.n_electrons, 3), jnp.float64) * gas.length
    carry, _ = jax.lax.scan(move, (r, log_p(r)), jax.random.split(k1, burn))
    return jax.lax.scan(block, carry, jax.random.split(k2, samples))[1]


def test_sampled_ewald_energy_is_the_hartree_fock_potential_energy():
    """The mean Ewald energy of walkers drawn from |psi|^2 is the Madelung plus exchange
    energy within 4 standard errors; each walker's chain is one independent estimate."""
    term = PeriodicCoulomb.of(GAS)
    samples = jax.jit(lambda key: metropolis(GAS, key))(jax.random.PRNGKey(7))
    flat = samples.reshape(-1, GAS.n_electrons, 3)
    v_ee = jax.jit(lambda x: jax.lax.map(lambda r: term.parts(r)[1], x, batch_size=512))(flat)
    per_walker = np.asarray(v_ee).reshape(samples.shape[:2]).mean(axis=0)
    mean, error = per_walker.mean(), per_walker.std(ddof=1) / np.sqrt(per_walker.size)
    expected = GAS.madelung_energy() + GAS.exchange_energy()
    assert error < 0.05 * abs(GAS.exchange_energy())  # the test resolves exchange
    assert abs(mean - expected) < 4 * error, (mean, error, expected)
