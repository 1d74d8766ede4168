"""Observables of a frozen wavefunction: per-walker local values, averaged by the caller.

An observable is a frozen dataclass with a ``name``, the ``columns`` it adds to the
evaluation's metrics and a ``local`` method that maps one walker to one value per column
(Hartree atomic units: Hartree, bohr, e*bohr). Averaging over walkers and steps, error
bars and derived quantities (``derived``) are the same for every observable.

- ``Energy``: the local energy and its parts, kinetic -1/2 (lap psi)/psi, electron-nucleus,
  electron-electron and nucleus-nucleus Coulomb energies.
- ``Spin``: <S^2> from ratios of psi with one up and one down electron exchanged,
  S^2 = S_z (S_z + 1) + N_down - sum_{i up, j down} psi(r with r_i <-> r_j) / psi(r);
  exact for any state whose spatial part has the given up/down assignment.
- ``Dipole``: the electric dipole moment sum_A Z_A R_A - sum_i r_i about the origin
  (origin-independent for neutral molecules), in e*bohr and Debye.
- ``Forces``: the force on every nucleus (Hartree/bohr): the zero-variance
  Hellmann-Feynman estimator of Assaraf and Caffarel (J. Chem. Phys. 119, 10536 (2003))
  plus the Pulay term of a wavefunction that moves with the nuclei, see ``Forces``.

Columns whose name starts with ``_`` are per-walker intermediates that ``combine`` turns
into a step's value (the Pulay covariance); they are not written anywhere.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from psijax.errors import InputError
from psijax.laplacian import LaplacianOperator
from psijax.system import Molecule
from psijax.types import Array, Params, Psi

DEBYE_PER_AU = 2.541746473  # 1 e*bohr in Debye (CODATA 2018)

Apply = Callable[[Params, Array], Psi]  # (params, one walker [n, 3]) -> Psi
ApplyAt = Callable[[Params, Array, Array], Psi]  # (params, walker, nuclei [atoms, 3]) -> Psi


@dataclasses.dataclass(frozen=True)
class Walker:
    """What the observables of one walker share: computed once, read by each."""

    r: Array  # [electron, 3] in bohr
    psi: Psi
    grad: Array | None  # grad log|psi| [electron, 3], when some observable needs it
    lap: Array | None  # Laplacian of log|psi|


@dataclasses.dataclass(frozen=True)
class Energy:
    """The local energy (Hartree) and its Coulomb and kinetic parts."""

    molecule: Molecule
    name: str = "energy"
    needs_derivatives: bool = True

    @property
    def columns(self) -> tuple[str, ...]:
        return ("energy", "kinetic", "electron_nucleus", "electron_electron", "nucleus_nucleus")

    def local(self, w: Walker, apply: Apply, params: Params) -> dict[str, Array]:
        kinetic = -0.5 * (w.lap + jnp.sum(w.grad**2))
        v_en, v_ee, v_nn = coulomb_parts(self.molecule, w.r)
        return {
            "energy": kinetic + v_en + v_ee + v_nn,
            "kinetic": kinetic,
            "electron_nucleus": v_en,
            "electron_electron": v_ee,
            "nucleus_nucleus": v_nn,
        }

    def derived(self, means: dict[str, Any]) -> dict[str, Any]:
        return {}


@dataclasses.dataclass(frozen=True)
class Spin:
    """<S^2> (dimensionless; 0 for a singlet, 3/4 for a doublet)."""

    molecule: Molecule
    name: str = "spin"
    needs_derivatives: bool = False

    @property
    def columns(self) -> tuple[str, ...]:
        return ("s2",)

    def local(self, w: Walker, apply: Apply, params: Params) -> dict[str, Array]:
        n_up, n_down = self.molecule.n_up, self.molecule.n_down
        s_z = 0.5 * (n_up - n_down)
        constant = s_z * (s_z + 1.0) + n_down
        if n_up == 0 or n_down == 0:
            return {"s2": jnp.asarray(constant, w.r.dtype)}
        i, j = np.meshgrid(np.arange(n_up), n_up + np.arange(n_down), indexing="ij")
        i, j = i.reshape(-1), j.reshape(-1)
        perm = np.tile(np.arange(n_up + n_down), (i.size, 1))
        perm[np.arange(i.size), i] = j
        perm[np.arange(i.size), j] = i
        swapped = jax.vmap(functools.partial(apply, params))(w.r[perm])  # [pairs]
        ratio = swapped.sign * w.psi.sign * jnp.exp(swapped.log_abs - w.psi.log_abs)
        return {"s2": constant - jnp.sum(ratio)}

    def derived(self, means: dict[str, Any]) -> dict[str, Any]:
        return {}


@dataclasses.dataclass(frozen=True)
class Dipole:
    """The electric dipole moment (e*bohr) about the origin: nuclei minus electrons."""

    molecule: Molecule
    name: str = "dipole"
    needs_derivatives: bool = False

    @property
    def columns(self) -> tuple[str, ...]:
        return ("dipole_x", "dipole_y", "dipole_z")

    def local(self, w: Walker, apply: Apply, params: Params) -> dict[str, Array]:
        nuclear = np.einsum(
            "a,ax->x", self.molecule.nuclear_charges, self.molecule.nuclear_positions
        )
        mu = jnp.asarray(nuclear, w.r.dtype) - jnp.sum(w.r, axis=0)
        return dict(zip(self.columns, mu, strict=True))

    def derived(self, means: dict[str, Any]) -> dict[str, Any]:
        """Components and magnitude in Debye (the magnitude's error by propagation)."""
        if not all(c in means for c in self.columns):
            return {}
        mu = np.array([means[c]["mean"] for c in self.columns])
        err = np.array([means[c]["error"] for c in self.columns])
        size = float(np.linalg.norm(mu))
        size_err = (
            float(np.linalg.norm(mu * err) / size) if size > 0 else float(np.linalg.norm(err))
        )
        out = {
            f"{c}_debye": {"mean": m * DEBYE_PER_AU, "error": e * DEBYE_PER_AU, "unit": "Debye"}
            for c, m, e in zip(self.columns, mu, err, strict=True)
        }
        out["dipole_magnitude"] = {"mean": size, "error": size_err, "unit": "e*bohr"}
        out["dipole_magnitude_debye"] = {
            "mean": size * DEBYE_PER_AU, "error": size_err * DEBYE_PER_AU, "unit": "Debye",
        }  # fmt: skip
        if self.molecule.charge:
            out["dipole_note"] = "charged molecule: the dipole is taken about the origin"
        return out


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
    """

    molecule: Molecule
    apply_at: ApplyAt | None = None
    name: str = "forces"
    needs_derivatives: bool = True

    def _names(self, prefix: str) -> tuple[str, ...]:
        return tuple(f"{prefix}_{a}_{c}" for a in range(self.molecule.n_atoms) for c in "xyz")

    @property
    def columns(self) -> tuple[str, ...]:
        hf = self._names("force_hf")
        return hf if self.apply_at is None else (*self._names("force"), *hf)

    def local(self, w: Walker, apply: Apply, params: Params) -> dict[str, Array]:
        nuclei = jnp.asarray(self.molecule.nuclear_positions, w.r.dtype)
        charges = jnp.asarray(self.molecule.nuclear_charges, w.r.dtype)
        x = w.r[None, :, :] - nuclei[:, None, :]  # [atom, electron, 3]
        dist = jnp.linalg.norm(x, axis=-1, keepdims=True)
        g = w.grad[None]
        radial = jnp.sum(x * g, axis=-1, keepdims=True)
        electronic = charges[:, None] * jnp.sum(g / dist - x * radial / dist**3, axis=1)
        total = electronic + jnp.asarray(self.nuclear_forces(), w.r.dtype)
        out = dict(zip(self._names("force_hf"), total.reshape(-1), strict=True))
        if self.apply_at is not None:
            at = lambda nuc: self.apply_at(params, w.r, nuc).log_abs
            d_log = jax.grad(at)(nuclei).reshape(-1)  # d log|psi| / dR, [atom * 3]
            e_local = -0.5 * (w.lap + jnp.sum(w.grad**2)) + sum(coulomb_parts(self.molecule, w.r))
            out |= dict(zip(self._names("_dlog"), d_log, strict=True))
            out |= dict(zip(self._names("_e_dlog"), e_local * d_log, strict=True))
        return out

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
        return out

    def nuclear_forces(self) -> np.ndarray:
        """[atom, 3]: Z_A sum_B Z_B (R_A - R_B) / |R_A - R_B|^3."""
        pos, z = self.molecule.nuclear_positions, self.molecule.nuclear_charges
        diff = pos[:, None] - pos[None]
        dist = np.linalg.norm(diff, axis=-1)
        np.fill_diagonal(dist, np.inf)
        return z[:, None] * np.einsum("b,abx->ax", z, diff / dist[..., None] ** 3)

    def derived(self, means: dict[str, Any]) -> dict[str, Any]:
        if self.apply_at is None:
            return {"forces_note": "Hellmann-Feynman part only (no Pulay term: the "
                    "wavefunction's dependence on the nuclei was not given)"}  # fmt: skip
        return {}


Observable = Energy | Spin | Dipole | Forces
OBSERVABLES: dict[str, type] = {
    "energy": Energy, "spin": Spin, "dipole": Dipole, "forces": Forces,
}  # fmt: skip
DEFAULT = ("energy", "spin", "dipole", "forces")


def parse(names: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """Observable names from user input ('spin,dipole' or a list); energy is always on."""
    if names is None:
        return DEFAULT
    if isinstance(names, str):
        names = [names]
    flat = [n.strip() for item in names for n in str(item).split(",") if n.strip()]
    for name in flat:
        if name not in OBSERVABLES:
            raise InputError(f"unknown observable {name!r}; choose from {', '.join(OBSERVABLES)}")
    return ("energy", *dict.fromkeys(n for n in flat if n != "energy"))


def build(names: tuple[str, ...], molecule: Molecule, network=None) -> tuple[Observable, ...]:
    """The observables ``names``; ``network`` (an ansatz with ``at(nuclei)``) gives the
    forces their Pulay term."""
    apply_at = None
    if network is not None and hasattr(network, "at"):
        apply_at = lambda params, r, nuclei: network.at(nuclei).apply(params, r)
    return tuple(
        Forces(molecule, apply_at) if name == "forces" else OBSERVABLES[name](molecule)
        for name in names
    )


def combine(observables: tuple[Observable, ...], means: dict[str, Array], n: Array):
    """One step's values from its walker means: every public column, plus what the
    observables compute from several means (the forces' Pulay covariance)."""
    out = {k: v for k, v in means.items() if not k.startswith("_")}
    for o in observables:
        if hasattr(o, "combine"):
            out |= o.combine(means, n)
    return out


def coulomb_parts(molecule: Molecule, r: Array) -> tuple[Array, Array, Array]:
    """(electron-nucleus, electron-electron, nucleus-nucleus) energies in Hartree."""
    nuclei = jnp.asarray(molecule.nuclear_positions, r.dtype)
    charges = jnp.asarray(molecule.nuclear_charges, r.dtype)
    r_en = jnp.linalg.norm(r[:, None, :] - nuclei[None], axis=-1)
    v_en = -jnp.sum(charges[None] / r_en)
    n = r.shape[0]
    if n > 1:
        i, j = np.triu_indices(n, k=1)
        v_ee = jnp.sum(1.0 / jnp.linalg.norm(r[i] - r[j], axis=-1))
    else:
        v_ee = jnp.zeros((), r.dtype)
    return v_en, v_ee, jnp.asarray(molecule.nuclear_repulsion, r.dtype)


def make_local_values(
    apply: Apply, observables: tuple[Observable, ...], op: LaplacianOperator
) -> Callable[[Params, Array], dict[str, Array]]:
    """``local(params, r) -> {column: value}`` for one walker, every observable at once.

    The Laplacian (the costly part) is computed once, and only if an observable needs it.
    """
    derivatives = any(o.needs_derivatives for o in observables)

    def local(params: Params, r: Array) -> dict[str, Array]:
        psi = apply(params, r)
        grad = lap = None
        if derivatives:
            log_abs = lambda x: apply(params, x).log_abs
            _, grad, lap = op(log_abs)(r)
        walker = Walker(r, psi, grad, lap)
        values: dict[str, Array] = {}
        for o in observables:
            values.update(o.local(walker, apply, params))
        return values

    return local
