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

    @property
    def n_electrons(self) -> int:
        return self.n_up + self.n_down

    def __str__(self) -> str:
        det = "full" if self.full_det else "spin"
        return (
            f"{self.n_up}u{self.n_down}d/{self.n_atoms}at [{','.join(self.layers)}] "
            f"w{self.width} {self.activation} +[{','.join(self.extras)}] env={self.envelope} "
            f"{self.n_determinants}x{det}det{'±' if self.signed_weights else ''} "
            f"jastrow={self.jastrow}"
        )


def draw_spec(choose: Chooser, max_electrons: int = 5, max_layers: int = 3) -> Spec:
    """A network spec; ``choose(name, options)`` picks one of ``options``.

    ``max_electrons`` and ``max_layers`` bound the size (compile time grows with both).
    """
    n_up = choose("n_up", tuple(range(min(3, max_electrons) + 1)))
    down = range(1 if n_up == 0 else 0, min(2, max_electrons - n_up) + 1)
    n_down = choose("n_down", tuple(down))
    n_layers = choose("n_layers", tuple(range(1, max_layers + 1)))
    n_extras = choose("n_extras", (0, 1, 2, 3))
    return Spec(
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


def seeded_spec(seed: int, **bounds: int) -> Spec:
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
        return params

    # ----------------------------------------------------------------- apply
    def log_abs(self, params: dict, r: jax.Array) -> jax.Array:
        return self.apply(params, r)[1]

    def apply(self, params: dict, r: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(sign, log|psi|) for one walker."""
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
        h = self._extras(params["extras"], h, r)
        sign, log_abs = self._determinants(params, h, r_ae)
        return sign, log_abs + self._jastrow(params["jastrow"], r, r_ae)

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

    def _determinants(self, params: dict, h: jax.Array, r_ae: jax.Array):
        s = self.spec
        k = s.n_determinants
        blocks = []
        for spin, start, count in (("up", 0, s.n_up), ("down", s.n_up, s.n_down)):
            if count == 0:
                continue
            p = params["orbitals"][spin]
            sl = slice(start, start + count)
            phi = h[sl] @ p["w"]  # [count, k * orbitals]
            if s.envelope == "nucleus_orbital":
                env = jnp.einsum(
                    "imo,mo->io", jnp.exp(-r_ae[sl][:, :, None] * jnp.abs(p["sigma"])), p["pi"]
                )
                phi = phi * env
            elif s.envelope == "orbital":
                nearest = jnp.min(r_ae[sl], axis=-1, keepdims=True)
                phi = phi * jnp.exp(-jnp.abs(p["sigma_o"]) * nearest)
            blocks.append(jnp.transpose(phi.reshape(count, k, -1), (1, 0, 2)))
        mats = [jnp.concatenate(blocks, axis=1)] if s.full_det else blocks
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
