"""Supervised pretraining of an ansatz's orbitals on Hartree-Fock orbitals (pyscf).

Hartree-Fock runs once on the host (pyscf UHF). Each pretraining step evaluates the occupied
HF orbitals at the current walkers, fits the network's orbital matrices to them with one optax
step, then moves the walkers by Metropolis sampling of the *network's* |psi|^2, so that the fit
covers the region the network will be trained on afterwards.

The HF orbitals are evaluated in JAX from the basis' Gaussian exponents and contraction
coefficients (`hf_orbitals`), so a whole chunk of steps is one compiled loop on the device:
no host round trip per step, and walkers sharded over devices or processes never leave them.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding, PartitionSpec

from psijax.ansatz.base import Ansatz
from psijax.batching import auto_chunk, map_walkers
from psijax.sampler import Metropolis
from psijax.system import Molecule
from psijax.types import Array, Params, Walkers

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, eq=False)
class HartreeFock:
    """A converged (or best-effort) UHF solution.

    Attributes:
        mol: the built pyscf `gto.Mole` (bohr).
        coeff_up, coeff_down: occupied MO coefficients, [n_ao, n_up] and [n_ao, n_down].
        energy: UHF total energy in Hartree (nuclear repulsion included).
        converged: whether the SCF converged.
    """

    mol: Any
    coeff_up: np.ndarray
    coeff_down: np.ndarray
    energy: float
    converged: bool = True

    @property
    def n_up(self) -> int:
        return self.coeff_up.shape[1]

    @property
    def n_down(self) -> int:
        return self.coeff_down.shape[1]

    def orbitals(self, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Occupied orbitals of each spin at that spin's electrons, for walkers r [W, N, 3].

        Returns ([W, n_up, n_up], [W, n_down, n_down]) in float64; rows are electrons
        (spin up first in r), columns are orbitals in order of energy.
        """
        r = np.asarray(r, dtype=np.float64)
        n = self.n_up + self.n_down
        if r.ndim != 3 or r.shape[1:] != (n, 3):
            raise ValueError(f"walkers must have shape [W, {n}, 3], got {list(r.shape)}")
        kind = "GTOval_cart" if self.mol.cart else "GTOval_sph"
        ao = self.mol.eval_gto(kind, r.reshape(-1, 3)).reshape(r.shape[0], n, -1)
        up = ao[:, : self.n_up] @ self.coeff_up
        down = ao[:, self.n_up :] @ self.coeff_down
        return up, down


def hartree_fock(molecule: Molecule, basis: str = "sto-6g", *, max_cycle: int = 100) -> HartreeFock:
    """Run pyscf UHF on `molecule` (quiet, minao guess); warns via logging if not converged."""
    from pyscf import scf

    mol = molecule.to_pyscf(basis)
    mol.verbose = 0
    mf = scf.UHF(mol)
    mf.init_guess = "minao"
    mf.max_cycle = max_cycle
    energy = float(mf.kernel())
    if not mf.converged:
        logger.warning(
            "Hartree-Fock (UHF/%s) for %s did not converge in %d cycles; pretraining on the "
            "last iterate (E = %.6f Ha)",
            basis,
            molecule.name or "".join(molecule.symbols),
            mf.max_cycle,
            energy,
        )
    up, down = (
        np.asarray(c)[:, np.asarray(o) > 0] for c, o in zip(mf.mo_coeff, mf.mo_occ, strict=True)
    )
    if (up.shape[1], down.shape[1]) != (molecule.n_up, molecule.n_down):
        raise RuntimeError(
            f"UHF occupied {up.shape[1]} up and {down.shape[1]} down orbitals, expected "
            f"{molecule.n_up} and {molecule.n_down}"
        )
    return HartreeFock(mol, up, down, energy, bool(mf.converged))


# ------------------------------------------------------------------- HF orbitals in JAX
# libcint's extra factor on cartesian s and p functions (1/sqrt(4 pi), sqrt(3 / (4 pi))).
_COMMON_FACTOR = {0: 0.282094791773878143, 1: 0.488602511902919921}


