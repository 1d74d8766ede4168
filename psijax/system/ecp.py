"""Effective core potentials (ECPs) from pyscf's tables.

An ECP replaces an atom's core electrons by a potential acting on the valence electrons:

    V_ECP(r) = V_loc(r) + sum_l V_l(r) sum_m |lm><lm|       (r measured from the nucleus)

each radial function a sum of terms c r^(n-2) exp(-a r^2) (pyscf's convention: the n-th
list of a channel holds the (a, c) pairs of power n - 2). The nucleus then carries the
effective charge Z - n_core, and the molecule only its valence electrons. The table
``ccecp`` (Bennett et al., J. Chem. Phys. 146, 204107 (2017) and later papers) is the
default choice; any ECP pyscf knows by name works (``lanl2dz``, ``crenbl``, ...).

``assign(spec, symbols)`` turns a user's choice (``"ccecp"``: every element the table has
a core for; ``"Cl:ccecp Na:ccecp"``: exactly those) into one ECP name or ``None`` per atom.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import warnings

from psijax.errors import InputError
from psijax.system.elements import symbol_of

Radial = tuple[tuple[int, float, float], ...]  # (power n of r^(n-2), exponent a, coefficient c)


@dataclasses.dataclass(frozen=True)
class Ecp:
    """One element's ECP: its core electrons, local part and nonlocal channels (l, radial)."""

    name: str
    symbol: str
    n_core: int
    local: Radial
    channels: tuple[tuple[int, Radial], ...]

    @property
    def max_l(self) -> int:
        """The largest angular momentum of a projector (-1: local part only)."""
        return max((ell for ell, _ in self.channels), default=-1)


@functools.cache
def load(name: str, symbol: str) -> Ecp | None:
    """``name``'s ECP for element ``symbol``, or ``None`` if the table has none for it.

    An unknown table name raises ``InputError``.
    """
    from pyscf.gto import basis

    try:
        with warnings.catch_warnings():  # its hint to install basis-set-exchange, for a typo
            warnings.simplefilter("ignore", UserWarning)
            data = basis.load_ecp(name, symbol)
    except Exception:  # pyscf raises several kinds for an unknown name
        data = None
    if data is None or (not data and not _known(name)):
        raise InputError(
            f"unknown ECP {name!r}; use a name pyscf knows, e.g. ccecp, lanl2dz or crenbl"
        )
    if not data:
        return None
    n_core, by_l = data
    local: Radial = ()
    channels = []
    for ell, powers in by_l:
        terms = tuple(
            (n, float(a), float(c)) for n, pairs in enumerate(powers) for a, c in pairs if c != 0.0
        )
        if ell < 0:
            local = terms
        else:
            channels.append((int(ell), terms))
    return Ecp(name, symbol, int(n_core), local, tuple(sorted(channels)))


@functools.cache
def _known(name: str) -> bool:
    """Whether pyscf has an ECP table ``name`` (it has an entry for some element)."""
    from pyscf.gto import basis

    for symbol in ("H", "Li", "Na", "K", "Ga", "Rb", "I"):
        try:
            if basis.load_ecp(name, symbol):
                return True
        except Exception:
            return False
    return False


_ITEM = re.compile(r"^(?:(?P<symbol>[A-Za-z]{1,2}|\d{1,3})\s*[:=]\s*)?(?P<name>[\w+.-]+)$")


