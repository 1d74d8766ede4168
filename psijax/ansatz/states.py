"""K states as one wavefunction: natural excited states (NES-VMC).

Pfau et al., Science 385, eadn0137 (2024), arXiv:2308.16848. K copies of one ansatz, each
with its own parameters, give K states psi_i; the total wavefunction of K copies of the
electrons x^1 .. x^K is

    Psi(x^1, .., x^K) = det [psi_i(x^j)]_{ij}     (i: state, j: copy)

Its energy under the Hamiltonian summed over the copies is the sum of the energies of the
K lowest states at the minimum, and any K states spanning the same space give the same
Psi up to a constant: training Psi by ordinary VMC (the same sampler, loss and optimiser
as a ground state) finds that space, and the energy matrix (``psijax.hamiltonian.states``)
resolves it into the states.

A walker of the total wavefunction is ``[K * N, 3]``: copy j is ``r[j * N:(j + 1) * N]``,
each copy laid out like a ground-state walker (spin up first).

Two ways to have K states: ``SharedStates`` (the default), one network whose layers all
states share, each state its own group of determinants (orbital projections and
envelopes), as Pfau et al. build theirs: the K x K matrix takes K evaluations of the
network (one per copy, all states at once), and the Laplacian of all K states at a copy
one forward pass; and ``States``, K independent copies of the network, parameters with a
leading axis of length K, K^2 evaluations. Both give ``each(params, x)``, every state at
one copy of the electrons, and ``matrix``.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

from psijax.types import Array, Params, Psi


@dataclasses.dataclass(frozen=True)
class States:
    """``n_states`` copies of ``base`` (an ``Ansatz``) as the NES total wavefunction."""

    base: object
    n_states: int

    def __post_init__(self) -> None:
        if self.n_states < 1:
            raise ValueError(f"n_states={self.n_states} must be >= 1")

    @property
    def electrons_per_copy(self) -> int:
        return self.base.n_up + self.base.n_down

    @property
    def n_electrons(self) -> int:
        """Electrons of one walker of the total wavefunction: K copies."""
        return self.n_states * self.electrons_per_copy

    def init(self, key: Array, dtype=jnp.float32) -> Params:
        """Independent random parameters per state, stacked on a leading axis."""
        keys = jax.random.split(key, self.n_states)
        if isinstance(key, jax.core.Tracer):
            return jax.vmap(lambda k: self.base.init(k, dtype))(keys)
        return _stacked_init(self.base, keys, jnp.dtype(dtype))

    @property
    def state_net(self):
        """The ansatz of one state (pretraining fits each state as one)."""
        return self.base

    def state(self, params: Params, i: int) -> Params:
        """The parameters of state ``i`` (a base-ansatz parameter tree)."""
        return jax.tree.map(lambda p: p[i], params)

    def with_state(self, params: Params, i: int, state: Params) -> Params:
        """``params`` with state ``i``'s parameters replaced by ``state``."""
        return jax.tree.map(lambda p, q: p.at[i].set(q), params, state)

    def each(self, params: Params, x: Array) -> Psi:
        """Every state at one copy ``x`` ``[N, 3]`` of the electrons: ``Psi`` of ``[K]``."""
        return jax.vmap(self.base.apply, in_axes=(0, None))(params, x)

    def copies(self, r: Array) -> Array:
        """``[K * N, 3]`` -> ``[K, N, 3]``: the K electron sets of one walker."""
        return r.reshape(self.n_states, self.electrons_per_copy, 3)

    def matrix(self, params: Params, r: Array) -> Psi:
        """``psi_i(x^j)`` for every state i and copy j, as ``Psi`` of ``[K, K]`` arrays."""
        x = self.copies(r)
        over_copies = jax.vmap(self.base.apply, in_axes=(None, 0))
        return jax.vmap(over_copies, in_axes=(0, None))(params, x)

    def apply(self, params: Params, r: Array) -> Psi:
        """Psi = det[psi_i(x^j)] as sign and log|Psi|, stable for any spread of |psi_i|."""
        values = self.matrix(params, r)
        if self.n_states == 1:
            return Psi(values.sign[0, 0], values.log_abs[0, 0])
        scaled, shift = scaled_matrix(values)
        sign, log_abs = jnp.linalg.slogdet(scaled)
        return Psi(sign, log_abs + jnp.sum(shift))

    def log_abs(self, params: Params, r: Array) -> Array:
        return self.apply(params, r).log_abs

    def describe(self) -> str:
        return f"{self.n_states} states (natural excited states) of {self.base.describe()}"


