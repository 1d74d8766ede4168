"""Name -> implementation tables: the only place where a name picks an implementation.

Every table maps a name the user may give (``--ansatz psiformer``) to an ``Entry``: the
implementation's factory as ``"module:attribute"``, imported the first time it is used,
so that config validation and ``psijax --help`` read the names (and each entry's
defaults, such as an optimiser's learning rate) without importing JAX. An entry may also
hold the factory itself (a test adds a term so). Each factory has its table's signature:

    ANSATZES     factory(molecule, config) -> Ansatz
    PERIODIC_ANSATZES  the same, for the electron gas (a periodic cell without nuclei)
    CRYSTAL_ANSATZES   the same, for a crystal (nuclei in a periodic cell)
    OPTIMIZERS   factory(config) -> Optimizer                (entry: its learning rate)
    LAPLACIANS   factory(n_electrons) -> LaplacianOperator   (entry: or no argument)
    SAMPLERS     factory(config, molecule, **settings) -> Sampler
    HAMILTONIAN  factory(molecule, config) -> Term, or None where it does not apply;
                 every entry is a term of every run's Hamiltonian, in this order
    OBSERVABLES  factory(molecule, network) -> Observable    (evaluation; energy is always on)

Adding an ansatz, optimiser, Laplacian operator, sampler, Hamiltonian term or observable
is one new module with its factory and one line here; docs/architecture.md shows each.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from psijax.errors import InputError

if TYPE_CHECKING:
    from psijax.config import Config
    from psijax.system import Molecule


@dataclasses.dataclass(frozen=True)
class Entry:
    """An implementation by name: ``target`` is ``"module:attribute"`` or the factory."""

    target: str | Callable[..., Any]
    learning_rate: float | None = None  # optimisers: the default learning rate
    sized: bool = True  # Laplacian operators: the factory takes the electron count

    def load(self) -> Callable[..., Any]:
        if callable(self.target):
            return self.target
        module, _, attribute = self.target.partition(":")
        value: Any = importlib.import_module(module)
        for name in attribute.split("."):
            value = getattr(value, name)
        return value


ANSATZES: dict[str, Entry] = {
    "ferminet": Entry("psijax.ansatz.ferminet:from_config"),
    "psiformer": Entry("psijax.ansatz.psiformer:from_config"),
}
# The ansaetze of a periodic system (one with a ``lattice``), by the same names: the
# electron gas's, and a crystal's (nuclei in the cell).
PERIODIC_ANSATZES: dict[str, Entry] = {
    "ferminet": Entry("psijax.ansatz.periodic:from_config"),
}
CRYSTAL_ANSATZES: dict[str, Entry] = {
    "ferminet": Entry("psijax.ansatz.crystal:from_config"),
}
# What a run solves for: the ground state, or the lowest K states as one wavefunction.
EIGENSTATES = (Entry("psijax.eigenstates:GroundState"), Entry("psijax.eigenstates:LowestStates"))
# Several states: one network whose determinants the states share out ("shared", K network
# evaluations per walker), or an independent network per state ("separate", K^2)
STATES_NETWORKS = ("shared", "separate")
OPTIMIZERS: dict[str, Entry] = {
    "spring": Entry("psijax.optim.spring:from_config", learning_rate=0.02),
    "march": Entry("psijax.optim.march:from_config", learning_rate=0.02),
    "adam": Entry("psijax.optim.adam:from_config", learning_rate=3e-3),
}
LAPLACIANS: dict[str, Entry] = {
    "default": Entry("psijax.laplacian:default_operator"),
    "forward": Entry("psijax.laplacian.operators:Forward", sized=False),
    "forward-sparse": Entry("psijax.laplacian.operators:ForwardSparse", sized=False),
    "loop": Entry("psijax.laplacian.operators:Loop", sized=False),
    "hessian": Entry("psijax.laplacian.operators:Hessian", sized=False),
}
SAMPLERS: dict[str, Entry] = {
    "metropolis": Entry("psijax.sampling.metropolis:from_config"),
    "scaled-metropolis": Entry("psijax.sampling.metropolis:scaled_from_config"),
}
HAMILTONIAN: dict[str, Entry] = {
    "kinetic": Entry("psijax.hamiltonian.kinetic:from_config"),
    "coulomb": Entry("psijax.hamiltonian.coulomb:from_config"),
    "periodic_coulomb": Entry("psijax.hamiltonian.ewald:from_config"),
    "ecp_local": Entry("psijax.hamiltonian.ecp:local_from_config"),
    "ecp_nonlocal": Entry("psijax.hamiltonian.ecp:nonlocal_from_config"),
}
OBSERVABLES: dict[str, Entry] = {
    "spin": Entry("psijax.estimators.spin:from_config"),
    "dipole": Entry("psijax.estimators.dipole:from_config"),
    "forces": Entry("psijax.estimators.forces:from_config"),
}


def eigenstates(config: Config):
    """What the run solves for (``psijax.eigenstates``): the ground state, or the lowest
    ``config.states`` states at once."""
    ground, lowest = EIGENSTATES
    if config.states == 1:
        return ground.load()()
    return lowest.load()(config.states, shared=config.states_network == "shared")


def ansatz(molecule: Molecule, config: Config):
    """The wavefunction ``config.ansatz`` for ``molecule``, as the run trains it: with
    ``config.states`` > 1 the total wavefunction of that many copies of it. A periodic
    system takes its ansatz from ``PERIODIC_ANSATZES`` (the electron gas) or
    ``CRYSTAL_ANSATZES``."""
    table = ANSATZES
    if getattr(molecule, "lattice", None) is not None:
        table = CRYSTAL_ANSATZES if molecule.n_atoms else PERIODIC_ANSATZES
    if config.ansatz not in table:
        raise InputError(
            f"ansatz={config.ansatz!r} has no periodic form; for a periodic system use one of "
            f"{', '.join(table)}"
        )
    return eigenstates(config).network(table[config.ansatz].load()(molecule, config))


def optimizer(config: Config):
    """The optimiser ``config.optimizer`` (``psijax.optim.Optimizer``)."""
    return OPTIMIZERS[config.optimizer].load()(config)


def learning_rate(config: Config) -> float:
    """The run's learning rate: the config's, else its optimiser's default."""
    if config.learning_rate is not None:
        return config.learning_rate
    return OPTIMIZERS[config.optimizer].learning_rate


def laplacian(name: str, n_electrons: int):
    """The Laplacian operator ``name`` for walkers of ``n_electrons`` electrons."""
    entry = LAPLACIANS[name]
    return entry.load()(n_electrons) if entry.sized else entry.load()()


def sampler(config: Config, molecule: Molecule, **settings):
    """The sampler ``config.sampler`` for ``molecule``'s electrons; ``settings`` override the
    config's (e.g. ``adapt=False`` for a frozen wavefunction, pretraining's own moves and
    width)."""
    return SAMPLERS[config.sampler].load()(config, molecule, **settings)


def hamiltonian_terms(molecule: Molecule, config: Config) -> tuple:
    """The terms of ``HAMILTONIAN`` that apply to ``molecule`` under ``config``, in order."""
    terms = (entry.load()(molecule, config) for entry in HAMILTONIAN.values())
    return tuple(t for t in terms if t is not None)


def observable(name: str, molecule: Molecule, network=None):
    """The evaluation observable ``name``; ``network`` (an ansatz with ``at(nuclei)``) gives
    the forces their Pulay term."""
    return OBSERVABLES[name].load()(molecule, network)
