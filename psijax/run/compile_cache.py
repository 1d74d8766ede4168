"""JAX's persistent compilation cache, on by default for psijax's own runs.

The training step of a small molecule takes tens of seconds to compile on a CPU; with
the cache a second launch of the same job loads the compiled programs from disk
instead (docs/benchmarks.md, "Launch"). The cache is keyed by JAX on the program, the
JAX/XLA versions, the devices and the compile options, so a stale entry is never used.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax

DEFAULT = "~/.cache/psijax/xla"
# Programs that compile faster than this are not worth a disk write and a read.
MIN_COMPILE_SECONDS = 0.25


def use_compilation_cache(directory: str | None = DEFAULT) -> Path | None:
    """Cache compiled programs in ``directory`` (created if missing); '' or None: off.

    JAX's own ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS`` overrides the 0.25 s below
    which a program is not cached. A cache the user configured already
    (``JAX_COMPILATION_CACHE_DIR`` or ``jax.config.update('jax_compilation_cache_dir', ...)``)
    is left alone and returned. Returns the directory in use, or None.
    """
    configured = jax.config.jax_compilation_cache_dir
    if configured:
        return Path(configured)
    if not directory:
        return None
    path = Path(os.path.expanduser(directory))
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None  # a read-only home is no reason to stop a run; it only compiles again
    jax.config.update("jax_compilation_cache_dir", str(path))
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    return path
