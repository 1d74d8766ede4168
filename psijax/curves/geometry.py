"""Moving nuclei on noisy forces: the internal space of a geometry (rigid translations and
rotations removed), forces with error bars in it, and quasi-Newton steps that trust only
what the error bars support (``next_geometry``).

The optimiser is BFGS in Cartesian coordinates restricted to the internal space, chosen
for forces that carry Monte Carlo noise:

- the Hessian is the bond model of ``psijax.curves.model_hessian`` at the current
  geometry (Schlegel's rules: anharmonic, so one step from a stretched bond lands near
  its equilibrium), with a BFGS update from each of the last ``MEMORY`` pairs of
  consecutive geometries that moved no coordinate more than ``LOCAL`` bohr (a secant over
  a longer step measures the average curvature along it, not the curvature here) and
  whose curvature along the step, s.(F_old - F_new), is positive and larger than
  ``SIGNIFICANT`` times its error bar (otherwise noise would set it);
- every step is the model's Newton step, shortened so that no nucleus moves more than the
  trust radius;
- the steps are a function of the whole history (the geometries, forces and error bars of
  every cycle so far), so a relaxation that stopped replays them and continues exactly.

Stochastic gradient descent with a decaying step, the other common choice, needs a step
size tuned per molecule and converges as 1/k in the cycles; a model Hessian with
noise-gated secant updates takes near-Newton steps from the first cycle on, and each cycle
costs a compilation and an evaluation, so fewer cycles is what makes a relaxation cost a
few single-point runs rather than tens.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence

import numpy as np

from psijax.curves.model_hessian import model_hessian
from psijax.statistics import blocking_estimate

TRUST_RADIUS = 0.3  # bohr: the most a nucleus moves in one step
SIGNIFICANT = 3.0  # error bars a curvature must exceed to update the Hessian
MEMORY = 3  # the latest steps whose secants update the model
LOCAL = 0.15  # bohr: the longest step whose secant is trusted


@dataclasses.dataclass(frozen=True)
class Forces:
    """Forces on the nuclei at one geometry, projected on its internal space (Ha/bohr):
    ``values`` and ``errors`` ``[atoms, 3]``; ``errors`` are each projected component's
    blocking error over the evaluation's steps."""

    coords: np.ndarray  # [atoms, 3] bohr
    values: np.ndarray
    errors: np.ndarray

    @property
    def largest(self) -> tuple[float, float]:
        """(the largest force on a nucleus, its error bar), Ha/bohr."""
        norms = np.linalg.norm(self.values, axis=-1)
        a = int(np.argmax(norms))
        unit = self.values[a] / max(norms[a], 1e-300)
        return float(norms[a]), float(np.sqrt(np.sum((unit * self.errors[a]) ** 2)))

    def zero_within_errors(self, tolerance: float, bars: float = 2.0) -> bool:
        """Every component within ``bars`` error bars of zero, and every error bar at most
        ``tolerance`` (so that "zero" means something)."""
        return bool(
            np.all(np.abs(self.values) <= bars * self.errors) and np.all(self.errors <= tolerance)
        )

    def clearly_nonzero(self, bars: float = 3.0) -> bool:
        """Some component more than ``bars`` error bars from zero."""
        return bool(np.any(np.abs(self.values) > bars * self.errors))


def rigid_modes(coords: np.ndarray) -> np.ndarray:
    """``[modes, 3 * atoms]``: an orthonormal basis of the rigid translations and rotations
    of ``coords`` (5 for a linear molecule, 6 otherwise)."""
    coords = np.asarray(coords, np.float64)
    centred = coords - coords.mean(axis=0)
    vectors = [np.tile(np.eye(3)[c], (len(coords), 1)).reshape(-1) for c in range(3)]
    vectors += [np.cross(np.eye(3)[c], centred).reshape(-1) for c in range(3)]
    u, s, _ = np.linalg.svd(np.asarray(vectors).T, full_matrices=False)
    return u[:, s > 1e-8 * s.max()].T


