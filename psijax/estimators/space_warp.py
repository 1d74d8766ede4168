"""The space-warp estimator of the force on a nucleus with an effective core potential.

An ECP atom's Hellmann-Feynman force (``Forces._ecp_gradient``) differentiates its local
and nonlocal potentials with the electrons held still: both are deep inside the core and
largely cancel in the energy, not in the derivative, so the estimate fluctuates by tens of
Ha/bohr from walker to walker (H2O with ccECP on O: 33-41 Ha/bohr against 0.8-1.6 for the
hydrogens' zero-variance estimator). The space warp (Filippi and Umrigar, Phys. Rev. B 61,
R16291 (2000)) moves each electron with the nucleus it is close to: under
R_A -> R_A + e, r_i -> r_i + w_A(r_i) e with w_A(r) = |r - R_A|^-4 / sum_B |r - R_B|^-4,
an electron at A's core moves rigidly with A and sees no change of A's potential. The
change of variables is exact, so

    dE/dR_A = < D_A E_L > + 2 cov(E_L, D_A log|psi| + 1/2 sum_i grad_i w_A(r_i)),
    D_A = d/dR_A + sum_i w_A(r_i) grad_i,

for any weights, with psi's own dependence on the nuclei in d/dR_A (the network moves with
its nuclei). D_A E_L needs the gradient of the whole local energy (kinetic, Coulomb, both
ECP terms) with respect to the electrons and the nuclei: one reverse pass through the
Laplacian (the forces' evaluation takes 1.28x as long for H2O, 1.38x for CO).
``local_energy_at`` builds that local energy from the molecular Hamiltonian's terms, which
a test holds equal to the Hamiltonian's own.

Neither estimator is the better one alone: on H2O's oxygen the warp's variance is 3-4x
lower than the direct one's, and they are strongly correlated, so their best combination
(``forces.control_variate``, the weight fitted over the evaluation's steps) is 11-20x lower
(docs/benchmarks.md, "Forces on ECP nuclei"). For an all-electron nucleus the zero-variance
estimator is better than the warp and is kept alone.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from psijax.hamiltonian import Walker, coulomb_parts
from psijax.hamiltonian.kinetic import Kinetic
from psijax.types import Array


def weights(r: Array, nuclei: Array) -> Array:
    """``[electron, atom]``: w_A(r_i) = |r_i - R_A|^-4 / sum_B |r_i - R_B|^-4, each row
    summing to one (formed as ratios to the nearest nucleus: finite at a nucleus)."""
    d2 = jnp.maximum(jnp.sum((r[:, None] - nuclei[None]) ** 2, axis=-1), 1e-30)
    nearest = jnp.min(d2, axis=-1, keepdims=True)
    f = (nearest / d2) ** 2
    return f / jnp.sum(f, axis=-1, keepdims=True)


def local_energy_at(walker: Walker, apply_at, molecule, ecp_terms, r: Array, nuclei: Array):
    """E_L of psi at electrons ``r`` with the nuclei (and the network's nuclei) at
    ``nuclei``: kinetic, Coulomb (nuclei included) and the ECP terms moved with their
    nuclei (the nonlocal quadrature's rotations from the walker's key)."""
    apply = lambda p, x: apply_at(p, x, nuclei)
    moved = walker.moved(lambda p, x: apply(p, x).log_abs, apply, r)
    total = Kinetic()(moved)["kinetic"] + sum(coulomb_parts(molecule, r, nuclei))
    ecp_atoms = np.asarray([k for k, e in enumerate(molecule.ecp) if e is not None], int)
    for term in ecp_terms:
        term = dataclasses.replace(term, centers=nuclei[ecp_atoms])
        total += sum(term(moved, walker.key).values())
    return total


def warped(walker: Walker, apply_at, molecule, ecp_terms, atoms, d_log: Array):
    """(D_A E_L, D_A log|psi| + 1/2 sum_i grad_i w_A) ``[len(atoms), 3]`` of one walker for
    the nuclei ``atoms``; ``d_log`` ``[atom, 3]`` is d log|psi| / dR of every nucleus."""
    r = walker.r
    nuclei = jnp.asarray(molecule.nuclear_positions, r.dtype)
    atoms = np.asarray(atoms, int)
    e_local = lambda x, nuc: local_energy_at(walker, apply_at, molecule, ecp_terms, x, nuc)
    grad_r, grad_nuclei = jax.grad(e_local, argnums=(0, 1))(r, nuclei)
    w = weights(r, nuclei)[:, atoms]  # [electron, k]
    d_energy = grad_nuclei[atoms] + jnp.einsum("ik,ix->kx", w, grad_r)
    one = lambda x: weights(x[None], nuclei)[0, atoms]  # [k]
    jacobian = jax.vmap(jax.jacfwd(one))(r)  # [electron, k, 3]
    grad_log = jnp.real(walker.grad)
    d_log_warp = d_log[atoms] + jnp.einsum("ik,ix->kx", w, grad_log) + 0.5 * jacobian.sum(0)
    return d_energy, d_log_warp


__all__ = ["local_energy_at", "warped", "weights"]
