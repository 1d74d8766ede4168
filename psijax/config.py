"""Typed, frozen run configuration, validated once at the boundary.

Values come from defaults, then a config file (TOML or JSON, flat or in the sections of
``SECTIONS``: system, ansatz, sampler, optimizer, pretraining, run), then CLI flags.
Every bad value raises ``InputError`` with one line naming the field and the fix.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tomllib
from pathlib import Path
from typing import Any

from psijax import precision, registry
from psijax.errors import InputError


def choices() -> dict[str, tuple[str, ...]]:
    """The choices of the fields naming an implementation: the registry's tables as they are."""
    return {
        "ansatz": tuple(registry.ANSATZES),
        "optimizer": tuple(registry.OPTIMIZERS),
        "laplacian": tuple(registry.LAPLACIANS),
        "sampler": tuple(registry.SAMPLERS),
        "matmul_precision": precision.PRECISIONS,
        "gram_precision": precision.PRECISIONS,
        "states_network": registry.STATES_NETWORKS,
    }


CHOICES = choices()  # as psijax ships them (the command's --help)
ECP_QUADRATURES = (4, 6, 12, 18, 26)  # psijax.hamiltonian.quadrature's rules
MAX_SEED = 2**32 - 1  # PRNGKey overflows past 2**63; without x64, seeds past 2**32 collide
MAX_STATES = 16
_TYPE_NAMES = {int: "whole number", float: "number", str: "string"}


