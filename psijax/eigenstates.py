"""What a run solves for: the ground state, or the lowest K states at once.

A run of ``states = K > 1`` trains one wavefunction of K copies of the electrons
(``psijax.ansatz.states``, natural excited states) whose local energy is a K x K matrix
(``psijax.hamiltonian.states``); its metrics carry that matrix, its evaluation measures
matrices (``psijax.estimators.states``), its end resolves them into the states
(``psijax.statistics.states``) and its pretraining fits K configurations
(``psijax.training.pretrain_states``). Everything that differs goes through one object of
this module, built by ``psijax.registry.eigenstates(config)``: ``GroundState`` or
``LowestStates``. Training, evaluation, ``psijax.load``, the report and the dry run call
its adapters and never ask how many states there are.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Protocol

from psijax.estimators import training as training_estimators
from psijax.registry import Entry

# metrics.csv: the step, every training estimator's columns, the wall time.
COLUMNS = ("step", *(c.name for c in training_estimators.columns()), "seconds")
# Pretraining is the training layer's: named, as the registry names implementations above it.
_PRETRAIN = Entry("psijax.training.pretrain:pretrain")
_PRETRAIN_STATES = Entry("psijax.training.pretrain_states:pretrain")


class Eigenstates(Protocol):
    """What a run solves for, and everything that depends on it (module docstring)."""

    n_states: int  # K: the walkers hold K copies of the electrons
    label: str  # what the run's energy is, in a report: "training", "training (sum)"
    header: str  # the run's header line's words about the states
    progress_label: str  # what the progress line's running estimate is of: "E", "sum E"
    exact_words: str  # what the molecule's exact energy is of, where not of the run's

    def network(self, net): ...  # the wavefunction trained, from the ansatz
    def local_energy(self, hamiltonian, network): ...  # the step's local energy
    def estimators(self) -> tuple: ...  # the training step's metrics
    def progress_columns(self) -> tuple: ...  # the progress line's first columns
    def columns(self) -> tuple[str, ...]: ...  # metrics.csv's columns
    def exact(self, molecule) -> float | None: ...  # the energy the run compares with
    def with_states(self, metrics: dict) -> dict: ...  # a step's metrics, as written
    def check(self, molecule, config) -> None: ...  # refuse early what cannot be done
    def describe(self, molecule, config, hf=None) -> list[str]: ...  # the dry run's lines
    def pretrain(self, key, net, params, molecule, walkers, **settings): ...
    def tail(self, rows, fraction: float): ...  # each state's energy at the end, or None
    def plot(self, path, energies, exact, estimate, per_state, rows, system) -> None: ...
    def observed(self, names, hamiltonian, network, molecule, *, given: bool): ...
    def reported(self, names, molecule) -> tuple: ...  # observables, as a report reads them
    def default_observables(self, names: tuple[str, ...]) -> tuple[str, ...]: ...
    def energy_matrix(self, values: dict): ...  # [..., K, K] from per-walker values
    def report_lines(self, run, rows, config, energies, estimate, exact) -> list: ...


@dataclasses.dataclass(frozen=True)
class GroundState:
    """A run of the ground state alone."""

    n_states: int = 1

    def network(self, net):
        """The wavefunction trained: ``net`` itself."""
        return net

    def local_energy(self, hamiltonian, network):
        return hamiltonian.local_energy(network)

    def estimators(self) -> tuple:
        return training_estimators.TRAINING

    def columns(self) -> tuple[str, ...]:
        """metrics.csv's columns."""
        return COLUMNS

    def exact(self, molecule) -> float | None:
        """The exact energy the run's energy is compared with."""
        return molecule.exact_energy

    def with_states(self, metrics: dict[str, float]) -> dict[str, float]:
        """A step's metrics with what the host derives from them (nothing here)."""
        return metrics

    def check(self, molecule, config) -> None:
        """Refuse what cannot be solved for before anything is written (nothing here)."""

    def describe(self, molecule, config, hf=None) -> list[str]:
        """The dry run's lines about the states (none here)."""
        return []

    def pretrain(self, key, net, params, molecule, walkers, *, hf, basis, ready, note, **kw):
        """Hartree-Fock pretraining; (params, walkers, the losses of each fit)."""
        fit = _PRETRAIN.load()  # the training layer's, named as the registry names it
        params, walkers, losses = fit(
            key, net, params, molecule, walkers, basis=basis, hf=hf, ready=ready, **kw
        )
        return params, walkers, [losses]

    def tail(self, rows: list[dict[str, float]], fraction: float):
        """Each state's energy over the trailing ``fraction`` of the rows (None here)."""
        return None

    def plot(self, path: Path, energies, exact, estimate, per_state, rows, system: str) -> None:
        from psijax.rundir.plots import plot_energy

        plot_energy(path, energies, exact, estimate, system)

    def observed(self, names, hamiltonian, network, molecule, *, given: bool):
        """The evaluation's observables: (observed, per-walker values, metrics columns)."""
        from psijax.estimators import observables

        observed = observables.build(names, molecule, network)
        return (
            observed,
            observables.local_values(hamiltonian, network, observed),
            tuple(observables.columns(hamiltonian, observed)),
        )

    def reported(self, names, molecule) -> tuple:
        """The observables of an evaluation as ``psijax report`` summarises it."""
        from psijax.estimators import observables

        return observables.build(names, molecule)

    def default_observables(self, names: tuple[str, ...]) -> tuple[str, ...]:
        """Of the default observables, those an evaluation of these states measures."""
        return names

    def energy_matrix(self, values: dict):
        """The local energy matrix ``[..., K, K]`` from ``observed``'s per-walker values."""
        return values["energy"][..., None, None]

    def report_lines(self, run: Path, rows, config, energies, estimate, exact):
        """``psijax report``'s (name, text) lines after the training energy; redraws
        energy.png."""
        from psijax.statistics import tail_note

        self.plot(run / "energy.png", energies, exact, estimate, None, rows, config.system)
        note = tail_note(energies, estimate)
        return [] if note is None else [("tail", note)]

    @property
    def label(self) -> str:
        """What the run's energy is: the training line's label in a report."""
        return "training"

    @property
    def header(self) -> str:
        """The run's header line's words about the states."""
        return ""

    @property
    def progress_label(self) -> str:
        """What the progress line's running estimate is of."""
        return "E"

    def progress_columns(self) -> tuple:
        """The progress line's columns before the training estimators' own."""
        return ()

    @property
    def exact_words(self) -> str:
        """What the molecule's exact energy is the energy of, where it is not the run's."""
        return ""


