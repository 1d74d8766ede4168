"""The ``psijax`` command (``psijax.cli.main``)."""

from psijax.cli.main import main

__all__ = ["main"]
