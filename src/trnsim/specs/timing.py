"""Timing-model constants per NeuronCore generation (data/timing.toml), in base units.

    >>> from trnsim.specs.timing import timing
    >>> timing("trn1").dma_descriptor_latency   # ns per DMA descriptor, fitted to the matmul ladder
    60.0
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Mapping

from trnsim.specs import neuroncore
from trnsim.specs.catalog import _load


@dataclass(frozen=True)
class TimingSpec:
    """Constants the cycle model adds to a NeuronCore's hardware figures; `notes` justify fitted ones."""

    key: str  # "v2"
    semaphore_latency: float  # ns from a producer's end to a waiting engine's start (cross-engine)
    dma_descriptor_latency: float  # ns a DMA engine spends per descriptor (one contiguous run)
    dma_turnaround_latency: float  # ns from a transfer's end until its queue can start the next one
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


def timing(generation) -> TimingSpec:
    """The timing constants of a generation, by version (`"v2"`) or NKI target (`"trn1"`)."""
    return _all()[neuroncore(generation).key]
