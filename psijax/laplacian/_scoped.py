"""A process-wide change to another package that holds only while some scope is open: how
psijax's shims of folx (``_folx_indices``, ``_folx_complex``) leave folx as shipped for
every other caller in the process."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator


class ScopedSwap:
    """``with swap():`` makes the change (``swap_in()``, which returns what undoes it) when
    the first scope opens, and undoes it when the last open scope, of any thread, closes.
    Re-entrant and thread-safe: psijax traces several programs at once on its own threads,
    and folx code another thread runs meanwhile sees the same change."""

    def __init__(self, swap_in: Callable[[], Callable[[], None]]) -> None:
        self._swap_in = swap_in
        self._lock = threading.Lock()
        self._depth = 0  # how many scopes are open, in every thread
        self._undo: Callable[[], None] | None = None

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._depth == 0:
                self._undo = self._swap_in()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0:
                    undo, self._undo = self._undo, None
                    undo()
