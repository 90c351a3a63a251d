"""Serving figures beyond the hardware records: engines' fixed costs, in-graph collectives, defaults.

    >>> from trnsim.specs import serving
    >>> serving.engine("vllm-neuron")["decode_overhead"] > 0
    True

The figures live in data/serving.toml with their sources; `source(table, key)` says where one came
from. The serving planner reads them here and nowhere else. Times are returned in ns.
"""
from __future__ import annotations

import functools
import tomllib
from importlib import resources

from trnsim.errors import UnknownNameError
from trnsim.specs import units


@functools.cache
def _data() -> dict:
    return tomllib.loads(resources.files("trnsim.specs").joinpath("data", "serving.toml").read_text())


def _plain(table: dict) -> dict:
    return {k: (units.value(v, "ns") if isinstance(v, str) and v.split()[-1] in ("ns", "us", "ms", "s") else v)
            for k, v in table.items() if k != "sources"}


def source(table: str, key: str) -> str:
    """Where the figure `[table].key` (table may be dotted, `engines.vllm-neuron`) came from, tags expanded."""
    node = _data()
    for part in table.split("."):
        node = node[part]
    text = node["sources"][key]
    for tag, full in sorted(_data()["sources"].items(), key=lambda kv: -len(kv[0])):
        text = text.replace(tag, full)
    return text


def engines() -> list[str]:
    return list(_data()["engines"])


def engine(name: str) -> dict:
    """An engine's figures: prefill_overhead and decode_overhead (ns)."""
    table = _data()["engines"]
    if name not in table:
        raise UnknownNameError("serving engine", name, list(table))
    return _plain(table[name])


def collective() -> dict:
    """In-graph collective constants: launch_floor, chip_hop_latency, link_hop_latency (ns)."""
    return _plain(_data()["collective"])


def defaults() -> dict:
    return _plain(_data()["defaults"])
