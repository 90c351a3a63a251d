"""Training figures beyond the hardware records: matmul efficiency, link latency, overlap, recipe defaults.

    >>> from trnsim import specs
    >>> from trnsim.specs import training
    >>> training.matmul_efficiency(specs.chip("Trainium"))
    0.8524

The figures live in data/training.toml with their sources; `source(table, key)` says where one
came from. The planner reads them here and nowhere else.
"""
from __future__ import annotations

import functools
import tomllib
from importlib import resources

from trnsim.errors import UnknownNameError
from trnsim.specs import units


@functools.cache
def _data() -> dict:
    return tomllib.loads(resources.files("trnsim.specs").joinpath("data", "training.toml").read_text())


def source(table: str, key: str) -> str:
    """Where the figure `[table].key` was published, its source tags expanded."""
    legend = _data()["sources"]
    text = _data()[table]["sources"][key]
    for tag in sorted(legend, key=len, reverse=True):
        text = text.replace(tag, legend[tag])
    return text


def matmul_efficiency(chip) -> float:
    """Declared fraction of `chip`'s peak FLOPS that a large, well-tiled matmul reaches."""
    table = {k: v for k, v in _data()["matmul_efficiency"].items() if k != "sources"}
    if chip.key in table:
        return table[chip.key]
    raise UnknownNameError("chip with a declared matmul efficiency (specs/data/training.toml)", chip.name, list(table))


def link_latency(where: str) -> float:
    """Per-hop latency in ns of the interim collective model: `intra_node` or `inter_node`."""
    return units.value(_data()["link_latency"][where], "ns")


def compile_time(instructions: int) -> float:
    """Estimated wall time in ns of compiling one graph of `instructions` HLO instructions (an assumed model:
    see source("compile", "graph"))."""
    c = _data()["compile"]
    return units.value(c["graph"], "ns") + instructions * units.value(c["per_instruction"], "ns")


def overlap(kind: str) -> float:
    """Fraction of `kind` communication (tp, dp_reduce, dp_gather, cp, pp, ep) hidden under compute."""
    return float(_data()["overlap"][kind])


def causal_share(seq: int) -> float:
    """Share of a causal [seq x seq] score matrix a flash-attention kernel computes.

    Each query tile runs the key tiles up to the one holding the diagonal, so with key tiles of B
    (dividing seq) the computed share is (1 + B / seq) / 2: half the matrix plus the diagonal tiles.
    """
    block = min(int(_data()["attention"]["causal_key_tile"]), seq)
    return (1 + block / seq) / 2


def recipe() -> dict:
    """NxD recipe defaults: global and micro batch, zero1, sequence_parallel, checkpointing, dtype, state bytes."""
    return {k: v for k, v in _data()["recipe"].items() if k != "sources"}
