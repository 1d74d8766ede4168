"""A trained wavefunction restored from a run directory: ``psijax.load(RUN)``.

>>> import psijax
>>> wf = psijax.load("runs/lih")          # the newest checkpoint, on all local devices
>>> psi = wf.log_psi(wf.walkers)          # Psi(sign, log_abs) per walker
>>> e_l = wf.local_energy(wf.walkers)     # Hartree per walker
>>> walkers = wf.sample(100)              # 100 more MCMC steps from the saved walkers

The checkpoint may come from any device count: parameters are restored replicated on the
mesh asked for, walkers split over it (or replicated, when their number does not divide).
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from psijax import config as config_lib
from psijax import hamiltonian, parallel, registry, system
from psijax.errors import InputError
from psijax.estimators import observables
from psijax.parallel.batching import map_walkers
from psijax.runtime import configure
from psijax.sampling import burn_in
from psijax.training import saved
from psijax.types import Array, Params, Psi, PyTree, Walkers


@dataclasses.dataclass
class Wavefunction:
    """A trained ansatz with frozen parameters and the walkers saved with them."""

    molecule: system.Molecule
    config: config_lib.Config
    params: Params  # replicated on ``mesh``
    network: object  # the ansatz (``psijax.ansatz.Ansatz``: FermiNet, PsiFormer)
    mesh: Mesh
    walkers: Walkers  # [walker, electron, 3] in bohr, sampled from |psi|^2 during training
    sampler_state: PyTree  # the sampler's state training adapted (replicated on ``mesh``)
    step: int  # the training step of the checkpoint
    run: Path
    _compiled: dict = dataclasses.field(default_factory=dict, repr=False)

    def apply(self, params: Params, r: Array) -> Psi:
        """psi for one walker ``r: [electron, 3]``, as ``Psi(sign, log_abs)``."""
        return self.network.apply(params, r)

    def log_psi(self, r: Array) -> Psi:
        """``Psi(sign, log|psi|)`` of one walker ``[electron, 3]`` or a batch of them."""
        r = self._check(r)
        if r.ndim == 2:
            return _jit_apply(self.network.apply, self.params, r)
        return _jit_batch(self.network.apply, self.params, r)

    def sign(self, r: Array) -> Array:
        return self.log_psi(r).sign

    def log_abs(self, r: Array) -> Array:
        return self.log_psi(r).log_abs

    def local_energy(self, r: Array, *, seed: int = 0) -> Array:
        """The local energy (Hartree) of one walker or each of a batch: the Hamiltonian of
        training and evaluation (``psijax.hamiltonian``); ``seed`` feeds its random terms.
        For several states, the trace of the energy matrix (``energy_matrix``)."""
        return self.local_values(r, ("energy",), seed=seed)["energy"]

    def energy_matrix(self, r: Array, *, seed: int = 0) -> Array:
        """Several states: the local energy matrix ``[K, K]`` of one walker (or of each of a
        batch); the eigenvalues of its average over |psi|^2 are the states' energies. (The
        ground state's is ``[1, 1]``: its local energy.)"""
        values = self.local_values(r, ("energy",), seed=seed)
        return registry.eigenstates(self.config).energy_matrix(values)

    def local_values(
        self, r: Array, names=observables.DEFAULT, *, seed: int = 0
    ) -> dict[str, Array]:
        """The energy, its components and every column of the observables ``names``
        (``psijax.estimators.observables``) per walker."""
        r = self._check(r)
        default = names is observables.DEFAULT
        names = observables.parse(list(names))
        if default:  # those of the defaults the run's states have
            names = registry.eigenstates(self.config).default_observables(names)
        if names not in self._compiled:
            self._compiled[names] = _local_values_fn(self, names)
        fn = self._compiled[names]
        one = r.ndim == 2
        batch = r[None] if one else r
        keys = jax.random.split(jax.random.PRNGKey(seed), batch.shape[0])
        out = fn(self.params, batch, keys)
        return {k: v[0] for k, v in out.items()} if one else out

    def sample(self, n_steps: int, *, seed: int = 0, walkers: Walkers | None = None) -> Walkers:
        """``n_steps`` steps of the run's sampler from ``walkers`` (the saved ones by
        default), with its saved state frozen (``sampler_state``); returns the walkers."""
        if int(n_steps) != n_steps or n_steps < 0:
            raise InputError(f"n_steps={n_steps} must be a whole number >= 0")
        walkers = self.walkers if walkers is None else self._check(walkers)
        key = jax.random.PRNGKey(seed)
        sampler = registry.sampler(self.config, self.molecule, adapt=False)
        state = self.sampler_state
        return _jit_sample(self.network.log_abs, sampler, self.params, walkers, key, state,
                           int(n_steps))  # fmt: skip

    def _check(self, r) -> Array:
        r = jnp.asarray(r)
        n = self.network.n_electrons  # K copies of the molecule's electrons for K states
        if r.ndim not in (2, 3) or r.shape[-2:] != (n, 3):
            raise InputError(
                f"walkers of shape {tuple(r.shape)} do not fit {self.config.system}; give "
                f"[{n}, 3] or [walkers, {n}, 3] electron positions in bohr"
            )
        return r


@functools.partial(jax.jit, static_argnums=0)
def _jit_apply(apply, params, r):
    return apply(params, r)


@functools.partial(jax.jit, static_argnums=0)
def _jit_batch(apply, params, r):
    return map_walkers(apply, params, r)


@functools.partial(jax.jit, static_argnums=(0, 1, 6))
def _jit_sample(log_abs, sampler, params, walkers, key, state, n_steps):
    batch = lambda w: map_walkers(log_abs, params, w)
    return burn_in(key, sampler, batch, walkers, state, n_steps=n_steps)[0]


def _local_values_fn(wf: Wavefunction, names: tuple[str, ...]):
    energy = hamiltonian.for_config(wf.molecule, wf.config)
    _, local, _ = registry.eigenstates(wf.config).observed(
        names, energy, wf.network, wf.molecule, given=True
    )

    def public(params, walker_key):
        values = local(params, *walker_key)
        return {k: v for k, v in values.items() if not k.startswith("_")}

    return jax.jit(lambda params, r, keys: map_walkers(public, params, (r, keys)))


def load(run: str | Path, *, devices: int | None = None, mesh: Mesh | None = None) -> Wavefunction:
    """The wavefunction of the newest checkpoint in ``run`` on ``devices`` local devices
    (all by default) or on ``mesh``. Raises ``InputError`` for anything but a run with a
    readable checkpoint."""
    configure()
    mesh = mesh if mesh is not None else parallel.make_mesh(devices)
    found = saved.restore(run, mesh)
    state = found.state
    return Wavefunction(
        molecule=found.molecule,
        config=found.config,
        params=state.params,
        network=found.net,
        mesh=mesh,
        walkers=state.walkers,
        sampler_state=state.sampler,
        step=int(np.asarray(parallel.to_host(state.step))),
        run=found.path,
    )
