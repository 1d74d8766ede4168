"""One writer per output: an advisory lock held while a run or an evaluation writes files.

Two processes given the same ``--out`` would interleave metrics rows, and a second one with
``--force`` (or ``--resume``) would delete or rewind the first one's checkpoints while it
still writes them. The lock file (``.psijax.lock``) is locked with ``flock`` before anything
is written and for as long as the job writes; the kernel releases it when the process ends,
however it ends, so a killed run never leaves a stale lock behind. The file records who
holds it, for the error the second process prints.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from psijax.errors import InputError

NAME = ".psijax.lock"


@contextlib.contextmanager
def holding(
    path: Path,
    what: str,
    *,
    fix: str = "or choose another --out",
    unwritable: str = "choose another --out",
    enabled: bool = True,
) -> Iterator[None]:
    """Hold the lock file ``path`` (its directory is created) while the block runs.

    Raises ``InputError`` at once, before the block, if another process (or another job in
    this process) holds it. ``what`` names the job in that error ("training run in ..."),
    ``fix`` ends it after "wait for it to end or stop it"; where the directory or the lock
    file cannot be made (a file in the way, no permission, a read-only file system) the
    error says what to do in ``unwritable``.
    """
    if not enabled:
        yield
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:  # not a directory, no permission, a read-only file system, ...
        raise InputError(
            f"cannot write the {what}: {e.strerror or e} ({e.filename or path.parent}); "
            f"{unwritable}"
        ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
            raise InputError(
                f"another psijax process ({holder}) is writing the {what}; wait for it to "
                f"end or stop it, {fix}"
            ) from None
        os.ftruncate(fd, 0)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}, since {stamp}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock
