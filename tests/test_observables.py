"""Observables against analytic values, on hand-built states sampled exactly (no MCMC).

Exact sampling gives independent samples, so the standard error is std / sqrt(n) and a
4-sigma bound is a fair test (false failure rate ~6e-5 per check); each test also checks
that its error bar is small enough for the comparison to mean something.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from psijax import hamiltonian, laplacian
from psijax.estimators import observables
from psijax.estimators.dipole import Dipole
from psijax.estimators.forces import Forces
from psijax.system import from_atom_string, preset
from psijax.types import Psi


@pytest.fixture(autouse=True, scope="module")
def _x64():
    with jax.enable_x64(True):
        yield


RNG = np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def _fresh_rng():
    """Every test draws the same samples whatever ran before it (xdist orders tests freely)."""
    global RNG
    RNG = np.random.default_rng(1234)


def slater_1s(rng, n: int, zeta: float, center=(0.0, 0.0, 0.0)) -> np.ndarray:
    """n points from |exp(-zeta |r - center|)|^2: radius ~ Gamma(3, 1 / (2 zeta))."""
    radius = rng.gamma(3.0, 1.0 / (2.0 * zeta), n)
    direction = rng.normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    return np.asarray(center) + radius[:, None] * direction


def local_values(names, molecule, apply, walkers, params=None):
    """Every column of ``names`` per walker, as evaluation computes them for ``apply``."""
    observed = observables.build(observables.parse(list(names)), molecule)
    energy = hamiltonian.molecular(molecule, laplacian.Forward())
    psi = hamiltonian.PsiFunctions(lambda p, r: apply(p, r).log_abs, apply)
    local = observables.local_values(energy, psi, observed)
    out = jax.jit(jax.vmap(functools.partial(local, params)))(jnp.asarray(walkers))
    return {k: np.asarray(v) for k, v in out.items()}


def product_of_1s(zetas, centers):
    """psi = prod_i exp(-zeta_i |r_i - center_i|) (no antisymmetry: one electron per spin)."""
    zetas, centers = jnp.asarray(zetas), jnp.asarray(centers)

    def apply(params, r):
        log_abs = -jnp.sum(zetas * jnp.linalg.norm(r - centers, axis=-1))
        return Psi(jnp.ones((), r.dtype), log_abs)

    return apply


def assert_mean(samples, expected, *, max_error):
    samples = np.asarray(samples, np.float64)
    mean, error = samples.mean(), samples.std(ddof=1) / np.sqrt(samples.size)
    assert error < max_error, f"error bar {error} too large to test against {expected}"
    assert abs(mean - expected) < 4 * error + 1e-12, f"{mean} ± {error} vs {expected}"


def test_hydrogen_ground_state_components_are_exact_for_every_walker():
    """psi = exp(-r): kinetic = -1/2 + 1/r, V_en = -1/r, E_L = -1/2 at every point."""
    walkers = slater_1s(RNG, 4096, 1.0)[:, None, :]
    values = local_values(["energy"], preset("H"), product_of_1s([1.0], [[0, 0, 0]]), walkers)
    r = np.linalg.norm(walkers[:, 0], axis=-1)
    np.testing.assert_allclose(values["kinetic"], -0.5 + 1 / r, rtol=1e-10)
    np.testing.assert_allclose(values["electron_nucleus"], -1 / r, rtol=1e-12)
    np.testing.assert_allclose(values["energy"], -0.5, atol=1e-10)
    assert np.all(values["electron_electron"] == 0) and np.all(values["nucleus_nucleus"] == 0)
    assert_mean(values["kinetic"], 0.5, max_error=0.05)  # virial: <T> = -E


def test_helium_product_state_gives_the_first_order_energy_components():
    """psi = exp(-2 r1 - 2 r2) for He: per walker, kinetic = sum_i (-2 + 2 / r_i) and
    V_en = -sum_i 2 / r_i; on average <T> = 4, <V_en> = -8, <V_ee> = 5 zeta / 8 = 1.25."""
    n, zeta = 16000, 2.0
    walkers = np.stack([slater_1s(RNG, n, zeta), slater_1s(RNG, n, zeta)], axis=1)
    apply = product_of_1s([zeta, zeta], np.zeros((2, 3)))
    values = local_values(["energy"], preset("He"), apply, walkers)
    inverse_r = np.sum(1 / np.linalg.norm(walkers, axis=-1), axis=1)
    np.testing.assert_allclose(values["kinetic"], -(zeta**2) + zeta * inverse_r, rtol=1e-10)
    np.testing.assert_allclose(values["electron_nucleus"], -2 * inverse_r, rtol=1e-12)
    assert_mean(values["kinetic"], zeta**2, max_error=0.15)
    assert_mean(values["electron_electron"], 5 * zeta / 8, max_error=0.02)
    assert_mean(values["energy"], -2.75, max_error=0.02)
    # the parts add up to the energy, which is the training's local energy
    parts = sum(values[c] for c in ("kinetic", "electron_nucleus", "electron_electron",
                                    "nucleus_nucleus"))  # fmt: skip
    np.testing.assert_allclose(values["energy"], parts, rtol=1e-10)
    local_energy = hamiltonian.molecular(preset("He"), laplacian.Forward()).local_energy(
        lambda p, r: apply(p, r).log_abs
    )
    e = jax.vmap(lambda r: local_energy(None, r))(jnp.asarray(walkers[:64]))
    np.testing.assert_allclose(values["energy"][:64], e, rtol=1e-12)


def test_closed_shell_product_state_has_zero_spin_at_every_walker():
    """psi = phi(r_up) phi(r_down), phi = 1s_A + 1s_B: every exchange ratio is 1, S^2 = 0."""
    h2 = preset("H2")
    nuclei = jnp.asarray(h2.nuclear_positions)

    def apply(params, r):
        phi = jnp.sum(jnp.exp(-jnp.linalg.norm(r[:, None] - nuclei[None], axis=-1)), axis=1)
        return Psi(jnp.prod(jnp.sign(phi)), jnp.sum(jnp.log(jnp.abs(phi))))

    walkers = RNG.normal(size=(128, 2, 3)) * 1.5
    np.testing.assert_allclose(local_values(["spin"], h2, apply, walkers)["s2"], 0, atol=1e-12)


def test_spin_contamination_of_a_two_center_product_matches_the_overlap():
    """psi = 1s_A(r_up) 1s_B(r_down) (an unrestricted pair): <S^2> = 1 - S_AB^2, with the
    1s-1s overlap S_AB = exp(-zR) (1 + zR + (zR)^2 / 3)."""
    n, zeta, bond = 8000, 1.0, 1.4
    a, b = np.zeros(3), np.array([0.0, 0.0, bond])
    walkers = np.stack([slater_1s(RNG, n, zeta, a), slater_1s(RNG, n, zeta, b)], axis=1)
    values = local_values(["spin"], preset("H2"), product_of_1s([zeta, zeta], [a, b]), walkers)
    zr = zeta * bond
    overlap = np.exp(-zr) * (1 + zr + zr**2 / 3)
    assert_mean(values["s2"], 1 - overlap**2, max_error=0.02)


def gaussian_doublet(rng, n: int, shift: np.ndarray):
    """3 electrons: up in (g0, gx) of the Gaussian g0 = pi^-3/4 exp(-r^2/2), gx = sqrt(2) x g0,
    down in g0 centred at ``shift``; samples drawn exactly by rejection from the mixture
    (g0^2(r1) gx^2(r2) + gx^2(r1) g0^2(r2)) / 2, which bounds |det|^2 / 2 times 2."""

    def g0(r):
        return np.pi**-0.75 * np.exp(-0.5 * np.sum(r**2, axis=-1))

    def gx(r):
        return np.sqrt(2.0) * r[..., 0] * g0(r)

    out = []
    while sum(len(o) for o in out) < n:
        m = 2 * n
        core = rng.normal(scale=np.sqrt(0.5), size=(m, 3))
        p = rng.normal(scale=np.sqrt(0.5), size=(m, 3))
        p[:, 0] = rng.choice([-1.0, 1.0], m) * np.sqrt(rng.gamma(1.5, 1.0, m))
        swap = rng.random(m) < 0.5
        r1 = np.where(swap[:, None], p, core)
        r2 = np.where(swap[:, None], core, p)
        det = g0(r1) * gx(r2) - gx(r1) * g0(r2)
        bound = 2 * ((g0(r1) * gx(r2)) ** 2 + (gx(r1) * g0(r2)) ** 2)
        keep = rng.random(m) * bound < det**2
        r3 = rng.normal(scale=np.sqrt(0.5), size=(m, 3)) + shift
        out.append(np.stack([r1, r2, r3], axis=1)[keep])
    walkers = np.concatenate(out)[:n]

    def apply(params, r):
        def orbitals(x):
            g = jnp.exp(-0.5 * jnp.sum(x**2, axis=-1))
            return jnp.stack([g, x[..., 0] * g], axis=-1)

        sign, log_up = jnp.linalg.slogdet(orbitals(r[:2]))
        log_down = -0.5 * jnp.sum((r[2] - shift) ** 2)
        return Psi(sign, log_up + log_down)

    return walkers, apply


@pytest.mark.parametrize("shift", [(0.0, 0.0, 0.0), (0.9, 0.0, 0.5)])
def test_doublet_determinant_spin(shift):
    """Restricted doublet (shift 0): <S^2> = 3/4 exactly. With the down orbital shifted by
    d: <S^2> = 3/4 + N_down - sum_i |<up_i|down>|^2 = 7/4 - exp(-d^2/2) (1 + d_x^2 / 2)."""
    shift = np.asarray(shift)
    walkers, apply = gaussian_doublet(RNG, 8000, shift)
    lithium = from_atom_string("Li 0 0 0", spin=1)  # 2 up, 1 down
    values = local_values(["spin"], lithium, apply, walkers)
    d2 = float(shift @ shift)
    expected = 1.75 - np.exp(-d2 / 2) * (1 + shift[0] ** 2 / 2)
    assert_mean(values["s2"], expected, max_error=0.03)


def test_dipole_of_a_displaced_hydrogen_atom_and_of_a_symmetric_molecule():
    """H with its electron in 1s centred at d (nucleus at 0): mu = -d e*bohr. H2 with a
    symmetric state about the origin: mu = 0. The nuclear term is exact per walker."""
    d = np.array([0.3, -0.2, 0.5])
    walkers = slater_1s(RNG, 8000, 1.0, d)[:, None, :]
    values = local_values(["dipole"], preset("H"), product_of_1s([1.0], [d]), walkers)
    for axis, name in enumerate(("dipole_x", "dipole_y", "dipole_z")):
        np.testing.assert_allclose(values[name], -walkers[:, 0, axis], rtol=1e-12)
        assert_mean(values[name], -d[axis], max_error=0.02)

    h2 = from_atom_string("H 0 0 -0.7; H 0 0 0.7")
    centers = h2.nuclear_positions
    n = 8000
    up = slater_1s(RNG, n, 1.0, centers[0])
    down = slater_1s(RNG, n, 1.0, centers[1])
    walkers = np.stack([up, down], axis=1)
    values = local_values(["dipole"], h2, product_of_1s([1.0, 1.0], centers), walkers)
    for name in ("dipole_x", "dipole_y", "dipole_z"):
        assert_mean(values[name], 0.0, max_error=0.03)


def test_dipole_in_debye_and_its_magnitude():
    means = {
        "dipole_x": {"mean": 0.0, "error": 0.01},
        "dipole_y": {"mean": 0.3, "error": 0.02},
        "dipole_z": {"mean": 0.4, "error": 0.02},
    }
    derived = Dipole(preset("LiH")).derived(means)
    assert derived["dipole_magnitude"]["mean"] == pytest.approx(0.5)
    assert derived["dipole_magnitude_debye"]["mean"] == pytest.approx(0.5 * 2.541746473)
    assert derived["dipole_magnitude"]["error"] == pytest.approx(0.02)
    assert derived["dipole_z_debye"]["mean"] == pytest.approx(0.4 * 2.541746473)


def test_unknown_observable_names_the_choices():
    with pytest.raises(ValueError, match="unknown observable 'spinn'; choose from energy"):
        observables.parse(["spinn"])
    assert observables.parse("dipole,spin") == ("energy", "dipole", "spin")


def test_zero_variance_force_vanishes_for_the_exact_hydrogen_atom():
    """psi = exp(-r) is an eigenstate: the zero-variance force is 0 at every walker,
    while the Hellmann-Feynman local force x / |x|^3 is not."""
    walkers = slater_1s(RNG, 512, 1.0)[:, None, :]
    values = local_values(["forces"], preset("H"), product_of_1s([1.0], [[0, 0, 0]]), walkers)
    for c in "xyz":
        np.testing.assert_allclose(values[f"force_hf_0_{c}"], 0.0, atol=1e-10)


def test_zero_variance_force_of_a_displaced_cloud_is_its_field_at_the_nucleus():
    """Electron in 1s centred at d, nucleus at 0: by Gauss the mean force on the nucleus is
    Q(d) / d^2 towards d, Q(d) = 1 - exp(-2d) (1 + 2d + 2d^2) the charge within radius d."""
    d = np.array([0.0, 0.4, 0.9])
    walkers = slater_1s(RNG, 8000, 1.0, d)[:, None, :]
    values = local_values(["forces"], preset("H"), product_of_1s([1.0], [d]), walkers)
    size = np.linalg.norm(d)
    enclosed = 1 - np.exp(-2 * size) * (1 + 2 * size + 2 * size**2)
    expected = enclosed / size**2 * d / size
    for axis, c in enumerate("xyz"):
        assert_mean(values[f"force_hf_0_{c}"], expected[axis], max_error=0.03)


def test_nuclear_repulsion_forces_push_the_nuclei_apart():
    h2 = from_atom_string("H 0 0 -0.7; H 0 0 0.7")
    forces = Forces(h2).nuclear_forces()
    np.testing.assert_allclose(forces, [[0, 0, -1 / 1.96], [0, 0, 1 / 1.96]], rtol=1e-12)


def moving_1s(zetas, offsets):
    """psi = prod_i exp(-zeta_i |r_i - R_i - offset_i|) for electron i bound to nucleus i:
    the wavefunction moves with the nuclei (``apply_at(params, r, nuclei)``)."""
    zetas, offsets = jnp.asarray(zetas), jnp.asarray(offsets)

    def apply_at(params, r, nuclei):
        log_abs = -jnp.sum(zetas * jnp.linalg.norm(r - nuclei - offsets, axis=-1))
        return Psi(jnp.ones((), r.dtype), log_abs)

    return apply_at


def total_forces(molecule, apply_at, walkers):
    """Per walker, the influence value of the total force (its mean is the estimate, its
    std / sqrt(n) the error), the Hellmann-Feynman part, the energy, and the combined step
    value that evaluation writes."""
    nuclei = jnp.asarray(molecule.nuclear_positions)
    observed = (Forces(molecule, apply_at),)
    apply = lambda p, r: apply_at(p, r, nuclei)
    psi = hamiltonian.PsiFunctions(lambda p, r: apply(p, r).log_abs, apply)
    energy = hamiltonian.molecular(molecule, laplacian.Forward())
    local = observables.local_values(energy, psi, observed)
    values = jax.jit(jax.vmap(functools.partial(local, None)))(jnp.asarray(walkers))
    means = {k: jnp.mean(v) for k, v in values.items()}
    n = jnp.asarray(float(len(walkers)))
    step = {k: float(v) for k, v in observables.combine(observed, means, n).items()}
    e = np.asarray(values["energy"])
    influence, hf = {}, {}
    for a in range(molecule.n_atoms):
        for c in "xyz":
            d = np.asarray(values[f"_dlog_{a}_{c}"])
            hf[a, c] = np.asarray(values[f"force_hf_{a}_{c}"])
            influence[a, c] = hf[a, c] - 2 * (e - e.mean()) * (d - d.mean())
    return influence, hf, e, step


def test_the_total_force_on_a_cloud_that_moves_with_its_nucleus_is_zero():
    """psi = exp(-|r - R - d|): moving the nucleus moves the whole state, so E(R) is constant
    and the total force is 0, while its Hellmann-Feynman part is the cloud's pull (Gauss)."""
    d = np.array([0.0, 0.4, 0.9])
    walkers = slater_1s(RNG, 8000, 1.0, d)[:, None, :]
    influence, hf, _, step = total_forces(preset("H"), moving_1s([1.0], [d]), walkers)
    size = np.linalg.norm(d)
    pull = (1 - np.exp(-2 * size) * (1 + 2 * size + 2 * size**2)) / size**2 * d / size
    for axis, c in enumerate("xyz"):
        assert_mean(hf[0, c], pull[axis], max_error=0.03)
        assert_mean(influence[0, c], 0.0, max_error=0.03)
        assert step[f"force_0_{c}"] == pytest.approx(np.mean(influence[0, c]), abs=1e-3)


