"""Beta-API front-end speed: the tutorial's tiled matmul written in the beta style against its current-API
port (examples/matmul_ladder.py), both on shapes only (timing_only) on trn1.

Prints one JSON object: per kernel, wall seconds to run the Python kernel through its front end and the
core's checks, instructions issued, instructions per second, the timing model's latency (equal for the
two); and the beta/current wall ratio (the cost of the index-map and mask translation). Shape: M=1024, N=2048, K=2048 (`--full` for the published 4096 x
8192 x 8192, about a minute per kernel).
"""
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "nki_beta"))
import matmul_ladder  # noqa: E402
from test_twin import beta_matmul_tiled  # noqa: E402

from trnsim.core.timing import simulate, summarize  # noqa: E402


def run(kernel, lhsT, rhs):
    t0 = time.perf_counter()
    cores = kernel.trace(lhsT, rhs, target="trn1", values=False)
    wall = time.perf_counter() - t0
    n = len(cores[0].stream)
    r = summarize(kernel.__name__, [simulate(cores[0].stream, "trn1")], cores[0].spec)
    return {"wall_s": round(wall, 3), "instructions": n, "instructions_per_s": round(n / wall),
            "latency_ms": round(r.latency / 1e6, 3)}


def main():
    K, M, N = (8192, 4096, 8192) if "--full" in sys.argv else (2048, 1024, 2048)
    lhsT, rhs = np.zeros((K, M), matmul_ladder.nl.bfloat16.np), np.zeros((K, N), matmul_ladder.nl.bfloat16.np)
    beta = run(beta_matmul_tiled, lhsT, rhs)
    current = run(matmul_ladder.matmul_tiled, lhsT, rhs)
    print(json.dumps({"shape": {"M": M, "N": N, "K": K}, "target": "trn1", "beta": beta, "current": current,
                      "beta_over_current_wall": round(beta["wall_s"] / current["wall_s"], 2)}))


if __name__ == "__main__":
    main()
