"""Forces on the nuclei (Hartree/bohr): the zero-variance Hellmann-Feynman estimator of
Assaraf and Caffarel (J. Chem. Phys. 119, 10536 (2003)) plus the Pulay term of a
wavefunction that moves with the nuclei; see ``Forces``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from psijax.estimators import space_warp
from psijax.hamiltonian import Walker, ecp
from psijax.statistics import blocking_estimate
from psijax.system import Molecule
from psijax.types import Array, Params, Psi

ApplyAt = Callable[[Params, Array, Array], Psi]  # (params, walker, nuclei [atoms, 3]) -> Psi


@dataclasses.dataclass(frozen=True)
class Forces:
    """Force on each nucleus A, F_A = -dE/dR_A (Hartree/bohr): zero-variance
    Hellmann-Feynman part plus, when psi's dependence on the nuclei is known, the Pulay part.

    Hellmann-Feynman (``force_hf_*``): the local force Z_A sum_i x_i / |x_i|^3
    (x_i = r_i - R_A) plus the nuclear repulsion has infinite variance (1 / |x|^2 at the
    nucleus). Subtracting (H - E_L)(Q psi) / psi with Q = Z_A sum_i x_i / |x_i|, whose
    average is exactly zero for any psi (H is Hermitian), cancels that singularity and
    leaves F_A = nuclear term + Z_A sum_i [g_i / |x_i| - x_i (x_i . g_i) / |x_i|^3],
    g_i = grad_i log|psi|: finite variance, zero variance for an exact one-electron
    eigenstate (Assaraf and Caffarel, J. Chem. Phys. 119, 10536 (2003)).

    Total (``force_*``): a network whose inputs include the nuclear positions changes with
    them, so -dE/dR_A of the trained (fixed-parameter) wavefunction also has the Pulay
    term -2 cov(E_L, d log|psi| / dR_A) over the walkers; as <dE_L/dR> = <dV/dR> for any
    real psi, the total is exactly the derivative of the energy of this wavefunction with
    its nuclei moved (tested against finite differences), and at a variational optimum
    of the parameters it is -dE/dR of the energy surface. ``apply_at(params, r, nuclei)``
    supplies the nuclear dependence; without it only ``force_hf_*`` is given. The
    covariance is taken over each step's walkers (times n / (n - 1)) and averaged over
    steps like every other column.

    Space warp (``force_warp_*``, atoms with an ECP, with ``apply_at``): a second estimator
    of the same total force (``psijax.estimators.space_warp``), strongly correlated with
    the first; ``control_variate`` combines the two series of step values into the one of
    least variance, which ``derived`` reports as ``force_*_combined`` and a relaxation
    steps on.
    """

    molecule: Molecule
    apply_at: ApplyAt | None = None
    name: str = "forces"
    needs_derivatives: bool = True
    # The ECP terms of the Hamiltonian (``psijax.hamiltonian.ecp``), whose potentials move
    # with their nuclei: their Hellmann-Feynman part is -d/dR_A of the terms' local value
    # with psi held fixed (the nonlocal quadrature's rotations from the walker's key).
    ecp_terms: tuple = ()
    warp: bool = True  # the space-warp estimator on ECP nuclei (``warp_atoms``)

    def _names(self, prefix: str, atoms=None) -> tuple[str, ...]:
        atoms = range(self.molecule.n_atoms) if atoms is None else atoms
        return tuple(f"{prefix}_{a}_{c}" for a in atoms for c in "xyz")

    @property
    def warp_atoms(self) -> tuple[int, ...]:
        """The nuclei with a space-warp estimator: those with an ECP, given ``apply_at``."""
        if not self.warp or self.apply_at is None or not self.ecp_terms:
            return ()
        return tuple(a for a, e in enumerate(self.molecule.ecp) if e is not None)

    @property
    def needs_rows(self) -> bool:  # ``derived`` combines the step series of two estimators
        return bool(self.warp_atoms)

    @property
    def columns(self) -> tuple[str, ...]:
        hf = self._names("force_hf")
        if self.apply_at is None:
            return hf
        return (*self._names("force"), *hf, *self._names("force_warp", self.warp_atoms))

    def local(self, w: Walker, parts: dict[str, Array]) -> dict[str, Array]:
        nuclei = jnp.asarray(self.molecule.nuclear_positions, w.r.dtype)
        charges = jnp.asarray(self.molecule.nuclear_charges, w.r.dtype)
        x = w.r[None, :, :] - nuclei[:, None, :]  # [atom, electron, 3]
        dist = jnp.linalg.norm(x, axis=-1, keepdims=True)
        g = w.grad[None]
        radial = jnp.sum(x * g, axis=-1, keepdims=True)
        electronic = charges[:, None] * jnp.sum(g / dist - x * radial / dist**3, axis=1)
        if self.ecp_terms:  # an ECP atom's whole potential, differentiated directly
            ecp_atoms = jnp.asarray([a for a, e in enumerate(self.molecule.ecp) if e is not None])
            electronic = electronic.at[ecp_atoms].set(-self._ecp_gradient(w, ecp_atoms))
        total = electronic + jnp.asarray(self.nuclear_forces(), w.r.dtype)
        out = dict(zip(self._names("force_hf"), total.reshape(-1), strict=True))
        if self.apply_at is not None:
            at = lambda nuc: self.apply_at(w.params, w.r, nuc).log_abs
            d_log = jax.grad(at)(nuclei).reshape(-1)  # d log|psi| / dR, [atom * 3]
            e_local = parts["energy"]  # the Hamiltonian's, every term included
            out |= dict(zip(self._names("_dlog"), d_log, strict=True))
            out |= dict(zip(self._names("_e_dlog"), e_local * d_log, strict=True))
            if self.warp_atoms:
                out |= self._warp_local(w, e_local, d_log.reshape(-1, 3))
        return out

    def _warp_local(self, w: Walker, e_local: Array, d_log: Array) -> dict[str, Array]:
        atoms = self.warp_atoms
        d_energy, d_log_warp = space_warp.warped(
            w, self.apply_at, self.molecule, self.ecp_terms, atoms, d_log
        )
        names = lambda prefix: self._names(prefix, atoms)
        return (dict(zip(names("_warp_de"), d_energy.reshape(-1), strict=True))
                | dict(zip(names("_warp_dlog"), d_log_warp.reshape(-1), strict=True))
                | dict(zip(names("_warp_e_dlog"), (e_local * d_log_warp).reshape(-1),
                           strict=True)))  # fmt: skip

    def _ecp_gradient(self, w: Walker, ecp_atoms: Array) -> Array:
        """[ECP atom, 3]: d/dR_A of atom A's whole potential on the electrons, psi fixed:
        its Coulomb attraction (Z_A - core) and both ECP terms. Their sum is finite at the
        nucleus (the ECP's local part cancels the 1/r), so its derivative has finite
        variance without the zero-variance correction the bare nuclei get. The nonlocal
        term's quadrature points sit on spheres around R_A, so psi is differentiated there;
        averaged over the random rotations this is the derivative of the exact projection
        (the rotations' distribution does not depend on R_A)."""
        nuclei = jnp.asarray(self.molecule.nuclear_positions, w.r.dtype)
        charges = jnp.asarray(self.molecule.nuclear_charges, w.r.dtype)[ecp_atoms]

        def potential(centers: Array) -> Array:
            distance = jnp.linalg.norm(w.r[None] - centers[:, None], axis=-1)
            coulomb = -jnp.sum(charges[:, None] / distance)
            moved = [dataclasses.replace(term, centers=centers) for term in self.ecp_terms]
            ecp = sum(sum(term(w, w.key).values()) for term in moved)
            return coulomb + ecp

        return jax.grad(potential)(nuclei[ecp_atoms])

    def combine(self, means: dict[str, Array], n: Array) -> dict[str, Array]:
        """The total force of one step from its walker means (``n`` walkers)."""
        if self.apply_at is None:
            return {}
        out = {}
        names = zip(self._names("force"), self._names("force_hf"), self._names("_dlog"),
                    self._names("_e_dlog"), strict=True)  # fmt: skip
        for force, hf, d_log, e_d_log in names:
            cov = (means[e_d_log] - means["energy"] * means[d_log]) * n / jnp.maximum(n - 1, 1)
            out[force] = means[hf] - 2.0 * cov
        atoms = self.warp_atoms
        names = zip(self._names("force_warp", atoms), self._names("_warp_de", atoms),
                    self._names("_warp_dlog", atoms), self._names("_warp_e_dlog", atoms),
                    strict=True)  # fmt: skip
        for force, d_energy, d_log, e_d_log in names:
            cov = (means[e_d_log] - means["energy"] * means[d_log]) * n / jnp.maximum(n - 1, 1)
            out[force] = -means[d_energy] - 2.0 * cov
        return out

    def nuclear_forces(self) -> np.ndarray:
        """[atom, 3]: Z_A sum_B Z_B (R_A - R_B) / |R_A - R_B|^3."""
        pos, z = self.molecule.nuclear_positions, self.molecule.nuclear_charges
        diff = pos[:, None] - pos[None]
        dist = np.linalg.norm(diff, axis=-1)
        np.fill_diagonal(dist, np.inf)
        return z[:, None] * np.einsum("b,abx->ax", z, diff / dist[..., None] ** 3)

    def derived(self, means: dict[str, Any], rows: list[dict] | None = None) -> dict[str, Any]:
        if self.apply_at is None:
            return {"forces_note": "Hellmann-Feynman part only (no Pulay term: the "
                    "wavefunction's dependence on the nuclei was not given)"}  # fmt: skip
        out = {}
        for a in self.warp_atoms if rows else ():
            for c in "xyz":
                pair = [[float(r.get(f"{k}_{a}_{c}", np.nan)) for r in rows]
                        for k in ("force", "force_warp")]  # fmt: skip
                series, weight = control_variate(*pair)
                series = series[np.isfinite(series)]
                if series.size >= 2:
                    e = blocking_estimate(series)
                    out[f"force_{a}_{c}_combined"] = {
                        "mean": e.mean,
                        "error": e.error,
                        "unit": "Ha/bohr",
                        "warp_weight": weight,
                    }
        return out


def control_variate(direct: np.ndarray, warp: np.ndarray) -> tuple[np.ndarray, float]:
    """Two step series of one force component, each unbiased -> (the combination
    ``direct + b (warp - direct)`` of least variance, step by step, and b). ``b`` is fitted
    over the steps where both are finite (cov(direct, direct - warp) / var(direct - warp));
    its error adds a bias of order 1/steps times the series' error, far below the error
    bar over hundreds of steps. With fewer than 8 such steps, the plain average (b = 1/2)."""
    direct, warp = np.asarray(direct, np.float64), np.asarray(warp, np.float64)
    difference = direct - warp
    ok = np.isfinite(difference)
    weight = 0.5
    if np.sum(ok) >= 8 and np.var(difference[ok]) > 0:
        d, x = direct[ok], difference[ok]
        weight = float(np.mean((d - d.mean()) * (x - x.mean())) / np.var(x))
    return direct - weight * difference, weight


def from_config(molecule: Molecule, network=None) -> Forces | None:
    """``network`` (an ansatz with ``at(nuclei)``) gives the forces their Pulay term. None
    for a system without nuclei (the electron gas) or in a cell (no periodic forces here)."""
    if not molecule.n_atoms or molecule.lattice is not None:
        return None
    apply_at = None
    if network is not None and hasattr(network, "at"):
        apply_at = lambda params, r, nuclei: network.at(nuclei).apply(params, r)
    return Forces(molecule, apply_at, ecp_terms=ecp_terms(molecule))


def ecp_terms(molecule: Molecule) -> tuple:
    """The molecule's ECP terms as the Hamiltonian builds them (none without ECPs; the
    nonlocal one with the default rule: any rule, randomly rotated, is unbiased)."""
    terms = (ecp.local_from_config(molecule, None), ecp.nonlocal_from_config(molecule, None))
    return tuple(term for term in terms if term is not None)
