"""The electron-electron cusp Jastrow factor of FermiNet and PsiFormer: the exact cusp
where two electrons meet, the factor in both ansaetze, and runs saved before FermiNet had
one still resumed and loaded as they were trained."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import psijax
from psijax import config as config_lib
from psijax import registry, system
from psijax.ansatz import FermiNet, PsiFormer
from psijax.ansatz import jastrow as cusp
from psijax.rundir.checkpoint import saved_names

NUCLEI = ((0.0, 0.0, -0.7), (0.3, 0.1, 0.8))


def small(kind: str, n_up: int, n_down: int, **fields):
    if kind == "ferminet":
        return FermiNet(n_up, n_down, NUCLEI, layers=((8, 4), (8, 4)), n_determinants=2, **fields)
    return PsiFormer(n_up, n_down, NUCLEI, layers=1, heads=1, head_dim=4, n_determinants=2,
                     **fields)  # fmt: skip


def test_the_jastrow_gives_the_electron_electron_cusp():
    """d J / d r_12 -> 1/2 for opposite spins and 1/4 for equal spins as r_12 -> 0 (Kato),
    whatever the learnt lengths; one electron has none."""
    with jax.enable_x64(True):
        base = jax.random.normal(jax.random.PRNGKey(3), (2, 3), jnp.float64)
        for n_up, want in ((1, 0.5), (2, 0.25), (0, 0.25)):
            for a in (0.3, 1.0, 2.5):
                params = {"parallel": jnp.asarray(a), "anti": jnp.asarray(1.7 * a)}

                def along(t, params=params, n_up=n_up):
                    r = base.at[1].set(base[0] + t * jnp.array([0.6, 0.0, 0.8]))
                    return cusp.exponent(params, r, n_up)

                np.testing.assert_allclose(jax.grad(along)(1e-9), want, rtol=1e-6)
        one = cusp.exponent(cusp.init(jnp.float64), base[:1], 1)
        assert float(one) == 0.0


def test_no_learnt_length_gives_the_factor_a_pole():
    """exp(J) <= 1 and finite for lengths of either sign at every distance, also at r_ij =
    -a, where a length that training took through zero put a pole (psi infinite there);
    positive lengths keep the published form."""
    with jax.enable_x64(True):
        base = jnp.zeros((2, 3), jnp.float64)
        r_12 = jnp.concatenate([jnp.linspace(1e-6, 3.0, 3001), jnp.array([0.3, 0.2999999])])
        for a in (-0.3, -1e-3, 0.0, 1e-3, 0.3, 2.0):
            params = {"parallel": jnp.asarray(a), "anti": jnp.asarray(a)}
            for n_up in (1, 2):
                j = jax.vmap(lambda t, p=params, n=n_up: cusp.exponent(
                    p, base.at[1, 0].set(t), n))(r_12)  # fmt: skip
                assert bool(jnp.all(jnp.isfinite(j))) and float(jnp.max(j)) <= 0.0, (a, n_up)
                c = 0.5 if n_up == 1 else 0.25
                np.testing.assert_allclose(j, -c * a**2 / (abs(a) + r_12), rtol=1e-12)


@pytest.mark.parametrize("kind", ["ferminet", "psiformer"])
def test_both_ansaetze_multiply_by_it_by_default(kind):
    """log|psi| with the factor is log|psi| without it plus J, the sign unchanged; the
    config's ``jastrow`` reaches both ansaetze."""
    with jax.enable_x64(True):
        net, bare = small(kind, 2, 1), small(kind, 2, 1, jastrow=False)
        assert net.jastrow and "Jastrow" in net.describe() and "Jastrow" not in bare.describe()
        params = net.init(jax.random.PRNGKey(0), jnp.float64)
        without = {k: v for k, v in params.items() if k != "jastrow"}
        assert jax.tree.structure(without) == jax.tree.structure(
            bare.init(jax.random.PRNGKey(0), jnp.float64)
        )
        r = jax.random.normal(jax.random.PRNGKey(4), (3, 3), jnp.float64)
        psi, psi_bare = net.apply(params, r), bare.apply(without, r)
        assert psi.sign == psi_bare.sign
        want = psi_bare.log_abs + cusp.exponent(params["jastrow"], r, 2)
        np.testing.assert_allclose(psi.log_abs, want, rtol=1e-13)
    for jastrow in (True, False):
        config = config_lib.Config(ansatz=kind, jastrow=jastrow)
        assert registry.ansatz(system.preset("LiH"), config).jastrow is jastrow


TINY = dict(system="H2", layers=((8, 4),), determinants=1, walkers=8, pretrain_steps=0,
            burn_in_steps=2, mcmc_moves=2, optimizer="adam", progress=False)  # fmt: skip


def test_a_ferminet_run_saved_before_it_had_the_jastrow_resumes_and_loads_without_it(tmp_path):
    """Such a run's config.json holds ``jastrow = true`` (PsiFormer's key then) and its
    checkpoints no Jastrow parameters: resumed, loaded and evaluated, it keeps its own
    network; a run with the factor keeps it."""
    old, new = tmp_path / "old", tmp_path / "new"
    psijax.train(out=old, steps=4, jastrow=False, **TINY)
    saved = json.loads((old / "config.json").read_text())
    (old / "config.json").write_text(json.dumps({**saved, "jastrow": True}))
    assert not any("jastrow" in name for name in saved_names(old))
    assert psijax.load(old).network.jastrow is False
    resumed = psijax.train(out=old, resume=True, steps=6, progress=False)
    assert resumed.energies.shape == (6,) and np.all(np.isfinite(resumed.energies))
    assert psijax.load(old).network.jastrow is False

    psijax.train(out=new, steps=4, **TINY)
    loaded = psijax.load(new)
    assert loaded.network.jastrow is True and "jastrow" in loaded.params
