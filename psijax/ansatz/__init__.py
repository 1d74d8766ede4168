"""Wavefunctions for one walker: the ``Ansatz`` protocol, the shared orbital head and the
ansaetze built on it (FermiNet, PsiFormer)."""

from psijax.ansatz.base import Ansatz
from psijax.ansatz.ferminet import FermiNet
from psijax.ansatz.head import OrbitalHead
from psijax.ansatz.psiformer import PsiFormer

__all__ = ["Ansatz", "FermiNet", "OrbitalHead", "PsiFormer"]
