"""Energies along a path of geometries: ``scan`` (an energy curve, each point started from
its neighbour's wavefunction) and the geometries it runs over (``points``)."""

from psijax.curves.points import along_bond, frames
from psijax.curves.scan import ScanResult, scan

__all__ = ["ScanResult", "along_bond", "frames", "scan"]
