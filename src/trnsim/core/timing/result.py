"""What a benchmark reports: latency, engine activity, FLOPs and utilisation, DMA traffic, memory
peaks and the critical path, all derived from a Timeline (ns, bytes, FLOPs)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from trnsim import numerics
from trnsim.core.timing.rules import TRACKS
from trnsim.core.timing.scheduler import Timeline
from trnsim.specs.timing import timing


def union_length(starts, ends) -> float:
    """Total length of the union of intervals [start, end)."""
    if len(starts) == 0:
        return 0.0
    order = np.argsort(starts, kind="stable")
    s, e = np.asarray(starts, float)[order], np.asarray(ends, float)[order]
    reach = np.maximum.accumulate(e)
    gaps = np.maximum(0.0, s[1:] - reach[:-1]).sum()
    return float(reach[-1] - s[0] - gaps)


def interval_shares(events, dma_engines: int) -> tuple[dict[str, float], float, float]:
    """Over the simulated interval that some events cover: each engine's busy share (the DMA engines
    together as "DMA"), the share with any engine busy, and the interval's end (ns)."""
    if not events:
        return {}, 0.0, 0.0
    busy: dict[str, float] = {}
    starts, ends = [], []
    for e in events:
        parts = e.parts  # (Event.pieces, without making the tuples of a transfer whose pieces span it alike)
        if parts:
            moved = 0.0
            if type(parts) is tuple:
                for _, s, f in parts:
                    moved += f - s
            else:
                span = e.end - e.start
                for _ in parts:
                    moved += span
            busy["DMA"] = busy.get("DMA", 0.0) + moved / dma_engines
        else:
            busy[e.track] = busy.get(e.track, 0.0) + (e.end - e.start)
        starts.append(e.start)
        ends.append(e.end)
    lo, hi = min(starts), max(ends)
    span = hi - lo
    if span <= 0:
        return {k: 0.0 for k in busy}, 0.0, hi
    return {k: min(1.0, v / span) for k, v in busy.items()}, union_length(starts, ends) / span, hi


@dataclass(frozen=True)
class BenchmarkResult:
    """The timing of one kernel run. Times in ns, shares 0..1, bandwidth in bytes/s.

    `latency` is what a measured kernel execution reports: the execution period (`period`, the timeline
    from the first instruction to the last, which the profile and its engine shares cover) plus the
    start-up and tear-down every NEFF execution carries (`overhead`, the catalog's `execution_overhead`;
    nki/guides/tutorials/fused_mamba.rst measures its VectorE share over the period alone)."""

    kernel: str
    target: str
    period: float  # the execution period: first instruction's start to last one's end
    overhead: float  # start-up and tear-down of the execution, outside the timeline
    active: dict[str, float]  # ns each engine (and "DMA", any DMA engine moving data) was busy
    instructions: dict[str, int]
    flops: float  # model FLOPs (matmuls, not transposes)
    hardware_flops: float  # every PE-array FLOP, transposes included
    peak_flops: float  # the core's dense BF16 peak, FLOP/s
    dma_bytes: int
    hbm_read_bytes: int
    hbm_write_bytes: int
    sbuf_peak_bytes: int
    psum_peak_bytes: int
    critical_path: dict[str, float]  # ns each engine (or "DMA") spends on the critical path
    critical_waiting: float  # ns of the critical path spent waiting (semaphores, DMA fixed latency)
    # Compiler-inserted spill traffic (core/memory.py), as the profiler's spill_save_bytes/spill_reload_bytes;
    # the HBM read/write figures above leave it out, as the profiler's do.
    spill_saves: int = 0
    spill_reloads: int = 0
    spill_save_bytes: int = 0
    spill_reload_bytes: int = 0
    timelines: tuple[Timeline, ...] = field(default=(), repr=False, compare=False)

    @property
    def latency(self) -> float:
        """The kernel's latency as a benchmark measures it: execution period + overhead (ns)."""
        return self.period + self.overhead if self.period else 0.0

    @property
    def share(self) -> dict[str, float]:
        """Each engine's active share of the execution period, as the profiler reports it."""
        return {k: (v / self.period if self.period else 0.0) for k, v in self.active.items()}

    @property
    def mfu(self) -> float:
        return self.flops / (self.peak_flops * self.latency * 1e-9) if self.latency else 0.0

    @property
    def hfu(self) -> float:
        return self.hardware_flops / (self.peak_flops * self.latency * 1e-9) if self.latency else 0.0

    @property
    def dma_bandwidth(self) -> float:
        """Bytes moved over the execution period."""
        return self.dma_bytes / (self.period * 1e-9) if self.period else 0.0

    @property
    def bound(self) -> str | None:
        """The engine ("TensorE", ...) or "DMA" with the most time on the critical path."""
        return max(self.critical_path, key=self.critical_path.get, default=None)

    def meta(self) -> dict:
        """The figures a report shows next to the schedule (trnsim.report's meta keys)."""
        return {"overhead_ns": self.overhead, "flops": self.flops, "hardware_flops": self.hardware_flops, "mfu": self.mfu, "hfu": self.hfu,
                "dma_bytes": self.dma_bytes, "hbm_read_bytes": self.hbm_read_bytes,
                "hbm_write_bytes": self.hbm_write_bytes, "dma_bandwidth": self.dma_bandwidth,
                "sbuf_peak_bytes": self.sbuf_peak_bytes, "psum_peak_bytes": self.psum_peak_bytes,
                **({"spill_save_bytes": self.spill_save_bytes, "spill_reload_bytes": self.spill_reload_bytes}
                   if self.spill_saves or self.spill_reloads else {})}

    @property
    def spill_line(self) -> str | None:
        """'N spills, X MiB moved': the tiles the compiler saved to HBM and reloaded; None without spills."""
        if not (self.spill_saves or self.spill_reloads):
            return None
        moved = (self.spill_save_bytes + self.spill_reload_bytes) / 2**20
        return (f"{self.spill_saves} spills, {moved:.1f} MiB moved ({self.spill_saves} saves to HBM, "
                f"{self.spill_reloads} reloads): SBUF could not hold the live tiles")

    def to_dict(self) -> dict:
        return {"kernel": self.kernel, "target": self.target, "latency_ns": self.latency,
                "period_ns": self.period, "overhead_ns": self.overhead,
                "active_ns": self.active, "share": self.share, "instructions": self.instructions,
                **self.meta(), "bound": self.bound, "critical_path_ns": self.critical_path,
                "critical_waiting_ns": self.critical_waiting, "spill_saves": self.spill_saves,
                "spill_reloads": self.spill_reloads}