def hf_orbitals(hf: HartreeFock) -> Callable[[Walkers], tuple[Array, Array]]:
    """A JAX function with the values of `HartreeFock.orbitals`, in the walkers' dtype.

    Cartesian Gaussians are evaluated shell by shell from pyscf's exponents and normalised
    contraction coefficients (pyscf's AO order), and pyscf's cartesian-to-spherical map is
    folded into the MO coefficients; the result matches ``mol.eval_gto`` to rounding.
    """
    orbitals, coefficients = hf_orbital_basis(hf)
    return lambda r: orbitals(r, coefficients)


def hf_orbital_basis(hf: HartreeFock) -> tuple[Callable[..., tuple[Array, Array]], tuple]:
    """``hf_orbitals`` as ``orbitals(r, coefficients)`` and the MO ``coefficients``.

    The coefficients are an argument, not constants of the compiled program: pyscf's SCF
    gives them with run-to-run differences in the last bits, and a program holding them
    as constants would miss JAX's persistent compilation cache on every launch (4-5 s of
    compile at the default LiH job).
    """
    from pyscf.gto import gto_norm

    mol = hf.mol
    shells = []
    for b in range(mol.nbas):
        ang, exponents = mol.bas_angular(b), mol.bas_exp(b)
        norm = gto_norm(ang, exponents)[:, None] * _COMMON_FACTOR.get(ang, 1.0)
        coeffs = mol.bas_ctr_coeff(b) * norm
        powers = [(x, y, ang - x - y) for x in range(ang, -1, -1) for y in range(ang - x, -1, -1)]
        shells.append((mol.bas_coord(b), exponents, coeffs, np.asarray(powers)))
    to_basis = np.eye(mol.nao_cart()) if mol.cart else mol.cart2sph_coeff()
    coefficients = (to_basis @ hf.coeff_up, to_basis @ hf.coeff_down)
    n_up = hf.n_up

    def orbitals(r: Walkers, coefficients) -> tuple[Array, Array]:
        dtype = r.dtype
        coeff_up, coeff_down = coefficients
        blocks = []
        for center, exponents, coeffs, powers in shells:
            d = r - jnp.asarray(center, dtype)  # [W, N, 3]
            r2 = jnp.sum(d**2, axis=-1, keepdims=True)
            radial = jnp.exp(-r2 * jnp.asarray(exponents, dtype)) @ jnp.asarray(coeffs, dtype)
            angular = jnp.prod(d[..., None, :] ** jnp.asarray(powers, dtype), axis=-1)
            block = radial[..., :, None] * angular[..., None, :]  # [W, N, contraction, xyz]
            blocks.append(block.reshape(*r.shape[:-1], -1))
        ao = jnp.concatenate(blocks, axis=-1)  # [W, N, n_ao_cart]
        up = ao[:, :n_up] @ jnp.asarray(coeff_up, dtype)
        down = ao[:, n_up:] @ jnp.asarray(coeff_down, dtype)
        return up, down

    return orbitals, coefficients


# ------------------------------------------------------------------------------ loss, step
def pretrain_loss(
    net: Ansatz, params: Params, walkers: Walkers, targets_up: Array, targets_down: Array
) -> Array:
    """Mean over walkers and determinants of sum_ij (network orbital - HF target)_ij^2.

    full_det: the target of every determinant is [[Phi_up, 0], [0, Phi_down]] (N x N);
    otherwise each spin block is compared with its own target and the two losses add.
    """
    orbitals = map_walkers(net.orbitals, params, walkers)  # each [W, k, ., .]
    dtype = orbitals[0].dtype
    up, down = targets_up.astype(dtype), targets_down.astype(dtype)
    if net.full_det:  # padding keeps the walker sharding of the targets
        top = jnp.pad(up, ((0, 0), (0, 0), (0, net.n_down)))
        bottom = jnp.pad(down, ((0, 0), (0, 0), (net.n_up, 0)))
        targets = [jnp.concatenate([top, bottom], axis=-2)]
    else:
        targets = [t for t, count in ((up, net.n_up), (down, net.n_down)) if count]
    losses = [
        jnp.mean(jnp.sum((o - t[:, None]) ** 2, axis=(-2, -1)))
        for o, t in zip(orbitals, targets, strict=True)
    ]
    return sum(losses[1:], losses[0])


# Pretraining steps per compiled call; the callback sees their losses after each call.
CHUNK = 25


