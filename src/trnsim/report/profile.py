"""What a kernel's profile shows, from its timing result: the slowest core's schedule, each DMA transfer's
pieces per queue, SBUF and PSUM occupancy over time, engine time per source line, and the run's figures under
Neuron Explorer's summary keys. `trnsim profile` writes them out; this module computes them."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from trnsim import specs
from trnsim.errors import ConfigError
from trnsim.report import files

if TYPE_CHECKING:
    from trnsim.core.timing import BenchmarkResult


def _operands(rec) -> str:
    """Each operand as the profiler shows it: memory, partitions (on chip), byte range, dtype and shape."""
    def one(r):
        parts = f"[{r.partition}:{r.partition + r.partitions}]" if r.space != "hbm" else ""
        return f"{r.space}{parts}@{r.byte_lo}..{r.byte_hi} {r.dtype}{list(r.shape)}"
    return ", ".join(f"{n}={one(r)}" for n, r in rec.operands.items())


def slowest(result: BenchmarkResult):
    return max(result.timelines, key=lambda t: max((e.end for e in t.events), default=0.0))


def schedule_of(result: BenchmarkResult, every: int = 1):
    """The slowest core's timeline as a report Schedule: a span per instruction, DMA transfers on one
    "DMA" track (their per-queue pieces go to `dma_pieces`), dependencies as flow arrows.

    every: keep every Nth instruction (the figures in `meta` still count them all)."""
    from trnsim.core.isa.registry import NAME
    from trnsim.report import Schedule, Span

    tl = slowest(result)
    spans = []
    last = max(tl.events, key=lambda e: e.end).index if tl.events else -1  # kept: the axis ends where the kernel does
    for e in tl.events:
        if e.index % every and e.index != last:
            continue
        args = {"operands": _operands(e.rec), "source": e.rec.location, "instruction": e.index}
        name = e.rec.attrs.get(NAME)
        if name is not None:  # the kernel's name= for it, which with_schedule edges use
            args["name"] = name
        if e.rec.spill is not None:  # inserted by the compiler, not written in the kernel
            args["compiler"] = f"spill {e.rec.spill} for {e.rec.attrs.get('line')}"
        if e.pieces:
            args["queues"] = len(e.pieces)
        if e.rec.hoisted is not None:
            args["lowering"] = f"loop-invariant, hoisted by the compiler: computed once by instruction {e.rec.hoisted}"
        deps = tuple(d for d in e.deps if d % every == 0)
        spans.append(Span(e.index, "DMA" if e.pieces else e.track, e.rec.op.value, e.start, e.end - e.start, args,
                          deps))
    meta = result.meta()
    meta.pop("hardware_flops")
    meta["HFU (TensorE)"] = f"{100 * meta.pop('hfu'):.1f} %"
    if len(result.timelines) > 1:
        meta["cores"] = f"{len(result.timelines)} (LNC 2); the timeline shows the slower one"
    if every > 1:
        meta["instructions shown"] = f"every {every}th: {len(spans):,} of {len(tl.events):,}"
    return Schedule(spans, result.target, result.kernel, meta)


def dma_pieces(result: BenchmarkResult, every: int = 1) -> dict:
    """Each DMA transfer's share per queue (queue, start, end, the transfer's instruction index)."""
    import numpy as np

    tl = slowest(result)
    owner = np.fromiter((e.index for e in tl.events for _ in e.pieces), np.int64)
    keep = owner % every == 0
    return {"queue": np.frombuffer(tl.piece_engine, np.int32)[keep], "start": np.frombuffer(tl.piece_start)[keep],
            "end": np.frombuffer(tl.piece_end)[keep], "span": owner[keep]}


def occupancy(result: BenchmarkResult, points: int = 4000) -> dict:
    """SBUF and PSUM bytes holding live data over time: a region is live from the instruction that writes
    it until the last one that reads it (the same bytes again) before the next write. Each memory also
    carries its capacity and its allocated peak, what "SBUF peak" means everywhere else (the summary, the
    JSON): the allocator's high-water mark, which counts a buffer from allocation to release."""
    import numpy as np

    tl = slowest(result)
    spec = specs.neuroncore(result.target)
    capacity = {"sbuf": spec.partitions * spec.sbuf_partition_bytes, "psum": spec.partitions * spec.psum_partition_bytes}
    out = {}
    for space in ("sbuf", "psum"):
        live, times, deltas = {}, [], []
        for e in tl.events:
            rec = e.rec
            for name, r in rec.operands.items():
                if r.space != space:
                    continue
                key = (r.memory, r.partition, r.partitions, r.byte_lo, r.byte_hi)
                if name in rec.writes:
                    old = live.pop(key, None)
                    if old is not None:
                        times += [old[0], old[1]]
                        deltas += [old[2], -old[2]]
                    live[key] = [e.start, e.end, r.partitions * (r.byte_hi - r.byte_lo)]
                elif key in live:
                    live[key][1] = max(live[key][1], e.end)
        for s, f, b in live.values():
            times += [s, f]
            deltas += [b, -b]
        if not times:
            continue
        t = np.asarray(times, float)
        order = np.lexsort((np.asarray(deltas), t))  # frees before allocations at the same instant
        t, level = t[order], np.cumsum(np.asarray(deltas, np.int64)[order])
        if len(t) > points:  # keep the highest level in each of `points` time buckets
            edges = np.searchsorted(t, np.linspace(t[0], t[-1], points + 1)[1:-1])
            parts = np.split(np.arange(len(t)), edges)
            idx = [p[np.argmax(level[p])] for p in parts if len(p)]
            t, level = t[idx], level[idx]
        allocated = result.sbuf_peak_bytes if space == "sbuf" else result.psum_peak_bytes
        out[space.upper()] = (t, level, capacity[space], allocated)
    return out


