"""Whether a steady loop's schedule repeats: each iteration's events against the next one's, timing only.

Shifting a loop's schedule instead of placing each iteration would be exact only where iteration k + 1's events
are iteration k's moved by one time shift, bit for bit, and stay so. This prints, per kernel and target, over
each pair of iterations of one loop 1 or 2 apart (the matmul ladder's K loops and a double-buffered
load/compute/store loop), how many pairs move:
- `one_shift`: every event by one common shift (1e-6 ns apart at most);
- `shift_per_track`: the events of each track (each compute engine, each DMA queue) by a shift of the track's
  own;
- `exact`: so, and each track's shift (a float) added to iteration k's starts and ends gives the later
  iteration's bit for bit;
- `one_binade`, `exact_in_one_binade`: of the pairs moving by a shift per track, those whose times all lie
  between two consecutive powers of two of nanoseconds, and of those the exact ones (a shift that is a
  multiple of the binade's ulp moves every float sum and comparison there with it);
and the shifts each track took (`shifts`: min, max, how many distinct at 0.01 ns).

    python benchmarks/loop_shifts.py [--target trn1|trn2]

The iterations are found from the kernels' loop structure (records per iteration, per block), which each kernel
below states.
"""
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import matmul_ladder as ladder  # noqa: E402

import trnsim.nki as nki  # noqa: E402
import trnsim.nki.isa as nisa  # noqa: E402
import trnsim.nki.language as nl  # noqa: E402
from trnsim.core.timing import simulate  # noqa: E402


@nki.jit
def load_compute_store(x):
    """Each 128-row tile loaded, exponentiated, doubled and stored: tiles made in the body, so the allocator gives
    consecutive iterations their own buffers (double buffering)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i * 128:(i + 1) * 128, :])
        u = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.activation(dst=u, op=nl.exp, data=t)
        v = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=v, data=u, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=v)
    return out


def _bf16(*shape):
    return np.zeros(shape, nl.bfloat16.np)


# name -> (kernel, args, [(first record, records per iteration, iterations)] of each run of the loop examined)
def cases():
    K, M, N = ladder.SHAPE["K"], ladder.SHAPE["M"], ladder.SHAPE["N"]
    tk, tm, tn = 8, 16, 2  # matmul_optimized's defaults: per K block 2 * tk loads and tm * tn groups of tk + 1
    per, kb = 2 * tk + tm * tn * (tk + 1), K // (ladder.TILE_K * tk)
    block = 1 + kb * per + 2 * tm  # memset, the K blocks, each row's copy and store
    blocks = (N // (ladder.TILE_N * tn)) * (M // (ladder.TILE_M * tm))
    kt = 8192 // ladder.TILE_K  # matmul_tiled at K = 8192, M = 256, N = 1024: per output tile kt x (2 loads, matmul)
    return {
        "matmul_optimized": (ladder.matmul_optimized, (_bf16(K, M), _bf16(K, N)),
                             [(b * block + 1, per, kb) for b in range(blocks)]),
        "matmul_tiled": (ladder.matmul_tiled, (_bf16(8192, 256), _bf16(8192, 1024)),
                         [(b * (3 * kt + 2), 3, kt) for b in range(4)]),
        "load_compute_store": (load_compute_store, (np.zeros((128 * 64, 2048), np.float32),), [(0, 4, 64)]),
    }


def pairs(events, runs, period: int) -> dict:
    """The counts and shifts described in the module's doc, over every pair of iterations `period` apart."""
    out = {"pairs": 0, "one_shift": 0, "shift_per_track": 0, "exact": 0, "one_binade": 0, "exact_in_one_binade": 0}
    seen: dict[str, set] = {}
    for first, length, n in runs:
        for k in range(n - period):
            a0, b0 = first + k * length, first + (k + period) * length
            shift, alike, exact, binades = {}, True, True, set()
            for j in range(length):
                a, b = events[a0 + j], events[b0 + j]
                if a.rec.op is not b.rec.op or a.rec.location != b.rec.location:
                    raise ValueError(f"records {a0 + j} and {b0 + j} are not one instruction of two iterations")
                d = shift.setdefault(a.track, b.start - a.start)
                seen.setdefault(a.track, set()).add(round(b.start - a.start, 2))
                alike = alike and abs(b.start - a.start - d) <= 1e-6 and abs(b.end - a.end - d) <= 1e-6
                exact = exact and a.start + d == b.start and a.end + d == b.end
                binades.update(math.frexp(t)[1] for t in (a.start, a.end, b.start, b.end))
            out["pairs"] += 1
            out["shift_per_track"] += alike
            out["exact"] += alike and exact
            if alike and len(binades) == 1:
                out["one_binade"] += 1
                out["exact_in_one_binade"] += exact
            out["one_shift"] += alike and max(shift.values()) - min(shift.values()) <= 1e-6
    out["shifts"] = {g: [min(v), max(v), len(v)] for g, v in sorted(seen.items())}
    return out


PERIODS = (1, 2)  # iterations apart: a loop's allocation state may repeat every other iteration (double buffering)


def main():
    target = sys.argv[sys.argv.index("--target") + 1] if "--target" in sys.argv else "trn1"
    rows = {}
    for name, (kernel, args, runs) in cases().items():
        nc = kernel.trace(*args, target=target, values=False)[0]
        events = simulate(nc.stream, target).events
        rows[name] = {"target": target, "instructions": len(nc.stream),
                      **{f"period {p}": pairs(events, runs, p) for p in PERIODS}}
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
