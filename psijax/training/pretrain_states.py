"""K states pretrained on the K lowest Hartree-Fock configurations.

State 0 is fitted to the UHF ground determinant, state i > 0 to the i-th lowest single
excitation (one electron moved from an occupied to a virtual orbital of the same spin,
ordered by the orbital-energy gap) with its orbitals relaxed for it (``scf.relaxed``:
UHF held on the configuration by maximum overlap; the ground state's own orbitals where
that fails). Distinct determinants make the K states linearly
independent from the first step, so that det[psi_i(x^j)] is far from zero, and put each
near a low-lying configuration; training then mixes them into the lowest K states. Each
state is pretrained as a ground state would be (``psijax.training.pretrain``), on walkers
of its own, which become that state's copy of the electrons in the total wavefunction.
States that share one network (``SharedStates``) are pretrained one after the other on it,
each moving the shared layers on; each state's orbital projection is then solved again by
least squares on the layers as they end.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from psijax.ansatz.states import SharedStates, States
from psijax.errors import InputError
from psijax.system.scf import HartreeFock, hf_orbital_basis, relaxed
from psijax.training import pretrain as pretrain_lib
from psijax.types import Array, Params, Walkers


@dataclasses.dataclass(frozen=True)
class Excitation:
    spin: str  # "up" or "down"
    occupied: int  # column of that spin's occupied orbitals
    virtual: int  # column of its virtual orbitals
    gap: float  # Hartree: virtual minus occupied orbital energy

    def __str__(self) -> str:
        return f"{self.spin} {self.occupied} -> virtual {self.virtual} (gap {self.gap:.3f} Ha)"


def excitations(hf: HartreeFock, n: int, basis: str) -> list[Excitation]:
    """The ``n`` single excitations of lowest orbital-energy gap; ``InputError`` where the
    basis has fewer."""
    found = []
    for spin, spectrum in zip(("up", "down"), hf.spectrum or (), strict=False):
        for o, e_occ in enumerate(spectrum.occupied):
            for v, e_virt in enumerate(spectrum.virtual):
                found.append(Excitation(spin, o, v, float(e_virt - e_occ)))
    found.sort(key=lambda x: (x.gap, x.spin, x.occupied, x.virtual))
    if len(found) < n:
        raise InputError(_too_few(basis, len(found) + 1, n + 1))
    return found[:n]


def check_basis(molecule, k: int, basis: str) -> None:
    """``InputError`` unless ``basis`` gives ``k`` configurations (before any SCF runs)."""
    nao = molecule.to_pyscf(basis).nao
    singles = sum(n * max(nao - n, 0) for n in (molecule.n_up, molecule.n_down))
    if singles + 1 < k:
        raise InputError(_too_few(basis, singles + 1, k))


def _too_few(basis: str, found: int, k: int) -> str:
    """The line for a basis with fewer configurations than states."""
    from psijax.system.sizing import STATES_BASIS

    larger = "a larger basis" if basis == STATES_BASIS else f"--basis {STATES_BASIS}, the default"
    return (
        f"the {basis} basis gives only {found} Hartree-Fock configuration{'s' * (found != 1)}, "
        f"fewer than the {k} states asked for; give {larger} with --states, or "
        "--pretrain-steps 0"
    )


def excited(hf: HartreeFock, x: Excitation) -> HartreeFock:
    """``hf`` with the excitation's occupied orbital replaced by its virtual one."""
    coeff = (hf.coeff_up if x.spin == "up" else hf.coeff_down).copy()
    spectrum = hf.spectrum[0 if x.spin == "up" else 1]
    coeff[:, x.occupied] = spectrum.virtual_coeff[:, x.virtual]
    energies = spectrum.occupied.copy()
    energies[x.occupied] = spectrum.virtual[x.virtual]
    spectra = list(hf.spectrum)
    spectra[0 if x.spin == "up" else 1] = spectrum._replace(occupied=energies)
    field = "coeff_up" if x.spin == "up" else "coeff_down"
    return dataclasses.replace(hf, **{field: coeff, "spectrum": tuple(spectra)})