def projector(coords: np.ndarray) -> np.ndarray:
    """``[3N, 3N]``: the projection onto the internal space of ``coords``."""
    modes = rigid_modes(coords)
    return np.eye(modes.shape[1]) - modes.T @ modes


def internal_dimension(coords: np.ndarray) -> int:
    """Degrees of freedom left once translations and rotations are removed."""
    coords = np.asarray(coords)
    return 3 * len(coords) - len(rigid_modes(coords))


def project(coords: np.ndarray, series: np.ndarray) -> Forces:
    """``series [steps, atoms, 3]``: one force per evaluation step (walker means) -> the
    mean projected forces with blocking error bars per component.

    The forces on all nuclei sum to zero in expectation (psi depends on the electrons'
    positions relative to the nuclei, so moving every nucleus and electron alike changes
    no energy), and the estimators of different atoms are not equally noisy: an atom with
    an ECP, or a heavy one, carries many times the variance of a hydrogen. Per Cartesian
    direction each step's sum is therefore taken out of the atoms in proportion to the
    variance of their forces over the steps (the best linear unbiased estimate under that
    constraint for independent atoms): equal variances give the plain projection, and an
    atom far noisier than the rest is estimated as minus the sum of their forces. The
    rotations are then projected out orthogonally."""
    p = projector(coords)
    steps = np.asarray(series, np.float64)
    if len(steps) > 1 and steps.shape[1] > 1:
        variance = steps.var(axis=0)  # [atoms, 3]
        total = variance.sum(axis=0)
        share = np.where(total > 0, variance / np.where(total > 0, total, 1.0),
                         1.0 / steps.shape[1])  # fmt: skip
        steps = steps - share * steps.sum(axis=1, keepdims=True)
    steps = steps.reshape(len(steps), -1) @ p
    estimates = [blocking_estimate(steps[:, i]) for i in range(steps.shape[1])]
    shape = np.asarray(coords).shape
    values = np.array([e.mean for e in estimates]).reshape(shape)
    errors = np.array([e.error for e in estimates]).reshape(shape)
    return Forces(np.asarray(coords, np.float64), values, errors)


def hessian(history: Sequence[Forces], symbols: Sequence[str]) -> np.ndarray:
    """``[3N, 3N]``: the model Hessian at the history's last geometry (module docstring)."""
    last = history[-1]
    h = model_hessian(symbols, last.coords)
    for before, after in list(itertools.pairwise(history))[-MEMORY:]:
        s = (after.coords - before.coords).reshape(-1)
        if np.max(np.abs(s)) > LOCAL:
            continue
        y = (before.values - after.values).reshape(-1)  # the gradient's change: -dF
        noise = np.sqrt(np.sum(s**2 * (before.errors**2 + after.errors**2).reshape(-1)))
        curvature = float(s @ y)
        if curvature <= SIGNIFICANT * noise:
            continue
        hs = h @ s
        h = h + np.outer(y, y) / curvature - np.outer(hs, hs) / float(s @ hs)
    p = projector(last.coords)
    return p @ h @ p


def next_geometry(
    history: Sequence[Forces], symbols: Sequence[str], *, trust: float = TRUST_RADIUS
) -> np.ndarray:
    """The next geometry ``[atoms, 3]`` from the history's last: the model's Newton step,
    no nucleus moved more than ``trust`` bohr."""
    last = history[-1]
    h = hessian(history, symbols)
    p = projector(last.coords)
    force = p @ last.values.reshape(-1)
    values, vectors = np.linalg.eigh(h)
    keep = values > 1e-8 * max(values.max(), 1e-300)
    step = vectors[:, keep] @ ((vectors[:, keep].T @ force) / values[keep])
    step = step.reshape(last.coords.shape)
    largest = float(np.max(np.linalg.norm(step, axis=-1)))
    if largest > trust:
        step *= trust / largest
    return last.coords + step
