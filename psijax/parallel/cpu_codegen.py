"""How XLA's CPU backend generates code for psijax's large programs.

jaxlib 0.10's CPU compiler emits each loop fusion through its MLIR fusion emitters by
default. For psijax's programs the older elemental emitters (``xla_cpu_use_fusion_emitters``
false) compile faster and run as fast or faster: on two cores LiH's training step compiles
in 0.72x the time (10.9 -> 7.8 s), N2's in 0.81x, the steps take 0.90-0.99x as long, and a
first LiH launch reaches its first training step in 0.75x the time; the float32 kinetic
energy near nodes is as accurate (docs/benchmarks.md, "XLA's CPU code generation").

``compiler_options()`` gives the option to pass per program (``jax.jit(...,
compiler_options=...)`` or ``Lowered.compile``), never globally: only on a CPU backend, only
where this jaxlib knows it (0.8-0.11 do; 0.12 refuses it by name), and never against the
user's own ``XLA_FLAGS`` setting of it.
"""

from __future__ import annotations

import functools
import os

OPTION = "xla_cpu_use_fusion_emitters"


@functools.cache
def compiler_options() -> dict[str, bool]:
    """The compile options for psijax's training, pretraining, burn-in and evaluation
    programs on this process's default backend ({} off the CPU)."""
    import jax

    if jax.default_backend() != "cpu" or OPTION in os.environ.get("XLA_FLAGS", ""):
        return {}
    options = {OPTION: False}
    try:  # a jaxlib without the option rejects it by name
        jax.jit(lambda x: x + 1, compiler_options=options).lower(0.0).compile()
    except jax.errors.JaxRuntimeError:  # "No such compile option": leave XLA's default
        return {}
    return options
