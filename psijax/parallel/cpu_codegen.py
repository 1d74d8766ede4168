"""How XLA's CPU backend generates code for psijax's large programs.

jaxlib 0.10's CPU compiler emits each loop fusion through its MLIR fusion emitters by
default. For psijax's programs the older elemental emitters (``xla_cpu_use_fusion_emitters``
false) compile faster and run as fast or faster: on two cores LiH's training step compiles
in 0.72x the time (10.9 -> 7.8 s), N2's in 0.81x, the steps take 0.90-0.99x as long, and a
first LiH launch reaches its first training step in 0.75x the time; the float32 kinetic
energy near nodes is as accurate (docs/benchmarks.md, "XLA's CPU code generation").

``compiler_options(brief=True)``, for the programs a launch runs only a few times
(pretraining, burn-in and the evaluation's equilibration), also has LLVM optimise at level 1
(``xla_backend_optimization_level``) instead of XLA's default 3: they then compile in
about three quarters of the CPU time and run as fast (LiH's pretraining program 3.45
against 4.5 CPU-s, burn-in's 1.7 against 2.3; N2's 3.7 against 4.8-5.2 and 1.55 against
2.7). The training step stays at the default: at level 1 it ran 1.7-9.4% slower in five of
nine A/B runs (LiH and N2) and at most 3% faster in the others, for 1-2 CPU-s less compile
(docs/benchmarks.md, "XLA's CPU code generation", "LLVM's optimisation level").

``compiler_options()`` gives the options to pass per program (``jax.jit(...,
compiler_options=...)`` or ``Lowered.compile``), never globally: only on a CPU backend, only
where this jaxlib knows them (0.8-0.11 know both; 0.12 refuses the emitters' by name), and
never against the user's own ``XLA_FLAGS`` setting of either.
"""

from __future__ import annotations

import functools
import os

OPTION = "xla_cpu_use_fusion_emitters"
LEVEL = "xla_backend_optimization_level"
BRIEF_LEVEL = 1


@functools.cache
def compiler_options(brief: bool = False) -> dict[str, bool | int]:
    """The compile options for psijax's training, pretraining, burn-in and evaluation
    programs on this process's default backend ({} off the CPU); ``brief``: for a program
    run only a few times (module doc)."""
    import jax

    if jax.default_backend() != "cpu":
        return {}
    flags = os.environ.get("XLA_FLAGS", "")
    wanted = ((OPTION, False),) + ((LEVEL, BRIEF_LEVEL),) * brief
    options = {k: v for k, v in wanted if k not in flags}
    for name in list(options):
        try:  # a jaxlib without the option rejects it by name
            jax.jit(lambda x: x + 1, compiler_options={name: options[name]}).lower(0.0).compile()
        except jax.errors.JaxRuntimeError:  # "No such compile option": leave XLA's default
            del options[name]
    return options
