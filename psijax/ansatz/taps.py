"""Taps on the weight-shared dense layers of an ansatz, for SPRING's jacobian in factors.

A dense layer ``z = x @ w`` applied to K rows of one walker (K electrons) has the
per-walker gradient ``d log|psi| / d w = sum_k x_k g_k^T`` with ``g_k = d log|psi| / d z_k``:
a sum of K outer products. SPRING only needs that gradient's products with other walkers'
(the Gram matrix) and with vectors, and those follow from the rows ``x`` and the signals
``g`` alone, without forming the ``[din, dout]`` gradient of every walker
(``psijax.optim.jacobian.Factored``).

An ansatz that supports this computes such layers through ``dense(x, w, taps, path)``
with ``path`` the weight's key path in its parameters (``("layers", 1, "one", "w")``)
and offers ``log_abs_tapped(params, r, taps)``. With ``taps`` None ``dense`` is ``x @ w``;
with a ``Taps`` it also keeps ``x`` and adds the tap's zero perturbation to ``z`` (for the
paths the ``Taps`` holds), so that the gradient with respect to the perturbation is ``g``.
"""

from __future__ import annotations

from psijax.types import Array

Path = tuple  # of str (dict keys) and int (list indices), as in the parameters


class Taps:
    """Zero perturbations to add, by path (None: only record), and the inputs seen.

    Made afresh inside the function being differentiated: ``inputs`` holds that trace's
    values and is returned from it (as ``jax.grad``'s aux), never kept beyond it.
    """

    def __init__(self, perturbations: dict[Path, Array] | None = None):
        self.perturbations = perturbations
        self.inputs: dict[Path, Array] = {}
        self.weights: dict[Path, tuple[int, ...]] = {}  # the tapped weights' shapes

    def tap(self, path: Path, x: Array, w: Array, z: Array) -> Array:
        if self.perturbations is None:
            self.inputs[path] = x
            self.weights[path] = tuple(w.shape)
            return z
        if path not in self.perturbations:
            return z
        self.inputs[path] = x
        return z + self.perturbations[path]


def dense(x: Array, w: Array, taps: Taps | None, path: Path) -> Array:
    """``x @ w``, tapped at ``path`` when ``taps`` is given (module doc)."""
    z = x @ w
    return z if taps is None else taps.tap(path, x, w, z)