def two_centre_energy(bond, zeta):
    """<H> of psi = 1s_A(r1) 1s_B(r2) (exponent zeta, one electron per spin) for H2 at
    bond length R: T = zeta^2, V_en = -2 zeta - 2 <1s_A|1/r_B|1s_A>, V_ee = the two-centre
    Coulomb integral J, V_nn = 1/R (closed forms, e.g. Slater, Quantum Theory of Molecules
    and Solids vol. 1, app. 6, scaled to exponent zeta)."""
    x = zeta * bond
    attraction = 1 / bond - jnp.exp(-2 * x) * (zeta + 1 / bond)
    coulomb = 1 / bond - jnp.exp(-2 * x) * (1 / bond + 11 * zeta / 8 + 3 * zeta * x / 4
                                            + zeta * x**2 / 6)  # fmt: skip
    return zeta**2 - 2 * zeta - 2 * attraction + coulomb + 1 / bond


def test_total_forces_are_minus_the_derivative_of_a_two_centre_energy():
    """H2 with psi = 1s_A(r1) 1s_B(r2), sampled exactly: the mean energy is the closed form
    E(R), the total force on B is -dE/dR and on A +dE/dR; the Hellmann-Feynman part alone
    misses the Pulay term by many error bars."""
    bond, zeta, n = 1.4, 1.15, 20000
    h2 = from_atom_string(f"H 0 0 0; H 0 0 {bond}")
    walkers = np.stack([slater_1s(RNG, n, zeta), slater_1s(RNG, n, zeta, (0, 0, bond))], 1)
    influence, hf, e, step = total_forces(h2, moving_1s([zeta, zeta], np.zeros((2, 3))), walkers)
    assert_mean(e, float(two_centre_energy(bond, zeta)), max_error=0.01)
    slope = float(jax.grad(two_centre_energy)(bond, zeta))
    assert abs(slope) > 0.03  # a force worth testing
    assert_mean(influence[1, "z"], -slope, max_error=0.01)
    assert_mean(influence[0, "z"], slope, max_error=0.01)
    for a in (0, 1):
        for c in "xy":
            assert_mean(influence[a, c], 0.0, max_error=0.01)
    hf_error = np.std(hf[1, "z"]) / np.sqrt(n)
    assert abs(np.mean(hf[1, "z"]) + slope) > 10 * hf_error
    assert step["force_1_z"] == pytest.approx(np.mean(influence[1, "z"]), abs=1e-3)


