"""Load the TOML catalog into records, converting published units to base units."""
from __future__ import annotations

import dataclasses
import functools
import re
import tomllib
from importlib import resources

from trnsim.errors import TrnsimError, UnknownNameError
from trnsim.specs import units
from trnsim.specs.records import ChipSpec, NeuronCoreSpec, SystemSpec, _freeze


class CatalogError(TrnsimError):
    """The catalog's own data is malformed (a missing field or source)."""


def dimension(field: str) -> str | None:
    """Which base unit a catalog field holds, from its name."""
    if field.endswith("_bytes"):
        return "bytes"
    if "bandwidth" in field:
        return "bytes/s"
    if field.endswith(("latency", "overhead")):
        return "ns"
    return {"clocks": "Hz", "ratings": "FLOP/s"}.get(field)


def _convert(field: str, raw, kind):
    dim = dimension(field)
    if isinstance(raw, dict):
        return _freeze({k: _convert(field, v, float) for k, v in raw.items()})
    if isinstance(raw, str) and dim is not None:
        v = units.value(raw, dim)
        return int(round(v)) if kind is int else v
    if isinstance(raw, list):
        return tuple(raw)
    return raw


def _load(filename: str, cls, **links) -> dict:
    text = resources.files("trnsim.specs").joinpath("data", filename).read_text()
    data = tomllib.loads(text)
    legend = data.pop("sources", {})
    out = {}
    for key, table in data.items():
        table = dict(table)
        table.setdefault("notes", [])
        sources = table.pop("sources", {})
        kwargs = {"key": key, "sources": _freeze({k: {s: _expand(x, legend) for s, x in v.items()} if isinstance(v, dict)
                                                  else _expand(v, legend) for k, v in sources.items()}),
                  "alternatives": _alternatives(table.pop("alternatives", {}), legend, filename, key)}
        for f in dataclasses.fields(cls):
            if f.name in ("key", "sources", "alternatives"):
                continue
            if f.name not in table:
                raise CatalogError(f"{filename}: [{key}] lacks field {f.name!r}")
            raw = table.pop(f.name)
            if f.name in links:
                raw = links[f.name](raw)
            elif f.name == "ratings":
                raw = _freeze({r: _convert("ratings", t, float) for r, t in raw.items()})
            else:
                raw = _convert(f.name, raw, f.type if isinstance(f.type, type) else _type_of(f.type))
            kwargs[f.name] = raw
        if table:
            raise CatalogError(f"{filename}: [{key}] has unknown fields {sorted(table)}")
        out[key] = cls(**kwargs)
    return out


def _alternatives(table: dict, legend: dict, filename: str, key: str):
    """`{field: {TAG: "820 GB/s"}}` -> `{field: {source text: base-unit value}}`."""
    out = {}
    for name, figures in table.items():
        unknown = [t for t in figures if t not in legend]
        if unknown:
            raise CatalogError(f"{filename}: [{key}.alternatives] {name} cites tags {unknown} missing from [sources]")
        out[name] = _freeze({_expand(tag, legend): _convert(name, v, float) for tag, v in figures.items()})
    return _freeze(out)


def _type_of(annotation: str):
    return {"int": int, "float": float}.get(annotation, object)


def _expand(text: str, legend: dict) -> str:
    """`"CHIP1, A-v2"` -> the doc paths those tags stand for, keeping any words around them."""
    if not legend:
        return text
    tags = re.compile(r"\b(" + "|".join(re.escape(t) for t in sorted(legend, key=len, reverse=True)) + r")\b")
    return tags.sub(lambda m: legend[m.group(1)], text)


@functools.cache
def neuroncores() -> dict[str, NeuronCoreSpec]:
    return _load("neuroncores.toml", NeuronCoreSpec)


@functools.cache
def chips() -> dict[str, ChipSpec]:
    cores = neuroncores()
    return _load("chips.toml", ChipSpec, core=lambda k: cores[k] if k else None)


@functools.cache
def systems() -> dict[str, SystemSpec]:
    all_chips = chips()
    return _load("systems.toml", SystemSpec, chip=lambda k: all_chips[k],
                 topology_shape=lambda s: tuple(s))


def normalize(name: str) -> str:
    """`"Trn2 UltraServer"`, `"trn2.48xlarge"` -> catalog keys `trn2-ultraserver`, `trn2-48xlarge`."""
    return str(name).strip().lower().replace(" ", "-").replace(".", "-").replace("_", "-")


def lookup(table: dict, name: str, kind: str, display=lambda r: r.name):
    key = normalize(name)
    if key in table:
        return table[key]
    raise UnknownNameError(kind, name, [display(r) for r in table.values()])
