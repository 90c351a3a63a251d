"""Quantities as the sources print them ("820 GiB/s", "2.9 TB/s", "800 Gbps") parsed to base units.

The catalog keeps each figure in its published unit so that GB-versus-GiB stays visible and
checkable against the source; code sees base units only: bytes, bytes/s, Hz, FLOP/s, ns, USD.
"""
from __future__ import annotations

import re

from trnsim.errors import TrnsimError


class UnitError(TrnsimError, ValueError):
    """A catalog quantity whose unit trnsim does not know."""


_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}

# unit (after its prefix) -> (dimension, factor to the base unit)
_UNITS = {
    "B": ("bytes", 1.0),
    "B/s": ("bytes/s", 1.0),
    "bps": ("bytes/s", 1 / 8),  # network links are quoted in bits per second
    "Hz": ("Hz", 1.0),
    "FLOPS": ("FLOP/s", 1.0),
    "OPS": ("FLOP/s", 1.0),  # integer TOPS share the FLOP/s dimension
    "s": ("ns", 1e9),
    "USD/h": ("USD/h", 1.0),
}
_SPECIAL = {"ns": ("ns", 1.0), "us": ("ns", 1e3), "ms": ("ns", 1e6), "B/ns": ("bytes/s", 1e9)}

_QUANTITY = re.compile(r"^\s*([-+]?[0-9][0-9_,]*\.?[0-9]*(?:[eE][-+]?[0-9]+)?)\s*(\S+)\s*$")


def parse(text: str) -> tuple[float, str]:
    """`"820 GiB/s"` -> (880468295680.0, "bytes/s")."""
    m = _QUANTITY.match(text)
    if not m:
        raise UnitError(f"cannot read quantity {text!r}: expected '<number> <unit>', e.g. '820 GiB/s'")
    number = float(m.group(1).replace(",", "").replace("_", ""))
    unit = m.group(2)
    if unit in _SPECIAL:
        dim, factor = _SPECIAL[unit]
        return number * factor, dim
    for prefixes in (_BINARY, _PREFIX):
        for p, scale in prefixes.items():
            if unit.startswith(p) and unit[len(p):] in _UNITS:
                dim, factor = _UNITS[unit[len(p):]]
                return number * scale * factor, dim
    raise UnitError(f"unknown unit {unit!r} in {text!r}")


def value(text: str, dimension: str) -> float:
    """Parse `text` and insist on its dimension (a bandwidth where a bandwidth belongs)."""
    v, dim = parse(text)
    if dim != dimension:
        raise UnitError(f"{text!r} is a {dim} figure where a {dimension} figure is required")
    return v


def _num(x: float) -> str:
    """Thousands separators for big or whole numbers, four significant digits otherwise."""
    return f"{x:,.0f}" if abs(x) >= 1000 or x == round(x) else f"{x:.4g}"


def human(v: float, dimension: str) -> str:
    """A base-unit figure in one consistent unit per dimension: sizes in binary units (GiB, MiB, KiB, as
    memory is sized), rates in decimal GB/s (never TB/s), a rate that is a whole number of GiB/s also
    shown that way, as its source printed it. `human(820 * 2**30, "bytes/s")` -> "880.5 GB/s (820 GiB/s)"."""
    if dimension == "bytes":
        for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
            if v >= scale:
                return f"{_num(v / scale)} {unit}"
        return f"{_num(v)} B"
    if dimension == "bytes/s":
        if v < 1e9:
            return f"{_num(v / 1e6)} MB/s" if v >= 1e6 else f"{_num(v)} B/s"
        text = f"{_num(v / 1e9)} GB/s"
        return text + (f" ({_num(v / 2**30)} GiB/s)" if v % 2**30 == 0 else "")
    if dimension == "FLOP/s":
        return f"{_num(v / 1e12)} TFLOPS"
    if dimension == "Hz":
        return f"{_num(v / 1e9)} GHz"
    if dimension == "ns":
        return f"{_num(v / 1e3)} us" if v >= 1e4 else f"{_num(v)} ns"
    return _num(v)