def hotspots(result: BenchmarkResult) -> list[dict]:
    """Engine time per kernel source line over every instruction of the slowest core."""
    by: dict[str, dict] = {}
    for e in slowest(result).events:
        h = by.setdefault(e.rec.location or "?", {"source": e.rec.location or "?", "ns": 0.0, "count": 0, "ops": {}})
        h["ns"] += e.end - e.start
        h["count"] += 1
        h["ops"][e.rec.op.value] = h["ops"].get(e.rec.op.value, 0.0) + e.end - e.start
    out = sorted(by.values(), key=lambda h: -h["ns"])
    for h in out:
        h["op"] = max(h.pop("ops").items(), key=lambda kv: kv[1])[0]
    return out


# trnsim's engines under Neuron Explorer's summary names
_EXPLORER_ENGINES = {"TensorE": "tensor_engine", "VectorE": "vector_engine", "ScalarE": "scalar_engine",
                     "GpSimdE": "gpsimd_engine", "Sync": "sync_engine", "DMA": "dma"}


def explorer_summary(r: BenchmarkResult) -> dict:
    """The run's figures under Neuron Explorer's summary keys (`view --output-format summary-json`):
    total_time in seconds (the latency, start-up and tear-down included), each engine's active time in
    seconds and in percent of total_time, bytes moved, MFU and MBU in percent (MBU: HBM bytes read and
    written over total_time, against the core's HBM bandwidth). trnsim's own figures carry a trnsim_ prefix."""
    total = r.latency * 1e-9
    out = {"total_time": total}
    for name, key in _EXPLORER_ENGINES.items():
        active = r.active.get(name, 0.0) * 1e-9
        out[f"{key}_active_time"] = active
        out[f"{key}_active_time_percent"] = 100 * active / total if total else 0.0
    hbm = r.hbm_read_bytes + r.hbm_write_bytes
    out.update({
        "dma_transfer_total_bytes": r.dma_bytes, "hbm_read_bytes": r.hbm_read_bytes, "hbm_write_bytes": r.hbm_write_bytes,
        "hardware_flops": r.hardware_flops, "mfu_estimated_percent": 100 * r.mfu,
        "mbu_estimated_percent": 100 * hbm / total / specs.neuroncore(r.target).hbm_bandwidth if total else 0.0,
        "spill_save_bytes": r.spill_save_bytes, "spill_reload_bytes": r.spill_reload_bytes,
        "trnsim_target": r.target, "trnsim_timeline_time": r.period * 1e-9, "trnsim_overhead_time": r.overhead * 1e-9,
        "trnsim_hfu_percent": 100 * r.hfu, "trnsim_sbuf_peak_bytes": r.sbuf_peak_bytes,
        "trnsim_psum_peak_bytes": r.psum_peak_bytes, "trnsim_bound": r.bound})
    return out


