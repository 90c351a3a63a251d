"""Emulator speed, side by side in one run (prints one JSON object):

- a bf16 [4096 x 4096] x [4096 x 4096] tiled-matmul NKI kernel on the emulator against numpy's own fp32
  matmul of the same size (target: the kernel within 1.5x of numpy);
- instructions per second on a small-tile elementwise kernel;
- many launches of a one-tile kernel in one process (a test suite, a sweep): launches per second and how far
  the process's resident memory rose above where it started (each launch is freed when the next replaces it).

The matmul's bits are checked twice: against the speed layer turned off (TRNSIM_FAST=0, each product added as
issued) and against `required_work`, numpy doing alone the arithmetic those bits require (one product per
matmul by single-threaded BLAS, summed per PSUM bank in issue order, on all CPU cores; with OpenBLAS each sum
made by the call that computes the product): its time over numpy's GEMM is the lowest ratio an emulator that
computes each PSUM group when its eviction reads it can reach on this machine. `reordered_work` does the same
arithmetic with several row blocks' products in one call (each element's own order kept, bits checked too):
the floor for an emulator that defers the groups past their evictions.

Wall times are the headline; CPU times (all threads) are printed too, since a busy machine stretches
wall time, and the emulator's main thread's own (its per-instruction Python: the SGEMM calls run on other
threads, those of owed PSUM groups beside it). numpy's matmul is multi-threaded BLAS; the emulator spends
its time in BLAS as well (each matmul's product, batched per PSUM accumulation group and summed in issue
order, see trnsim/core/isa/psum.py, core/fast/psum.py and core/fast/blas.py) plus per-instruction
bookkeeping.

    .venv/bin/python benchmarks/bench_core.py [--size 4096] [--repeat 5] [--launches 1000]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import time
from concurrent.futures import ThreadPoolExecutor

import ml_dtypes
import numpy as np
from threadpoolctl import ThreadpoolController, threadpool_limits

from trnsim.compiled import ENV
from trnsim.core.limits import _rss

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl


@nki.jit
def tiled_matmul(a_t, b):
    """out[M, N] = a_t.T @ b, blocked as NKI's matmul tutorial does: one 128-row block of A stays
    stationary while the 8 PSUM banks accumulate the 8 column blocks of 512 over K."""
    K, M = a_t.shape
    N = b.shape[1]
    KT, TM, TN = K // 128, 128, 512
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    accs = [nl.ndarray((TM, TN), nl.float32, buffer=nl.psum) for _ in range(N // TN)]  # all 8 banks
    for m in range(M // TM):
        at = nl.ndarray((128, KT, TM), a_t.dtype)  # the K tiles of one row block, K on partitions
        nisa.dma_copy(at, a_t[:, m * TM:(m + 1) * TM].reshape((KT, 128, TM)).permute((1, 0, 2)))
        for k in range(KT):
            bt = nl.ndarray((128, N), b.dtype)
            nisa.dma_copy(bt, b[k * 128:(k + 1) * 128, :])
            for n in range(N // TN):
                nisa.nc_matmul(accs[n], at[:, k, :], bt[:, n * TN:(n + 1) * TN])
        for n in range(N // TN):
            res = nl.ndarray((TM, TN), nl.float32)
            nisa.tensor_copy(res, accs[n])  # the eviction closes the bank's accumulation group
            nisa.dma_copy(out[m * TM:(m + 1) * TM, n * TN:(n + 1) * TN], res)
    return out


@nki.jit
def small_tiles(x):
    """Elementwise work on [128, 64] tiles: 4 compute instructions per load/store pair."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for i in range(x.shape[0] // 128):
        t = nl.load(x[i * 128:(i + 1) * 128])
        u = nl.ndarray(t.shape, t.dtype)
        nisa.tensor_scalar(u, t, nl.multiply, 2.0, op1=nl.add, operand1=1.0)
        nisa.activation(u, nl.exp, u, scale=-1.0)
        nisa.tensor_tensor(u, u, t, nl.add)
        nisa.tensor_scalar(u, u, nl.maximum, 0.0)
        nl.store(out[i * 128:(i + 1) * 128], u)
    return out


