"""Reading compiled programs: the collectives of a per-device HLO module.

``collectives(jax.jit(f).lower(*args).compile().as_text())`` lists what each device
sends or receives, so that tests and benchmarks can check that a step never moves an
array whose size grows with walkers x parameters (tests/test_spring_layout.py,
benchmarks/step_scale.py).
"""

from __future__ import annotations

import math
import re

KINDS = ("all-gather", "all-reduce", "all-to-all", "collective-permute", "reduce-scatter")
_COLLECTIVE = re.compile(r"= (.*?) (" + "|".join(KINDS) + r")(?:-start)?\(")
_SHAPE = re.compile(r"[a-z]\w*\[([\d,]*)\]")


def collectives(hlo: str) -> list[tuple[str, int]]:
    """(kind, elements of its result on one device) for every collective in ``hlo``; a
    collective over several operands (a tuple result) counts all of them."""
    found = []
    for line in hlo.splitlines():
        match = _COLLECTIVE.search(line)
        if match:
            shapes = _SHAPE.findall(match.group(1))
            size = sum(math.prod(int(x) for x in dims.split(",") if x) for dims in shapes)
            found.append((match.group(2), size))
    return found
