"""FermiNet for one walker (Pfau et al., Phys. Rev. Research 2, 033429 (2020)).

One-electron streams see electron-nucleus vectors, two-electron streams see
electron-electron vectors; each layer mixes spin-resolved means of both streams
into every electron. The last one-electron features become orbitals, multiplied
by exponential envelopes around the nuclei, and psi is a sum of determinants, by default
times the electron-electron cusp Jastrow factor (``psijax.ansatz.jastrow``).
Everything here is for ONE walker ``r: [n_electrons, 3]``; the caller vmaps.
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp

from psijax.ansatz import features, taps
from psijax.ansatz import jastrow as cusp
from psijax.ansatz.base import MolecularAnsatz, nuclei_of, soft_core_of
from psijax.ansatz.head import envelope_floor
from psijax.types import Array, Normal, Params


@dataclasses.dataclass(frozen=True)
class FermiNet(MolecularAnsatz):
    """The FermiNet ansatz; all fields are static (they fix shapes).

    Attributes:
        n_up, n_down: electrons per spin; electrons ``[:n_up]`` are spin up.
        nuclei: nuclear positions in bohr, one (x, y, z) per atom.
        layers: (one-electron width, two-electron width) of every hidden layer.
        n_determinants: number of determinants summed in psi.
        full_det: one N x N determinant per term (True), or the product of an
            up and a down determinant (False).
        jastrow: multiply psi by the electron-electron cusp Jastrow factor
            (``psijax.ansatz.jastrow``).
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
    layers: tuple[tuple[int, int], ...] = ((64, 16), (64, 16), (64, 16))
    n_determinants: int = 8
    full_det: bool = True
    jastrow: bool = True
    soft_core: tuple[float, ...] = ()  # per atom, bohr: see features.electron_nucleus
    envelope_floor: float = 0.0  # 1/bohr: see head.ENVELOPE_FLOOR
    matmul_precision: str | None = "highest"  # psijax.precision.PRECISIONS, as Config

    # ----------------------------------------------------------------- init

    def _init(self, normal: Normal, dtype) -> Params:
        d1, d2 = self._input_widths()

        def dense(n_in: int, n_out: int, bias: bool = True) -> dict:
            p = {"w": normal((n_in, n_out)) / math.sqrt(n_in)}
            if bias:
                p["b"] = normal((n_out,)) * 0.1
            return p

        layers = []
        for i, (w1, w2) in enumerate(self.layers):
            layer = {"one": dense(self._mixed_width(d1, d2), w1)}
            if i < len(self.layers) - 1:
                layer["two"] = dense(d2, w2)
            layers.append(layer)
            d1, d2 = w1, w2
        orbitals = self.head.init(normal, d1, dtype)
        params = {"layers": layers, "orbitals": orbitals}
        if self.jastrow:
            params["jastrow"] = cusp.init(dtype)
        return params

    def _mixed_width(self, d1: int, d2: int) -> int:
        n_spins = int(self.n_up > 0) + int(self.n_down > 0)
        return d1 * (1 + n_spins) + d2 * n_spins

    # ------------------------------------------------------------- features
    def _features(
        self, params: Params, r: Array, tapped: taps.Taps | None = None
    ) -> tuple[Array, Array]:
        """Final one-electron features and the electron-nucleus distances [n, atoms];
        ``tapped``: the one-electron layers' products are tapped (``psijax.ansatz.taps``)."""
        h1, h2, r_ae = self._inputs(r)
        for i, layer in enumerate(params["layers"]):
            mixed = self._mix(h1, h2)
            z = taps.dense(mixed, layer["one"]["w"], tapped, ("layers", i, "one", "w"))
            new1 = jnp.tanh(z + layer["one"]["b"])
            h1 = new1 + h1 if new1.shape == h1.shape else new1
            if "two" in layer:
                new2 = jnp.tanh(h2 @ layer["two"]["w"] + layer["two"]["b"])
                h2 = new2 + h2 if new2.shape == h2.shape else new2
        return h1, r_ae

    def _input_widths(self) -> tuple[int, int]:
        """The widths of the one- and two-electron input features (``_inputs``)."""
        return 4 * self.n_atoms, 4

    def _inputs(self, r: Array) -> tuple[Array, Array, Array]:
        """One-electron features ``[n, 4 * atoms]``, two-electron features ``[n, n, 4]`` and
        what the orbital head takes besides the features: the electron-nucleus distances."""
        h1, r_ae = features.electron_nucleus(
            r, features.nuclei_array(self.nuclei, r.dtype), self.soft_core
        )
        h2, _ = features.electron_electron(r)
        return h1, h2, r_ae

    def _mix(self, h1: Array, h2: Array) -> Array:
        """Concatenate each electron's features with spin-resolved means."""
        n = self.n_electrons
        parts = [h1]
        spins = [(0, self.n_up), (self.n_up, self.n_down)]
        for start, count in spins:
            if count:
                g = jnp.mean(h1[start : start + count], axis=0, keepdims=True)
                parts.append(jnp.broadcast_to(g, (n, h1.shape[-1])))
        for start, count in spins:
            if count:
                parts.append(jnp.mean(h2[:, start : start + count], axis=1))
        return jnp.concatenate(parts, axis=-1)

    def describe(self) -> str:
        widths = ", ".join(f"({a}, {b})" for a, b in self.layers)
        kind = "full" if self.full_det else "spin-block"
        extras = " + Jastrow" * self.jastrow
        return f"FermiNet [{widths}]{extras}, {self.n_determinants} {kind} determinants"


def from_config(molecule, config) -> FermiNet:
    return FermiNet(
        molecule.n_up, molecule.n_down, nuclei_of(molecule),
        layers=config.layers, n_determinants=config.determinants, full_det=config.full_det,
        jastrow=config.jastrow,
        soft_core=soft_core_of(molecule, config), matmul_precision=config.matmul_precision,
        envelope_floor=envelope_floor(molecule, config),
    )  # fmt: skip
