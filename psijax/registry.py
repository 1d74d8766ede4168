"""Name -> factory tables: the only place where a config string picks an implementation.

Each factory takes the molecule and the resolved ``Config``. Adding an ansatz, optimiser
or Laplacian operator is one new module and one entry here (and its name in
``psijax.config``'s tuple of choices, which the CLI and config validation read without
importing JAX); a test checks that the two agree.
"""

from __future__ import annotations

from collections.abc import Callable

from psijax import laplacian, optim
from psijax.ansatz import Ansatz, FermiNet, PsiFormer
from psijax.config import Config
from psijax.system import Molecule


def _nuclei(molecule: Molecule) -> tuple[tuple[float, float, float], ...]:
    return tuple(map(tuple, molecule.nuclear_positions.tolist()))


def _ferminet(molecule: Molecule, config: Config) -> FermiNet:
    return FermiNet(
        molecule.n_up, molecule.n_down, _nuclei(molecule),
        layers=config.layers, n_determinants=config.determinants, full_det=config.full_det,
    )  # fmt: skip


def _psiformer(molecule: Molecule, config: Config) -> PsiFormer:
    return PsiFormer(
        molecule.n_up, molecule.n_down, _nuclei(molecule),
        layers=config.attention_layers, heads=config.attention_heads,
        head_dim=config.attention_head_dim, n_determinants=config.determinants,
        full_det=config.full_det, layer_norm=config.layer_norm, jastrow=config.jastrow,
    )  # fmt: skip


ANSATZES: dict[str, Callable[[Molecule, Config], Ansatz]] = {
    "ferminet": _ferminet,
    "psiformer": _psiformer,
}

OPTIMIZERS: dict[str, Callable[[Config], optim.Optimizer]] = {
    "spring": lambda c: optim.spring(learning_rate=c.lr, decay_steps=c.decay_steps),
    "adam": lambda c: optim.adam(learning_rate=c.lr, decay_steps=c.decay_steps),
}


def _laplacian(name: str) -> Callable[[int], laplacian.LaplacianOperator]:
    return lambda n_electrons: laplacian.OPERATORS[name]()


LAPLACIANS: dict[str, Callable[[int], laplacian.LaplacianOperator]] = {
    "default": laplacian.default_operator,
    **{name: _laplacian(name) for name in laplacian.OPERATORS},
}


def ansatz(molecule: Molecule, config: Config) -> Ansatz:
    """The wavefunction ``config`` asks for, for ``molecule``."""
    return ANSATZES[config.ansatz](molecule, config)


def optimizer(config: Config) -> optim.Optimizer:
    return OPTIMIZERS[config.optimizer](config)


def laplacian_operator(name: str, n_electrons: int) -> laplacian.LaplacianOperator:
    return LAPLACIANS[name](n_electrons)
