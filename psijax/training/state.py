"""The one place a ``TrainState`` is built: by training, evaluation's templates, the
tests and the benchmarks."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import Mesh

from psijax import parallel
from psijax.parallel.batching import map_walkers
from psijax.sampling import Metropolis
from psijax.types import Array, Params, PyTree, TrainState, Walkers


def train_state(
    net,
    optimizer,
    params: Params,
    walkers: Walkers,
    key: Array,
    *,
    sampler_state: PyTree | None = None,
    log_abs: Array | None = None,
    mesh: Mesh | None = None,
) -> TrainState:
    """A state at step 0: the optimiser's initial state, log|psi| of the walkers (computed
    unless given) and the sampler's state (any pytree; unless given, a Metropolis
    sampler's initial width). With ``mesh`` it is placed there, walkers split over the
    devices and everything else replicated, on one or many processes."""
    if log_abs is None:  # one compiled program, not ~100 operations compiled one by one
        log_abs = jax.jit(lambda p, w: map_walkers(net.log_abs, p, w))(params, walkers)
    if sampler_state is None:
        sampler_state = Metropolis().init(walkers.dtype)
    state = TrainState(
        params=params,
        opt_state=jax.jit(optimizer.init)(params),  # as log_abs: one program
        walkers=walkers,
        log_abs=log_abs,
        sampler=sampler_state,
        step=jnp.zeros((), jnp.int32),
        key=key,
    )
    if mesh is None:
        return state
    return parallel.to_global(state, parallel.state_shardings(mesh, state))


def abstract_train_state(
    net, optimizer, n_walkers: int, n_electrons: int, mesh: Mesh, sampler=None
):
    """Shapes, dtypes and shardings of the float32 TrainState, without computing it;
    ``sampler``'s state (a Metropolis sampler's where None)."""

    def build() -> TrainState:
        walkers = jnp.zeros((n_walkers, n_electrons, 3), jnp.float32)
        params = net.init(jax.random.PRNGKey(0), jnp.float32)
        zeros = jnp.zeros((n_walkers,), jnp.float32)
        state = None if sampler is None else sampler.init(jnp.float32)
        return train_state(net, optimizer, params, walkers, jax.random.PRNGKey(0),
                           sampler_state=state, log_abs=zeros)  # fmt: skip

    shapes = jax.eval_shape(build)
    shardings = parallel.state_shardings(mesh, shapes)
    return jax.tree.map(
        lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh), shapes, shardings
    )