# trnsim's engine tracks under Neuron Explorer's engine names (a DMA transfer, issued and moved as one
# instruction here, is a row of engine "dma" on the track of its last queue)
_EXPLORER_ENGINE_NAMES = {"TensorE": "tensor", "VectorE": "vector", "ScalarE": "scalar", "GpSimdE": "gpsimd",
                          "Sync": "sync"}


def pyarrow_or_error():
    """pyarrow, or a one-line error saying how to get it (it is an optional extra)."""
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise ConfigError("--output-format parquet writes Parquet with pyarrow, which is not installed: "
                          "pip install 'trnsim[parquet]' (or pip install pyarrow)") from None
    return pyarrow


def instruction_table(result: BenchmarkResult, path: Path) -> int:
    """Every instruction of every core as a row of Neuron Explorer's Instruction table (its Parquet schema:
    start_ts, end_ts, duration_ns in integer nanoseconds from the kernel's start, engine, opcode, operands,
    id, pc, bir_id, and the optional fields trnsim knows: timeline_track, pcore_idx, nki_source_location,
    raw_flops, tensor_instruction_type). bir_id is empty: no compiler ran. Returns the row count."""
    pa = pyarrow_or_error()
    import pyarrow.parquet as pq

    cols: dict[str, list] = {k: [] for k in (
        "start_ts", "end_ts", "duration_ns", "engine", "timeline_track", "pcore_idx", "opcode", "operands", "id",
        "pc", "bir_id", "nki_source_location", "raw_flops", "tensor_instruction_type")}
    t0 = min((e.start for tl in result.timelines for e in tl.events), default=0.0)
    base = 0
    for core, tl in enumerate(result.timelines):
        pcs: dict[str, int] = {}
        for e in tl.events:
            engine = "dma" if e.pieces else _EXPLORER_ENGINE_NAMES.get(e.track, e.track.lower())
            start, end = round(e.start - t0), round(e.end - t0)
            pcs[engine] = pcs.get(engine, -1) + 1
            transpose = e.flops > e.model_flops  # PE work whose FLOPs are not the model's: a transpose
            for k, v in (("start_ts", start), ("end_ts", end), ("duration_ns", end - start), ("engine", engine),
                         ("timeline_track", e.track), ("pcore_idx", core), ("opcode", e.rec.op.value),
                         ("operands", _operands(e.rec)), ("id", base + e.index), ("pc", pcs[engine]), ("bir_id", ""),
                         ("nki_source_location", e.rec.location or None), ("raw_flops", round(e.flops or 0)),
                         ("tensor_instruction_type", ("TRANSPOSE" if transpose else "REGULAR")
                          if engine == "tensor" else None)):
                cols[k].append(v)
        base += len(tl.events)
    types = {"start_ts": pa.int64(), "end_ts": pa.int64(), "duration_ns": pa.int64(), "pcore_idx": pa.int64(),
             "id": pa.int64(), "pc": pa.int64(), "raw_flops": pa.int64()}
    table = pa.table({k: pa.array(v, types.get(k, pa.string())) for k, v in cols.items()})
    path.parent.mkdir(parents=True, exist_ok=True)
    with files.replacing(path) as tmp:
        pq.write_table(table, tmp)
    return table.num_rows