@dataclasses.dataclass(frozen=True)
class Config:
    system: str = "LiH"  # preset, atom string ("Li 0 0 0; H 0 0 3.015"), .xyz path or "heg"
    electrons: int | None = None  # "heg", the electron gas (psijax.system.electron_gas): per cell
    rs: float | None = None  # "heg": its Wigner-Seitz radius (bohr)
    lattice: str | None = None  # a crystal: the cell's vectors "a1; a2; a3" in `unit`
    twist: str | None = None  # "heg": "t1 t2 t3", fractions of the reciprocal vectors; Gamma
    charge: int | None = None
    spin: int | None = None  # n_up - n_down; None: the preset's, else the lowest
    unit: str = "bohr"  # of atom-string coordinates (.xyz files are always angstrom)
    ecp: str | None = None  # effective core potentials: "ccecp", or "Cl:ccecp Na:ccecp"
    ecp_quadrature: int = 12  # points of the nonlocal ECP term's quadrature on the sphere
    ecp_neighbours: int | None = None  # electrons each ECP nucleus moves; None: by geometry
    ecp_soft_core: float | None = None  # bohr: distances to ECP nuclei softened; None: sized
    basis: str | None = None  # Hartree-Fock pretraining; None: sized (psijax.system.sizing)
    # a run directory whose wavefunction starts this run instead of pretraining (the same
    # network and atoms, the nuclei moved: psijax.training.warm)
    init_from: str | None = None
    steps: int | None = None  # None: sized from the molecule (psijax.system.sizing)
    walkers: int | None = None  # None: sized from the molecule (psijax.system.sizing)
    pretrain_steps: int = 50  # at least; more while the orbitals are off by > 0.7%, up to:
    pretrain_max_steps: int | None = None  # None: 10 x pretrain_steps
    burn_in_steps: int = 10  # the last 10 with the run's sampler (psijax.training.start)
    # (pretraining leaves the walkers at Hartree-Fock's density, close to the network's;
    # more steps, e.g. without pretraining, start with steps scaled to the nearest nucleus)
    optimizer: str = "spring"
    learning_rate: float | None = None  # None: the optimizer's default (psijax.registry)
    decay_steps: float = 1000.0
    laplacian: str = "default"
    ansatz: str = "ferminet"
    layers: tuple[tuple[int, int], ...] = ((64, 16), (64, 16), (64, 16))  # FermiNet
    attention_layers: int = 2  # PsiFormer: self-attention layers,
    attention_heads: int = 4  # heads per layer
    attention_head_dim: int = 16  # and the width of each head
    layer_norm: bool = False  # PsiFormer: LayerNorm before attention and MLP
    jastrow: bool = True  # electron-electron cusp Jastrow factor (FermiNet and PsiFormer)
    determinants: int = 16
    full_det: bool = True  # one N x N determinant per term; False: up x down
    states: int = 1  # > 1: the lowest K states in one run (natural excited states)
    states_network: str = "shared"  # with states > 1 (psijax.ansatz.states)
    # The step's sampler; "scaled-metropolis" (steps scaled to the nearest nucleus) left Be
    # 1.5 mHa further from exact (docs/benchmarks.md, "Sampling: steps scaled to the ...").
    sampler: str = "metropolis"
    mcmc_moves: int = 10
    clip_scale: float | None = None  # None: sized from the molecule (psijax.system.sizing)
    chunk_size: int | None = None
    jacobian_blocks: int = 1  # SPRING: form the jacobian in this many parameter blocks
    # float32 matrix products (psijax.precision; only GPUs and TPUs tell them apart): of
    # every evaluation of the wavefunction, and of SPRING's products with the jacobian
    matmul_precision: str = "highest"
    gram_precision: str = "high"
    devices: int | None = None  # None: all local devices
    eval_fraction: float = 0.3  # trailing part of the run that gives the energy
    target_error: float | None = None  # Hartree: stop once the energy's error is below it
    seed: int = 0
    out: str = "runs/psijax"
    checkpoint_every: int = 100  # steps between checkpoints; 0: none by step count
    checkpoint_minutes: float = 10.0  # minutes between checkpoints; 0: none by time
    # (a checkpoint is always written at the end and on SIGTERM/SIGINT)
    keep_checkpoints: int = 3  # newest checkpoints kept
    max_rejected: int = 20  # rejected (non-finite) steps in a row that stop the run
    compilation_cache: str = "~/.cache/psijax/xla"  # compiled programs kept here; "": none
    # Seconds: the least a step may take before the run calls it stalled (psijax.run.watch);
    # the bound grows to 10 median steps. 0: no watch.
    stall_timeout: float = 120.0

    def __post_init__(self) -> None:
        _positive(self, "determinants", "mcmc_moves", "decay_steps")
        for sized in ("walkers", "steps", "electrons", "rs", "clip_scale"):  # None: sized
            if getattr(self, sized) is not None:
                _positive(self, sized)
        if self.steps is not None and self.steps < 2:  # refused before minutes of compiling
            raise InputError(
                f"steps={self.steps}: the energy's error bar needs at least 2 training steps; "
                "give --steps 2 or more"
            )
        _positive(self, "attention_layers", "attention_heads", "attention_head_dim",
                  "jacobian_blocks", "keep_checkpoints", "max_rejected")  # fmt: skip
        if int(self.states) != self.states or not 1 <= self.states <= MAX_STATES:
            raise InputError(
                f"states={self.states} must be a whole number from 1 (the ground state) to "
                f"{MAX_STATES}; give e.g. --states 3 for the ground and two excited states"
            )
        _nonnegative(self, "pretrain_steps", "burn_in_steps", "checkpoint_every")
        _nonnegative(self, "checkpoint_minutes", "stall_timeout")
        if math.isnan(self.stall_timeout):
            raise InputError("stall_timeout=nan is not a number; give seconds, e.g. 120")
        for name, known in choices().items():
            if getattr(self, name) not in known:
                raise InputError(
                    f"{name}={getattr(self, name)!r} is unknown; use one of {', '.join(known)}"
                )
        if not self.layers or any(len(w) != 2 or min(w) < 1 for w in self.layers):
            raise InputError(
                f"layers={self.layers!r} is invalid; give (one-electron, two-electron) "
                "widths per layer, e.g. [[64, 16], [64, 16]]"
            )
        if not 0 < self.eval_fraction <= 1:
            raise InputError(
                f"eval_fraction={self.eval_fraction} must be in (0, 1]; give e.g. 0.3 "
                "(the energy from the last 30% of the steps)"
            )
        if self.target_error is not None and not (
            math.isfinite(self.target_error) and self.target_error > 0
        ):
            raise InputError(
                f"target_error={self.target_error} must be a positive number of Hartree, e.g. "
                "1e-4 (or unset to run all --steps)"
            )
        if self.learning_rate is not None and not self.learning_rate > 0:
            raise InputError(
                f"learning_rate={self.learning_rate} must be > 0; give a positive value like 0.02"
            )
        if not 0 <= self.seed <= MAX_SEED:
            raise InputError(
                f"seed={self.seed} is out of range; give a whole number from 0 to {MAX_SEED}"
            )
        if self.basis is not None and not self.basis.strip():
            raise InputError("basis is empty; give a basis name such as sto-6g or cc-pvdz")
        if self.ecp_quadrature not in ECP_QUADRATURES:
            raise InputError(
                f"ecp_quadrature={self.ecp_quadrature} has no rule; use one of "
                f"{', '.join(map(str, ECP_QUADRATURES))} (points on the sphere)"
            )
        if self.ecp_soft_core is not None and not self.ecp_soft_core >= 0:
            raise InputError(
                f"ecp_soft_core={self.ecp_soft_core} must be >= 0; give the softening of the "
                "distances to ECP nuclei in bohr (0: none)"
            )
        if self.ecp_neighbours is not None and self.ecp_neighbours < 0:
            raise InputError(
                f"ecp_neighbours={self.ecp_neighbours} must be >= 0; give how many electrons "
                "each ECP nucleus moves onto its sphere (0: all) or unset it"
            )
        if self.pretrain_max_steps is not None and self.pretrain_max_steps < 0:
            raise InputError(
                f"pretrain_max_steps={self.pretrain_max_steps} must be >= 0; give the most "
                "pretraining steps (at most pretrain_steps: no extension) or unset it"
            )
        if self.chunk_size is not None and self.chunk_size < 1:
            raise InputError(f"chunk_size={self.chunk_size} must be a positive number or unset")


