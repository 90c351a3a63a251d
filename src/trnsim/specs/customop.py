"""The custom C++ operator runtime of the GpSimd engine per NeuronCore generation (data/customop.toml).

    >>> from trnsim.specs.customop import customop
    >>> customop("trn1").tcm_pool_bytes
    16384
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Mapping

from trnsim.errors import ConfigError
from trnsim.specs import neuroncore
from trnsim.specs.catalog import _load


class CustomOpPlatformError(ConfigError):
    """Custom C++ operators on a NeuronCore generation whose runtime has none."""


@dataclass(frozen=True)
class CustomOpSpec:
    """Limits and timing figures of custom operators on one generation; `notes` say which are assumed."""

    key: str  # "v2"
    gpsimd_cores: int
    tcm_pool_bytes: int
    stream_buffer_bytes: int
    performant_streams: int
    max_functions: int
    max_stack_bytes: int
    dtypes: tuple[str, ...]
    tensor_limits: tuple  # ((most dimensions, largest dimension), ...): a tensor fits one of them
    accessor_latency: float  # ns per element access of a standard accessor
    stream_bandwidth: float  # bytes/s
    tcm_copy_bandwidth: float  # bytes/s
    tcm_copy_latency: float  # ns per tensor_to_tcm / tcm_to_tensor
    element_cycles: float  # GpSimd cycles of the operator's own work per 4-byte word moved
    call_overhead: float  # ns per operator call
    sources: Mapping[str, str] = field(repr=False)
    notes: tuple[str, ...] = field(default=(), repr=False)
    alternatives: Mapping = field(default_factory=dict, repr=False)


@functools.cache
def _all() -> dict[str, CustomOpSpec]:
    return _load("customop.toml", CustomOpSpec)


def customop(generation) -> CustomOpSpec:
    """The custom-operator figures of a generation (`"v2"`, `"trn1"`, `"inf2"`); refused where it has none."""
    core = neuroncore(generation)
    spec = _all().get(core.key)
    if spec is None:
        have = ", ".join(neuroncore(k).name for k in _all())
        raise CustomOpPlatformError(
            f"custom C++ operators run on {have} only (Trn1 and Inf2 instances); {core.name} ({core.target}) has no "
            f"GpSimd custom-operator runtime: the aws-neuronx-gpsimd-customop-lib library entered maintenance with "
            f"Neuron 2.33, and new custom operators are written in NKI")
    return spec
