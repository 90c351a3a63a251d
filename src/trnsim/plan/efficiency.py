"""What fraction of a NeuronCore's peak one op reaches, from timing-only simulations of kernels.

    >>> efficiency("trn1", "matmul", (8192, 512, 4096))   # M, N, K: lhsT [K, M], rhs [K, N]
    0.56...

Each op is rounded to a bucket (`matmul_bucket`, `attention_bucket`, `elementwise_bucket`), the bucket's representative
kernel (trnsim.plan.kernels) is timed on one core of the generation with the core timing model, and
the achieved rate over the core's peak is the efficiency. "latency" here is the kernel's execution period
(`BenchmarkResult.period`): an op runs inside a step's graph, one NEFF execution, so a kernel execution's own
start-up and tear-down (`execution_overhead`) is not the op's:

    matmul     FLOPs / latency over the core's dense peak for the dtype
    attention  QK^T and PV FLOPs (4 Sq S D) / latency over the same peak
    vector     elements / latency over the Vector engine's peak for a BF16 add: partitions x Vector clock x
               v3+'s tensor_tensor perf mode (N cycles on NC-v2, the nki.isa tensor_tensor cost note; N/2 on v3/v4)
    stream     HBM bytes read + written / latency over the core's share of HBM bandwidth

All four peaks come from the core's catalog record (neuroncores.toml); `peak` gives them, so the
planner turns an efficiency back into a time with the same denominators.

Planning reads the shipped table (efficiency.json, written by `python -m trnsim.plan.calibrate`);
a bucket missing from it is simulated once per process and kept in memory.
"""
from __future__ import annotations

import contextlib
import functools
import json
import math
from importlib import resources

import numpy as np

from trnsim import numerics, specs
from trnsim.pure import pure
from trnsim.specs.timing import timing

TABLE = "efficiency.json"
MATMUL_DIMS = (128, 8192)  # each of M, N, K rounded to a power of two in this range
MATMUL_CAP = 2**36  # M x N x K of one simulation (~10k instructions, ~2 s): larger shapes halve their largest dim
ELEMENTWISE_SPAN = (512, 65536)  # elements per partition of one elementwise simulation
ATTENTION_DIMS = ((128, 8192), (128, 8192), (64, 128))  # queries, keys, head dim of one simulated head
KERNELS = ("matmul", "attention", "vector", "stream")


def peak(core, kernel: str, dtype: str = "bf16") -> float:
    """The core's peak rate for `kernel`: FLOP/s, elements/s or HBM bytes/s."""
    if kernel in ("matmul", "attention"):
        return core.peak_flops(dtype)
    if kernel == "stream":
        return core.hbm_bandwidth
    # one BF16 add a lane a cycle on NC-v2 (both inputs in SBUF), times v3+'s tensor_tensor perf mode
    return core.partitions * core.clocks["vector"] * timing(core.target).vector_perf_modes["tensor_tensor"]


def _pow2(x: float, lo: int, hi: int) -> int:
    """The power of two nearest `x` in log space, within [lo, hi]."""
    return int(min(max(2 ** round(math.log2(max(x, 1))), lo), hi))


def matmul_bucket(m: int, n: int, k: int) -> tuple[int, int, int]:
    """The representative (M, N, K) simulated for an [m, k] x [k, n] matmul."""
    dims = [_pow2(d, *MATMUL_DIMS) for d in (m, n, k)]
    while math.prod(dims) > MATMUL_CAP:  # the steady state of a large matmul: trim the largest dim
        dims[dims.index(max(dims))] //= 2
    return tuple(dims)


def attention_bucket(queries: int, keys: int, head_dim: int) -> tuple[int, int, int]:
    """The representative (queries, keys, head dim) simulated for one head of attention."""
    return tuple(_pow2(d, *span) for d, span in zip((queries, keys, head_dim), ATTENTION_DIMS))


def elementwise_bucket(elems: float, partitions: int = 128) -> tuple[int]:
    """The representative per-partition element count for an elementwise pass over `elems` on one core."""
    return (_pow2(elems / partitions, *ELEMENTWISE_SPAN),)


@functools.cache  # a package file, read once: loading, not a memo
def _table() -> dict[tuple, dict]:
    text = resources.files("trnsim.plan").joinpath(TABLE).read_text()
    return {(e["target"], e["kernel"], e["dtype"], tuple(e["shape"])): e for e in json.loads(text)["entries"]}


_wanted: set | None = None  # while collecting: the buckets asked for, answered with a placeholder


@contextlib.contextmanager
def collecting():
    """Within the block, record the buckets asked for (yielded set) instead of looking them up."""
    global _wanted
    _wanted = set()
    try:
        yield _wanted
    finally:
        _wanted = None


def entry(target: str, kernel: str, shape: tuple[int, ...], dtype: str = "bf16") -> dict:
    """The table's record for a bucket, else a fresh simulation of it (kept for this process)."""
    key = (target, kernel, dtype, tuple(shape))
    if _wanted is not None:
        _wanted.add(key)
        return {"efficiency": 1.0}
    hw = specs.active()  # a what-if chip is simulated, never read from the catalog chips' table
    return (None if hw else _table().get(key)) or simulate(target, kernel, tuple(shape), dtype, hw)


def efficiency(target: str, kernel: str, shape: tuple[int, ...], dtype: str = "bf16") -> float:
    """The bucket's achieved fraction of the core's peak (see the module docstring for which peak)."""
    return entry(target, kernel, shape, dtype)["efficiency"]


@pure()
def simulate(target: str, kernel: str, shape: tuple[int, ...], dtype: str = "bf16", hardware=None) -> dict:
    """Time the bucket's kernel on one core of `target` (timing only) and derive its efficiency; `hardware`
    (the what-if chip in use, specs.active()) only keys the cache."""
    from trnsim.core.timing import benchmark  # the emulator loads only when a bucket is simulated
    from trnsim.plan import kernels

    core = specs.neuroncore(target)
    np_dtype = numerics.dtype(numerics.dtype_name(dtype)).np
    if kernel == "matmul":
        m, n, k = shape
        r = benchmark(kernels.matmul, np.zeros((k, m), np_dtype), np.zeros((k, n), np_dtype), target=target,
                      timing_only=True)
        done = 2.0 * m * n * k
    elif kernel == "attention":
        sq, s, d = shape
        r = benchmark(kernels.attention, np.zeros((d, sq), np_dtype), np.zeros((d, s), np_dtype),
                      np.zeros((s, d), np_dtype), target=target, timing_only=True)
        done = 4.0 * sq * s * d
    else:
        (per_partition,) = shape
        free = min(per_partition, 2048)  # 4 KiB of bf16 per partition per instruction and DMA
        x = np.zeros((per_partition // free, core.partitions, free), np_dtype)
        r = benchmark(getattr(kernels, kernel), x, target=target, timing_only=True)
        done = r.hbm_read_bytes + r.hbm_write_bytes if kernel == "stream" else x.size
    eff = done / (r.period * 1e-9) / peak(core, kernel, dtype)
    return {"target": target, "kernel": kernel, "dtype": dtype, "shape": list(shape), "latency_ns": round(r.period, 3),
            "efficiency": round(eff, 6), "bound": r.bound}