@dataclasses.dataclass(frozen=True)
class LowestStates:
    """A run of the lowest ``n_states`` states as one wavefunction (natural excited
    states); its energy is their sum."""

    n_states: int = 2
    shared: bool = True  # one network for all states where the ansatz allows it

    def network(self, net):
        """The total wavefunction of K states of ``net`` (``psijax.ansatz.states``): with
        ``shared``, ``net`` itself where the ansatz splits its determinants into groups
        (``apply_groups``), its determinants shared out among the states (at least one
        each), so that evaluating all K states costs about what one state's network
        does; else K copies of ``net``."""
        from psijax.ansatz.states import SharedStates, States

        if self.shared and hasattr(net, "apply_groups"):
            each = self.determinants_per_state(net.n_determinants)
            split = dataclasses.replace(net, n_determinants=each * self.n_states)
            return SharedStates(split, self.n_states)
        return States(net, self.n_states)

    def determinants_per_state(self, n_determinants: int) -> int:
        """Each state's determinants of a network's ``n_determinants``: its share (at
        least one) on one shared network, all of them on a network of its own."""
        return max(1, n_determinants // self.n_states) if self.shared else n_determinants

    def local_energy(self, hamiltonian, network):
        from psijax.hamiltonian import states

        return states.local_energy(hamiltonian, network)

    def estimators(self) -> tuple:
        return (*training_estimators.TRAINING, training_estimators.energy_matrix(self.n_states))

    def columns(self) -> tuple[str, ...]:
        """With several states, each state's energy and the energy matrix follow the
        training columns."""
        k = self.n_states
        extra = [c.name for c in training_estimators.state_columns(k)]
        extra += [c.name for c in training_estimators.energy_matrix(k).columns]
        return (*COLUMNS[:-1], *extra, COLUMNS[-1])

    def exact(self, molecule) -> float | None:
        return None  # known for the ground state, not for a sum of states

    def with_states(self, metrics: dict[str, float]) -> dict[str, float]:
        from psijax.statistics import states as analysis

        return metrics | analysis.step_energies(metrics, self.n_states)

    def check(self, molecule, config) -> None:
        if config.pretrain_steps:
            check_basis = Entry("psijax.training.pretrain_states:check_basis").load()
            check_basis(molecule, self.n_states, config.basis)

    def describe(self, molecule, config, hf=None) -> list[str]:
        k = self.n_states
        lines = [
            f"states         the lowest {k}, as one wavefunction of {k} copies of the "
            "electrons (natural excited states)"
        ]
        if config.pretrain_steps and hf is not None:
            configurations = Entry("psijax.training.pretrain_states:configurations").load()
            per_state = self.determinants_per_state(config.determinants)
            targets = configurations(hf, k, config.basis, pair=per_state >= 2)
            lines.append(
                "pretraining    "
                + "; ".join(f"state {i}: {what}" for i, (what, *_) in enumerate(targets))
            )
        return lines

    def pretrain(self, key, net, params, molecule, walkers, *, hf, basis, ready, note, **kw):
        fit = _PRETRAIN_STATES.load()
        params, walkers, losses = fit(
            key, net, params, molecule, walkers, hf=hf, basis=basis, note=note, **kw
        )
        ready()  # (its programs compile as it goes: only after it)
        return params, walkers, losses

    def tail(self, rows: list[dict[str, float]], fraction: float):
        from psijax.statistics import states as analysis

        return analysis.tail(analysis.matrices_of(rows, self.n_states), fraction)

    def plot(self, path: Path, energies, exact, estimate, per_state, rows, system: str) -> None:
        from psijax.rundir.plots import plot_states
        from psijax.statistics import states as analysis

        matrices = analysis.matrices_of(rows, self.n_states)
        plot_states(path, analysis.per_step_energies(matrices), per_state, system)

    def observed(self, names, hamiltonian, network, molecule, *, given: bool):
        from psijax.estimators import states as state_observables

        total = self.local_energy(hamiltonian, network)
        observed = state_observables.build(names, total, molecule, given=given)
        return (observed,), observed.local, tuple(observed.columns)

    def reported(self, names, molecule) -> tuple:
        from psijax.estimators import states as state_observables

        return (state_observables.build(names, self.n_states, molecule, given=False),)

    def default_observables(self, names: tuple[str, ...]) -> tuple[str, ...]:
        from psijax.estimators import states as state_observables

        return tuple(n for n in names if n in state_observables.SUPPORTED)

    def energy_matrix(self, values: dict):
        import jax.numpy as jnp

        from psijax.statistics.states import matrix_names

        k = self.n_states
        names = matrix_names("energy", k)
        shape = values["energy"].shape
        return jnp.stack([values[n] for n in names], axis=-1).reshape(*shape, k, k)

    def report_lines(self, run: Path, rows, config, energies, estimate, exact):
        per_state = self.tail(rows, config.eval_fraction)
        self.plot(run / "energy.png", energies, exact, estimate, per_state, rows, config.system)
        return [(f"state {i}", f"{e} Ha") for i, e in enumerate(per_state)]

    @property
    def label(self) -> str:
        return "training (sum)"

    @property
    def header(self) -> str:
        return f"; the lowest {self.n_states} states"

    @property
    def progress_label(self) -> str:
        return "sum E"

    def progress_columns(self) -> tuple:
        return training_estimators.state_columns(self.n_states)  # each state's energy

    @property
    def exact_words(self) -> str:
        return " (ground state)"