def assign(spec: str | None, symbols: tuple[str, ...]) -> tuple[str | None, ...]:
    """One ECP name or ``None`` per atom from ``spec`` (see the module docstring).

    ``"NAME"`` gives every atom whose element has a core in table NAME its ECP (elements
    the table has no core for stay all-electron); ``"El:NAME ..."`` names the elements.
    """
    if spec is None or not str(spec).strip():
        return ()
    items = [s for s in re.split(r"[\s,;]+", str(spec).strip()) if s]
    per_element: dict[str, str] = {}
    everywhere = None
    for item in items:
        match = _ITEM.match(item)
        if match is None:
            raise InputError(
                f"cannot read {item!r} in ecp {spec!r}; give a table name (ccecp) or "
                "element:name pairs (Cl:ccecp Na:ccecp)"
            )
        name = match["name"].lower()
        if match["symbol"] is None:
            if everywhere is not None or len(items) > 1:
                raise InputError(
                    f"ecp {spec!r} mixes a table for every element with other entries; give "
                    "one name (ccecp) or only element:name pairs (Cl:ccecp Na:ccecp)"
                )
            everywhere = name
            continue
        symbol = symbol_of(match["symbol"], f"in ecp {spec!r}")
        if symbol not in symbols:
            raise InputError(
                f"ecp {spec!r} names {symbol}, which is not in the molecule "
                f"({' '.join(dict.fromkeys(symbols))}); name only its elements"
            )
        per_element[symbol] = name
    if everywhere is not None:
        chosen = {s: everywhere for s in symbols if _has_core(everywhere, s)}
        if not chosen:
            raise InputError(
                f"ECP table {everywhere!r} removes no core electrons from any atom of the "
                f"molecule ({' '.join(dict.fromkeys(symbols))}); run all-electron (no ecp) "
                "or name the elements (H:ccecp)"
            )
    else:
        chosen = per_element
        for symbol, name in chosen.items():
            if load(name, symbol) is None:
                raise InputError(
                    f"ECP table {name!r} has no potential for {symbol}; choose another table "
                    f"for {symbol} or leave it all-electron"
                )
    return tuple(chosen.get(s) for s in symbols)


def _has_core(name: str, symbol: str) -> bool:
    ecp = load(name, symbol)
    return ecp is not None and ecp.n_core > 0


DEFAULT_BASIS = "sto-6g"  # Config.basis's default, all-electron


def basis_for(symbol: str, ecp_name: str, basis: str) -> str:
    """The pretraining basis of an atom of ``symbol`` carrying ECP ``ecp_name``.

    The default (all-electron) basis becomes the ECP's own valence basis (``ccecp`` ->
    ``ccecp-cc-pvdz``; other tables, e.g. ``lanl2dz``, name their basis alike); a basis made
    for the ECP is kept; an all-electron basis raises ``InputError``.
    """
    own = f"{ecp_name}-cc-pvdz" if ecp_name == "ccecp" else ecp_name
    if basis.strip().lower() == DEFAULT_BASIS:
        return own
    if _made_for(basis, ecp_name, symbol):
        return basis
    raise InputError(
        f"basis {basis!r} is an all-electron basis, but {symbol} carries the ECP {ecp_name!r} "
        f"(its core electrons are gone); use a basis made for that ECP, e.g. {own}, or leave "
        "--basis at its default"
    )


def _made_for(basis: str, ecp_name: str, symbol: str) -> bool:
    """Whether ``basis`` was made for ``ecp_name``: named after it (``ccecp-cc-pvtz``), or a
    basis that carries an ECP of the same core in pyscf (``lanl2dz``, ``def2-svp``)."""
    from pyscf.gto import basis as tables

    key = basis.strip().lower()
    if key.startswith(ecp_name.lower()):
        return True
    try:
        own = tables.load_ecp(key, symbol)
    except Exception:
        return False
    ecp = load(ecp_name, symbol)
    return bool(own) and ecp is not None and int(own[0]) == ecp.n_core


def describe(symbols: tuple[str, ...], names: tuple[str | None, ...]) -> str:
    """Which atoms carry which ECP and how many core electrons each removes, in words:
    ``"Na1 Cl2 ccecp (10 + 10 core electrons)"``; empty without ECPs."""
    groups: dict[str, list[str]] = {}
    cores: dict[str, list[int]] = {}
    for i, (symbol, name) in enumerate(zip(symbols, names, strict=True), start=1):
        if name is not None:
            groups.setdefault(name, []).append(f"{symbol}{i}")
            cores.setdefault(name, []).append(load(name, symbol).n_core)  # type: ignore[union-attr]
    return "; ".join(
        f"{' '.join(atoms)} {name} ({' + '.join(map(str, cores[name]))} core electrons)"
        for name, atoms in groups.items()
    )


def pretraining_basis(symbols: tuple[str, ...], names: tuple[str | None, ...], basis: str) -> str:
    """The pretraining basis in words: ``basis``, or per element where an ECP changes it."""
    if not any(names):
        return basis
    per = {s: basis_for(s, e, basis) if e else basis for s, e in zip(symbols, names, strict=True)}
    if len(set(per.values())) == 1:
        return next(iter(per.values()))
    return ", ".join(f"{s} {b}" for s, b in per.items())
