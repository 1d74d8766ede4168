"""The training step within the device's memory: planned by XLA, made to fit.

XLA plans every buffer of a compiled program ahead (``memory_analysis()``: arguments,
outputs and temporaries). ``compile_within`` compiles the step, compares its plan with
``FRACTION`` of the memory free on one device (the least on any process), and when it
does not fit, takes smaller walker chunks for the local energy and the jacobian
(``chunk_size``) and forms SPRING's [walkers, params] jacobian in parameter blocks
(``jacobian_blocks``), sized from the plan's own parts, then compiles again. A jacobian
that alone would not fit is put into blocks before the first compilation (``first_guess``:
its size is known from the walkers and parameters). Settings the user gave are kept; a
step that still does not fit ends with one line naming what to set.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable

import jax
import numpy as np
from jax.sharding import Mesh

from psijax import optim
from psijax.config import Config
from psijax.errors import InputError
from psijax.optim.base import JACOBIAN
from psijax.parallel.batching import auto_chunk
from psijax.training.step import StepConfig

FRACTION = 0.8  # of the free memory one step may plan for
TRIES = 3  # compilations before giving up
# SPRING's unblocked step holds about this many [walkers, params] float32 arrays at once
# (the per-leaf gradients, their centered copies, the products' operands): a 16-electron
# plan of 4.4 MB held 3 x its 1.67 MB jacobian.
JACOBIAN_COPIES = 3


def free_bytes(device: jax.Device | None = None) -> int | None:
    """Memory free for one device now: the accelerator's own, or on a CPU the host's
    available memory shared by its CPU devices; None where it cannot be told."""
    device = device or jax.local_devices()[0]
    stats = device.memory_stats() if hasattr(device, "memory_stats") else None
    if stats and "bytes_limit" in stats:
        return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    if device.platform != "cpu":
        return None
    available = _mem_available()
    return None if available is None else available // jax.local_device_count()


def more_memory(platform: str | None = None, environ=os.environ) -> str:
    """Where the device is a GPU whose memory JAX shares out by its default fraction, how
    to give a run more of it (appended to the lines that fit a step to the memory)."""
    platform = platform or jax.local_devices()[0].platform
    if platform != "gpu" or "XLA_PYTHON_CLIENT_MEM_FRACTION" in environ:
        return ""
    return (
        " (JAX takes 75% of a GPU's memory by default: XLA_PYTHON_CLIENT_MEM_FRACTION=0.9 "
        "gives it more)"
    )


def budget() -> int | None:
    """The bytes one step may plan for: ``FRACTION`` of ``free_bytes``, the least on any
    process (a collective with several processes: every process calls it, on its main
    thread); None where the free memory cannot be told."""
    free = free_bytes()
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        everyone = multihost_utils.process_allgather(np.array(-1 if free is None else free))
        known = [int(x) for x in np.ravel(everyone) if x >= 0]
        free = min(known) if known else None
    return None if free is None else int(FRACTION * free)


def _mem_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


@dataclasses.dataclass(frozen=True)
class Plan:
    """A compiled program's memory plan on one device, in bytes."""

    fixed: int  # arguments + outputs - aliased: the state, which no setting shrinks
    temporary: int  # the program's working buffers

    @property
    def total(self) -> int:
        return self.fixed + self.temporary

    @classmethod
    def of(cls, compiled) -> Plan:
        m = compiled.memory_analysis()
        fixed = m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes
        return cls(int(fixed), int(m.temp_size_in_bytes))


def smaller(
    plan: Plan,
    budget: int,
    config: StepConfig,
    *,
    walkers: int,
    devices: int,
    n_params: int,
    jacobian: bool,
    kept: frozenset[str] = frozenset(),
) -> StepConfig | None:
    """Settings whose step should fit ``budget`` bytes per device, from ``plan`` of the
    step with ``config`` (None: none to be had without changing ``kept`` settings).

    The temporaries are split into SPRING's jacobian (``jacobian``: ``JACOBIAN_COPIES``
    x walkers x params x 4 bytes per device, over its blocks) and the rest, which scales
    with the walkers evaluated at once (``chunk_size``, or the automatic chunk when unset);
    each part gets what it needs of the room left by the fixed part, the jacobian at most
    half.
    """
    room = budget - plan.fixed
    if room <= 0:
        return None
    per_device = walkers // devices
    blocks = config.jacobian_blocks
    whole = JACOBIAN_COPIES * per_device * n_params * 4 if jacobian else 0
    jac = whole // blocks
    rest = max(plan.temporary - jac, 1)
    if jac > room // 2 and "jacobian_blocks" not in kept:
        blocks = min(n_params, max(blocks + 1, math.ceil(2 * whole / room)))
        jac = whole // blocks
    size = config.chunk_size
    if rest > room - jac and "chunk_size" not in kept:
        now = (size or auto_chunk(walkers, devices) or walkers) // devices
        scale = max(room - jac, 0) / rest
        chunk = max(1, min(now - 1, 2 ** math.floor(math.log2(max(now * scale, 1)))))
        size = chunk * devices
    new = dataclasses.replace(config, jacobian_blocks=blocks, chunk_size=size)
    return None if new == config else new


