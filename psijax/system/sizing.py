"""Defaults that scale with the molecule: how many walkers a step samples, how many
steps a run takes, and how far training clips the local energies.

A config leaves ``walkers`` unset (None) unless the user gives it; a job sizes it from the
molecule before anything runs (``sized``), and the run's config.json, its checkpoints'
identity and ``--dry-run`` hold the number. The local energy's variance comes from the
electrons near the heaviest nucleus (their kinetic and potential energies grow as Z^2),
and SPRING's natural gradient is estimated from the step's walkers: below some number of
walkers per step a run plateaus above the exact energy however long it trains (Be at 256
walkers: +1.1 to +1.7 mHa after 1500 and after 3000 steps; B +5.8 and +8.1 mHa, C +9.8 and
+12.6 mHa after 1500; with 512 walkers Be +0.5 to +0.6 mHa and B +1.9 mHa;
docs/accuracy.md). Atoms with effective core potentials sample
the core region of every ECP nucleus and take 1024 (docs/benchmarks.md, "C: walkers per
step").

Steps: up to four electrons (valence electrons with an ECP) 1500 steps reach chemical
accuracy (H2, LiH, Li, Be; C with ccECP at 1024 walkers); B, five electrons at 512 walkers,
was +1.9 and +1.5 mHa above exact after 1500 steps and +1.1 and +1.2 after 3000, so from five
electrons a run takes 3000 (docs/accuracy.md). As with the walkers, a heavier nucleus asks
for more: Be (four electrons, Z = 4) was +0.62 and +0.01 mHa above exact after 1500 steps
and +0.24 and +0.34 after 3000, so an all-electron nucleus from Z = 4 takes 3000 too, while
LiH (Z = 3) keeps 1500. N (Z = 7) was +1.70 and +2.87 mHa above exact after 3000 steps
(two runs) and +1.70 and +1.42 after 5000 (seed 1 gaining 1.4 mHa from step 3000 on, within
1.6 mHa for good only from step 4854; seed 0 level from step 2000 on), while C (Z = 6) was
within 1.6 mHa on both seeds after 3000: an all-electron nucleus from Z = 7 takes 5000.
K states take K - 1 times as many, at least 1.5 times: each further state adds about a
ground state's worth of steps, the highest state converging last. LiH's two states were
within 0.4 mHa after 1.5 times
(2300 steps) and He's three within 0.25 mHa after twice (3000), but hydrogen's four
diffuse n = 2 states with K = 5 were +0.16 to +3.0 mHa above exact after 1500 steps,
+0.03 to +0.75 after 3000, +0.01 to +0.33 after 4500 and +0.00 to +0.19 after 6000, four
times (two seeds; docs/states.md).
A crystal takes twice a molecule's steps: LiH in its rocksalt cell was 7-10 mHa above a
CCSD(T) estimate after 1500 steps and within 2 mHa of it after 3000, two seeds, its
local energy's variance still falling (docs/periodic.md).

Clipping: training clips the local energies at CLIP_SCALE mean absolute deviations from
their median, and with an effective core potential at ECP_CLIP_SCALE, hardly at all. A
network's valence orbitals are small and poorly fitted near an ECP nucleus (the ccECPs
repel valence electrons from the core), and the few walkers there carry local energies
tens of Hartree off, which clipping at 5 hides from the gradient: Al with ccECP ended 5.0
mHa above its reference at 5 and 0.69 mHa at 100 (same seed; along a line through the
nucleus its local energy was 3-5 Ha off at 0.4-0.5 bohr at 5, within 0.2 Ha at 100), C
with ccECP +0.7 mHa against +0.3 (docs/ecp.md, "Clipping").

Softening: the networks' distances to an ECP nucleus are sqrt(r^2 + a^2) (the valence
wavefunction has no cusp there, ``psijax.ansatz.features``), a by the largest core an ECP
replaces: 0.2 bohr for a helium core (Li to Ne: LiH with ccECP on Li +0.76 and +0.64 mHa
at 0.2 against +1.15 at 0.5 and +1.52 and +1.19 unsoftened; C +4.9 mHa against +11.8),
0.5 for a neon core or larger, whose valence orbitals are small over a wider core (Al,
seeds 0 and 1: +0.69 and +2.44 mHa at 0.2, +0.93 and +0.68 at 0.5; docs/benchmarks.md,
"Al with ccECP").

Pretraining basis: a ground state pretrains on STO-6G's Hartree-Fock determinant (an
ECP atom on its ECP's own basis, ``psijax.system.ecp.basis_for``); several states
(``--states K``) pretrain on the K lowest configurations of a basis with diffuse functions,
aug-cc-pVDZ: STO-6G gives He a single configuration, and He's 2 3S state ended 1.63 mHa
above exact after pretraining on cc-pVDZ against 0.16 mHa on aug-cc-pVDZ (3000 steps).
"""

from __future__ import annotations

import dataclasses
import itertools

from psijax.config import FIELDS, Config
from psijax.errors import InputError
from psijax.system.ecp import DEFAULT_BASIS
from psijax.system.molecule import Molecule

# (the heaviest nuclear charge up to which, walkers per step), all-electron runs
WALKERS_BY_CHARGE: tuple[tuple[float, int], ...] = ((3, 256), (5, 512), (float("inf"), 1024))
ECP_WALKERS = 1024  # any atom with an effective core potential
# (the electron count up to which, training steps)
STEPS_BY_ELECTRONS: tuple[tuple[float, int], ...] = ((4, 1500), (float("inf"), 3000))
# (the heaviest all-electron nuclear charge up to which, training steps); the larger wins
STEPS_BY_CHARGE: tuple[tuple[float, int], ...] = (
    (3, 1500),
    (6, 3000),
    (float("inf"), 5000),
)
CRYSTAL_STEPS = 2  # a crystal's steps over a molecule's of as many electrons
STATES_BASIS = "aug-cc-pvdz"  # pretraining basis of several states, all-electron
# Mean absolute deviations from the median at which training clips the local energies
CLIP_SCALE = 5.0
ECP_CLIP_SCALE = 100.0  # any atom with an effective core potential
# The softening (bohr) of the networks' distances to ECP nuclei: by the largest core an ECP
# replaces, (core electrons up to which, softening)
SOFT_CORE_BY_CORE: tuple[tuple[float, float], ...] = ((2, 0.2), (float("inf"), 0.5))