def configurations(
    hf: HartreeFock, k: int, basis: str, *, pair: bool = False
) -> list[tuple[str, HartreeFock, int]]:
    """The ground determinant and the ``k - 1`` lowest single excitations, each with its
    orbitals relaxed where the SCF allows (``scf.relaxed``): (description, configuration,
    mirror). With ``pair`` and a closed shell (n_up = n_down, the same orbitals for both
    spins), an excitation whose spin mirror (the same excitation of the other spin) is not
    among them starts as itself minus its mirror (mirror -1, ``paired_targets``): the
    M_S = 0 triplet, the lower of the two spin states it is half of. Where both are, their
    span holds the triplet and the singlet already, and each keeps mirror 0."""
    out: list[tuple[str, HartreeFock, int]] = [("ground", hf, 0)]
    closed = hf.n_up == hf.n_down and np.allclose(hf.coeff_up, hf.coeff_down, atol=1e-3)
    found = excitations(hf, k - 1, basis)
    for x in found:
        spin = 0 if x.spin == "up" else 1
        own = _relaxed(hf, spin, x.occupied, x.virtual)
        what, config = (f"{x}, orbitals relaxed", own) if own is not None else (
            f"{x}, the ground state's orbitals", excited(hf, x)
        )  # fmt: skip
        twin = any(
            (y.spin, y.occupied, y.virtual) != (x.spin, x.occupied, x.virtual)
            and (y.occupied, y.virtual) == (x.occupied, x.virtual)
            for y in found
        )
        mirror = -1 if pair and closed and not twin else 0
        out.append((f"{what} - its spin mirror (triplet)" if mirror else what, config, mirror))
    return out


def paired_targets(
    orbitals: Callable[..., tuple[Array, Array]], sign: int, k: int
) -> Callable[..., tuple[Array, Array]]:
    """The targets of a state that is a configuration D plus ``sign`` times its spin mirror
    F D (each spin's orbitals the other's; n_up = n_down): the first k // 2 of its k
    determinants fitted to D, the next k // 2 to F D with its first up orbital times
    ``sign``, an odd one out to zero (so the two enter with equal weight).
    For a single excitation of a closed shell, in which F D moves the other spin's
    electron, sign -1 gives the M_S = 0 triplet, +1 the singlet. ``orbitals(r,
    coefficients)`` gives D's orbitals (``scf.hf_orbital_basis``); the targets are
    [W, k, n, n] per spin."""
    half = k // 2

    def stack(a: Array, b: Array) -> Array:
        return jnp.stack([a] * half + [b] * half + [jnp.zeros_like(a)] * (k % 2), axis=1)

    def targets(r: Walkers, coefficients) -> tuple[Array, Array]:
        up_a, down_a = orbitals(r, coefficients)
        up_b, down_b = orbitals(r, tuple(coefficients)[::-1])
        return stack(up_a, up_b.at[..., 0].multiply(sign)), stack(down_a, down_b)

    return targets


@functools.lru_cache(maxsize=64)
def _relaxed(hf: HartreeFock, spin: int, occupied: int, virtual: int) -> HartreeFock | None:
    """``scf.relaxed`` once per UHF solution and excitation (the dry run's description
    and pretraining both ask)."""
    return relaxed(hf, spin, occupied, virtual)


def pretrain(
    key: Array,
    net: States | SharedStates,
    params: Params,
    molecule,
    walkers: Walkers,
    *,
    hf: HartreeFock,
    basis: str,
    note: Callable[[str], None] = lambda text: None,
    **settings,
) -> tuple[Params, Walkers, list[np.ndarray]]:
    """Each state of ``net`` fitted to its configuration (``configurations``) by
    ``psijax.training.pretrain.pretrain`` with ``settings``; ``walkers`` ``[W, K * N, 3]``
    give each state its copy. Returns the stacked parameters, the walkers and each state's
    losses."""
    k, n = net.n_states, net.electrons_per_copy
    per_state = net.state_net.n_determinants
    targets = configurations(hf, k, basis, pair=per_state >= 2)
    copies = walkers.reshape(walkers.shape[0], k, n, 3)
    moved, losses = [], []
    for i, (what, config, mirror) in enumerate(targets):
        note(f"state {i}: {what}")
        paired = functools.partial(paired_targets, sign=mirror, k=per_state) if mirror else None
        p, w, loss = pretrain_lib.pretrain(
            jax.random.fold_in(key, i), net.state_net, net.state(params, i), molecule,
            copies[:, i], hf=config, basis=basis, targets_of=paired, **settings,
        )  # fmt: skip
        params = net.with_state(params, i, p)
        moved.append(w)
        losses.append(loss)
    if isinstance(net, SharedStates):  # the layers moved on after the earlier states' fits
        params = _refit_heads(net, params, moved, targets)
    walkers = jnp.stack(moved, axis=1).reshape(walkers.shape)
    return params, walkers, losses


def _refit_heads(net: SharedStates, params: Params, walkers: list, targets: list) -> Params:
    """Each state's orbital projection fitted again by least squares to its target
    (``configurations``) at its walkers, on the shared layers as the last state's
    pretraining left them."""
    one = net.state_net
    if not pretrain_lib.fits_head(one):
        return params
    for i, (w, (_, config, mirror)) in enumerate(zip(walkers, targets, strict=True)):
        orbitals, coefficients = hf_orbital_basis(config)
        if mirror:
            orbitals = paired_targets(orbitals, mirror, one.n_determinants)
        up, down = orbitals(w, [np.asarray(c, w.dtype) for c in coefficients])
        fitted = pretrain_lib.fit_head(one, net.state(params, i), w, up, down)
        params = net.with_state(params, i, fitted)
    return params
