"""Timing-model constants per NeuronCore generation (data/timing.toml), in base units.

    >>> from trnsim.specs.timing import timing
    >>> timing("trn1").dma_descriptor_latency   # ns per DMA descriptor of the current stack (2025)
    2.0
    >>> timing("trn1", sdk="2024").dma_descriptor_latency   # the 2024 compiler's, fitted to the matmul ladder
    60.0

Some figures belong to the software stack, not the silicon: what a DMA descriptor and a queue's turnaround
cost depends on how the Neuron SDK's compiler and runtime build the DMA programs (the same tiled matmul on
the same trn1 took 51.80 ms with the 2024 compiler and 20.99 ms with a 2025 one, calibration 1.1). The
catalog keys those figures by the stack's release year; `sdk` (default TRNSIM_NEURON_SDK) picks one.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from trnsim import flags
from trnsim.errors import ConfigError
from trnsim.specs import neuroncore
from trnsim.specs.catalog import _load

STACKS = ("2024", "2025")  # Neuron SDK release years whose DMA costs the catalog holds; the last is current


@dataclass(frozen=True)
class TimingSpec:
    """Constants the cycle model adds to a NeuronCore's hardware figures; `notes` justify fitted ones."""

    key: str  # "v2"
    semaphore_latency: float  # ns from a producer's end to a waiting engine's start (cross-engine)
    dma_descriptor_latency: float  # ns a DMA engine spends per descriptor (one contiguous run); per stack
    dma_turnaround_latency: float  # ns on a DMA engine from a queue's last piece or completion write to its next; per stack
    tensor_warmup_start: float  # TensorE rate fraction when the dI/dt throttle engages (1.0: none)
    tensor_warmup_latency: float  # ns to ramp from that fraction to full rate
    vector_perf_modes: Mapping[str, float]  # v3+ speedups: copy_sbuf, copy_psum, tensor_tensor, copy_sbuf_wide
    scalar_perf_mode: float  # ScalarE speedup when every operand is 16-bit or FP8 (v4's wider datapath)
    strided_access: Mapping[str, float]  # bytes: most-minor free stride above which SBUF/PSUM give `rate`
    dma_transpose: Mapping[str, float]  # block: elements per partition one descriptor moves; hbm/sbuf: rate share
    execution_overhead: float  # ns of start-up and tear-down per kernel (NEFF) execution, outside its profile
    sources: Mapping[str, str] = field(repr=False)
    notes: tuple[str, ...] = field(default=(), repr=False)
    alternatives: Mapping = field(default_factory=dict, repr=False)


@functools.cache
def _all() -> dict[str, TimingSpec]:
    return _load("timing.toml", TimingSpec)


def timing(generation, sdk: str | None = None) -> TimingSpec:
    """The timing constants of a generation, by version (`"v2"`) or NKI target (`"trn1"`), with the figures of
    software stack `sdk` (a release year of STACKS; default TRNSIM_NEURON_SDK)."""
    sdk = str(sdk or flags.NEURON_SDK.value())
    if sdk not in STACKS:
        raise ConfigError(f"{flags.NEURON_SDK.name} / --neuron-sdk {sdk!r}: the catalog holds the DMA costs of the "
                          f"Neuron SDK of {' and '.join(STACKS)} (release years)")
    return _on_stack(neuroncore(generation).key, sdk)


@functools.cache
def _on_stack(key: str, sdk: str) -> TimingSpec:
    """A generation's constants with each per-stack figure (a table keyed by STACKS) and its source resolved."""
    spec = _all()[key]
    picked = {f.name: getattr(spec, f.name)[sdk] for f in dataclasses.fields(spec)
              if isinstance(getattr(spec, f.name), Mapping) and set(getattr(spec, f.name)) == set(STACKS)}
    sources = {k: v[sdk] if k in picked and isinstance(v, Mapping) else v for k, v in spec.sources.items()}
    return dataclasses.replace(spec, **picked, sources=MappingProxyType(sources))
