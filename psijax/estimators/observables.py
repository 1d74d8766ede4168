"""Observables of a frozen wavefunction: per-walker values, averaged over walkers and steps.

The energy and its components are always evaluated: they are the Hamiltonian's
(``psijax.hamiltonian``), the same terms training uses. Every other observable is named
in ``psijax.registry.OBSERVABLES`` (``spin``: <S^2>, ``dipole``, ``forces``) and is a frozen
dataclass with a ``name``, the ``columns`` it adds to the evaluation's metrics and a
``local(walker, parts)`` method mapping one walker (``psijax.hamiltonian.Walker``: psi and
log|psi|'s derivatives, computed once for every observable) and the walker's energy parts
to one value per column (Hartree atomic units). Averaging, error bars and values derived
from the averages (``derived``) are the same for every observable.

Columns whose name starts with ``_`` are per-walker intermediates that ``combine`` turns
into a step's value (the forces' Pulay covariance); they are not written anywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from psijax import registry
from psijax.errors import InputError

if TYPE_CHECKING:  # the names are read without JAX (evaluation's settings, the CLI)
    from psijax.hamiltonian import Hamiltonian, Walker
    from psijax.system import Molecule
    from psijax.types import Array, Params

ENERGY = "energy"  # always on: the Hamiltonian's energy and components
DEFAULT = (ENERGY, *registry.OBSERVABLES)


class Observable(Protocol):
    name: str

    @property
    def columns(self) -> tuple[str, ...]: ...

    def local(self, walker: Walker, parts: dict[str, Array]) -> dict[str, Array]:
        """One value per column for one walker; ``parts`` are its energy and components."""

    def derived(self, means: dict[str, Any]) -> dict[str, Any]:
        """Values derived from the columns' estimates (``{"mean", "error", "unit"}``)."""


def parse(names: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """Observable names from user input ('spin,dipole' or a list); energy is always on."""
    if names is None:
        return DEFAULT
    if isinstance(names, str):
        names = [names]
    flat = [n.strip() for item in names for n in str(item).split(",") if n.strip()]
    for name in flat:
        if name not in DEFAULT:
            raise InputError(f"unknown observable {name!r}; choose from {', '.join(DEFAULT)}")
    return (ENERGY, *dict.fromkeys(n for n in flat if n != ENERGY))


def build(names: tuple[str, ...], molecule: Molecule, network=None) -> tuple[Observable, ...]:
    """The observables ``names`` beyond the energy; ``network`` (an ansatz with
    ``at(nuclei)``) gives the forces their Pulay term. An observable whose factory gives
    none has no meaning for the system (the dipole and forces of the electron gas): left
    out of the defaults, refused when named."""
    built = []
    for name in names:
        observable = None if name == ENERGY else registry.observable(name, molecule, network)
        if observable is not None:
            built.append(observable)
        elif name != ENERGY and names != DEFAULT:
            raise InputError(
                f"observable {name!r} has no meaning for this system; leave it out of --observables"
            )
    return tuple(built)


def columns(hamiltonian: Hamiltonian, observables: tuple[Observable, ...]) -> tuple[str, ...]:
    """Every column an evaluation writes per step, before its statistics columns."""
    return (*hamiltonian.columns, *(c for o in observables for c in o.columns))


def combine(observables: tuple[Observable, ...], means: dict[str, Array], n: Array):
    """One step's values from its walker means: every public column, plus what the
    observables compute from several means (the forces' Pulay covariance)."""
    out = {k: v for k, v in means.items() if not k.startswith("_")}
    for o in observables:
        if hasattr(o, "combine"):
            out |= o.combine(means, n)
    return out


def local_values(
    hamiltonian: Hamiltonian, psi: object, observables: tuple[Observable, ...]
) -> Callable[[Params, Array, Array | None], dict[str, Array]]:
    """``local(params, r, key=None) -> {column: value}`` for one walker: the energy and its
    components, then every observable, from one ``Walker`` (psi's derivatives once)."""

    def local(params: Params, r: Array, key: Array | None = None) -> dict[str, Array]:
        walker = hamiltonian.walker(psi, params, r, key)
        values = hamiltonian.parts(walker)
        for o in observables:
            values = values | o.local(walker, values)
        return values

    return local
