"""Initial walkers: electrons placed around the nuclei they belong to.

Walkers are ``[walker, electron, 3]`` in bohr, spin-up electrons first.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from psijax.system import Molecule
from psijax.types import Array, Walkers


def electrons_per_atom(molecule: Molecule) -> tuple[np.ndarray, np.ndarray]:
    """(up, down) electron counts per atom: ~Z per atom, spins alternating and balanced.

    Ions take electrons from the atoms holding the most (added to those holding the fewest);
    spins then move between atoms' pairs until the totals are exactly n_up and n_down.
    """
    z = np.rint(molecule.nuclear_charges).astype(int)
    count = z.copy()
    for _ in range(max(molecule.charge, 0)):  # cation: remove from the fullest (largest Z)
        count[np.lexsort((-z, -count))[0]] -= 1
    for _ in range(max(-molecule.charge, 0)):  # anion: add to the emptiest (smallest Z)
        count[np.lexsort((z, count))[0]] += 1
    up = count // 2
    down = count - up
    while up.sum() < molecule.n_up:  # flip a down electron where down is most in excess
        i = int(np.argmax(np.where(down > 0, down - up, np.iinfo(int).min)))
        up[i], down[i] = up[i] + 1, down[i] - 1
    while up.sum() > molecule.n_up:  # flip an up electron where up is most in excess
        i = int(np.argmax(np.where(up > 0, up - down, np.iinfo(int).min)))
        up[i], down[i] = up[i] - 1, down[i] + 1
    return up, down


def init_walkers(
    key: Array,
    molecule: Molecule,
    n_walkers: int,
    *,
    spread: float = 1.0,
    dtype: jnp.dtype = jnp.float32,
) -> Walkers:
    """Walkers ``[n_walkers, n_electrons, 3]``: nucleus + spread * N(0, 1), spin up first;
    in a periodic cell without nuclei (the electron gas), uniform over the cell."""
    if molecule.lattice is not None and not molecule.n_atoms:
        return _uniform_walkers(key, molecule.lattice.matrix, n_walkers, molecule.n_electrons,
                                jnp.dtype(dtype))  # fmt: skip
    up, down = electrons_per_atom(molecule)
    atoms = np.arange(molecule.n_atoms)
    owner = np.concatenate([np.repeat(atoms, up), np.repeat(atoms, down)])
    centers = np.asarray(molecule.nuclear_positions[owner])
    gaussian = _gaussian_walkers
    if isinstance(key, jax.core.Tracer):  # inside jit: nested jits take no compiler options
        gaussian = _gaussian_walkers.__wrapped__
    return gaussian(key, centers, n_walkers, float(spread), jnp.dtype(dtype))


# One small program compiled at level 0: a launch-time cost, not a hot-loop one.
@functools.partial(
    jax.jit, static_argnums=(2, 3, 4), compiler_options={"xla_backend_optimization_level": 0}
)
def _gaussian_walkers(key: Array, centers: np.ndarray, n_walkers: int, spread: float, dtype):
    noise = jax.random.normal(key, (n_walkers, *centers.shape), dtype)
    return centers.astype(dtype) + jnp.asarray(spread, dtype) * noise


@functools.partial(jax.jit, static_argnums=(2, 3, 4))
def _uniform_walkers(key: Array, vectors: np.ndarray, n_walkers: int, n: int, dtype):
    fractions = jax.random.uniform(key, (n_walkers, n, 3), dtype)
    return fractions @ jnp.asarray(vectors, dtype)
