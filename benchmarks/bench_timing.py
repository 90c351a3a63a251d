"""Timing-model speed: the fully optimised matmul ladder kernel at the published shape, timing only.

Prints one JSON object: wall seconds to run the kernel on shapes (front end and checks) and to schedule
its stream, instructions per second, and simulated NeuronCore cycles (at the core's base clock) per
wall second (CPU seconds too: on a shared machine they show what an idle one would take). `--ladder` adds the calibration table: every ladder step on trn1 against the published
latency and HFU (reference/calibration.md 1.1), and the trn2 engine-active shares.
"""
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import matmul_ladder as ladder  # noqa: E402

from trnsim import specs  # noqa: E402
from trnsim.core.timing import simulate, summarize  # noqa: E402

PUBLISHED = {"matmul_tiled": (51.80, 0.1098), "matmul_hoisted": (42.96, 0.1324), "matmul_blocked": (22.07, 0.2651),
             "matmul_optimized": (6.97, 0.8524)}  # ms, HFU: the 2024 tutorial table


def run(kernel, target):
    lhsT, rhs = (np.zeros((ladder.SHAPE["K"], ladder.SHAPE[d]), ladder.nl.bfloat16.np)
                 for d in "MN")
    t0, c0 = time.perf_counter(), time.process_time()
    cores = kernel.trace(lhsT, rhs, target=target, values=False)
    t1, c1 = time.perf_counter(), time.process_time()
    tl = simulate(cores[0].stream, target)
    t2, c2 = time.perf_counter(), time.process_time()
    return summarize(kernel.__name__, [tl], cores[0].spec), len(cores[0].stream), (t1 - t0, c1 - c0), (t2 - t1, c2 - c1)


def main():
    target = "trn1"
    r, n, front, sched = run(ladder.matmul_optimized, target)
    base = specs.neuroncore(target).clocks["base"]
    wall = front[0] + sched[0]
    out = {"kernel": r.kernel, "target": target, "shape": ladder.SHAPE, "instructions": n,
           "simulated_latency_ms": r.latency / 1e6, "hfu": r.hfu,
           "wall_s": wall, "wall_frontend_s": front[0], "wall_schedule_s": sched[0],
           "cpu_s": front[1] + sched[1], "cpu_frontend_s": front[1], "cpu_schedule_s": sched[1],
           "instructions_per_s": n / wall, "simulated_cycles_per_s": r.latency * 1e-9 * base / wall}
    if "--ladder" in sys.argv:
        rows = []
        for k in ladder.LADDER:
            r1 = run(k, "trn1")[0] if k is not ladder.matmul_optimized else r
            r2 = run(k, "trn2")[0]
            ms, hfu = PUBLISHED[k.__name__]
            rows.append({"step": k.__name__, "trn1_ms": r1.latency / 1e6, "published_ms": ms,
                         "error": r1.latency / 1e6 / ms - 1, "trn1_hfu": r1.hfu, "published_hfu": hfu,
                         "trn1_bound": r1.bound, "trn2_ms": r2.latency / 1e6, "trn2_bound": r2.bound,
                         "trn2_share": {t: round(v, 3) for t, v in r2.share.items() if not t.startswith("DMA q")}})
        out["ladder"] = rows
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
