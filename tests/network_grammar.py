"""A grammar of small wavefunction networks, for tests that claim "any network".

``draw_spec(choose)`` draws a ``Spec`` (what the network contains) with any
chooser: a hypothesis ``draw`` in property tests, a seeded ``random.Random`` in
the fixed matrix and the benchmark. ``Network(spec)`` builds it for ONE walker
``r: [n_electrons, 3]``: ``init(key) -> params`` and ``log_abs(params, r)``.

What the grammar covers (what real wavefunctions contain):
- inputs: electron-nucleus vectors and distances, electron-electron distances;
- feature layers: dense (``@`` + bias), ``einsum``, spin-resolved mean and sum
  pooling over electrons, self-attention (softmax over electrons), layer
  normalisation, ``lax.scan`` and ``lax.fori_loop`` over stacked weights;
- activations ``tanh``, ``sin``, ``jax.nn.softplus``/``silu``/``sigmoid`` (jits
  that folx has rules for by name) and element-wise extras: ``abs``, ``sqrt``,
  ``log``, ``exp``, ``where``, ``maximum``/``max``, ``sign`` of a walker value and
  of a parameter, integer and boolean masks;
- spin blocks of unequal sizes, including 1x1 determinants and an empty channel;
- per-nucleus-per-orbital, per-orbital or no envelopes;
- one or several determinants, full (N x N) or per spin, with signed weights
  combined by a signed log-sum-exp;
- a parameterised Jastrow factor (electron-electron Pade, electron-nucleus).

Complex-valued networks (``draw_spec(..., complex_valued=True)``; ``log_psi`` is then
complex, ``log_abs`` its real part), of the kind periodic systems with a twist need:
- complex orbitals: plane waves ``exp(i (k + twist) . r)`` times the real orbitals (exp
  of imaginary arguments), complex orbital weights (a complex matmul), or both;
- the determinants combined by a complex ``slogdet`` and a signed log-sum-exp, by a
  complex ``det`` and the log of their sum, or by a complex ``logsumexp`` of
  ``log det``; complex determinant weights ``|w| exp(i theta)`` with signed weights;
- a complex phase term ``i sum(c sin(r))``.
Every parameter stays real.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

LAYERS = ("dense", "einsum", "mean_pool", "sum_pool", "attention", "layernorm", "scan", "fori")
ACTIVATIONS = ("tanh", "sin", "softplus", "silu", "sigmoid")
EXTRAS = ("abs", "sqrt", "log", "exp", "where", "maximum", "max", "sign", "param_sign",
          "int_mask", "bool_mask")  # fmt: skip
ENVELOPES = ("nucleus_orbital", "orbital", "none")
JASTROWS = ("none", "pade", "nuclear")
COMPLEX_ORBITALS = ("none", "twist", "matmul", "both")  # "none": a real network
COMBINES = ("slogdet", "det", "logsumexp")
TWIST = (0.31, -0.17, 0.23)  # a twist vector (1/bohr) added to every orbital's wave vector
NUCLEI = ((0.0, 0.0, 0.0), (0.0, 0.0, 1.6), (1.2, -0.4, 0.3))

Chooser = Callable[[str, Sequence[Any]], Any]


@dataclasses.dataclass(frozen=True)
class Spec:
    n_up: int
    n_down: int
    n_atoms: int
    layers: tuple[str, ...]
    width: int
    activation: str
    extras: tuple[str, ...]
    envelope: str
    n_determinants: int
    full_det: bool
    signed_weights: bool
    jastrow: str
    complex_orbitals: str = "none"
    combine: str = "slogdet"
    phase: bool = False

    @property
    def n_electrons(self) -> int:
        return self.n_up + self.n_down

    @property
    def complex_valued(self) -> bool:
        return self.complex_orbitals != "none"

    def __str__(self) -> str:
        det = "full" if self.full_det else "spin"
        return (
            f"{self.n_up}u{self.n_down}d/{self.n_atoms}at [{','.join(self.layers)}] "
            f"w{self.width} {self.activation} +[{','.join(self.extras)}] env={self.envelope} "
            f"{self.n_determinants}x{det}det{'±' if self.signed_weights else ''} "
            f"jastrow={self.jastrow}"
            + (
                f" complex={self.complex_orbitals}/{self.combine}{'+phase' if self.phase else ''}"
                if self.complex_valued
                else ""
            )
        )


def draw_spec(
    choose: Chooser, max_electrons: int = 5, max_layers: int = 3, complex_valued: bool = False
) -> Spec:
    """A network spec; ``choose(name, options)`` picks one of ``options``.

    ``max_electrons`` and ``max_layers`` bound the size (compile time grows with both).
    ``complex_valued`` draws a complex-valued network (its parts are drawn after the
    real ones, so the real networks of a seed are those drawn without it).
    """
    n_up = choose("n_up", tuple(range(min(3, max_electrons) + 1)))
    down = range(1 if n_up == 0 else 0, min(2, max_electrons - n_up) + 1)
    n_down = choose("n_down", tuple(down))
    n_layers = choose("n_layers", tuple(range(1, max_layers + 1)))
    n_extras = choose("n_extras", (0, 1, 2, 3))
    spec = Spec(
        n_up=n_up,
        n_down=n_down,
        n_atoms=choose("n_atoms", (1, 2, 3)),
        layers=tuple(choose(f"layer{i}", LAYERS) for i in range(n_layers)),
        width=choose("width", (3, 4)),
        activation=choose("activation", ACTIVATIONS),
        extras=tuple(choose(f"extra{i}", EXTRAS) for i in range(n_extras)),
        envelope=choose("envelope", ENVELOPES),
        n_determinants=choose("n_determinants", (1, 2, 3)),
        full_det=choose("full_det", (True, False)),
        signed_weights=choose("signed_weights", (True, False)),
        jastrow=choose("jastrow", JASTROWS),
    )
    if not complex_valued:
        return spec
    return dataclasses.replace(
        spec,
        complex_orbitals=choose("complex_orbitals", COMPLEX_ORBITALS[1:]),
        combine=choose("combine", COMBINES),
        phase=choose("phase", (True, False)),
    )


def seeded_spec(seed: int, **bounds: int) -> Spec:
    """``draw_spec`` with a seeded chooser; ``bounds`` are its keyword arguments."""
    rng = np.random.default_rng(seed)
    return draw_spec(lambda _, options: options[int(rng.integers(len(options)))], **bounds)


def _activation(name: str) -> Callable:
    return {
        "tanh": jnp.tanh,
        "sin": jnp.sin,
        "softplus": jax.nn.softplus,
        "silu": jax.nn.silu,
        "sigmoid": jax.nn.sigmoid,
    }[name]


@dataclasses.dataclass(frozen=True)
class Network:
    """The network a ``Spec`` describes, for one walker ``r: [n_electrons, 3]``."""

    spec: Spec

    @property
    def nuclei(self) -> np.ndarray:
        return np.asarray(NUCLEI[: self.spec.n_atoms])

    @property
    def n_electrons(self) -> int:
        return self.spec.n_electrons

    # ------------------------------------------------------------------ init
    def init(self, key: jax.Array, dtype=jnp.float64) -> dict:
        s = self.spec
        keys = iter(jax.random.split(key, 64))
        normal = lambda *shape, scale=1.0: scale * jax.random.normal(next(keys), shape, dtype)
        w, m, k = s.width, s.n_atoms, s.n_determinants
        d = 4 * m
        params: dict[str, Any] = {"inputs": {"w": normal(d, w, scale=1 / math.sqrt(d))}}
        layers = []
        for kind in s.layers:
            layer: dict[str, Any] = {}
            if kind in ("dense", "einsum"):
                layer = {"w": normal(w, w, scale=1 / math.sqrt(w)), "b": normal(w, scale=0.1)}
            elif kind in ("mean_pool", "sum_pool"):
                n_in = w * (1 + (s.n_up > 0) + (s.n_down > 0)) + 1
                layer = {"w": normal(n_in, w, scale=1 / math.sqrt(n_in)), "a": normal(1)}
            elif kind == "attention":
                layer = {name: normal(w, w, scale=1 / math.sqrt(w)) for name in "qkv"}
            elif kind == "layernorm":
                layer = {"g": 1.0 + normal(w, scale=0.1), "b": normal(w, scale=0.1)}
            elif kind in ("scan", "fori"):
                layer = {"w": normal(2, w, w, scale=0.7 / math.sqrt(w))}
            layers.append(layer)
        params["layers"] = layers
        params["extras"] = {"c": normal(len(s.extras) + 1, scale=0.3), "p": normal(w)}
        blocks = {}
        for spin, count in (("up", s.n_up), ("down", s.n_down)):
            if count == 0:
                continue
            n_orb = s.n_electrons if s.full_det else count
            blocks[spin] = {
                "w": normal(w, k * n_orb, scale=1 / math.sqrt(w)),
                "sigma": 1.0 + 0.2 * normal(m, k * n_orb),
                "pi": 1.0 + 0.2 * normal(m, k * n_orb),
                "sigma_o": 1.0 + 0.2 * normal(k * n_orb),
            }
        params["orbitals"] = blocks
        # Signed determinant weights: at least one negative when there are several.
        weights = jnp.abs(normal(k)) + 0.5
        params["det_weights"] = weights.at[-1].multiply(-1.0) if k > 1 else weights
        params["jastrow"] = {"a": normal(1, scale=0.3), "b": normal(1), "c": normal(m, scale=0.3)}
        if s.complex_valued:  # drawn after the real parameters: those stay as they were
            for block in blocks.values():
                n_orb = block["w"].shape[1]
                block["w_imag"] = normal(w, n_orb, scale=1 / math.sqrt(w))
                block["k"] = normal(3, n_orb, scale=0.5)  # wave vectors, 1/bohr
            params["det_phases"] = normal(k)
            params["phase"] = normal(3, scale=0.3)
        return params

    # ----------------------------------------------------------------- apply
    def log_abs(self, params: dict, r: jax.Array) -> jax.Array:
        """log|psi| for one walker."""
        if self.spec.complex_valued:
            return jnp.real(self.log_psi(params, r))
        return self.apply(params, r)[1]

    def log_psi(self, params: dict, r: jax.Array) -> jax.Array:
        """log psi for one walker: log|psi| for a real network, complex for a complex one."""
        if not self.spec.complex_valued:
            return self.log_abs(params, r)
        h, r_ae = self._features(params, r)
        log_psi = self._complex_determinants(params, h, r, r_ae)
        log_psi = log_psi + self._jastrow(params["jastrow"], r, r_ae)
        if self.spec.phase:
            log_psi = log_psi + 1j * jnp.sum(params["phase"] * jnp.sin(r))
        return log_psi

    def apply(self, params: dict, r: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(sign, log|psi|) for one walker of a real network."""
        h, r_ae = self._features(params, r)
        sign, log_abs = self._determinants(params, h, r_ae)
        return sign, log_abs + self._jastrow(params["jastrow"], r, r_ae)

    def _features(self, params: dict, r: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(per-electron features [n, width], electron-nucleus distances [n, atoms])."""
        s = self.spec
        nuclei = jnp.asarray(self.nuclei, r.dtype)
        n = s.n_electrons
        ae = r[:, None, :] - nuclei[None]  # [n, atoms, 3]
        r_ae = jnp.linalg.norm(ae, axis=-1)  # [n, atoms]
        x = jnp.concatenate([ae.reshape(n, -1), r_ae], axis=-1)
        act = _activation(s.activation)
        h = act(x @ params["inputs"]["w"])
        for kind, p in zip(s.layers, params["layers"], strict=True):
            h = self._layer(kind, p, h, r, act)
        return self._extras(params["extras"], h, r), r_ae

    def _layer(self, kind: str, p: dict, h: jax.Array, r: jax.Array, act: Callable) -> jax.Array:
        s = self.spec
        if kind == "dense":
            return h + act(h @ p["w"] + p["b"])
        if kind == "einsum":
            return act(jnp.einsum("ef,fg->eg", h, p["w"]) + p["b"])
        if kind in ("mean_pool", "sum_pool"):
            pool = jnp.mean if kind == "mean_pool" else jnp.sum
            parts = [h]
            for start, count in ((0, s.n_up), (s.n_up, s.n_down)):
                if count:
                    g = pool(h[start : start + count], axis=0, keepdims=True)
                    parts.append(jnp.broadcast_to(g, h.shape))
            # electron-electron distances, with the diagonal shifted to stay smooth
            eye = jnp.eye(s.n_electrons, dtype=r.dtype)
            r_ee = jnp.linalg.norm(r[:, None] - r[None] + eye[..., None], axis=-1)
            parts.append(jnp.mean(jnp.tanh(p["a"] * r_ee) * (1 - eye), axis=1, keepdims=True))
            return act(jnp.concatenate(parts, axis=-1) @ p["w"])
        if kind == "attention":
            q, k, v = h @ p["q"], h @ p["k"], h @ p["v"]
            weights = jax.nn.softmax(q @ k.T / math.sqrt(h.shape[-1]), axis=-1)
            return h + weights @ v
        if kind == "layernorm":
            mean = jnp.mean(h, axis=-1, keepdims=True)
            var = jnp.mean((h - mean) ** 2, axis=-1, keepdims=True)
            return (h - mean) / jnp.sqrt(var + 0.5) * p["g"] + p["b"]
        if kind == "scan":
            return jax.lax.scan(lambda c, w: (c + act(c @ w), None), h, p["w"])[0]
        if kind == "fori":
            body = lambda i, c: c + act(c @ p["w"][i])
            return jax.lax.fori_loop(0, p["w"].shape[0], body, h)
        raise ValueError(kind)

    def _extras(self, p: dict, h: jax.Array, r: jax.Array) -> jax.Array:
        n = self.spec.n_electrons
        for i, kind in enumerate(self.spec.extras):
            c = p["c"][i]
            if kind == "abs":
                h = h + c * jnp.abs(h)
            elif kind == "sqrt":
                h = h + c * jnp.sqrt(h**2 + 1.0)
            elif kind == "log":
                h = h + c * jnp.log(1.0 + h**2)
            elif kind == "exp":
                h = h + c * jnp.exp(-(h**2))
            elif kind == "where":
                h = jnp.where(h > 0, h, 0.3 * h)
            elif kind == "maximum":
                h = jnp.maximum(h, -0.8)
            elif kind == "max":
                h = h + c * jnp.max(h, axis=0, keepdims=True)
            elif kind == "sign":  # sign of a walker-dependent value: no derivative
                h = h + c * jnp.sign(h) * h**2
            elif kind == "param_sign":  # sign of a parameter times a walker value
                h = h * jnp.sign(p["p"]) + c * h
            elif kind == "int_mask":  # integer arithmetic mixed in
                h = h * (jnp.arange(n) % 2 + 1)[:, None].astype(h.dtype)
            elif kind == "bool_mask":  # a boolean that depends on the walker
                h = jnp.where((r[:, :1] > 0.0) & (h > -5.0), h, 1.1 * h)
        return h

    def _orbitals(self, params: dict, h: jax.Array, r: jax.Array, r_ae: jax.Array) -> list:
        """The orbital matrices [determinants, electrons, orbitals]: one (full) or per spin."""
        s = self.spec
        k = s.n_determinants
        blocks = []
        for spin, start, count in (("up", 0, s.n_up), ("down", s.n_up, s.n_down)):
            if count == 0:
                continue
            p = params["orbitals"][spin]
            sl = slice(start, start + count)
            if s.complex_orbitals in ("matmul", "both"):  # a complex matmul
                phi = h[sl] @ jax.lax.complex(p["w"], p["w_imag"])
            else:
                phi = h[sl] @ p["w"]  # [count, k * orbitals]
            if s.complex_orbitals in ("twist", "both"):  # plane waves with a twist
                k_vectors = p["k"] + jnp.asarray(TWIST, r.dtype)[:, None]
                phi = phi * jnp.exp(1j * (r[sl] @ k_vectors))
            if s.envelope == "nucleus_orbital":
                env = jnp.einsum(
                    "imo,mo->io", jnp.exp(-r_ae[sl][:, :, None] * jnp.abs(p["sigma"])), p["pi"]
                )
                phi = phi * env
            elif s.envelope == "orbital":
                nearest = jnp.min(r_ae[sl], axis=-1, keepdims=True)
                phi = phi * jnp.exp(-jnp.abs(p["sigma_o"]) * nearest)
            blocks.append(jnp.transpose(phi.reshape(count, k, -1), (1, 0, 2)))
        return [jnp.concatenate(blocks, axis=1)] if s.full_det else blocks

    def _determinants(self, params: dict, h: jax.Array, r_ae: jax.Array):
        s = self.spec
        k = s.n_determinants
        mats = self._orbitals(params, h, None, r_ae)
        sign, log_abs = None, None
        for mat in mats:
            sm, lm = jnp.linalg.slogdet(mat)
            sign = sm if sign is None else sign * sm
            log_abs = lm if log_abs is None else log_abs + lm
        if s.signed_weights:
            wd = params["det_weights"]
            sign = sign * jnp.sign(wd)
            log_abs = log_abs + jnp.log(jnp.abs(wd))
        if k == 1:
            return sign[0], log_abs[0]
        shift = jax.lax.stop_gradient(jnp.max(log_abs))
        total = jnp.sum(sign * jnp.exp(log_abs - shift))
        return jnp.sign(total), jnp.log(jnp.abs(total)) + shift

    def _complex_determinants(
        self, params: dict, h: jax.Array, r: jax.Array, r_ae: jax.Array
    ) -> jax.Array:
        """log sum_k w_k prod det(orbitals), complex, by the spec's ``combine``."""
        s = self.spec
        mats = self._orbitals(params, h, r, r_ae)
        weights = jnp.ones(s.n_determinants, r.dtype)
        if s.signed_weights:  # complex weights |w| exp(i theta)
            weights = params["det_weights"] * jnp.exp(1j * params["det_phases"])
        if s.combine == "det":
            dets = weights
            for mat in mats:
                dets = dets * jnp.linalg.det(mat)
            return jnp.log(jnp.sum(dets))
        sign, log_abs = weights, jnp.zeros(s.n_determinants, r.dtype)
        for mat in mats:
            sm, lm = jnp.linalg.slogdet(mat)
            sign, log_abs = sign * sm, log_abs + lm
        if s.combine == "logsumexp":
            return jax.nn.logsumexp(jnp.log(sign) + log_abs)
        shift = jax.lax.stop_gradient(jnp.max(log_abs))
        return jnp.log(jnp.sum(sign * jnp.exp(log_abs - shift))) + shift

    def _jastrow(self, p: dict, r: jax.Array, r_ae: jax.Array) -> jax.Array:
        s = self.spec
        if s.jastrow == "pade" and s.n_electrons > 1:
            i, j = np.triu_indices(s.n_electrons, k=1)
            r_ee = jnp.linalg.norm(r[i] - r[j], axis=-1)
            return jnp.sum(p["a"] * r_ee / (1.0 + jnp.abs(p["b"]) * r_ee))
        if s.jastrow == "nuclear":
            return -jnp.sum(r_ae * jnp.abs(p["c"])) * 0.1
        return jnp.zeros((), r.dtype)


def walkers(net: Network, params: dict, n: int, seed: int) -> np.ndarray:
    """``n`` walkers around the nuclei, float64, [n, electrons, 3], away from nodes.

    Of 4n candidates the n with the smallest |grad log|psi|| are kept. Near a node of
    psi the rounding of every method is amplified like |grad log|psi||^2 (a walker
    with |grad| = 15 differed by 1e-4 between two compilations of the same dense
    Hessian), and that is the network's conditioning, not an operator's mistake.
    """
    rng = np.random.default_rng(seed)
    owner = rng.integers(0, net.spec.n_atoms, size=(4 * n, net.n_electrons))
    candidates = net.nuclei[owner] + rng.normal(size=(4 * n, net.n_electrons, 3))
    grad = jax.jit(jax.vmap(jax.grad(net.log_abs, argnums=1), in_axes=(None, 0)))
    norms = np.linalg.norm(np.asarray(grad(params, candidates)).reshape(4 * n, -1), axis=1)
    norms = np.where(np.isfinite(norms), norms, np.inf)
    return candidates[np.argsort(norms, kind="stable")[:n]]
