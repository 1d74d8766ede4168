"""The flags of ``psijax train``, generated from ``psijax.config.Config``.

Every field of ``Config`` is a flag: ``steps`` is ``--steps``, ``mcmc_moves`` is
``--mcmc-moves``. The flag's type and its default come from the dataclass; choices come
from the config's tables (``OPTIMIZERS``, ``LAPLACIANS``). Only the one-line descriptions
live here (``HELP``); a test checks that every field has one. Flags default to ``None`` so
that only the flags given override a config file or a resumed run's config; argparse
checks only that a value parses (number, widths), and ``Config`` checks ranges and names,
so a flag and a config-file key give the same error.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import types
import typing
from typing import Any

from psijax import config as config_lib
from psijax import registry
from psijax.system import sizing

HELP = {
    "system": "preset (H2, LiH, N2, ...), atom string 'Li 0 0 0; H 0 0 3.015', .xyz path, "
    "or heg: the homogeneous electron gas (with --electrons and --rs)",
    "electrons": "the electron gas (--system heg): electrons per cell, each spin a closed "
    "shell of plane waves (1, 7, 19, 27, 33, 57, ... per spin)",
    "rs": "the electron gas (--system heg): Wigner-Seitz radius in bohr",
    "lattice": "a crystal: the cell's three vectors 'a1; a2; a3' in --unit, the atoms of "
    "--system in one cell (Gamma point, all-electron)",
    "twist": "the electron gas: the twist 't1 t2 t3' in fractions of the reciprocal vectors "
    "(twisted boundary conditions, complex psi); by default the Gamma point",
    "charge": "net charge",
    "spin": "n_up - n_down",
    "unit": "unit of atom-string coordinates",
    "ecp": "effective core potentials from pyscf's tables: ccecp (every element it has a "
    "core for) or element:table pairs, e.g. 'Cl:ccecp Na:ccecp'",
    "ecp_quadrature": "points of the nonlocal ECP term's quadrature on the sphere",
    "ecp_neighbours": "electrons each ECP nucleus moves onto its sphere, the nearest "
    "(default: from the geometry; 0: all)",
    "ecp_soft_core": "bohr: the networks' distances to ECP nuclei become sqrt(r^2 + a^2), "
    "smooth where the valence wavefunction has no cusp (0: plain |r - R|)",
    "basis": "basis for Hartree-Fock pretraining",
    "steps": "training steps (at least 2: the energy's error bar needs two)",
    "walkers": "walkers (a multiple of the device count)",
    "init_from": "a run directory whose wavefunction (parameters and walkers) starts this run "
    "instead of pretraining: the same network and atoms, the nuclei may have moved",
    "pretrain_steps": "Hartree-Fock pretraining steps at least (0: none); from 50 on, more "
    "while the network's orbitals are off Hartree-Fock's by more than 0.7% (root mean square)",
    "pretrain_max_steps": "the most pretraining steps (default 10 x --pretrain-steps; "
    "--pretrain-steps or less: exactly that many)",
    "burn_in_steps": "MCMC burn-in steps before training: the last 10 with the run's "
    "--sampler, adapting its width, any before them with steps scaled to the nearest "
    "nucleus (for walkers far from the density, e.g. with --pretrain-steps 0)",
    "optimizer": "optimizer",
    "learning_rate": "initial learning rate",
    "decay_steps": "learning rate decays as lr / (1 + step / decay_steps)",
    "laplacian": "Laplacian operator for the kinetic energy",
    "ansatz": "wavefunction",
    "layers": "FermiNet widths (one-electron x two-electron) per layer",
    "attention_layers": "PsiFormer self-attention layers",
    "attention_heads": "PsiFormer attention heads per layer",
    "attention_head_dim": "PsiFormer width of each attention head",
    "layer_norm": "PsiFormer LayerNorm before attention and MLP",
    "jastrow": "electron-electron cusp Jastrow factor (FermiNet and PsiFormer)",
    "determinants": "determinants summed in psi (with --states, shared out among the states)",
    "full_det": "one N x N determinant per term (false: up x down determinants)",
    "states": "the lowest K states in one run (natural excited states; 1: the ground state)",
    "states_network": "with --states: one network whose determinants the states share out "
    "(shared: K network evaluations per walker) or a network per state with all the "
    "determinants each (separate: K^2)",
    "sampler": "how walkers are sampled from |psi|^2",
    "mcmc_moves": "MCMC moves per step",
    "clip_scale": "clip local energies at this many mean absolute deviations from the median",
    "chunk_size": "walkers per chunk of the local energy (bounds memory)",
    "jacobian_blocks": "SPRING: form the walkers x parameters jacobian in this many parameter "
    "blocks, never whole (bounds memory; slower)",
    "matmul_precision": "float32 matrix products of the wavefunction and its derivatives: "
    "highest (full float32) or default / high (TensorFloat-32 on a GPU)",
    "gram_precision": "float32 matrix products of SPRING with the jacobian: high (on an H100 "
    "float32's error at TensorFloat-32's speed), highest (full float32: 6x slower there) or "
    "default (TensorFloat-32 on a GPU: 6x float32's error)",
    "devices": "devices to shard walkers over",
    "eval_fraction": "trailing fraction of the steps that gives the energy",
    "target_error": "stop early once the energy's error bar (Ha) is below this and it no "
    "longer drifts (--steps is then the most steps)",
    "seed": "random seed",
    "out": "run directory",
    "checkpoint_every": "steps between checkpoints (0: by time only)",
    "checkpoint_minutes": "minutes between checkpoints (0: by steps only)",
    "keep_checkpoints": "newest checkpoints to keep",
    "max_rejected": "rejected (non-finite) steps in a row that stop the run",
    "stall_timeout": "seconds a step may take at least before the run calls it stalled "
    "(the bound grows to 10 median steps; 0: no watch)",
    "compilation_cache": "directory of compiled programs that later launches reuse ('': off)",
}
# What an unset (None) default means, for --help.
UNSET = {
    "charge": "the system's (neutral for atom strings)",
    "spin": "the preset's, else the lowest (the electron gas: unpolarised)",
    "electrons": "none: a molecule",
    "rs": "none: a molecule",
    "learning_rate": ", ".join(
        f"{e.learning_rate:g} for {name}" for name, e in registry.OPTIMIZERS.items()
    ),
    "chunk_size": "automatic",
    "walkers": sizing.describe(),
    "steps": sizing.describe_steps(),
    "basis": sizing.describe_basis(),
    "clip_scale": f"{sizing.CLIP_SCALE:g}; {sizing.ECP_CLIP_SCALE:g} with --ecp",
    "ecp_soft_core": sizing.describe_soft_core(),
    "ecp": "none: all electrons",
    "devices": "all local devices",
    "target_error": "none: run all --steps",
    "init_from": "none: initial parameters pretrained on Hartree-Fock",
}
CHOICES = {**config_lib.CHOICES, "unit": ("bohr", "angstrom")}


def flag_of(field: str) -> str:
    return "--" + field.replace("_", "-")


def whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def boolean(text: str) -> bool:
    value = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}
    try:
        return value[text.strip().lower()]
    except KeyError:
        raise argparse.ArgumentTypeError(f"{text!r} is not true or false") from None


def _layers(text: str) -> tuple[tuple[int, int], ...]:
    """``64x16,64x16`` or JSON ``[[64, 16], [64, 16]]``."""
    bad = argparse.ArgumentTypeError(
        f"{text!r} is not a list of layer widths; give e.g. 64x16,64x16 or '[[64, 16]]'"
    )
    try:
        if text.strip().startswith("["):
            pairs = json.loads(text)
        else:
            pairs = [re.fullmatch(r"\s*(\d+)\s*x\s*(\d+)\s*", p).groups() for p in text.split(",")]
        layers = tuple((int(a), int(b)) for a, b in pairs)
    except (AttributeError, TypeError, ValueError):
        raise bad from None
    if not layers:
        raise bad
    return layers


def _base_type(field: dataclasses.Field) -> type:
    """int, float, str or tuple from the field's annotation (``int | None`` -> int)."""
    hint = typing.get_type_hints(config_lib.Config)[field.name]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    return typing.get_origin(hint) or hint