def _make_chunk(
    net: Ansatz,
    optimizer: optax.GradientTransformation,
    targets: Callable[[Walkers], tuple[Array, Array]],
    n_moves: int,
    chunk: int | None,
) -> Callable[..., tuple[Params, optax.OptState, Walkers, Array, Array]]:
    """Jitted: steps ``start .. start + count - 1`` (count <= CHUNK) of fit, move, adapt.

    Returns (params, opt_state, walkers, width, losses [CHUNK], of which ``count`` are set).
    """

    @jax.jit
    def run(key, start, count, params, opt_state, walkers, width, coefficients):
        def body(j, carry):
            params, opt_state, walkers, width, losses = carry
            up, down = targets(walkers, coefficients)
            loss, grads = jax.value_and_grad(pretrain_loss, argnums=1)(
                net, params, walkers, up, down
            )
            updates, opt_state = optimizer.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
            log_abs = lambda x: map_walkers(net.log_abs, params, x, chunk_size=chunk)
            walkers, _, width, _ = Metropolis(n_moves).step(
                jax.random.fold_in(key, start + j), log_abs, walkers, log_abs(walkers), width
            )
            return params, opt_state, walkers, width, losses.at[j].set(loss.astype(losses.dtype))

        losses = jnp.zeros((CHUNK,), walkers.dtype)
        return jax.lax.fori_loop(0, count, body, (params, opt_state, walkers, width, losses))

    return run


# ------------------------------------------------------------------------------------ loop
def _replicate(tree: Any, sharding: jax.sharding.Sharding) -> Any:
    """`tree` replicated over the mesh of a NamedSharding; unchanged for other shardings."""
    if isinstance(sharding, NamedSharding):
        return jax.device_put(tree, NamedSharding(sharding.mesh, PartitionSpec()))
    return tree


def pretrain(
    key: Array,
    net: Ansatz,
    params: Params,
    molecule: Molecule,
    walkers: Walkers,
    *,
    steps: int,
    basis: str = "sto-6g",
    learning_rate: float = 3e-3,
    n_moves: int = 5,
    width: float = 0.2,
    callback: Callable[[int, float], None] | None = None,
    hf: HartreeFock | None = None,
) -> tuple[Params, Walkers, np.ndarray]:
    """Fit the network's orbitals to UHF orbitals for `steps` Adam steps, sampling as it goes.

    Walkers [W, N, 3] (bohr) keep their sharding. `callback(step, loss)` runs for every step,
    in order, after each chunk of `CHUNK` steps (one host sync per chunk).
    `hf` is the UHF solution to fit (computed here when not given).
    Returns (params, walkers, losses [steps] as numpy).
    """
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    if (net.n_up, net.n_down) != (molecule.n_up, molecule.n_down):
        raise ValueError(
            f"the network has {net.n_up} up and {net.n_down} down electrons but the molecule "
            f"has {molecule.n_up} and {molecule.n_down}; build the ansatz from the molecule"
        )
    if steps == 0:
        return params, walkers, np.zeros((0,), np.float64)
    hf = hf if hf is not None else hartree_fock(molecule, basis)
    optimizer = optax.adam(learning_rate)
    opt_state = optimizer.init(params)
    walkers = jnp.asarray(walkers)
    sharding = walkers.sharding
    chunk = auto_chunk(walkers.shape[0], len(sharding.device_set))
    targets, coefficients = hf_orbital_basis(hf)
    run = _make_chunk(net, optimizer, targets, n_moves, chunk)
    coefficients = _replicate(
        jax.tree.map(lambda c: np.asarray(c, walkers.dtype), coefficients), sharding
    )
    # Parameters and width come back replicated on the walkers' mesh: put them there now
    # so that the first chunk compiles the same program as all the others.
    params, opt_state, width_arr = _replicate(
        (params, opt_state, jnp.asarray(width, walkers.dtype)), sharding
    )
    losses = []
    for start in range(0, steps, CHUNK):
        count = min(CHUNK, steps - start)
        params, opt_state, walkers, width_arr, chunk = run(
            key, start, count, params, opt_state, walkers, width_arr, coefficients
        )
        chunk = np.asarray(jax.device_get(chunk[:count]), dtype=np.float64)
        losses.append(chunk)
        if callback is not None:
            for j, loss in enumerate(chunk):
                callback(start + j, float(loss))
    return params, walkers, np.concatenate(losses)
