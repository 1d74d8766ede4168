"""The periodic table psijax knows (H to Kr): symbols, atomic numbers, and the one way a
user's element (a symbol in any case, or an atomic number) becomes a symbol."""

from __future__ import annotations

from typing import Any

from psijax.errors import InputError

_ELEMENT_TEXT = "H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar"
_ELEMENT_TEXT += " K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn Ga Ge As Se Br Kr"
ELEMENTS: tuple[str, ...] = tuple(_ELEMENT_TEXT.split())
Z_OF = {symbol.lower(): z for z, symbol in enumerate(ELEMENTS, start=1)}


def symbol_of(text: Any, where: str) -> str:
    """Canonical element symbol from a symbol in any case or an atomic number."""
    key = str(text).strip().lower()
    z = int(key) if key.isdigit() else Z_OF.get(key, 0)
    if not 1 <= z <= len(ELEMENTS):
        raise InputError(
            f"unknown element {str(text)!r} {where}; use a chemical symbol such as H, Li or Ne "
            "(psijax knows H to Kr)"
        )
    return ELEMENTS[z - 1]
