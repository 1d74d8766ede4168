"""``psijax train --dry-run``: check everything a run would check, show the job, write nothing.

Prints the resolved config (as a config file that reproduces the run), the electrons per
spin, the parameter count, the device layout, the Laplacian operator and the Hartree-Fock
energy. Any problem raises the same ``InputError`` a real run would raise.
"""

from __future__ import annotations

import json
from pathlib import Path

import jax

from psijax import config as config_lib
from psijax import parallel, registry, system
from psijax.hamiltonian.ewald import PeriodicCoulomb
from psijax.rundir import checkpoint, train_files
from psijax.system import ecp, presets, scf, sizing
from psijax.training import warm
from psijax.training.state import abstract_train_state


def config_text(config: config_lib.Config) -> str:
    """The config as TOML tables, one per section; unset (None) fields are comments."""
    lines = []
    for section, values in config_lib.sectioned(config).items():
        lines.append(f"[{section}]")
        for name, value in values.items():
            if value is None:
                lines.append(f"# {name} = (unset)")
            else:
                lines.append(f"{name} = {json.dumps(value)}")
    return "\n".join(lines)


def describe(config: config_lib.Config, *, force: bool = False, resume: bool = False) -> str:
    """Everything a run of ``config`` would check, checked; the job in words."""
    molecule = system.for_config(config)
    config = sizing.sized(config, molecule)
    mesh = parallel.make_mesh(config.devices)
    parallel.check_walkers(config.walkers, mesh)
    periodic, gas = molecule.lattice is not None, not molecule.n_atoms
    if not gas:  # the electron gas has no basis and takes no pyscf
        molecule.to_pyscf(config.basis)  # an unknown basis fails here
    eigenstates = registry.eigenstates(config)
    eigenstates.check(molecule, config)
    if config.init_from:
        warm.check(config.init_from, molecule, config)
    out = Path(config.out)
    if resume:
        latest = None
        if (out / checkpoint.SUBDIR).is_dir():
            reader = checkpoint.Checkpoints(out, read_only=True)
            latest = reader.latest()
            reader.close()
        where = f"resume from step {latest}" if latest is not None else "resume from step 0"
    else:
        parallel.check_on_lead(lambda: train_files.check_new(out, force))
        holds = any((out / name).exists() for name in train_files.RUN_FILES)
        where = "overwrite the run there (--force)" if holds else "a new run"
    net = registry.ansatz(molecule, config)
    operator = registry.laplacian(config.laplacian, molecule.n_electrons)
    optimizer = registry.optimizer(config)
    template = abstract_train_state(
        net, optimizer, config.walkers, net.n_electrons, mesh,
        sampler=registry.sampler(config, molecule),
    )  # fmt: skip
    n_params = sum(x.size for x in jax.tree.leaves(template.params))
    n_dev = mesh.devices.size
    system_lines, hf_lines = (
        (molecule.describe(), [] if gas else _hartree_fock_lines(molecule, config))
        if periodic
        else _molecule_lines(molecule, config, eigenstates)
    )
    lines = [
        "# psijax train --dry-run: every input checked, nothing written",
        "# the resolved config (save it as run.toml and pass --config run.toml):",
        config_text(config),
        "",
        *system_lines,
        f"network        {net.describe()}: {n_params:,} parameters",
        f"laplacian      {config.laplacian} ({type(operator).__name__})",
        f"devices        {n_dev} x {jax.devices()[0].platform} in {jax.process_count()} "
        f"process(es); {config.walkers // n_dev} walkers per device ({config.walkers} in all)",
        *[f"start          from the wavefunction of {config.init_from} (no pretraining)"]
        * bool(config.init_from),
        *["start          the plane-wave determinant (no pretraining)"] * gas,
        *hf_lines,
        f"output         {out}: {where}",
    ]
    return "\n".join(lines)


def _molecule_lines(molecule, config: config_lib.Config, eigenstates):
    """A molecule's lines: (atoms, electrons, states and exact energy; its Hartree-Fock
    energy)."""
    hf = scf.hartree_fock(molecule, config.basis)
    exact = molecule.exact_energy
    return [
        f"molecule       {len(molecule.symbols)} atoms ({' '.join(molecule.symbols)}), "
        f"charge {molecule.charge}, spin {molecule.spin}",
        f"electrons      {molecule.n_electrons}: {molecule.n_up} up, {molecule.n_down} down"
        + (" (valence)" if molecule.ecp else ""),
        *_ecp_lines(molecule),
        *eigenstates.describe(molecule, config, hf),
        f"exact energy   {f'{exact:.6f} Ha' if exact is not None else 'unknown'}"
        + eigenstates.exact_words * (exact is not None)
        + f" ({presets.ECP_SOURCE})" * (exact is not None and bool(molecule.ecp)),
    ], _hartree_fock_lines(molecule, config, hf)


def _hartree_fock_lines(molecule, config: config_lib.Config, hf=None) -> list[str]:
    """The Hartree-Fock energy pretraining starts from (at Gamma, per cell, for a crystal)."""
    hf = scf.hartree_fock(molecule, config.basis) if hf is None else hf
    basis = ecp.pretraining_basis(molecule.symbols, molecule.ecp, config.basis)
    converged = "" if hf.converged else " (not converged)"
    if molecule.lattice is None:
        return [f"hartree-fock   UHF/{basis} E = {hf.energy:.6f} Ha{converged}"]
    nuclei = PeriodicCoulomb.of(molecule).nucleus_nucleus
    return [
        f"nuclei         Ewald energy {nuclei:.10f} Ha per cell",
        f"hartree-fock   UHF/{basis} at Gamma, per cell E = {hf.energy:.6f} Ha{converged}",
    ]


def _ecp_lines(molecule) -> list[str]:
    if not molecule.ecp:
        return []
    return [f"ecp            {ecp.describe(molecule.symbols, molecule.ecp)}"]
