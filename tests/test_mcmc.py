"""MCMC: initial walkers, exact sampling of known densities, rejection, sharding, dtypes."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from psijax import config as config_lib
from psijax import registry
from psijax.sampling import (
    Metropolis,
    adapt_width,
    burn_in,
    electrons_per_atom,
    init_walkers,
    metropolis,
)
from psijax.sampling.base import LEAD_STREAM
from psijax.sampling.metropolis import STEP_SCALE, step_scale
from psijax.system import from_atom_string, preset
from psijax.training import pretrain, start

MOLECULES = {
    "H": preset("H"),
    "LiH": preset("LiH"),
    "N": preset("N"),  # spin 3
    "Li+": from_atom_string("Li 0 0 0", charge=1),
    "LiH-": from_atom_string("Li 0 0 0; H 0 0 3.015", charge=-1),
}


def hydrogen_1s(x):
    """log|psi| = -|r| for one electron: |psi|^2 ~ exp(-2r), <r> = 3/2 bohr."""
    return -jnp.linalg.norm(x[:, 0, :], axis=-1)


def oscillator(x):
    """log|psi| = -|r|^2 / 2 summed over electrons: <x^2> = 1/2 per coordinate."""
    return -0.5 * jnp.sum(x**2, axis=(-2, -1))


def mcmc_run(log_abs, walkers, width, *, n_samples, n_moves, nuclei=None):
    """Walkers after each of `n_samples` rounds of `n_moves` moves: [n_samples, W, N, 3]."""

    @jax.jit
    def run(key, walkers, width):
        def body(carry, k):
            x, logp = carry
            x, logp, stats = metropolis(k, log_abs, x, logp, width, n_moves, nuclei)
            return (x, logp), (x, stats.acceptance)

        keys = jax.random.split(key, n_samples)
        _, (xs, acc) = jax.lax.scan(body, (walkers, log_abs(walkers)), keys)
        return xs, acc

    return run(jax.random.key(7), walkers, width)


# ------------------------------------------------------------------------ initial walkers
@pytest.mark.parametrize("name", list(MOLECULES))
def test_init_walkers_shapes_spins_and_positions(name):
    mol = MOLECULES[name]
    up, down = electrons_per_atom(mol)
    assert up.sum() == mol.n_up and down.sum() == mol.n_down
    assert np.all(np.abs(up + down - mol.nuclear_charges) <= abs(mol.charge))

    spread = 0.5
    w = init_walkers(jax.random.key(0), mol, 64, spread=spread)
    assert w.shape == (64, mol.n_electrons, 3) and w.dtype == jnp.float32
    nuclei = jnp.asarray(mol.nuclear_positions, jnp.float32)
    dist = jnp.linalg.norm(w[:, :, None, :] - nuclei, axis=-1).min(axis=-1)  # [W, N]
    assert float(dist[:, : mol.n_up].mean()) < 3 * spread
    assert float(dist.mean()) < 3 * spread

    np.testing.assert_array_equal(w, init_walkers(jax.random.key(0), mol, 64, spread=spread))
    assert not np.allclose(w, init_walkers(jax.random.key(1), mol, 64, spread=spread))


def test_init_walkers_put_spins_on_the_right_atoms():
    lih = preset("LiH")  # Li: 2 up 1 down, H: 1 down
    w = np.asarray(init_walkers(jax.random.key(0), lih, 512, spread=0.3))
    near_h = np.linalg.norm(w - lih.nuclear_positions[1], axis=-1) < 1.5  # [W, N]
    np.testing.assert_array_equal(near_h.mean(axis=0) > 0.9, [False, False, False, True])
    n_up, n_down = electrons_per_atom(preset("N"))
    assert (int(n_up[0]), int(n_down[0])) == (5, 2)


# ------------------------------------------------------------------------ known densities
def walker_mean_and_error(values):
    """Mean over walkers of each walker's time average, with the standard error across walkers.

    Walkers are independent chains, so their time averages are independent samples whatever
    the autocorrelation along each chain: the error bar is conservative and honest.
    """
    per_walker = np.asarray(values, np.float64).mean(axis=0)
    return per_walker.mean(), per_walker.std(ddof=1) / np.sqrt(per_walker.size)


@pytest.mark.parametrize(
    ("log_abs", "observable", "exact"),
    [
        (hydrogen_1s, lambda x: jnp.linalg.norm(x[..., 0, :], axis=-1), 1.5),
        (oscillator, lambda x: jnp.mean(x**2, axis=(-2, -1)), 0.5),
    ],
    ids=["hydrogen_r", "oscillator_x2"],
)
def test_samples_known_density(log_abs, observable, exact):
    walkers = init_walkers(jax.random.key(1), preset("H"), 2000, spread=1.0)
    walkers, _, width = burn_in(
        jax.random.key(2), Metropolis(5), log_abs, walkers, jnp.float32(0.2), n_steps=60
    )
    assert 0.3 < float(width) < 2.0
    xs, acc = mcmc_run(log_abs, walkers, width, n_samples=40, n_moves=5)
    assert np.all((acc > 0.35) & (acc < 0.65))  # the adapted width hits the target ~0.5
    mean, error = walker_mean_and_error(observable(xs))
    assert error < 0.02 * exact
    assert abs(mean - exact) < 3 * error, (mean, error)


# Two nuclei 3 bohr apart; electron 0 in a 1s orbital of charge 2 on the first (<r> = 3/4),
# electron 1 in a 1s orbital of charge 1 on the second (<r> = 3/2), whose density reaches
# past the midplane, where its nearest nucleus and so its step change.
TWO_CENTRES = ((0.0, 0.0, 0.0), (0.0, 0.0, 3.0))


def two_centres(x):
    centres = jnp.asarray(TWO_CENTRES, x.dtype)
    r = jnp.linalg.norm(x - centres, axis=-1)  # [W, 2]: each electron from its own nucleus
    return -2.0 * r[:, 0] - r[:, 1]


def test_nucleus_scaled_moves_sample_the_exact_density():
    """Steps scaled by the distance to the nearest nucleus are asymmetric proposals: without
    the Hastings factor in the acceptance the electrons linger where their steps are short
    (electron 0's mean distance came out 0.63 bohr instead of 0.75)."""
    walkers = init_walkers(jax.random.key(1), from_atom_string("He 0 0 0; H 0 0 3"), 2000)[
        :, :2
    ]  # fmt: skip
    sampler = Metropolis(5, nuclei=TWO_CENTRES)
    walkers, _, width = burn_in(
        jax.random.key(2), sampler, two_centres, walkers, jnp.float32(0.2), n_steps=60
    )
    xs, acc = mcmc_run(two_centres, walkers, width, n_samples=40, n_moves=5, nuclei=TWO_CENTRES)
    assert np.all((acc > 0.35) & (acc < 0.65))  # the adapted width hits the target ~0.5
    r = jnp.linalg.norm(xs - jnp.asarray(TWO_CENTRES, xs.dtype), axis=-1)  # [T, W, 2]
    for electron, exact in ((0, 0.75), (1, 1.5)):
        mean, error = walker_mean_and_error(r[..., electron])
        assert error < 0.01 * exact
        assert abs(mean - exact) < 3 * error, (electron, mean, error)


def test_step_scale_is_the_clipped_distance_to_the_nearest_nucleus():
    nuclei = jnp.asarray(TWO_CENTRES, jnp.float32)
    x = jnp.asarray([[[0.0, 0.0, 0.01], [0.0, 0.5, 2.5], [0.0, 0.0, 10.0]]], jnp.float32)
    low, high = STEP_SCALE
    np.testing.assert_allclose(step_scale(x, nuclei), [[low, np.sqrt(0.5), high]], rtol=1e-6)


def test_step_scale_in_a_crystal_is_the_distance_to_the_nearest_image():
    """Near the image of a nucleus in the next cell an electron takes a core electron's
    step, and the sampler of a crystal's config knows its cell."""
    from psijax import config as config_lib
    from psijax.sampling.metropolis import scaled_from_config
    from psijax.system import Crystal, Lattice, Molecule

    cell = Lattice.cubic(6.0)
    nuclei = jnp.asarray([[0.0, 0.0, 0.0]], jnp.float32)
    x = jnp.asarray([[[5.9, 0.0, 0.0], [3.0, 0.0, 1.0], [-0.6, 6.0, 0.8]]], jnp.float32)
    low, high = STEP_SCALE
    np.testing.assert_allclose(step_scale(x, nuclei), [[high, high, high]], rtol=1e-6)
    np.testing.assert_allclose(step_scale(x, nuclei, cell), [[low, high, 1.0]], rtol=1e-5, atol=0)
    crystal = Crystal.of(Molecule(("H", "H"), (1.0, 1.0), ((0, 0, 0), (1.4, 0, 0))), cell)
    sampler = scaled_from_config(config_lib.Config(system="H2"), crystal)
    assert sampler.lattice == cell and sampler.nuclei is not None
    assert scaled_from_config(config_lib.Config(system="H2"), preset("H2")).lattice is None


# ----------------------------------------------------------------------- width adaptation
def test_acceptance_in_range_and_width_moves_toward_target():
    walkers = init_walkers(jax.random.key(0), preset("LiH"), 32)
    logp = oscillator(walkers)
    step = jax.jit(metropolis, static_argnums=(1, 5))
    acceptance = [
        float(step(jax.random.key(1), oscillator, walkers, logp, jnp.float32(w), 4)[2].acceptance)
        for w in (1e-3, 0.3, 5.0, 50.0)
    ]
    assert all(0.0 <= a <= 1.0 for a in acceptance)
    assert acceptance == sorted(acceptance, reverse=True)  # wider moves, fewer accepted
    assert acceptance[0] > 0.9 and acceptance[-1] < 0.1

    w = jnp.float32(0.5)
    assert float(adapt_width(w, jnp.float32(0.9))) > 0.5
    assert float(adapt_width(w, jnp.float32(0.1))) < 0.5
    assert float(adapt_width(w, jnp.float32(0.5))) == pytest.approx(0.5)
    assert float(adapt_width(jnp.float32(1.99), 1.0, rate=1.0)) == 2.0
    assert float(adapt_width(jnp.float32(0.011), 0.0, rate=1.0)) == pytest.approx(0.01)
    assert jax.jit(adapt_width)(w, 0.7).dtype == jnp.float32


# --------------------------------------------------------------------- non-finite proposals
@pytest.mark.parametrize("bad", [jnp.nan, jnp.inf], ids=["nan", "inf"])
def test_non_finite_proposals_are_rejected(bad):
    def log_abs(x):  # a wall at x = 1 for every electron; +inf would be accepted if trusted
        return jnp.where(jnp.any(x[..., 0] > 1.0, axis=-1), bad, oscillator(x))

    walkers = jnp.zeros((256, 2, 3), jnp.float32)
    x, logp, stats = jax.jit(metropolis, static_argnums=(1, 5))(
        jax.random.key(3), log_abs, walkers, log_abs(walkers), jnp.float32(1.0), 50
    )
    assert float(x[..., 0].max()) <= 1.0
    assert bool(jnp.all(jnp.isfinite(logp)))
    np.testing.assert_allclose(logp, oscillator(x), rtol=1e-6)
    assert 0.05 < float(stats.acceptance) < 0.95


def test_walker_with_non_finite_log_abs_takes_a_finite_proposal():
    walkers = jnp.zeros((8, 1, 3), jnp.float32)
    logp = jnp.full((8,), jnp.nan, jnp.float32)
    _, logp, stats = metropolis(jax.random.key(0), oscillator, walkers, logp, 0.5, 1)
    assert bool(jnp.all(jnp.isfinite(logp))) and float(stats.acceptance) == 1.0


# ----------------------------------------------------------------------- layout independence
@pytest.mark.parametrize("nuclei", [None, preset("LiH").coords], ids=["uniform", "scaled"])
def test_same_samples_sharded_over_four_devices(nuclei):
    assert jax.device_count() >= 4
    mesh = jax.make_mesh((4,), ("walkers",), axis_types=(jax.sharding.AxisType.Auto,))
    sharding = NamedSharding(mesh, P("walkers"))
    walkers = init_walkers(jax.random.key(0), preset("LiH"), 64)
    logp = oscillator(walkers)
    step = jax.jit(functools.partial(metropolis, log_abs=oscillator, n_moves=6, nuclei=nuclei))
    width = jnp.float32(0.4)

    x1, l1, s1 = step(jax.random.key(5), walkers=walkers, log_abs_walkers=logp, width=width)
    sharded = jax.device_put(walkers, sharding)
    x4, l4, s4 = step(
        jax.random.key(5),
        walkers=sharded,
        log_abs_walkers=jax.device_put(logp, sharding),
        width=width,
    )
    assert x4.sharding.is_equivalent_to(sharding, x4.ndim)
    np.testing.assert_array_equal(x4, x1)  # partitionable threefry: bitwise the same draws
    np.testing.assert_array_equal(l4, l1)
    np.testing.assert_array_equal(s4.acceptance, s1.acceptance)
    assert not np.allclose(x1, walkers)  # it moved


# -------------------------------------------------------------------------------- dtypes
def test_float32_walkers_stay_float32_even_with_x64():
    with jax.enable_x64(True):
        walkers = init_walkers(jax.random.key(0), preset("LiH"), 16)
        assert walkers.dtype == jnp.float32
        width = jnp.float32(0.3)
        x, logp, stats = metropolis(
            jax.random.key(1), oscillator, walkers, oscillator(walkers), width, 3
        )
        assert x.dtype == logp.dtype == stats.acceptance.dtype == jnp.float32
        x, logp, w = burn_in(jax.random.key(2), Metropolis(2), oscillator, walkers, 0.3, n_steps=2)
        assert x.dtype == logp.dtype == w.dtype == jnp.float32
        assert init_walkers(jax.random.key(0), preset("H"), 4, dtype=jnp.float64).dtype == (
            jnp.float64
        )


# ------------------------------------------------------------------------ the run's sampler
def test_the_scaled_sampler_scales_steps_by_the_molecules_nuclei():
    molecule = from_atom_string("N 0 0 0; N 0 0 2.07")
    sampler = registry.sampler(config_lib.Config(sampler="scaled-metropolis"), molecule)
    assert sampler.nuclei == molecule.coords
    assert registry.sampler(config_lib.Config(sampler="metropolis"), molecule).nuclei is None


def test_a_resumed_run_may_change_its_sampler():
    saved = config_lib.Config(system="LiH", sampler="metropolis")
    resumed = config_lib.for_resume(saved, {"sampler": "scaled-metropolis"})
    assert resumed.sampler == "scaled-metropolis"
    assert config_lib.identity(resumed) == config_lib.identity(saved)


# ------------------------------------------------ pretraining's sampler and burn-in's lead
def test_pretraining_scales_steps_to_the_nuclei_whatever_the_runs_sampler():
    molecule = from_atom_string("N 0 0 0; N 0 0 2.07")
    for name in registry.SAMPLERS:
        sampler = pretrain.sampler_of(config_lib.Config(sampler=name), molecule)
        assert sampler.nuclei == molecule.coords
        assert (sampler.n_moves, sampler.initial_width) == (pretrain.MOVES, pretrain.WIDTH)


def test_burn_in_with_a_lead_runs_the_lead_then_the_sampler_from_its_own_state():
    """The lead's steps (from its initial state, on their own keys), then the sampler's from
    the state given, as two separate burn-ins would: the state returned is the sampler's."""
    key, walkers = jax.random.key(3), jax.random.normal(jax.random.key(4), (64, 2, 3))
    lead = Metropolis(3, initial_width=0.7, nuclei=((0.0, 0.0, 0.0),))
    sampler = Metropolis(2, initial_width=0.1)
    x, logp, width = burn_in(
        key, sampler, oscillator, walkers, 0.25, n_steps=4, lead=lead, lead_steps=5
    )
    lead_key = jax.random.fold_in(key, LEAD_STREAM)
    x_lead, _, lead_width = burn_in(lead_key, lead, oscillator, walkers, 0.7, n_steps=5)
    x_own, logp_own, width_own = burn_in(key, sampler, oscillator, x_lead, 0.25, n_steps=4)
    np.testing.assert_array_equal(x, x_own)
    np.testing.assert_array_equal(logp, logp_own)
    assert width == width_own and width != lead_width
    assert not np.array_equal(x_lead, walkers)  # the lead moved the walkers
    # Without lead steps (or without a lead) it is the sampler's burn-in alone.
    alone = burn_in(key, sampler, oscillator, walkers, 0.25, n_steps=4)
    for a, b in zip(burn_in(key, sampler, oscillator, walkers, 0.25, n_steps=4, lead=lead),
                    alone, strict=True):  # fmt: skip
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "steps, leads, split",
    [(20, True, (10, 10)), (50, True, (40, 10)), (10, True, (0, 10)), (3, True, (0, 3)),
     (20, False, (0, 20)), (0, True, (0, 0))],
)  # fmt: skip
def test_burn_in_ends_with_the_runs_own_sampler(steps, leads, split):
    assert start.ADAPT_STEPS == 10
    assert start.burn_in_split(steps, leads) == split