def walkers_for(molecule: Molecule) -> int:
    """Walkers per step for ``molecule`` (module docstring); a system without nuclei (the
    electron gas) takes the lightest nuclei's number."""
    if molecule.ecp:
        return ECP_WALKERS
    heaviest = max(molecule.charges, default=0.0)
    return next(n for charge, n in WALKERS_BY_CHARGE if heaviest <= charge)


def clip_scale_for(molecule: Molecule) -> float:
    """The local energies' clipping in training for ``molecule`` (module docstring)."""
    return ECP_CLIP_SCALE if molecule.ecp else CLIP_SCALE


def soft_core_for(molecule: Molecule) -> float:
    """The softening of the distances to ``molecule``'s ECP nuclei (module docstring), by
    the largest core an ECP replaces; the smallest softening without ECPs (where it is moot)."""
    core = max(molecule.core_electrons, default=0)
    return next(soft for limit, soft in SOFT_CORE_BY_CORE if core <= limit)


def steps_for(molecule: Molecule, states: int = 1) -> int:
    """Training steps for ``states`` states of ``molecule`` (module docstring): by its
    electrons and its heaviest all-electron nucleus, the larger; the ground state's times
    K - 1 (at least 1.5) for K states, in whole hundreds; twice as many in a crystal."""
    steps = next(n for count, n in STEPS_BY_ELECTRONS if molecule.n_electrons <= count)
    cores = zip(molecule.charges, molecule.core_electrons, strict=True)
    heaviest = max((z for z, core in cores if not core), default=0.0)  # ECP nuclei: by valence
    steps = max(steps, next(n for charge, n in STEPS_BY_CHARGE if heaviest <= charge))
    if molecule.lattice is not None and molecule.n_atoms:
        steps *= CRYSTAL_STEPS
    if states == 1:
        return steps
    return -(-steps * max(2 * (states - 1), 3) // 200) * 100


def sized(config: Config, molecule: Molecule) -> Config:
    """``config`` with every field it leaves to the molecule set from ``molecule``. The
    electron gas has no basis and takes no pretraining: its network
    starts as the plane-wave determinant (``psijax.ansatz.periodic``)."""
    walkers = walkers_for(molecule) if config.walkers is None else config.walkers
    steps = steps_for(molecule, config.states) if config.steps is None else config.steps
    clip = clip_scale_for(molecule) if config.clip_scale is None else config.clip_scale
    soft = soft_core_for(molecule) if config.ecp_soft_core is None else config.ecp_soft_core
    config = dataclasses.replace(config, clip_scale=clip, ecp_soft_core=soft)
    if molecule.lattice is not None and not molecule.n_atoms:
        if config.pretrain_steps not in (0, FIELDS["pretrain_steps"].default):
            raise InputError(
                f"pretrain_steps={config.pretrain_steps}: the electron gas takes no pretraining "
                "(its network starts as the plane-wave determinant); leave --pretrain-steps out"
            )
        return dataclasses.replace(config, walkers=walkers, steps=steps, pretrain_steps=0)
    basis = basis_for(molecule, config.states) if config.basis is None else config.basis
    return dataclasses.replace(config, walkers=walkers, steps=steps, basis=basis)


def basis_for(molecule: Molecule, states: int) -> str:
    """The pretraining basis for ``states`` states of ``molecule`` (module docstring)."""
    if states == 1 or molecule.ecp:
        return DEFAULT_BASIS
    return STATES_BASIS


def describe_steps() -> str:
    """The steps rule in words (``--help``)."""
    parts = [
        f"{n} from more electrons" if count == float("inf") else f"{n} up to {int(count)} electrons"
        for count, n in STEPS_BY_ELECTRONS
    ]
    nuclei = ", ".join(
        f"{n} above Z = {int(below)}" for (below, _), (_, n) in itertools.pairwise(STEPS_BY_CHARGE)
    )
    return (
        f"by the electrons (valence ones with --ecp): {', '.join(parts)}; with an all-electron "
        f"nucleus at least {nuclei}; times K - 1 (at least 1.5) with --states K; twice as "
        "many for a crystal (--lattice)"
    )


def describe_soft_core() -> str:
    """The softening rule in words (``--help``)."""
    (small, first), (_, second) = SOFT_CORE_BY_CORE
    return f"{first:g} for ECP cores of up to {int(small)} electrons, {second:g} for larger ones"


def describe_basis() -> str:
    """The basis rule in words (``--help``)."""
    return f"{DEFAULT_BASIS}; {STATES_BASIS} with --states 2 or more (all-electron)"


def describe() -> str:
    """The walkers rule in words (``--help``)."""
    parts = [
        f"{n} for heavier nuclei" if charge == float("inf") else f"{n} up to Z = {int(charge)}"
        for charge, n in WALKERS_BY_CHARGE
    ]
    return f"by the heaviest nucleus: {', '.join(parts)}; {ECP_WALKERS} with --ecp"


def for_system(config: Config) -> Config:
    """``sized`` for ``config``'s own system (read from ``config``)."""
    from psijax.system.parse import for_config

    return sized(config, for_config(config))