def _jacobian_bytes(*, walkers: int, devices: int, n_params: int, jacobian: bool, **_) -> int:
    """SPRING's unblocked jacobian per device: JACOBIAN_COPIES x walkers x params x 4."""
    return JACOBIAN_COPIES * (walkers // devices) * n_params * 4 if jacobian else 0


def first_guess(
    settings: StepConfig, budget: int | None, *, kept: frozenset[str] = frozenset(), **fitting
) -> StepConfig:
    """Before anything is compiled: as many jacobian blocks as keep SPRING's jacobian within
    half of ``budget`` (what ``smaller`` would choose once a plan is known), so that a
    step whose jacobian alone cannot fit is not compiled whole first; the walker chunk
    needs the compiled plan and is left to ``smaller``."""
    whole = _jacobian_bytes(**fitting)
    if budget is None or not whole or "jacobian_blocks" in kept:
        return settings
    blocks = min(fitting["n_params"], max(settings.jacobian_blocks, math.ceil(2 * whole / budget)))
    return dataclasses.replace(settings, jacobian_blocks=blocks)


def compile_within(
    build: Callable[[StepConfig], Callable],
    settings: StepConfig,
    template,
    budget: int | None,
    *,
    config: Config,
    mesh: Mesh,
    optimizer,
    note: Callable[[str], None] = lambda line: None,
    wait: Callable[[], None] = lambda: None,
):
    """The compiled ``build(settings).lower(template)``, or that of settings that fit
    ``budget`` bytes per device (``smaller``; the run's ``chunk_size`` and
    ``jacobian_blocks`` are kept where ``config`` sets them); returns (compiled, its
    StepConfig). ``wait()`` returns when the compiling may start (the lowering, Python,
    does not wait)."""
    fitting = dict(
        walkers=config.walkers, devices=mesh.devices.size,
        n_params=sum(x.size for x in jax.tree.leaves(template.params)),
        jacobian=JACOBIAN in optim.needs_of(optimizer),
        kept=frozenset(k for k, unset in (("chunk_size", None), ("jacobian_blocks", 1))
                       if getattr(config, k) != unset),
    )  # fmt: skip
    shrink = lambda plan, current: smaller(plan, budget, current, **fitting)
    guess = first_guess(settings, budget, **fitting)
    if guess != settings:
        note(
            f"SPRING's jacobian alone needs about {_size(_jacobian_bytes(**fitting))} per "
            f"device, more than half of the {_size(budget)} that can be had: compiling the "
            f"training step with jacobian_blocks {guess.jacobian_blocks}{more_memory()}"
        )

    def lowered_then_compiled(current):
        lowered = build(current).lower(template)
        wait()
        return lowered.compile()

    return _fit(
        lowered_then_compiled, guess, budget, shrink, what="training step",
        describe=_settings, note=note,
        advice="a smaller --chunk-size, more --jacobian-blocks, fewer --walkers or more --devices"
        + more_memory(),
    )  # fmt: skip


def compile_evaluation(
    build: Callable[[int | None], Callable],
    chunk: int | None,
    args: tuple,
    budget: int | None,
    *,
    walkers: int,
    devices: int,
    kept: bool,
    note: Callable[[str], None] = lambda line: None,
):
    """The compiled ``build(chunk).lower(*args)`` of an evaluation step (no jacobian), or
    that of a smaller walker chunk that fits ``budget`` (``kept``: the run set its chunk;
    it stays); returns (compiled, its chunk)."""
    fitting = dict(walkers=walkers, devices=devices, n_params=0, jacobian=False,
                   kept=frozenset({"chunk_size"}) if kept else frozenset())  # fmt: skip
    compiled, settings = _fit(
        lambda current: build(current.chunk_size).lower(*args).compile(),
        StepConfig(chunk_size=chunk), budget,
        lambda plan, current: smaller(plan, budget, current, **fitting),
        what="evaluation step", describe=lambda current: f"chunk_size {current.chunk_size}",
        advice="fewer --walkers or more --devices", note=note,
    )  # fmt: skip
    return compiled, settings.chunk_size


def _fit(compile_with, settings, budget, shrink, *, what, describe, advice, note):
    """``compile_with(settings)``, compiled again with ``shrink(plan, settings)`` while
    its plan exceeds ``budget`` (at most ``TRIES`` compilations), else one line."""
    compiled = compile_with(settings)
    for attempt in range(TRIES):
        plan = Plan.of(compiled)
        if budget is None or plan.total <= budget:
            return compiled, settings
        fitted = shrink(plan, settings)
        if fitted is None or attempt == TRIES - 1:
            break
        note(
            f"the {what} plans {_size(plan.total)} per device, {_size(budget)} can be had: "
            f"compiling it again with {describe(fitted)}"
        )
        settings = fitted
        compiled = compile_with(settings)
    raise InputError(
        f"the {what} needs {_size(plan.total)} per device but {_size(budget)} can be had "
        f"({describe(settings)}); set {advice}"
    )


def _settings(config: StepConfig) -> str:
    chunk = "automatic" if config.chunk_size is None else config.chunk_size
    return f"chunk_size {chunk}, jacobian_blocks {config.jacobian_blocks}"


def _size(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"
