"""XLA flags that psijax sets for its process before JAX starts its backend.

From jaxlib 0.10 on, XLA's CPU backend hands matrix products and the operations around
them to YNNPACK "fusions" by default. Each such fusion runs on one thread: the LiH
training step's Gram matrix (256 x 35,616 x 256) took 60-73 ms as a YNNPACK fusion and
37 ms as XLA's own multi-threaded product on the 2-core CPU, and under load from another
process the whole step took 0.32-0.38 s with the fusions against 0.17 s without
(docs/benchmarks.md, "YNNPACK fusions"). jaxlib 0.8 and 0.9 (which FermiNet and jaqmc
run on) have the fusions off. psijax turns them off again:

- only where XLA_FLAGS does not mention the flag already (the user's choice wins);
- only before JAX has started a backend (XLA reads XLA_FLAGS once, at that moment; a
  process that ran JAX before importing psijax keeps its flags);
- only on jaxlib versions known to have the flag (an unknown flag in XLA_FLAGS aborts the
  process): ``KNOWN`` is checked by tests/test_xla_flags.py on every JAX of CI.

The flag is read by XLA's CPU compiler only; other backends ignore it. It changes which
kernels run, not what they compute (round-off aside).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

FLAG = "xla_cpu_experimental_ynn_fusion_type"
SETTING = f"--{FLAG}="
# jaxlib versions (major, minor) whose XLA has YNNPACK fusions on by default and knows
# the flag that turns them off; 0.10.2 and 0.12.0 were measured, 0.11 lies between.
KNOWN = ((0, 10), (0, 13))


def apply(environ: MutableMapping[str, str] | None = None) -> bool:
    """Turn YNNPACK fusions off in ``environ`` (``os.environ``) if it is safe; True if set."""
    environ = os.environ if environ is None else environ
    flags = environ.get("XLA_FLAGS", "")
    if FLAG in flags or not _known_jaxlib() or _backend_started():
        return False
    environ["XLA_FLAGS"] = f"{flags} {SETTING}".strip()
    return True


def _known_jaxlib() -> bool:
    try:
        import jaxlib
    except ImportError:
        return False
    major_minor = tuple(int(x) for x in jaxlib.__version__.split(".")[:2])
    return KNOWN[0] <= major_minor < KNOWN[1]


def _backend_started() -> bool:
    from jax._src import xla_bridge

    return bool(xla_bridge.backends_are_initialized())