FIELDS = {f.name: f for f in dataclasses.fields(Config)}
# The config in sections: config files may group keys in these tables (``[ansatz]``),
# ``--help`` groups the flags by them and ``--dry-run`` prints them so. A section's table
# holds the same key names as the flat form; both forms mean the same run.
SECTIONS: dict[str, tuple[str, ...]] = {
    "system": ("system", "electrons", "rs", "charge", "spin", "unit", "ecp", "ecp_quadrature",
               "ecp_neighbours", "lattice", "twist"),
    "ansatz": ("ansatz", "layers", "attention_layers", "attention_heads", "attention_head_dim",
               "layer_norm", "jastrow", "determinants", "full_det", "states", "states_network",
               "ecp_soft_core", "matmul_precision"),
    "sampler": ("sampler", "walkers", "mcmc_moves", "burn_in_steps"),
    "optimizer": ("optimizer", "learning_rate", "decay_steps", "clip_scale", "laplacian",
                  "chunk_size", "jacobian_blocks", "gram_precision"),
    "pretraining": ("pretrain_steps", "pretrain_max_steps", "basis", "init_from"),
    "run": ("steps", "target_error", "devices", "eval_fraction", "seed", "out",
            "checkpoint_every", "checkpoint_minutes", "keep_checkpoints", "max_rejected",
            "compilation_cache", "stall_timeout"),
}  # fmt: skip
SECTION_OF = {name: section for section, names in SECTIONS.items() for name in names}
# What a resumed run may change; every other field must match the run being resumed.
RESUMABLE = frozenset({
    "steps", "target_error", "devices", "out", "eval_fraction",
    "checkpoint_every", "checkpoint_minutes", "keep_checkpoints", "max_rejected",
    "compilation_cache", "jacobian_blocks", "stall_timeout", "matmul_precision",
    "gram_precision", "sampler",
})  # fmt: skip
# The Jastrow factor's parameters are among a checkpoint's arrays, which must match anyway;
# a FermiNet run from before FermiNet had one holds jastrow = true (see
# ``psijax.rundir.checkpoint.as_trained``).
IDENTITY = tuple(name for name in FIELDS if name not in RESUMABLE | {"jastrow"})
# Fields added after checkpoints were first written: a checkpoint without them was written
# with these values, so its run's identity leaves them out while they hold these values.
ADDED_LATER = {
    "ansatz": "ferminet", "attention_layers": 2, "attention_heads": 4,
    "attention_head_dim": 16, "layer_norm": False, "jastrow": True, "full_det": True,
    "sampler": "metropolis", "ecp": None, "ecp_quadrature": 12, "pretrain_max_steps": None,
    "states": 1, "ecp_neighbours": None, "ecp_soft_core": 0.0, "init_from": None,
    "electrons": None, "rs": None, "states_network": "separate", "lattice": None,
    "twist": None,
}  # fmt: skip


