"""Casts per second from FP32, RNE vs stochastic rounding, on 16M values; prints one JSON object.

Also reports SR's statistics: how often a value a quarter of the way between two bf16 neighbours rounds
up, and the mean error in ulps of SR and RNE over random data in [1, 2) (uniform, and placed in the lower
half of each gap, where RNE is biased by -1/4 ulp).

    .venv/bin/python benchmarks/bench_numerics.py [--n 16777216] [--repeat 5]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np

import trnsim.numerics as tn

TARGETS = ("bfloat16", "float8_e4m3", "float8_e4m3fn", "float8_e5m2")


def best_times(fns, repeat: int) -> list[float]:
    """Fastest of `repeat` runs of each function, the runs interleaved so machine noise hits all alike."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - t0)
    return best


def mean_ulp_error(x: np.ndarray, rounding: str) -> float:
    """Mean of (bf16(x) - x) in ulps, for x in [1, 2) where the bf16 step is 2^-7."""
    y = tn.cast(x, "bfloat16", rounding, rng=11).astype(np.float64)
    return float(np.mean((y - x) * 128))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=16 * 2**20)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    x = np.random.default_rng(0).standard_normal(args.n).astype(np.float32)

    casts = {}
    for t in TARGETS:
        rne, sr = best_times([lambda: tn.cast(x, t, "rne"), lambda: tn.cast(x, t, "stochastic", rng=1)],
                             args.repeat)
        casts[t] = {"rne_casts_per_s": args.n / rne, "sr_casts_per_s": args.n / sr, "sr_over_rne_time": sr / rne}

    quarter = np.full(1_000_000, np.float32(1 + 2**-9))  # bf16 neighbours 1 and 1 + 2^-7
    up = float((tn.cast(quarter, "bfloat16", "stochastic", rng=2).astype(np.float32) > 1).mean())
    data = np.random.default_rng(3).uniform(1, 2, 1_000_000).astype(np.float32)
    # each value in the lower half of its bf16 gap, where RNE always rounds down
    lower_half = (np.floor(data * 128) + np.random.default_rng(4).uniform(0, 0.5, data.size)) / 128
    lower_half = lower_half.astype(np.float32)
    print(json.dumps({
        "benchmark": "numerics.cast",
        "n_values": args.n,
        "repeat": args.repeat,
        "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "numpy": np.__version__,
        "casts": casts,
        "max_sr_over_rne_time": max(c["sr_over_rne_time"] for c in casts.values()),
        "sr_stats_bf16": {
            "quarter_way_round_up_fraction": up,
            "mean_error_ulp_uniform_1_2": {"sr": mean_ulp_error(data, "stochastic"),
                                           "rne": mean_ulp_error(data, "rne")},
            "mean_error_ulp_lower_half_of_gap": {"sr": mean_ulp_error(lower_half, "stochastic"),
                                                 "rne": mean_ulp_error(lower_half, "rne")},
        },
    }, indent=2))


if __name__ == "__main__":
    main()
