"""The fabric's catalog (data/fabric.toml): hop latencies, EFA NIC layout, thresholds, fitted constants.

    >>> from trnsim.specs import fabric
    >>> fabric.constants().network.efa_hop_latency   # ns
    11000.0
    >>> fabric.chip_constants("trainium2").policy
    'runtime'

Figures are read in their published units and kept in base units (ns, bytes); `sources` maps each
figure to where it came from, with the file's legend tags expanded.
"""
from __future__ import annotations

import dataclasses
import functools
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from typing import Mapping

from trnsim.errors import UnknownNameError
from trnsim.specs import units
from trnsim.specs.catalog import CatalogError, _expand, normalize
from trnsim.specs.records import _freeze


@dataclass(frozen=True)
class NetworkConstants:
    efa_hop_latency: float  # ns per EFA crossing (one step)
    efa_efficiency: float  # achieved share of the EFA line rate
    switch_hop_latency: float  # ns per NeuronSwitch traversal
    link_bandwidth_per_direction: bool  # a link's share of the per-chip figure runs each way (else split)
    sources: Mapping[str, str] = field(repr=False)
    notes: tuple[str, ...] = field(default=(), repr=False)


@dataclass(frozen=True)
class ChipConstants:
    """How the collective runtime drives one chip generation."""

    launch_floor: float  # ns per collective operation
    chip_hop_latency: float  # ns per step between cores of one chip
    link_hop_latency: float  # ns per NeuronLink hop
    hbm_efficiency: float
    link_efficiency: float
    reduce_cost: float  # HBM passes of a DMA reduction relative to a copy
    policy: str  # "ring" | "runtime"
    sources: Mapping[str, str] = field(repr=False)
    notes: tuple[str, ...] = field(default=(), repr=False)


@dataclass(frozen=True)
class Thresholds:
    mesh_max_bytes: float
    rdh_max_bytes: float
    inter_mesh_max_nodes: int
    flat_ring_min_bytes: float
    ring_policy_max_nodes: int  # Trn1's ring policy up to this many nodes, the runtime's choice beyond
    sources: Mapping[str, str] = field(repr=False)
    notes: tuple[str, ...] = field(default=(), repr=False)


@dataclass(frozen=True)
class FabricConstants:
    network: NetworkConstants
    efa_nics: Mapping[str, int]  # system key -> EFA devices
    chips: Mapping[str, ChipConstants]  # chip key -> constants
    thresholds: Thresholds
    efa_nics_sources: Mapping[str, str] = field(repr=False)


def _value(name: str, raw):
    if not isinstance(raw, str) or name in ("policy",):
        return raw
    dim = "ns" if name.endswith(("latency", "floor")) else "bytes" if name.endswith("_bytes") else None
    return units.value(raw, dim) if dim else raw


def _record(cls, where: str, table: dict, legend: dict):
    table = dict(table)
    sources = {k: _expand(v, legend) for k, v in table.pop("sources", {}).items()}
    notes = tuple(table.pop("notes", ()))
    names = [f.name for f in dataclasses.fields(cls) if f.name not in ("sources", "notes")]
    missing = [n for n in names if n not in table or n not in sources]
    if missing or set(table) - set(names):
        raise CatalogError(f"fabric.toml: [{where}] lacks a value or source for {missing}, "
                           f"or has unknown fields {sorted(set(table) - set(names))}")
    return cls(**{n: _value(n, table[n]) for n in names}, sources=_freeze(sources), notes=notes)


@functools.cache
def constants() -> FabricConstants:
    """Everything in data/fabric.toml, in base units."""
    data = tomllib.loads(resources.files("trnsim.specs").joinpath("data", "fabric.toml").read_text())
    legend = data.pop("sources")
    nics = dict(data["efa_nics"])
    nic_sources = {k: _expand(v, legend) for k, v in nics.pop("sources").items()}
    if set(nics) != set(nic_sources):
        raise CatalogError(f"fabric.toml: [efa_nics] entries without a source: {sorted(set(nics) ^ set(nic_sources))}")
    return FabricConstants(
        network=_record(NetworkConstants, "network", data["network"], legend),
        efa_nics=_freeze(nics),
        chips=_freeze({k: _record(ChipConstants, f"chips.{k}", t, legend) for k, t in data["chips"].items()}),
        thresholds=_record(Thresholds, "thresholds", data["thresholds"], legend),
        efa_nics_sources=_freeze(nic_sources),
    )


def chip_constants(chip_key: str) -> ChipConstants:
    """The collective constants of a chip generation by catalog key (`"trainium2"`)."""
    table = constants().chips
    if chip_key not in table:
        raise UnknownNameError("chip with fabric constants", chip_key, list(table))
    return table[chip_key]


def efa_nics(system_key: str) -> int:
    """EFA devices of a system by catalog key or name (`"trn1.32xlarge"` -> 8)."""
    table = constants().efa_nics
    key = normalize(system_key)
    if key not in table:
        raise UnknownNameError("system with an EFA layout", system_key, list(table))
    return table[key]
