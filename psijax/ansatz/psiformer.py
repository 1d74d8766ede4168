"""PsiFormer for one walker (von Glehn, Spencer, Pfau, ICLR 2023).

Each electron starts from its rescaled vectors and distances to the nuclei and its spin
(+1 up, -1 down), projected to the model dimension. Every layer is multi-head self-attention
over all electrons and a tanh MLP, each added back to its input (residual), with optional
LayerNorm in front of both. Attention sees no electron-electron input: the
electron-electron cusp comes from the Jastrow factor exp(J) (``psijax.ansatz.jastrow``,
FermiNet's too), exact at r_ij = 0. The final features go through the shared orbital head
(envelopes, determinants) and psi = exp(J) * sum of dets.
Attention is equivariant under any permutation of electrons of the same spin, so psi is
antisymmetric. Like FermiNet, the inputs are vectors in the lab frame: psi is unchanged by
a common translation of electrons and nuclei, not by a rotation.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

from psijax.ansatz import features, taps
from psijax.ansatz import jastrow as cusp
from psijax.ansatz.base import MolecularAnsatz, nuclei_of, soft_core_of
from psijax.ansatz.head import envelope_floor
from psijax.types import Array, Normal, Params


@dataclasses.dataclass(frozen=True)
class PsiFormer(MolecularAnsatz):
    """The PsiFormer ansatz; all fields are static (they fix shapes).

    Attributes:
        n_up, n_down: electrons per spin; electrons ``[:n_up]`` are spin up.
        nuclei: nuclear positions in bohr, one (x, y, z) per atom.
        layers: number of self-attention layers.
        heads: attention heads per layer.
        head_dim: width of each head; the model dimension is ``heads * head_dim``.
        n_determinants, full_det: as in the orbital head.
        layer_norm: LayerNorm before attention and before the MLP.
        jastrow: multiply psi by the electron-electron cusp Jastrow factor.
        soft_core: per atom, the softening (bohr) of its distances (effective core
            potentials; empty: none).
        envelope_floor: the slowest envelope decay, 1/bohr (``head.ENVELOPE_FLOOR`` for a
            neutral or positive molecule's ground state; 0: none).
        matmul_precision: float32 products of every evaluation at this precision
            (``psijax.precision``; None: JAX's setting).
    """

    n_up: int
    n_down: int
    nuclei: tuple[tuple[float, float, float], ...]
    layers: int = 2
    heads: int = 4
    head_dim: int = 16
    n_determinants: int = 8
    full_det: bool = True
    layer_norm: bool = False
    jastrow: bool = True
    soft_core: tuple[float, ...] = ()  # per atom, bohr: see features.electron_nucleus
    envelope_floor: float = 0.0  # 1/bohr: see head.ENVELOPE_FLOOR
    matmul_precision: str | None = "highest"  # psijax.precision.PRECISIONS, as Config

    @property
    def model_dim(self) -> int:
        return self.heads * self.head_dim

    # ----------------------------------------------------------------- init

    def _init(self, normal: Normal, dtype) -> Params:
        d = self.model_dim

        def dense(n_in: int, n_out: int, bias: bool = False) -> dict:
            p = {"w": normal((n_in, n_out)) / math.sqrt(n_in)}
            if bias:
                p["b"] = normal((n_out,)) * 0.1
            return p

        def norm() -> dict:
            return {"scale": jnp.ones((d,), dtype), "offset": jnp.zeros((d,), dtype)}

        params: Params = {"embed": dense(4 * self.n_atoms + 1, d)}
        layers = []
        for _ in range(self.layers):
            layer = {
                "query": dense(d, d),
                "key": dense(d, d),
                "value": dense(d, d),
                "out": dense(d, d),
                "mlp": dense(d, d, bias=True),
            }
            if self.layer_norm:
                layer["norm_attention"], layer["norm_mlp"] = norm(), norm()
            layers.append(layer)
        params["layers"] = layers
        params["orbitals"] = self.head.init(normal, d, dtype)
        if self.jastrow:
            params["jastrow"] = cusp.init(dtype)
        return params

    # ------------------------------------------------------------- features
    def _features(
        self, params: Params, r: Array, tapped: taps.Taps | None = None
    ) -> tuple[Array, Array]:
        """Final electron features [n, model_dim] and electron-nucleus distances [n, atoms];
        ``tapped``: the layers' products are tapped (``psijax.ansatz.taps``)."""
        h_ae, r_ae = features.electron_nucleus(
            r, features.nuclei_array(self.nuclei, r.dtype), self.soft_core
        )
        # [h_ae, spin] @ W written as h_ae @ W[:-1] + spin W[-1]: concatenating a constant
        # column to the walker's features would stop folx's sparsity tracking here.
        spin = jnp.where(jnp.arange(self.n_up + self.n_down) < self.n_up, 1.0, -1.0)
        w = params["embed"]["w"]
        h = h_ae @ w[:-1] + spin.astype(r.dtype)[:, None] * w[-1]
        for i, layer in enumerate(params["layers"]):
            dense = lambda x, name, i=i, layer=layer: taps.dense(
                x, layer[name]["w"], tapped, ("layers", i, name, "w")
            )
            x = _layer_norm(h, layer["norm_attention"]) if self.layer_norm else h
            h = h + self._attention(dense, x)
            x = _layer_norm(h, layer["norm_mlp"]) if self.layer_norm else h
            h = h + jnp.tanh(dense(x, "mlp") + layer["mlp"]["b"])
        return h, r_ae

    def _attention(self, dense, x: Array) -> Array:
        """Self-attention of ``x`` with the layer's products ``dense(x, name)``."""
        n, heads, dim = x.shape[0], self.heads, self.head_dim
        q = dense(x, "query").reshape(n, heads, dim)
        k = dense(x, "key").reshape(n, heads, dim)
        v = dense(x, "value").reshape(n, heads, dim)
        logits = jnp.einsum("ihd,jhd->hij", q, k) / math.sqrt(dim)
        weights = jax.nn.softmax(logits, axis=-1)
        mixed = jnp.einsum("hij,jhd->ihd", weights, v).reshape(n, heads * dim)
        return dense(mixed, "out")

    def describe(self) -> str:
        extras = " + LayerNorm" * self.layer_norm + " + Jastrow" * self.jastrow
        kind = "full" if self.full_det else "spin-block"
        return (
            f"PsiFormer {self.layers} layers x {self.heads} heads x {self.head_dim}{extras}, "
            f"{self.n_determinants} {kind} determinants"
        )


def _layer_norm(x: Array, p: Params, eps: float = 1e-5) -> Array:
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * p["scale"] + p["offset"]


def from_config(molecule, config) -> PsiFormer:
    return PsiFormer(
        molecule.n_up, molecule.n_down, nuclei_of(molecule),
        layers=config.attention_layers, heads=config.attention_heads,
        head_dim=config.attention_head_dim, n_determinants=config.determinants,
        full_det=config.full_det, layer_norm=config.layer_norm, jastrow=config.jastrow,
        soft_core=soft_core_of(molecule, config), matmul_precision=config.matmul_precision,
        envelope_floor=envelope_floor(molecule, config),
    )  # fmt: skip