def critical_path(tl: Timeline) -> tuple[dict[str, float], float, float]:
    """Walk back from the last event through each event's blocker: ({track: ns}, waiting ns, length)."""
    if not tl.events:
        return {}, 0.0, 0.0
    ev = tl.events
    cur = max(range(len(ev)), key=lambda i: (ev[i].end, -i))
    last_end, by_track, first = ev[cur].end, {}, cur
    while cur >= 0:
        e = ev[cur]
        track = "DMA" if e.parts else e.track  # a transfer keeps all 16 DMA engines busy together
        by_track[track] = by_track.get(track, 0.0) + (e.end - e.start)
        first, cur = cur, e.blocker
    length = last_end - ev[first].start
    return by_track, length - sum(by_track.values()), length


def summarize(kernel: str, timelines: list[Timeline], spec) -> BenchmarkResult:
    """The figures of a run on one or two cores (LNC 2: the latency is the slower core's)."""
    active: dict[str, float] = {}
    counts: dict[str, int] = {}
    flops = hw_flops = 0.0
    dma = hbm_r = hbm_w = 0
    spill = {"save": [0, 0], "reload": [0, 0]}  # transfers, bytes
    peaks: dict[str, int] = {}
    latency, path, waiting = 0.0, {}, 0.0
    for tl in timelines:
        if not tl.events:
            continue
        begin = min(e.start for e in tl.events)
        lat = max(e.end for e in tl.events) - begin
        for e in tl.events:
            moving = bool(e.parts)  # (Event.pieces is not empty)
            track = "DMA" if moving else e.track
            counts[track] = counts.get(track, 0) + 1
            if not moving:
                active[track] = active.get(track, 0.0) + (e.end - e.start)
            if e.flops:
                hw_flops += e.flops
                flops += e.model_flops
            if moving:
                src, dst = e.rec.operands.get("src"), next(r for n, r in e.rec.operands.items() if n in e.rec.writes)
                nbytes = int(np.prod(dst.shape)) * numerics.dtype(dst.dtype).itemsize
                dma += nbytes
                kind = e.rec.spill
                if kind is not None:
                    spill[kind][0] += 1
                    spill[kind][1] += nbytes
                    continue
                hbm_r += nbytes if src is not None and src.space == "hbm" else 0
                hbm_w += nbytes if dst.space == "hbm" else 0
        # A DMA packet is moving while a piece is, and while a transfer's completion writes are (its queue's
        # turnaround: every engine writes a 4 B semaphore update, nki-dma-overview.rst).
        ends = np.array([e.end for e in tl.events if e.parts])
        done = np.minimum(ends + timing(spec.target).dma_turnaround_latency, begin + lat)
        active["DMA"] = active.get("DMA", 0.0) + union_length(np.concatenate([np.frombuffer(tl.piece_start), ends]),
                                                              np.concatenate([np.frombuffer(tl.piece_end), done]))
        eng = np.frombuffer(tl.piece_engine, np.int32)
        s, f = np.frombuffer(tl.piece_start), np.frombuffer(tl.piece_end)
        for q in np.unique(eng):
            active[f"DMA q{q}"] = active.get(f"DMA q{q}", 0.0) + float((f[eng == q] - s[eng == q]).sum())
        for k, v in tl.memory_peak.items():
            peaks[k] = max(peaks.get(k, 0), v)
        if lat >= latency:
            latency = lat
            path, waiting, _ = critical_path(tl)
    order = [TRACKS[e] for e in TRACKS] + ["DMA"]
    active = {k: active[k] for k in sorted(active, key=lambda k: (order.index(k) if k in order else len(order), len(k), k))}
    overhead = timing(spec.target).execution_overhead if latency else 0.0
    return BenchmarkResult(kernel, spec.target, latency, overhead, active, counts, flops, hw_flops, spec.peak_flops("bf16"),
                           dma, hbm_r, hbm_w, peaks.get("sbuf", 0), peaks.get("psum", 0), path, waiting,
                           spill["save"][0], spill["reload"][0], spill["save"][1], spill["reload"][1], tuple(timelines))
