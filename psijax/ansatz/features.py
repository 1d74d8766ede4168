"""Input features every ansatz starts from, for one walker ``r: [n, 3]``.

Distances are rescaled by log(1 + r) / r so that far electrons do not saturate the
network, the scaling FermiNet and PsiFormer share. Distances to a nucleus with an
effective core potential are softened (``soft_core``): the valence wavefunction has no
cusp there, and |r - R|'s kink would have to be learnt away. Electron-electron distances use a
shifted diagonal so that their gradient exists where r_ii = 0.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from psijax.types import Array


def nuclei_array(nuclei, dtype) -> Array:
    """The nuclear positions ``[atoms, 3]``: a static tuple, or a (traced) array when a
    derivative with respect to them is wanted (see ``MolecularAnsatz.at``)."""
    if isinstance(nuclei, jax.Array):
        return nuclei.astype(dtype)
    return jnp.asarray(np.asarray(nuclei), dtype)


def electron_nucleus(
    r: Array, nuclei: Array, soft_core: tuple[float, ...] = ()
) -> tuple[Array, Array]:
    """Rescaled vectors and distances to each nucleus, ``[n, 4 * atoms]``, and the plain
    distances ``[n, atoms]`` (for the envelopes). ``soft_core`` (bohr, one per atom, or
    empty): the distance to that nucleus is sqrt(|r - R|^2 + a^2), smooth at R, for a
    nucleus without a cusp (an effective core potential's)."""
    n = r.shape[0]
    ae = r[:, None, :] - nuclei[None, :, :]  # [n, atoms, 3]
    if any(soft_core):
        a2 = jnp.asarray(np.square(soft_core), r.dtype)[None, :, None]
        r_ae = jnp.sqrt(jnp.sum(ae * ae, axis=-1, keepdims=True) + a2)
    else:
        r_ae = jnp.linalg.norm(ae, axis=-1, keepdims=True)
    scale = jnp.log1p(r_ae) / r_ae
    h1 = jnp.concatenate([ae * scale, r_ae * scale], axis=-1).reshape(n, -1)
    return h1, r_ae[..., 0]


def electron_electron(r: Array) -> tuple[Array, Array]:
    """Rescaled vectors and distances between electrons ``[n, n, 4]`` and the plain
    distances ``[n, n]`` (0 on the diagonal, with a finite gradient there)."""
    n = r.shape[0]
    ee = r[:, None, :] - r[None, :, :]  # [n, n, 3]
    eye = jnp.eye(n, dtype=r.dtype)
    r_ee = jnp.linalg.norm(ee + eye[..., None], axis=-1, keepdims=True) * (1.0 - eye[..., None])
    r_shift = r_ee + eye[..., None]  # on the diagonal the shifted norm is 1: no 0/0
    scale = jnp.log1p(r_shift) / r_shift
    h2 = jnp.concatenate([ee * scale, r_ee * scale], axis=-1)
    return h2, r_ee[..., 0]