@dataclasses.dataclass(frozen=True)
class SharedStates:
    """K states from one network: ``base`` is the ansatz with K times the determinants of
    one state, and state i is its i-th group of them (``Ansatz.apply_groups``), so the
    states share every layer and the cusp factor and each has its own orbital projections
    and envelopes. ``psi_i(x^j)`` for all i takes one evaluation per copy j."""

    base: object
    n_states: int

    def __post_init__(self) -> None:
        if self.n_states < 1 or self.base.n_determinants % self.n_states:
            raise ValueError(
                f"n_states={self.n_states} must be >= 1 and divide the base's "
                f"{self.base.n_determinants} determinants"
            )

    electrons_per_copy = States.electrons_per_copy
    n_electrons = States.n_electrons
    copies = States.copies
    apply = States.apply
    log_abs = States.log_abs

    @property
    def state_net(self):
        """The ansatz of one state: the shared layers and one group of determinants."""
        return dataclasses.replace(self.base, n_determinants=self.determinants_per_state)

    @property
    def determinants_per_state(self) -> int:
        return self.base.n_determinants // self.n_states

    def init(self, key: Array, dtype=jnp.float32) -> Params:
        return self.base.init(key, dtype)

    def state(self, params: Params, i: int) -> Params:
        """State ``i`` as parameters of ``state_net``: the shared layers and its orbitals'
        columns (the head's last axis holds the states' groups one after the other)."""
        k = self.n_states
        own = jax.tree.map(lambda p: p.reshape(*p.shape[:-1], k, -1)[..., i, :], params["orbitals"])
        return {**params, "orbitals": own}

    def with_state(self, params: Params, i: int, state: Params) -> Params:
        """``params`` with the shared layers of ``state`` and its orbitals as state ``i``'s."""
        k = self.n_states

        def put(p: Array, q: Array) -> Array:
            return p.reshape(*p.shape[:-1], k, -1).at[..., i, :].set(q).reshape(p.shape)

        return {**state, "orbitals": jax.tree.map(put, params["orbitals"], state["orbitals"])}

    def each(self, params: Params, x: Array) -> Psi:
        """Every state at one copy ``x`` ``[N, 3]`` of the electrons: ``Psi`` of ``[K]``,
        one evaluation of the network."""
        return self.base.apply_groups(params, x, self.n_states)

    def matrix(self, params: Params, r: Array) -> Psi:
        """``psi_i(x^j)`` for every state i and copy j, as ``Psi`` of ``[K, K]`` arrays."""
        by_copy = jax.vmap(self.each, in_axes=(None, 0))(params, self.copies(r))
        return Psi(by_copy.sign.T, by_copy.log_abs.T)

    def describe(self) -> str:
        return (
            f"{self.n_states} states (natural excited states) of one network, "
            f"{self.determinants_per_state} determinants each: {self.state_net.describe()}"
        )


def scaled_matrix(values: Psi) -> tuple[Array, Array]:
    """``[psi_i(x^j)]`` with column j divided by ``exp(shift_j)``, ``shift_j`` the largest
    log|psi_i(x^j)| over the states: every entry in [-1, 1], and the column scaling cancels
    in the energy matrix and adds ``sum_j shift_j`` to log|det|."""
    shift = jax.lax.stop_gradient(jnp.max(values.log_abs, axis=0))
    return values.sign * jnp.exp(values.log_abs - shift[None, :]), shift


@functools.partial(
    jax.jit, static_argnums=(0, 2), compiler_options={"xla_backend_optimization_level": 0}
)
def _stacked_init(base, keys: Array, dtype) -> Params:
    """One compiled program for all states' random parameters (as ``Ansatz.init``)."""
    return jax.vmap(lambda k: base.init(k, dtype))(keys)
