"""What the training step reports, declared in one place.

An estimator turns what one step computed (``StepValues``: the walkers' local-energy
statistics, the sampler's statistics, the update's fate) into named scalars. Each
declares its columns with unit, meaning and how the progress line shows them; the
step's metrics, the columns of metrics.csv and the progress line all come from
``TRAINING`` (docs/outputs.md lists the same columns, checked by a test). A new
quantity is one estimator appended there; the step, writer and display do not change.
Evaluation's per-walker observables (energy parts, S^2, dipole, forces) live in
``psijax.estimators.observables``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from psijax.types import Array, Params, Walkers

if TYPE_CHECKING:  # the progress display reads this module: keep optax and the step out
    from psijax.optim.gradient import EnergyStats
    from psijax.sampling import MCMCStats


class StepValues(NamedTuple):
    """Everything one training step computed that an estimator may read."""

    params: Params  # after the update (or the old ones if it was rejected)
    walkers: Walkers  # [walker, electron, 3] after the moves
    energy: EnergyStats  # of the local energies at those walkers
    moves: MCMCStats
    width: Array  # the sampler's proposal scale after the step (``Sampler.width``)
    n_reset: Array  # walkers restarted from a healthy one
    accepted: Array  # bool: the update was kept
    grads: Params  # the energy gradient before the optimiser


@dataclasses.dataclass(frozen=True)
class Column:
    name: str
    unit: str
    meaning: str
    show: str | None = None  # the progress line's format, e.g. "var {:.4f}"; None: hidden


@dataclasses.dataclass(frozen=True)
class Estimator:
    """``values(step) -> {column: scalar}`` for the declared ``columns``."""

    name: str
    columns: tuple[Column, ...]
    values: Callable[[StepValues], dict[str, Array]]


def _energy(v: StepValues) -> dict[str, Array]:
    return {"energy": v.energy.energy, "variance": v.energy.variance}


def _sampling(v: StepValues) -> dict[str, Array]:
    return {"acceptance": v.moves.acceptance, "width": v.width}


def _health(v: StepValues) -> dict[str, Array]:
    import optax

    dtype = v.energy.energy.dtype
    return {
        "nonfinite_walkers": v.energy.n_nonfinite,
        "reset_walkers": v.n_reset.astype(dtype),
        "rejected": (~v.accepted).astype(dtype),
        "grad_norm": optax.tree.norm(v.grads),
    }


TRAINING: tuple[Estimator, ...] = (
    Estimator("energy", (
        Column("energy", "Ha", "mean local energy of the step's walkers (non-finite local "
               "energies left out); the estimate at the end is a blocking analysis of this "
               "column's trailing `eval_fraction`", "step E {:.5f}"),
        Column("variance", "Ha²", "variance of the step's local energies over the walkers "
               "(zero for an exact eigenstate)", "var {:.4f}"),
    ), _energy),
    Estimator("sampling", (
        Column("acceptance", "fraction, 0–1", "accepted / proposed MCMC moves in the step, "
               "over all walkers and moves", "acc {:.2f}"),
        Column("width", "bohr", "standard deviation of the Gaussian MCMC proposal after the "
               "step (adapted towards 50% acceptance)"),
    ), _sampling),
    Estimator("health", (
        Column("nonfinite_walkers", "count", "walkers whose local energy was nan or inf (left "
               "out of the step's statistics and gradient)"),
        Column("reset_walkers", "count", "walkers whose position or log\\|psi\\| was not "
               "finite and were restarted from a healthy walker"),
        Column("rejected", "0 or 1", "1 if the step's update was rejected (non-finite energy, "
               "gradient or parameters; the parameters stay); `--max-rejected` (20) in a row "
               "stop the run with exit code 3"),
        Column("grad_norm", "Ha per unit of the parameters", "Euclidean norm of the energy "
               "gradient over all parameters, before the optimiser"),
    ), _health),
)  # fmt: skip


def columns(estimators: tuple[Estimator, ...] = TRAINING) -> tuple[Column, ...]:
    return tuple(c for e in estimators for c in e.columns)


def metrics(estimators: tuple[Estimator, ...], values: StepValues) -> dict[str, Array]:
    """Every estimator's columns, in declaration order; a missing or extra column is a bug
    in that estimator and fails at trace time."""
    import jax.numpy as jnp

    out: dict[str, Array] = {}
    for est in estimators:
        got = est.values(values)
        want = [c.name for c in est.columns]
        if sorted(got) != sorted(want):
            raise ValueError(f"estimator {est.name!r} gave {sorted(got)}, declared {want}")
        out.update({name: jnp.asarray(got[name]) for name in want})
    return out


# Several states (``psijax.ansatz.states``): the step's mean local energy matrix, element by
# element; the host adds each state's energy (its eigenvalues, ``state_columns``).
def energy_matrix(k: int) -> Estimator:
    from psijax.statistics.states import matrix_names

    names = [(n // k, n % k, name) for n, name in enumerate(matrix_names("energy", k))]
    cols = tuple(
        Column(name, "Ha", f"element ({i}, {j}) of the step's mean local energy matrix of the "
               f"{k} states (rows: states; its eigenvalues are the states' energies)")
        for i, j, name in names
    )  # fmt: skip

    def values(v: StepValues) -> dict[str, Array]:
        from psijax.hamiltonian.states import MATRIX

        m = v.energy.aux[MATRIX]
        return {name: m[i, j] for i, j, name in names}

    return Estimator("energy_matrix", cols, values)


def state_columns(k: int) -> tuple[Column, ...]:
    """Each state's energy in one step: the eigenvalues of its energy matrix (on the host)."""
    return tuple(
        Column(f"energy_state_{i}", "Ha", f"energy of state {i} (0: the lowest) in the step: "
               "eigenvalue of the step's mean energy matrix", f"E{i} {{:.4f}}")
        for i in range(k)
    )  # fmt: skip
