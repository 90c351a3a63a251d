"""Fabric speed: analytical estimates at UltraCluster scale, the flow model at 1,024 chips, value runs.

Prints one JSON object. Targets: the 30,000-chip analytical all-reduce under 1 s, the 1,024-chip
flow-level all-reduce under 30 s, a warm `collective_time` under 1 ms for the planner, and whole
`trnsim` commands at Project Rainier's scale (25,000 trn2.48xlarge: the all-reduce under 1.5 s of wall
time with the interpreter's start, under 500 MB peak; the training plan under 1 s) and on the 30,000-chip
Trn1 UltraCluster, each in a fresh process (CPU seconds too: on a shared machine they show what an idle
one would take).
"""
import json
import os
import subprocess
import sys
import time

import numpy as np

import trnsim.fabric as tf
from trnsim.fabric import runtime, timing


def timed(fn, repeat=1):
    t = time.perf_counter()
    for _ in range(repeat):
        out = fn()
    return out, (time.perf_counter() - t) / repeat


COMMANDS = {  # name -> (trnsim arguments, wall-time target in seconds)
    "rainier_all_reduce_1GiB": (["collective", "all_reduce", "--instance", "trn2.48xlarge", "-N", "25000",
                                 "-b", "1G", "-e", "1G"], 1.5),
    "trn1_ultracluster_30000_chips_all_reduce_1GiB": (["collective", "all_reduce", "--instance", "trn1.32xlarge",
                                                       "-N", "1875", "-b", "1G", "-e", "1G"], 1.5),
    "rainier_plan_llama3_70b": (["plan", "llama3-70b", "--instance", "trn2.48xlarge", "--nodes", "25000",
                                 "--tp", "8", "--pp", "8", "--global-batch", "25000"], 1.0),
}


def command(args: list[str]) -> dict:
    """A trnsim command in a fresh process: wall and CPU seconds, peak resident memory."""
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "trnsim", *args], stdout=subprocess.DEVNULL)
    _, status, use = os.wait4(p.pid, 0)
    return {"wall_s": round(time.perf_counter() - t, 3), "cpu_s": round(use.ru_utime + use.ru_stime, 3),
            "peak_rss_mb": round(use.ru_maxrss / 1024, 1), "exit_status": os.waitstatus_to_exitcode(status)}


def main():
    res = {}
    for name, (args, target) in COMMANDS.items():
        res[name] = {**min((command(args) for _ in range(3)), key=lambda r: r["wall_s"]), "target_wall_s": target,
                     "target_peak_rss_mb": 500, "command": "trnsim " + " ".join(args)}
    colds = []
    for _ in range(3):  # a fresh cluster each time: network, group, schedule and pricing all included
        big = tf.cluster("trn2.48xlarge", nodes=1875)  # 30,000 chips, 120,000 ranks at LNC 2
        (t, alg, steps), cold = timed(lambda: tf.collective_time("all_reduce", 2**30, None, big))
        colds.append(cold)
    _, warm = timed(lambda: tf.collective_time("all_reduce", 2**30 + 1, None, big), 200)
    res["ultracluster_30000_chips_all_reduce_1GiB"] = {
        "chips": big.chips, "ranks": big.ranks, "algorithm": alg, "steps": steps, "simulated_ms": t / 1e6,
        "cold_s_best_of_3": min(colds), "cold_s_worst_of_3": max(colds), "warm_us": warm * 1e6, "target_s": 1.0}
    mid = tf.cluster("trn2.48xlarge", nodes=64)  # 1,024 chips
    (t, alg, steps), secs = timed(lambda: tf.collective_time("all_reduce", 2**30, None, mid, model="flow"))
    ab = tf.collective_time("all_reduce", 2**30, None, mid)[0]
    (tr, _, _), ring_secs = timed(lambda: tf.collective_time("all_reduce", 2**30, None, mid, "ring", model="flow"))
    res["flow_1024_chips_all_reduce_1GiB"] = {
        "algorithm": alg, "steps": steps, "simulated_ms": t / 1e6, "alpha_beta_ms": ab / 1e6, "wall_s": secs,
        "flat_ring_simulated_ms": tr / 1e6, "flat_ring_wall_s": ring_secs, "target_s": 30.0}
    # the same collective with every round's max-min event loop actually run (no equal-size shortcut)
    g = runtime.group_of(mid, None)
    sch = runtime.schedule("all_reduce", "hierarchical", g, 2**30)

    def simulated():
        total = mid.constants.launch_floor
        for ph in sch.phases:
            lat, per_chunk = timing._flow(g, ph, simulate=True)
            total += ph.repeat * (lat + per_chunk * 2**30 / sch.nchunks)
        return total

    t_sim, secs = timed(simulated)
    res["flow_1024_chips_all_reduce_1GiB"].update(event_loop_simulated_ms=t_sim / 1e6, event_loop_wall_s=secs)
    tp = tf.cluster("trn2.48xlarge", nodes=4)
    _, cold = timed(lambda: tf.collective_time("all_reduce", 2**24, 16, tp))
    _, warm = timed(lambda: tf.collective_time("all_reduce", 2**24 + 1, 16, tp), 1000)
    res["planner_call_tp16"] = {"cold_ms": cold * 1e3, "warm_us": warm * 1e6, "target_warm_ms": 1.0}
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(2**18).astype(np.float32) for _ in range(64)]
    one = tf.cluster("trn2.48xlarge")
    _, secs = timed(lambda: tf.all_reduce(xs, cluster=one, algorithm="ring"))
    res["values_ring_all_reduce_64_ranks_1MiB_fp32"] = {"wall_s": secs}
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