def pretrain_limit(config: Config) -> int:
    """The most pretraining steps: ``pretrain_max_steps``, by default 10 x ``pretrain_steps``."""
    if config.pretrain_max_steps is None:
        return 10 * config.pretrain_steps
    return max(config.pretrain_steps, config.pretrain_max_steps)


def identity(config: Config) -> dict[str, Any]:
    """The fields a checkpoint must share with the run that resumes it."""
    values = {name: getattr(config, name) for name in IDENTITY}
    # what changes nothing: the softening without ECP atoms, how one state gets its network
    moot = {"ecp_soft_core": config.ecp is None, "states_network": config.states == 1}
    values = {k: v for k, v in values.items() if not moot.get(k)}
    return {k: v for k, v in values.items() if not (k in ADDED_LATER and ADDED_LATER[k] == v)}


def flatten(values: dict[str, Any]) -> dict[str, Any]:
    """Section tables (``{"ansatz": {"layers": ...}}``) as flat keys; checks that each
    key sits in its own section and is given once."""
    flat: dict[str, Any] = {}
    for name, value in values.items():
        key = name.replace("-", "_")
        if not (key in SECTIONS and isinstance(value, dict)):
            if key in flat:
                raise InputError(f"config key {name!r} is given twice; keep one")
            flat[key] = value
            continue
        for inner, item in value.items():
            field = inner.replace("-", "_")
            home = SECTION_OF.get(field)
            if home is None:
                raise InputError(
                    f"unknown config key {inner!r} in [{key}]; valid keys there are "
                    f"{', '.join(SECTIONS[key])}"
                )
            if home != key:
                raise InputError(
                    f"config key {inner!r} belongs in [{home}], not [{key}]; move it there"
                )
            if field in flat:
                raise InputError(f"config key {inner!r} is given twice; keep one")
            flat[field] = item
    return flat


def sectioned(config: Config) -> dict[str, dict[str, Any]]:
    """The config as ``{section: {key: value}}``."""
    values = to_dict(config)
    return {section: {k: values[k] for k in names} for section, names in SECTIONS.items()}


def from_dict(values: dict[str, Any], base: Config | None = None) -> Config:
    """A Config from ``base`` (defaults) with ``values`` replaced; checks names and types.
    ``values`` may be flat or grouped in section tables (``SECTIONS``)."""
    values = flatten(values)
    clean = {}
    for name, value in values.items():
        key = name.replace("-", "_")
        if key not in FIELDS:
            raise InputError(
                f"unknown config key {name!r}; valid keys are {', '.join(sorted(FIELDS))}"
            )
        clean[key] = _coerce(key, value)
    # without a base, defaults that depend on other fields (walkers) follow ``values``
    return Config(**clean) if base is None else dataclasses.replace(base, **clean)


def load(path: str | Path, base: Config | None = None) -> Config:
    """Read a TOML (.toml) or JSON (.json) config file."""
    return from_dict(read_values(path), base)


