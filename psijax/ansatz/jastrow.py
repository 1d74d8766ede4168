"""The electron-electron cusp Jastrow factor exp(J) that FermiNet and PsiFormer multiply by.

    J = sum over pairs i < j of  -c a^2 / (a + r_ij),  c = 1/4 (same spin), 1/2 (opposite)

dJ/dr_ij at r_ij = 0 is c: the exact cusp (Kato), so the Coulomb term 1/r_ij of the local
energy is cancelled by the kinetic energy's where two electrons meet, whatever the network
learns; one learnt length a per spin pairing, starting at ``LENGTH`` (its size |a| in the
denominator, so that no sign of a makes a pole). Without it a network has
only |r_ij|'s kink in its inputs to learn the cusp from: FermiNet's Li, trained 1,440
steps, had two opposite-spin electrons meet 0.002 bohr apart with E_L = +58 Ha (the
electron-electron term +477, the kinetic energy -215), and that one walker moved two
steps' mean energies by 0.25 Ha (docs/benchmarks.md, "The electron-electron cusp").
"""

from __future__ import annotations

import jax.numpy as jnp

from psijax.ansatz import features
from psijax.types import Array, Params, Psi

# The lengths' start (bohr). The factor is not in the Hartree-Fock orbitals pretraining fits,
# and at 1 bohr (FermiNet's and PsiFormer's published start) it reshapes N2's core pairs,
# 0.3 bohr apart: N2's first 12 training energies averaged 1.8 Ha above Hartree-Fock's
# (FermiNet and PsiFormer alike), at 0.25 bohr 0.3 Ha, as without the factor
# (docs/benchmarks.md, "The electron-electron cusp").
LENGTH = 0.25


def init(dtype) -> Params:
    """The two lengths (bohr): same-spin (``parallel``) and opposite-spin (``anti``) pairs."""
    return {"parallel": jnp.full((), LENGTH, dtype), "anti": jnp.full((), LENGTH, dtype)}


def exponent(params: Params, r: Array, n_up: int) -> Array:
    """J (a scalar) for one walker ``r: [n, 3]`` whose first ``n_up`` electrons are spin
    up; 0 for a single electron."""
    _, r_ee = features.electron_electron(r)
    return exponent_of(params, r_ee, n_up)


def exponent_of(params: Params, r_ee: Array, n_up: int) -> Array:
    """J of the electron-electron distances ``r_ee: [n, n]`` (any diagonal): a periodic
    system gives its periodic distances (``psijax.ansatz.periodic``)."""
    n, dtype = r_ee.shape[0], r_ee.dtype
    spin = jnp.arange(n) < n_up
    same = (spin[:, None] == spin[None, :]).astype(dtype)
    upper = jnp.triu(jnp.ones((n, n), dtype), k=1)
    a_par, a_anti = params["parallel"], params["anti"]
    # 1 added off the pairs (i < j): no 0 / 0 at r_ii when a = 0 (an add, not a select on a
    # constant, through which folx's sparse Laplacian could not follow and went dense)
    r_ee = r_ee + (1.0 - upper)
    # |a| + r_ij: a length that training takes through zero would otherwise put a pole at
    # r_ij = -a, where psi is infinite (a tiny N2 run's steps were all rejected from there
    # on: docs/benchmarks.md); with |a|, exp(J) <= 1 for any lengths, as written above for a > 0
    par = -0.25 * a_par**2 / (jnp.abs(a_par) + r_ee)
    anti = -0.5 * a_anti**2 / (jnp.abs(a_anti) + r_ee)
    return jnp.sum(upper * (same * par + (1.0 - same) * anti))


def times(psi: Psi, params: Params, r: Array, n_up: int) -> Psi:
    """``psi`` multiplied by exp(J) of ``exponent``: the sign unchanged."""
    return Psi(psi.sign, psi.log_abs + exponent(params, r, n_up))
