"""The samplers' determinants: the unrolled elimination against LAPACK's slogdet in float64,
and the scope that chooses it only for the samplers' values."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from psijax import sampling, system
from psijax.ansatz import FermiNet
from psijax.ansatz import slogdet as slogdet_lib
from psijax.parallel.batching import map_walkers

from close import assert_close


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 14])
def test_elimination_gives_lapacks_sign_and_log_det_in_float64(n):
    with jax.enable_x64(True):
        a = jax.random.normal(jax.random.PRNGKey(n), (64, 3, n, n), jnp.float64)
        # rows swapped, a pivot of zero in the first column, a near-singular matrix
        a = a.at[0, 0].set(a[0, 0, ::-1]).at[1, 0, 0, 0].set(0.0)
        if n > 1:
            a = a.at[2, 0, -1].set(a[2, 0, 0] + 1e-6 * a[3, 0, 0])
        sign, log_abs = jax.jit(slogdet_lib.eliminate)(a)
        want_sign, want_log = jnp.linalg.slogdet(a)
        np.testing.assert_array_equal(sign, want_sign)
        np.testing.assert_allclose(log_abs, want_log, rtol=1e-9, atol=1e-7)


def test_a_singular_matrix_has_a_nonfinite_log_det():
    a = jnp.array([[[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 5.0]]])
    _, log_abs = slogdet_lib.eliminate(a)
    assert not np.isfinite(log_abs[0])


def _lu_count(fn, *args) -> int:
    """LAPACK LU calls in ``fn``'s program."""
    return jax.jit(fn).lower(*args).as_text().count("lapack_sgetrf")


def test_only_the_samplers_values_take_the_elimination():
    mol = system.preset("LiH")
    nuclei = tuple(map(tuple, mol.nuclear_positions.tolist()))
    net = FermiNet(mol.n_up, mol.n_down, nuclei, layers=((8, 4),), n_determinants=2)
    params = net.init(jax.random.PRNGKey(0))
    walkers = sampling.init_walkers(jax.random.PRNGKey(1), mol, 8)
    batch = lambda w: map_walkers(net.log_abs, params, w)

    assert _lu_count(batch, walkers) > 0  # the local energy's and gradients' path
    assert _lu_count(sampling.values_of(batch), walkers) == 0
    assert _lu_count(jax.grad(lambda w: batch(w).sum()), walkers) > 0
    # elimination against LU: rounding relative to the values' scale (one can be near 0)
    assert_close(jax.jit(sampling.values_of(batch))(walkers), jax.jit(batch)(walkers), rtol=1e-5)