def load_saved(path: str | Path) -> Config:
    """The config a run saved (its config.json): a field it lacks was added later, and the
    run was made with that field's value of then (``ADDED_LATER``), not today's default."""
    return from_dict({**ADDED_LATER, **read_values(path)})


def read_values(path: str | Path) -> dict[str, Any]:
    """The key = value pairs of a TOML (.toml) or JSON (.json) config file, checked and
    flattened (section tables become plain keys)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"config file {str(path)!r} does not exist; check the path")
    try:
        text = path.read_text(encoding="utf-8")
        values = tomllib.loads(text) if path.suffix != ".json" else json.loads(text)
    except OSError as err:
        raise InputError(
            f"cannot read config file {str(path)!r} ({err.strerror}); check its permissions"
        ) from None
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as err:
        msg = str(err).splitlines()[0]
        raise InputError(f"config file {str(path)!r} is not valid: {msg}; fix its syntax") from None
    if not isinstance(values, dict):
        raise InputError(f"config file {str(path)!r} must hold a table of key = value pairs")
    values = flatten(values)
    from_dict(values)  # names and types
    return values


def to_dict(config: Config) -> dict[str, Any]:
    return dataclasses.asdict(config)


# The fields a job sizes from the molecule (their default is None), with examples
_SIZED_EXAMPLES = {"steps": 3000, "walkers": 512, "basis": "cc-pvdz", "clip_scale": 5.0,
                   "ecp_soft_core": 0.2}  # fmt: skip
SIZED = frozenset(_SIZED_EXAMPLES)


def _coerce(key: str, value: Any) -> Any:
    default = getattr(Config(), key)
    if key == "layers":
        try:
            return tuple((int(a), int(b)) for a, b in value)
        except (TypeError, ValueError):
            raise InputError(
                f"layers={value!r} is invalid; give pairs of widths like [[64, 16], [64, 16]]"
            ) from None
    if value is None:
        if FIELDS[key].type.endswith("None"):
            return None
        raise InputError(f"{key} cannot be empty; give a value like {default!r}")
    want = type(default) if default is not None else _optional_type(key)
    wrong = f"{key}={value!r} has the wrong type; give a {_TYPE_NAMES.get(want, want.__name__)}"
    example = default if default is not None else _SIZED_EXAMPLES.get(key)
    if example is not None:
        wrong += f" like {example!r}"
    if want is bool:
        if isinstance(value, bool):
            return value
        raise InputError(f"{key}={value!r} has the wrong type; give true or false")
    if isinstance(value, bool):
        raise InputError(wrong)
    try:
        if want is int and isinstance(value, float) and not value.is_integer():
            raise ValueError
        return want(value)
    except (TypeError, ValueError):
        raise InputError(wrong) from None


def _optional_type(key: str) -> type:
    """The type of an optional field from its annotation (``"float | None"`` -> float)."""
    return {"int": int, "float": float, "str": str}[FIELDS[key].type.split("|")[0].strip()]


def _positive(config: Config, *names: str) -> None:
    for name in names:
        if not getattr(config, name) > 0:
            raise InputError(f"{name}={getattr(config, name)} must be positive; give a value > 0")


def _nonnegative(config: Config, *names: str) -> None:
    for name in names:
        if getattr(config, name) < 0:
            raise InputError(
                f"{name}={getattr(config, name)} must be >= 0; "
                "give 0 to skip it or a positive number"
            )


def for_resume(saved: Config, values: dict[str, Any]) -> Config:
    """The saved run's config with ``values`` applied; only ``RESUMABLE`` fields may change.
    A field a job sizes from the molecule left unset (None) keeps the saved run's value."""
    values = {k: v for k, v in flatten(values).items() if not (k in SIZED and v is None)}
    for name, value in values.items():
        key = name.replace("-", "_")
        if key in FIELDS and key not in RESUMABLE and _coerce(key, value) != getattr(saved, key):
            raise InputError(
                f"{key} cannot change when resuming (the run has {getattr(saved, key)!r}, "
                f"given {value!r}); drop that setting or start a new run in another --out"
            )
    return from_dict(values, saved)
