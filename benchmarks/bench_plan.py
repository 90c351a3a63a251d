"""Planner speed: one layout evaluation after warm-up, and a 1,000-layout sweep on 2 processes.

Prints one JSON object. Targets (issue 8): under 5 ms per layout, under 30 s for the sweep.
Trainium compute reads the shipped efficiency table; `simulated_on_demand` counts the buckets this
process had to simulate because the table lacked them (0 when the table covers the benchmark).
"""
from __future__ import annotations

import json
import os
import time

from trnsim.plan import Cluster, Layout, Recipe, model
from trnsim.plan import efficiency, sweep as S
from trnsim.plan.step import DEFAULT


def per_layout_ms(repeats: int = 500) -> float:
    """Median over layouts of Llama-3-70B on 8 trn2.48xlarge, after one warm-up pass."""
    m = model("llama3-70b")
    cluster = Cluster("trn2.48xlarge", 8)
    rec = Recipe.nxd(m)
    layouts = [Layout(tp=32, pp=4, vpp=v, cp=c) for v in (1, 2) for c in (1, 2)] + [Layout(tp=32, pp=8), Layout(tp=16, pp=8)]
    for lay in layouts:
        DEFAULT.evaluate(m, cluster, lay, rec)
    times = []
    for i in range(repeats):
        lay = layouts[i % len(layouts)]
        t = time.perf_counter()
        DEFAULT.evaluate(m, cluster, lay, rec)
        times.append(time.perf_counter() - t)
    times.sort()
    return 1e3 * times[len(times) // 2]


def sweep_1000(workers: int = 2) -> tuple[float, int, int]:
    """Wall time of a sweep of exactly 1,000 candidates on fresh worker processes with cold caches."""
    m = model("llama3-70b")
    todo = S.tasks(m, ["trn1.32xlarge", "trn2.48xlarge", "p4d.24xlarge"], [8, 16, 32, 64],
                   micro_batches=(1, 2), checkpointing=("selective", "full"))
    todo = todo[:: max(1, len(todo) // 1000)][:1000]
    t = time.perf_counter()
    result = S.sweep(m, (), (), workers=workers, candidates=todo)
    return time.perf_counter() - t, len(todo), len(result.ranked)


if __name__ == "__main__":
    wall, n, valid = sweep_1000()  # first, so no cache of this process is warm
    ms = per_layout_ms()
    print(json.dumps({"bench": "plan", "per_layout_ms_median": round(ms, 3), "target_per_layout_ms": 5,
                      "sweep_layouts": n, "sweep_valid": valid, "sweep_workers": 2, "sweep_s": round(wall, 3),
                      "target_sweep_s": 30, "simulated_on_demand": efficiency.simulate.cache_info().currsize,
                      "cpus": os.cpu_count()}))
