"""Wavefunctions for one walker."""

from psijax.ansatz.ferminet import FermiNet

__all__ = ["FermiNet"]
