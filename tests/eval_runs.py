"""A tiny trained run shared by the evaluation tests (trained once per test process)."""

from __future__ import annotations

import functools
import hashlib
import shutil
import tempfile
from pathlib import Path

TINY_RUN = dict(
    system="H2", layers=((8, 4),), determinants=1, walkers=16, pretrain_steps=3,
    burn_in_steps=3, mcmc_moves=2, steps=6,
)  # fmt: skip


@functools.cache
def _trained() -> Path:
    import psijax

    root = Path(tempfile.mkdtemp(prefix="psijax-eval-"))
    psijax.train(out=str(root / "run"), progress=False, **TINY_RUN)
    return root / "run"


def trained_run(tmp_path: Path) -> Path:
    """A private copy of the tiny run (tests may add eval/ to it)."""
    copy = tmp_path / "run"
    shutil.copytree(_trained(), copy)
    return copy


def snapshot(directory: Path) -> dict[str, str]:
    """Every file under ``directory`` with a hash of its bytes."""
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }
