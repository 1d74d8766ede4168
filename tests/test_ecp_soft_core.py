"""Distances to ECP nuclei are softened in the networks' features and envelopes: the
valence wavefunction of an effective core potential has no cusp, and |r - R|'s kink would
give the kinetic energy a 1/r spike at the nucleus that the network must learn away."""

from __future__ import annotations

import dataclasses
import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from psijax import config as config_lib
from psijax import laplacian, registry, system
from psijax.ansatz.base import soft_core_of
from psijax.config import Config
from psijax.system import sizing


def test_only_atoms_with_an_ecp_core_are_softened():
    config = Config(ecp="ccecp")
    assert soft_core_of(system.resolve("C 0 0 0", spin=2, ecp="ccecp"), config) == (0.2,)
    lih = system.resolve("Li 0 0 0; H 0 0 3.015", ecp="ccecp")
    assert soft_core_of(lih, config) == (0.2, 0.0)
    assert soft_core_of(system.resolve("LiH"), Config()) == ()
    assert soft_core_of(lih, dataclasses.replace(config, ecp_soft_core=0.0)) == ()
    assert registry.ansatz(lih, config).soft_core == (0.2, 0.0)


@pytest.mark.parametrize(
    "atoms, spin, softening",
    [("C 0 0 0", 2, 0.2), ("Al 0 0 0", 1, 0.5), ("Cl 0 0 0", 1, 0.5),
     ("Li 0 0 0; H 0 0 3.015", 0, 0.2), ("Na 0 0 0; Cl 0 0 4.5", 0, 0.5)],
)  # fmt: skip
def test_the_softening_is_sized_by_the_largest_ecp_core(atoms, spin, softening):
    """0.2 bohr around a helium core, 0.5 around a neon core or larger (the largest core of
    the molecule's ECPs sets it); a given value is kept and saved like any sized field."""
    molecule = system.resolve(atoms, spin=spin, ecp="ccecp")
    config = Config(system=atoms, spin=spin, ecp="ccecp")
    assert sizing.sized(config, molecule).ecp_soft_core == softening
    assert soft_core_of(molecule, config) == tuple(
        softening if core else 0.0 for core in molecule.core_electrons
    )
    given = dataclasses.replace(config, ecp_soft_core=0.3)
    assert sizing.sized(given, molecule).ecp_soft_core == 0.3
    assert registry.ansatz(molecule, given).soft_core[0] == 0.3


@pytest.mark.parametrize("ansatz", ["ferminet", "psiformer"])
def test_the_kinetic_energy_has_no_spike_at_a_softened_nucleus(ansatz):
    """One electron approaching the carbon nucleus (ccECP) along a line, float64: with the
    plain distance r * lap log|psi| tends to a nonzero constant (the kink's 1/r), with the
    softened one the Laplacian converges."""
    with jax.enable_x64(True):
        molecule = system.resolve("C 0 0 0", spin=2, ecp="ccecp")
        config = Config(ansatz=ansatz, ecp="ccecp", layers=((8, 4),), determinants=2,
                        attention_layers=1, attention_head_dim=4)  # fmt: skip
        soft = registry.ansatz(molecule, config)
        plain = dataclasses.replace(soft, soft_core=())
        params = soft.init(jax.random.PRNGKey(0), jnp.float64)
        others = jnp.asarray(np.random.default_rng(1).normal(size=(3, 3)))
        direction = jnp.asarray([0.6, 0.0, 0.8])

        @functools.partial(jax.jit, static_argnums=0)
        def laplacian_at(net, distance):
            r = jnp.concatenate([distance * direction[None], others])
            return laplacian.Hessian()(lambda x: net.log_abs(params, x))(r)[2]

        lap = lambda net, distance: float(laplacian_at(net, distance))

        near, nearer = 1e-4, 1e-5
        plain_ratio = lap(plain, nearer) / lap(plain, near)
        assert 5 < plain_ratio < 15  # ~ 1/r: the kink
        assert lap(soft, nearer) == pytest.approx(lap(soft, near), rel=1e-3)


def test_a_run_saved_before_the_softening_existed_loads_without_it(tmp_path):
    """A run's config.json without ``ecp_soft_core`` was trained with plain distances:
    reading it back gives 0 (the checkpoint's network), not today's default."""
    values = config_lib.to_dict(Config(ecp="ccecp", system="C 0 0 0", spin=2))
    values.pop("ecp_soft_core")
    (tmp_path / "config.json").write_text(json.dumps(values))
    old = config_lib.load_saved(tmp_path / "config.json")
    assert old.ecp_soft_core == 0.0
    assert config_lib.load(tmp_path / "config.json").ecp_soft_core is None  # a user's file: sized
    # its checkpoint's identity (written without the field) is the identity it reads back
    assert "ecp_soft_core" not in config_lib.identity(old)
    assert config_lib.identity(dataclasses.replace(old, ecp_soft_core=0.2))["ecp_soft_core"] == 0.2
    assert "ecp_soft_core" not in config_lib.identity(Config())  # no ECP: it changes nothing


def test_a_resume_keeps_the_softening_the_run_was_sized_with():
    """A run sized before the rule changed (or by another rule) resumes with its own value:
    an unset softening means "the run's", a different one is refused."""
    saved = Config(system="Al 0 0 0", spin=1, ecp="ccecp", ecp_soft_core=0.2)
    assert config_lib.for_resume(saved, {"ecp_soft_core": None}).ecp_soft_core == 0.2
    with pytest.raises(config_lib.InputError, match="ecp_soft_core cannot change"):
        config_lib.for_resume(saved, {"ecp_soft_core": 0.5})
