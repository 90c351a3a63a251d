"""Time the report layer on a 100k-span schedule: build, summary, trace (write + validate), HTML.

The schedule is a made-up tiled pipeline (load on a DMA queue, matmul, activation, vector op,
store), placed by a greedy in-order list scheduler here; its durations are arbitrary, only its size
and shape (engines in order, overlapping transfers per queue, cross-engine waits) matter.
Prints one JSON object.
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from trnsim.report import Schedule, Span, render_html, summary_dict, validate_trace_events, write_trace

STAGES = (("DMA", "DMA_DIRECT2D", 900.0), ("TensorE", "MATMUL", 420.0), ("ScalarE", "ACTIVATE", 300.0),
          ("VectorE", "TENSOR_TENSOR", 260.0), ("DMA", "DMA_DIRECT2D", 700.0))
QUEUES, DMA_IN_FLIGHT = 16, 4


def pipeline(spans_wanted: int) -> Schedule:
    free: dict[str, list[float]] = {}
    spans: list[Span] = []
    for tile in range(spans_wanted // len(STAGES)):
        prev = None
        for k, (engine, op, dur) in enumerate(STAGES):
            track = f"DMA q{(2 * tile + k // 4) % QUEUES}" if engine == "DMA" else engine
            slots = free.setdefault(track, [0.0] * (DMA_IN_FLIGHT if engine == "DMA" else 1))
            slot = min(range(len(slots)), key=slots.__getitem__)
            start = max(slots[slot], prev.end if prev else 0.0)
            d = dur * (1 + (tile * 7 + k) % 5 / 10)
            span = Span(len(spans), track, op, start, d,
                        {"operands": f"bf16@sb[{tile % 128}][128,512]", "tile": tile},
                        (prev.id,) if prev else ())
            slots[slot] = span.end
            spans.append(span)
            prev = span
    return Schedule(tuple(spans), "trn2", "bench_pipeline", {"flops": 2.0 * 128 * 128 * 512 * len(spans) / 5})


def main(n: int = 100_000) -> None:
    out = {"spans": n}
    t = time.perf_counter()
    sched = pipeline(n)
    out["build_s"] = time.perf_counter() - t
    t = time.perf_counter()
    d = summary_dict(sched)
    out["summary_s"] = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        trace = write_trace(sched, Path(tmp) / "trace.json")
        out["write_trace_s"] = time.perf_counter() - t
        out["trace_mb"] = trace.stat().st_size / 1e6
        t = time.perf_counter()
        validate_trace_events(json.loads(trace.read_text()))
        out["load_and_validate_trace_s"] = time.perf_counter() - t
        t = time.perf_counter()
        page = render_html(sched, Path(tmp) / "report.html", trace)
        out["render_html_s"] = time.perf_counter() - t
        out["html_kb"] = page.stat().st_size / 1e3
    out["latency_ns"] = d["latency_ns"]
    out["bound"] = d["critical_path"]["bound"]
    print(json.dumps(out))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