def test_a_networks_nuclear_gradient_is_minus_its_total_electron_gradient():
    """FermiNet depends on electron-nucleus differences only: moving every nucleus and
    electron together leaves psi unchanged, so sum_A d log|psi|/dR_A = -sum_i grad_i."""
    from psijax import registry
    from psijax.config import Config

    lih = preset("LiH")
    net = registry.ansatz(lih, Config(layers=((8, 4),), determinants=2))
    params = net.init(jax.random.PRNGKey(0), jnp.float64)
    r = jnp.asarray(RNG.normal(size=(lih.n_electrons, 3)))
    nuclei = jnp.asarray(lih.nuclear_positions)
    d_nuclei = jax.grad(lambda R: net.at(R).log_abs(params, r))(nuclei)
    d_electrons = jax.grad(lambda x: net.log_abs(params, x))(r)
    np.testing.assert_allclose(d_nuclei.sum(0), -d_electrons.sum(0), rtol=1e-9, atol=1e-12)
    assert float(net.at(nuclei).log_abs(params, r)) == pytest.approx(float(net.log_abs(params, r)))
    eps = 1e-6
    moved = nuclei.at[1, 2].add(eps)
    fd = (net.at(moved).log_abs(params, r) - net.at(nuclei).log_abs(params, r)) / eps
    assert float(d_nuclei[1, 2]) == pytest.approx(float(fd), rel=1e-4, abs=1e-6)
