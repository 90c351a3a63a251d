"""The time of a custom operator on the GpSimd engine, from what each core's accessors moved.

    t = call_overhead + max over cores of:
          (accessor elements + slow-stream elements) x accessor_latency      element by element, to HBM
        + (stream bytes + library bytes) / stream_bandwidth                   through a 4 KiB TCM buffer
        + TCM copies x tcm_copy_latency + TCM bytes / tcm_copy_bandwidth      bulk copies to and from TCM
        + element_cycles x (4-byte words moved) / GpSimd clock                the operator's own work

The figures are in the catalog (specs/data/customop.toml) with their sources; all of them are assumptions,
since the custom-operator documents describe the accessors' speeds only in words (see its notes).
"""
from __future__ import annotations

from trnsim.core.customop.library import Call
from trnsim.specs.customop import CustomOpSpec


def core_time_ns(c: Call, spec: CustomOpSpec, clock_hz: float) -> float:
    """One core's time for its part of one call, without the call overhead."""
    moved = c.accessor_bytes + c.stream_bytes + c.slow_stream_bytes + c.tcm_bytes + c.library_bytes
    return ((c.accessor_elements + c.slow_stream_elements) * spec.accessor_latency
            + (c.stream_bytes + c.library_bytes) / spec.stream_bandwidth * 1e9
            + c.tcm_copies * spec.tcm_copy_latency + c.tcm_bytes / spec.tcm_copy_bandwidth * 1e9
            + spec.element_cycles * (moved / 4) / clock_hz * 1e9)


def time_ns(calls: list[Call], spec: CustomOpSpec, clock_hz: float) -> float:
    """The operator's time: its cores run in parallel, the slowest decides."""
    return spec.call_overhead + max((core_time_ns(c, spec, clock_hz) for c in calls), default=0.0)
