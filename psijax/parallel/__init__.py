"""Devices and processes: the mesh and its shardings, batching over walkers, multi-process
start and the watch over lost processes.

Walkers are split along one mesh axis (``WALKER_AXIS``), everything else is replicated;
``map_walkers`` is the one place a one-walker function is applied to a batch.
"""

from psijax.parallel.batching import auto_chunk, map_walkers
from psijax.parallel.mesh import (
    WALKER_AXIS,
    check_on_lead,
    check_walkers,
    from_lead,
    make_mesh,
    replicated,
    state_shardings,
    to_global,
    to_host,
    walker_sharding,
)

__all__ = [
    "WALKER_AXIS", "auto_chunk", "check_on_lead", "check_walkers", "from_lead", "make_mesh",
    "map_walkers",
    "replicated", "state_shardings", "to_global", "to_host", "walker_sharding",
]  # fmt: skip
