"""Fabric speed: analytical estimates at UltraCluster scale, the flow model at 1,024 chips, value runs.

Prints one JSON object. Targets (issue 7): the 30,000-chip analytical all-reduce under 1 s, the
1,024-chip flow-level all-reduce under 30 s, and a warm `collective_time` under 1 ms for the planner.
"""
import json
import time

import numpy as np

import trnsim.fabric as tf
from trnsim.fabric import runtime, timing


def timed(fn, repeat=1):
    t = time.perf_counter()
    for _ in range(repeat):
        out = fn()
    return out, (time.perf_counter() - t) / repeat


def main():
    res = {}
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