@nki.jit
def one_tile(x):
    """out = 2x + 1 on one [128, 512] tile."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=1.0)
    nisa.dma_copy(dst=out, src=t)
    return out


def _sgemm():
    """numpy's OpenBLAS cblas_sgemm (64-bit integers, as numpy's wheels ship it), or None."""
    for lib in ThreadpoolController().select(internal_api="openblas").lib_controllers:
        fn = getattr(ctypes.CDLL(lib.filepath), "scipy_cblas_sgemm64_", None)
        if fn is not None:
            i, n, f, p = ctypes.c_int, ctypes.c_int64, ctypes.c_float, ctypes.c_void_p
            fn.argtypes, fn.restype = [i, i, i, n, n, n, f, p, n, p, n, f, p, n], None
            return fn
    return None


def required_work(a_t, b):
    """tiled_matmul's arithmetic alone, in numpy and its BLAS: for each matmul, its product [512 x 128] (moving
    tile read in place from B transposed, times the stationary tile) by single-threaded SGEMM, each bank's
    products summed in issue order; the row blocks shared out over the CPU cores. With OpenBLAS the sum is made
    by the SGEMM call itself (beta = 1: the finished product added to the running sum, the one rounding of
    product-then-add) and the 8 banks' products of one K tile are one call (their moving tiles are adjacent
    rows of B transposed); without it, numpy's matmul and then an add."""
    K, M = a_t.shape
    N = b.shape[1]
    a32, bt = a_t.astype(np.float32), b.T.astype(np.float32, order="C")  # bt: [N, K], the moving tiles side by side
    out = np.empty((M, N), np.float32)
    sgemm = _sgemm()

    def rows(first, step):
        acc = np.empty((N, 128), np.float32)
        for m in range(first, M // 128, step):
            at = [np.ascontiguousarray(a32[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128]) for k in range(K // 128)]
            if sgemm is not None:
                for k in range(K // 128):  # row-major: acc[N, 128] = bt[:, k tile] @ at[k] (+ acc)
                    sgemm(101, 111, 111, N, 128, 128, 1.0, bt[:, k * 128:].ctypes.data, K, at[k].ctypes.data, 128,
                          1.0 if k else 0.0, acc.ctypes.data, 128)
            else:
                for n in range(N // 512):
                    tile, sums = bt[n * 512:(n + 1) * 512], acc[n * 512:(n + 1) * 512]
                    np.matmul(tile[:, :128], at[0], out=sums)
                    for k in range(1, K // 128):
                        sums += tile[:, k * 128:(k + 1) * 128] @ at[k]
            out[m * 128:(m + 1) * 128] = acc.T

    cores = os.cpu_count() or 1
    with threadpool_limits(1, "blas"), ThreadPoolExecutor(cores) as pool:
        list(pool.map(rows, range(cores), [cores] * cores))
    return out


def reordered_work(a_t, b):
    """required_work's products and sums in another order that keeps each output element's own: a K tile's
    products for several row blocks side by side (their stationary tiles are adjacent columns of A) in one
    SGEMM that adds them into a block of running sums, so each moving tile is packed once for several
    stationary tiles; computed in the output's own layout (A's tile transposed by the call, B's rows as they
    are). An emulator reaches this order only by deferring the PSUM groups past their evictions until the
    kernel's output is read; None without OpenBLAS."""
    sgemm = _sgemm()
    if sgemm is None:
        return None
    K, M = a_t.shape
    N = b.shape[1]
    a32, b32 = a_t.astype(np.float32), b.astype(np.float32)
    out = np.empty((M, N), np.float32)
    rows, width = 512, 1024  # 2 MiB of running sums per call: a moving tile, packed once, meets 4 stationary ones

    def blocks(first, step):
        for r in range(first * rows, M, step * rows):
            for c in range(0, N, width):
                for k in range(K // 128):  # out[r:, c:] = a32[k tile, r:].T @ b32[k tile, c:] (+ out)
                    sgemm(101, 112, 111, min(rows, M - r), min(width, N - c), 128, 1.0, a32[k * 128:, r:].ctypes.data,
                          M, b32[k * 128:, c:].ctypes.data, N, 1.0 if k else 0.0, out[r:, c:].ctypes.data, N)

    cores = os.cpu_count() or 1
    with threadpool_limits(1, "blas"), ThreadPoolExecutor(cores) as pool:
        list(pool.map(blocks, range(cores), [cores] * cores))
    return out


def fast_off(kernel, *args):
    """One launch with the speed layer off (read at each launch)."""
    before = os.environ.get(ENV)
    os.environ[ENV] = "0"
    try:
        return kernel(*args)
    finally:
        if before is None:
            del os.environ[ENV]
        else:
            os.environ[ENV] = before


def launches(n: int) -> dict:
    """`n` launches of one_tile, one after another: their rate and the highest rise of resident memory."""
    x = np.ones((128, 512), np.float32)
    start, top = _rss(), 0
    t, c = time.perf_counter(), time.process_time()
    for _ in range(n):
        one_tile(x)
        top = max(top, _rss() - start)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    return {"launches": n, "per_s": round(n / wall), "cpu_s": round(cpu, 3), "memory_rise_mib": round(top / 2**20)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--launches", type=int, default=1000)
    ap.add_argument("--no-bits", action="store_true", help="skip the run with the speed layer off")
    args = ap.parse_args()
    many = launches(args.launches)  # first: the large matmul's memory would hide the rise
    n = args.size
    rng = np.random.default_rng(0)
    a_t = rng.standard_normal((n, n), np.float32).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((n, n), np.float32).astype(ml_dtypes.bfloat16)
    a32, b32 = a_t.astype(np.float32).T.copy(), b.astype(np.float32)

    def timed(fn, *args):
        t, c, m = time.perf_counter(), time.process_time(), time.thread_time()
        out = fn(*args)
        return out, time.perf_counter() - t, time.process_time() - c, time.thread_time() - m

    # interleaved, best of `repeat` for both sides: a busy machine stretches single runs unevenly
    runs = [(timed(np.matmul, a32, b32), timed(tiled_matmul, a_t, b), timed(required_work, a_t, b),
             timed(reordered_work, a_t, b)) for _ in range(args.repeat)]
    ref, numpy_s, numpy_cpu, _ = min((r[0] for r in runs), key=lambda r: r[1])
    got, emu_s, emu_cpu, emu_main = min((r[1] for r in runs), key=lambda r: r[1])
    floor, floor_s, floor_cpu, _ = min((r[2] for r in runs), key=lambda r: r[1])
    rel = float(np.abs(got - ref).max() / np.abs(ref).max())
    lower, lower_s, lower_cpu, _ = min((r[3] for r in runs), key=lambda r: r[1])
    bits = {"required_work": got.tobytes() == floor.tobytes()}
    if lower is not None:
        bits["reordered_work"] = got.tobytes() == lower.tobytes()
    if not args.no_bits:
        bits[f"{ENV}=0"] = got.tobytes() == fast_off(tiled_matmul, a_t, b).tobytes()
    n_matmul = len(tiled_matmul.last_cores[0].stream)

    x = rng.standard_normal((128 * 400, 64), np.float32)
    t = time.perf_counter()
    small_tiles(x)
    ew_s = time.perf_counter() - t
    n_ew = len(small_tiles.last_cores[0].stream)

    print(json.dumps({
        "benchmark": "core",
        "machine": platform.machine(), "python": platform.python_version(), "numpy": np.__version__,
        "matmul": {"size": n, "dtype": "bfloat16", "emulator_s": round(emu_s, 3), "numpy_fp32_s": round(numpy_s, 3),
                   "ratio": round(emu_s / numpy_s, 2), "target_ratio": 1.5,
                   "runs_s": [[round(x[1], 3) for x in r] for r in runs],
                   "emulator_cpu_s": round(emu_cpu, 3), "emulator_main_thread_cpu_s": round(emu_main, 3),
                   "numpy_cpu_s": round(numpy_cpu, 3), "instructions": n_matmul,
                   "required_work_s": round(floor_s, 3), "required_work_cpu_s": round(floor_cpu, 3),
                   "required_work_ratio": round(floor_s / numpy_s, 2),
                   "reordered_work_s": None if lower is None else round(lower_s, 3),
                   "reordered_work_cpu_s": None if lower is None else round(lower_cpu, 3),
                   "reordered_work_ratio": None if lower is None else round(lower_s / numpy_s, 2), "bits_equal": bits,
                   "max_rel_error_vs_fp32": rel},
        "elementwise": {"tile": [128, 64], "instructions": n_ew, "seconds": round(ew_s, 3),
                        "instructions_per_s": round(n_ew / ew_s)},
        "many_launches": many,
    }))


if __name__ == "__main__":
    main()
