"""Energies along a path of geometries: ``scan`` (an energy curve, each point started from
its neighbour's wavefunction), the geometries it runs over (``points``), and ``relax`` (a
geometry optimisation on the forces, its steps in ``geometry``)."""

from psijax.curves.points import along_bond, frames
from psijax.curves.relax import RelaxResult, RelaxSettings, relax
from psijax.curves.scan import ScanResult, scan

__all__ = [
    "RelaxResult", "RelaxSettings", "ScanResult", "along_bond", "frames", "relax", "scan",
]  # fmt: skip