_PARSERS = {int: whole_number, float: number, str: str, tuple: _layers, bool: boolean}


def _default_text(field: dataclasses.Field) -> str:
    value = field.default
    if value is None:
        return UNSET.get(field.name, "unset")
    if field.name == "layers":
        return ",".join(f"{a}x{b}" for a, b in value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per ``Config`` field, with its default and choices in the help."""
    groups = {
        section: parser.add_argument_group(
            f"{section} settings (config-file keys of the same names, flat or under [{section}])"
        )
        for section in config_lib.SECTIONS
    }
    for field in dataclasses.fields(config_lib.Config):
        group = groups[config_lib.SECTION_OF[field.name]]
        kind = _base_type(field)
        metavar = None
        if field.name in CHOICES:
            metavar = "{" + ",".join(CHOICES[field.name]) + "}"
        elif kind is tuple:
            metavar = "AxB,..."
        elif kind is bool:
            metavar = "{true,false}"
        elif kind in (int, float):
            metavar = "N" if kind is int else "X"
        text = HELP.get(field.name, field.name.replace("_", " "))
        group.add_argument(
            flag_of(field.name),
            dest=field.name,
            type=_PARSERS[kind],
            default=None,
            metavar=metavar,
            help=f"{text} (default: {_default_text(field)})".replace("%", "%%"),
        )


def given(args: argparse.Namespace) -> dict[str, Any]:
    """The config keys the command was given: those its --config file sets, then its flags
    (only these, so that a resumed job can tell what would change)."""
    values = config_lib.read_values(args.config) if args.config else {}
    return values | overrides(args)


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The config fields given as flags."""
    return {
        name: getattr(args, name)
        for name in config_lib.FIELDS
        if getattr(args, name, None) is not None
    }


# Per-process launch settings of a multi-process job (not part of the run's config).
DISTRIBUTED = {
    "--coordinator": (str, "process 0's host:port (env PSIJAX_COORDINATOR)"),
    "--num-processes": (whole_number, "processes in the job (env PSIJAX_NUM_PROCESSES)"),
    "--process-id": (whole_number, "this process's index, 0 .. n-1 (env PSIJAX_PROCESS_ID)"),
    "--coordinator-timeout": (number, "seconds to wait for the coordinator (default 300)"),
    "--peer-timeout": (number, "seconds a step may wait for the other processes (default 120)"),
}


def add_distributed_flags(parser: argparse.ArgumentParser) -> None:
    """The flags that join a multi-process job (training and evaluation alike)."""
    for flag, (kind, text) in DISTRIBUTED.items():
        parser.add_argument(flag, type=kind, help=text, default=None)
    parser.add_argument(
        "--distributed", action="store_true",
        help="join a multi-process job found by JAX's cluster detection (SLURM, ...)",
    )  # fmt: skip


def join_distributed(args: argparse.Namespace) -> None:
    """Join the multi-process job the flags (or the environment) describe, if any."""
    from psijax.parallel import distributed

    distributed.initialize(
        args.coordinator, args.num_processes, args.process_id,
        auto=args.distributed, timeout_s=args.coordinator_timeout or 300.0,
        peer_timeout_s=args.peer_timeout,
    )  # fmt: skip
