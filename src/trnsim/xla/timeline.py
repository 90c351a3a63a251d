"""Per-rank timelines of a simulated run (`trnsim torchrun --trace DIR`), as Chrome trace JSON for Perfetto.

Each rank's steps are laid end to end on its simulated clock, in the order the work ran: compilations (the
estimated wait for neuronx-cc, or a load from the persistent cache), compute (each eager op or graph, with its
time by engine and FLOPs) and collectives (op, bytes, ranks), one track each, and a track of the steps. The
cost model does not overlap compute with collectives, so neither does the timeline.
"""
from __future__ import annotations

import json
import os

TRACKS = ("steps", "compile", "compute", "collective")


def chrome_trace(steps, rank: int, title: str) -> dict:
    """The Chrome trace of one rank's `steps` (graphs.Step with events)."""
    events = [{"ph": "M", "pid": rank, "name": "process_name", "args": {"name": f"rank {rank}: {title}"}}]
    events += [{"ph": "M", "pid": rank, "tid": tid, "name": "thread_name", "args": {"name": name}}
               for tid, name in enumerate(TRACKS)]
    t = 0.0  # ns on the simulated clock
    for i, step in enumerate(steps, 1):
        start = t
        for kind, name, ns, args in step.events:
            events.append({"ph": "X", "pid": rank, "tid": TRACKS.index(kind), "name": name, "ts": t / 1e3,
                           "dur": ns / 1e3, "args": args})
            t += ns
        events.append({"ph": "X", "pid": rank, "tid": 0, "name": f"step {i}", "ts": start / 1e3,
                       "dur": (t - start) / 1e3,
                       "args": {"step_time_ms": step.time_ns / 1e6, "compile_s_estimate": step.compile_ns / 1e9,
                                "warm_up": bool(step.compilations or step.warm_up)}})
    return {"traceEvents": events, "displayTimeUnit": "ns"}


def write(folder: str, steps, rank: int, title: str) -> str:
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"rank{rank}.trace.json")
    with open(path, "w") as f:
        json.dump(chrome_trace(steps, rank, title), f)
    return path