def test_pretrainings_sampler_is_the_registrys_scaled_one():
    molecule = from_atom_string("N 0 0 0; N 0 0 2.07")
    run = registry.sampler(config_lib.Config(sampler=pretrain.SAMPLER), molecule)
    lead = pretrain.sampler_of(config_lib.Config(), molecule)
    assert run.nuclei == lead.nuclei == molecule.coords  # a run on it needs no lead


def test_burn_in_adapts_the_runs_width_within_its_last_steps():
    """From a width 10x too small (the oscillator's acceptance 0.5 is near width 1), the run's
    sampler at burn-in's rate reaches the target acceptance in ``ADAPT_STEPS`` steps; at
    training's rate it would not (it may grow by e at most): training would start at a
    width still adapting (H2 began at acceptance 0.78 and took 40 steps)."""
    walkers = jax.random.normal(jax.random.key(5), (256, 2, 3)) * 0.7
    sampler = Metropolis(5, initial_width=0.1)
    assert start.adapting(sampler) == Metropolis(5, initial_width=0.1, rate=start.ADAPT_RATE)
    acceptance = {}
    for name, chosen in (("training", sampler), ("burn-in", start.adapting(sampler))):
        x, logp, width = burn_in(jax.random.key(6), chosen, oscillator, walkers,
                                 jnp.float32(0.1), n_steps=start.ADAPT_STEPS)  # fmt: skip
        _, _, stats = metropolis(jax.random.key(7), oscillator, x, logp, width, 5)
        acceptance[name] = float(stats.acceptance)
    assert 0.4 < acceptance["burn-in"] < 0.6, acceptance
    assert acceptance["training"] > 0.65, acceptance
    # a sampler without a rate is used as it is
    assert start.adapting(object) is object
