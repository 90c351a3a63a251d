"""PSUM accumulation groups: how matmul results land in PSUM.

With `accumulate=None` the first matmul into a region overwrites and later ones accumulate in FP32
(read-accumulate-write); a region's group closes when another engine reads or writes it (the eviction).

A kernel run evaluates a group lazily: the matmuls of one group are kept (their inputs widened to FP32
or copied at issue time) and computed as one GEMM over the concatenated K when anything next touches
PSUM, or when the kernel ends. Nothing can observe PSUM in between, so the values are those of the eager
order except for FP32 rounding: the sum over K runs in FP32 in BLAS order either way (the PE array's own
order is undocumented). A 4096-deep accumulation then costs one BLAS call instead of 32, and groups
that share their stationary tiles (one row block accumulating into several banks) share one call.

A moving tile that a plain DMA loaded from an HBM tensor, unchanged since on both sides, is read from
one FP32 conversion of that tensor (see View.remember_source) rather than copied and converted at every
load: a kernel that streams B past each row block of A loads B many times but converts it once (on all
CPU cores), and when the tiles of a GEMM sit side by side in that conversion, the GEMM reads them in
place.
"""
from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

from trnsim import numerics


def pe_matmul(a, b) -> np.ndarray:
    """a[K, M].T @ b[K, N] in FP32 (narrow products are exact in FP32)."""
    return np.matmul(numerics.widen(a).T, numerics.widen(b))


def group_flags(nc, v):
    """The PSUM bytes of `v` that are inside an open accumulation group (1) or not (0)."""
    r = v.region()
    return nc.psum_groups[r.partition:r.partition + r.partitions, r.byte_lo:r.byte_hi]


def _key(v):
    r = v.region()
    return (r.partition, r.partitions, r.byte_lo, r.byte_hi)


def _overlap(k1, k2):
    return k1[0] < k2[0] + k2[1] and k2[0] < k1[0] + k1[1] and k1[2] < k2[3] and k2[2] < k1[3]


def close(nc, v) -> None:
    """Another engine touched PSUM region `v`: the accumulation groups over it close."""
    r = v.region()
    nc.psum_groups[r.partition:r.partition + r.partitions, r.byte_lo:r.byte_hi] = 0
    key = _key(v)
    nc.psum_open -= {k for k in nc.psum_open if _overlap(k, key)}


class Group:
    """Matmuls accumulating into one PSUM region, waiting to be computed as one GEMM."""

    def __init__(self, dst, onto: bool):
        self.dst, self.onto = dst, onto  # onto: add to the PSUM contents present when the group opened
        self.a, self.b, self.amask, self.bmask = [], [], None, None
        self.akeys = []  # which bytes each stationary tile came from (stationary_key)

    def add(self, a, b, am, bm, akey=None):
        """Add operands a[K, M] (FP32, read from the bytes `akey` names) and b[K, N] (a Piece, or an array of
        any storage, owned or read-only) and their column masks."""
        self.akeys.append(akey if akey is not None else id(a))
        self.a.append(a)
        self.b.append(b)
        if am is not None or bm is not None:
            m = a.shape[1], b.shape[1]
            self.amask = (self.amask if self.amask is not None else np.zeros(m[0], bool)) | (am if am is not None else False)
            self.bmask = (self.bmask if self.bmask is not None else np.zeros(m[1], bool)) | (bm if bm is not None else False)

    def finish(self, out):
        mask = None
        if self.amask is not None:
            mask = self.amask[:, None] | self.bmask[None, :]
        write(self.dst, out, mask, self.onto)

    def compute(self):
        compute_together([self])


def compute_together(groups):
    """Groups with the same stationary tiles: one GEMM over their moving tiles side by side.

    Tiles that are adjacent blocks of one HBM tensor's FP32 conversion are read in place; others are
    laid out transposed, [N, K] row-major, which is the operand order in which BLAS runs a 128-column
    product as fast as a square one.
    """
    a = groups[0].a[0] if len(groups[0].a) == 1 else np.concatenate(groups[0].a)
    b = _joined([_joined(g.b, 0) for g in groups], 1)
    if b is not None:
        _finish_all(groups, b.array().T @ a)
        return
    n_total = sum(g.b[0].shape[1] for g in groups)
    bt = np.empty((n_total, a.shape[0]), np.float32)
    col = 0
    for g in groups:
        n, k0 = g.b[0].shape[1], 0
        for piece in g.b:
            _widen_into(bt[col:col + n, k0:k0 + piece.shape[0]], _array(piece).T)
            k0 += piece.shape[0]
        col += n
    _finish_all(groups, bt @ a)


def _finish_all(groups, out_t):
    """Write each group's columns of the transposed result [N, M] into PSUM."""
    col = 0
    for g in groups:
        n = g.b[0].shape[1]
        g.finish(out_t[col:col + n].T)
        col += n


class Piece(NamedTuple):
    """A moving tile [K, N] read in place from an HBM tensor's FP32 conversion: a block of `table` at
    element `offset` with element strides (k, n). Kept as numbers so that adjacent pieces join cheaply."""

    table: np.ndarray
    offset: int
    shape: tuple
    strides: tuple

    def array(self) -> np.ndarray:
        return np.ndarray(self.shape, np.float32, self.table, self.offset * 4, (self.strides[0] * 4, self.strides[1] * 4))


def _array(x) -> np.ndarray:
    return x.array() if isinstance(x, Piece) else x


def _joined(parts, axis):
    """The pieces `parts` as one Piece along `axis` when they are adjacent blocks of one table with the same
    strides (always for a single piece); else None."""
    first = parts[0]
    if not isinstance(first, Piece):
        return None
    other, total = 1 - axis, 0
    for p in parts:
        if (p.__class__ is not Piece or p.table is not first.table or p.strides != first.strides
                or p.shape[other] != first.shape[other] or p.offset != first.offset + total * first.strides[axis]):
            return None
        total += p.shape[axis]
    shape = (total, first.shape[1]) if axis == 0 else (first.shape[0], total)
    return Piece(first.table, first.offset, shape, first.strides)


def _widen_into(out: np.ndarray, x: np.ndarray) -> None:
    """Write x (any storage) into the FP32 array `out` exactly."""
    if x.dtype == numerics.bfloat16.np:  # bf16 is the top half of fp32: a shift widens it exactly
        np.left_shift(x.view(np.uint16), 16, out=out.view(np.uint32), dtype=np.uint32)
    else:
        np.copyto(out, x, casting="unsafe")


def write(dst, out, mask, accumulate: bool):
    """Overwrite, or FP32 read-accumulate-write, a matmul result into PSUM."""
    if accumulate:
        out = out + dst.array().reshape(out.shape).astype(np.float32)
        if dst.poisoned():
            pm = dst.mask().reshape(out.shape)
            mask = pm if mask is None else (mask | pm)
    out = out.reshape(dst.shape)
    dst.store(out if dst.dtype.name == "float32" else numerics.cast(out, dst.dtype),
              None if mask is None else mask.reshape(dst.shape))


def stationary_key(v, rows: int) -> tuple:
    """Names the bytes of stationary tile `v` as they are now (the memory's version counts its writes)."""
    return (id(v.alloc), v.poff, v.offset, v.strides, v.shape, v.dtype.name, rows, v.alloc.memory.version)


def widened(nc, v, rows: int) -> np.ndarray:
    """`v` as FP32 [rows, -1], reusing the last conversion of the same bytes while they are unchanged."""
    if not nc.fast:
        return numerics.widen(v.array().reshape(rows, -1))
    key = stationary_key(v, rows)
    hit = nc.widen_cache.get(key)
    if hit is not None:
        return hit
    a = numerics.widen(v.array().reshape(rows, -1))
    if len(nc.widen_cache) > 8:
        nc.widen_cache.clear()
    nc.widen_cache[key] = a
    return a


def moving(nc, v, k: int):
    """The moving tile as [K, N]: a Piece of its HBM source's FP32 conversion when the tile holds that
    source's bytes unchanged, else an owned copy of its bytes (widened when computed)."""
    origin = v.origin() if nc.fast else None
    piece = None if origin is None else _in_source(nc, v, k, *origin)
    return np.array(v.array().reshape(k, -1)) if piece is None else piece


def _in_source(nc, v, k, mem, offset, strides):
    """Tile `v` as [K, N] in its HBM source's FP32 conversion (a Piece, or a read-only array when its free
    dims do not collapse to one stride), or None.

    The conversion sees the tensor as rows of `pitch` elements (the tile's partition stride) and is kept
    transposed, [pitch, rows] row-major: the moving tiles of a GEMM, side by side, then form the [N, K]
    row-major operand with which BLAS runs a 128-column product fastest.
    """
    pitch, free, shape = strides[0], strides[1:], v.shape
    extent = 0
    for n, s in zip(shape[1:], free):
        if s < 0:
            return None
        extent += (n - 1) * s
    rows = mem.row_bytes // v.dtype.itemsize // pitch if pitch > 0 else 0
    r0, c0 = divmod(offset, pitch or 1)
    if r0 + shape[0] > rows or c0 + extent >= pitch:
        return None  # the tile is not a block of whole rows' columns
    size = v.size
    t = _hbm_f32(nc, mem, v.dtype, pitch, rows, size)
    if t is None:
        return None
    step = free[0] if len(free) == 1 else _collapsed(shape[1:], free)
    if step is not None and shape[0] == k:
        return Piece(t, r0 + c0 * rows, (k, size // k), (1, step * rows))
    view = np.ndarray(shape, np.float32, t, (r0 + c0 * rows) * 4, (4,) + tuple(s * rows * 4 for s in free))
    return view.reshape(k, -1)


def _collapsed(shape, strides):
    """The one element stride that walks dims (shape, strides) in row-major order, or None."""
    step = None
    for n, s in reversed(list(zip(shape, strides))):
        if n == 1:
            continue
        if step is None:
            step, span = s, n * s
        elif s != span:
            return None
        else:
            span *= n
    return 1 if step is None else step


def _hbm_f32(nc, mem, dtype, pitch: int, rows: int, need: int):
    """An HBM tensor's first rows x pitch elements as `dtype`, in FP32, transposed ([pitch, rows]) and
    converted once per version of its bytes; or None.

    After the first conversion, another one (the tensor was written since) waits until the moving
    elements read without it add up to the tensor's size, so a tensor rewritten between loads does not
    cost a whole conversion per matmul.
    """
    key = (mem, dtype.name, pitch)
    hit = nc.hbm_f32.get(key)
    if hit is not None:
        if hit[0] == mem.version:
            return hit[1]
        hit[2] += need
        if hit[2] < rows * pitch:
            return None
    src = mem.data[0, :rows * pitch * dtype.itemsize].view(dtype.np).reshape(rows, pitch)
    t = np.empty((pitch, rows), np.float32)
    bi = min(pitch, 128)
    bj = max(128, 16384 // bi)

    def convert(lo, hi):  # in blocks: one transposing pass over a big array is cache-hostile
        for i in range(lo, hi, bi):
            for j in range(0, rows, bj):
                _widen_into(t[i:i + bi, j:j + bj], src[j:j + bj, i:i + bi].T)

    _on_all_cores(convert, pitch, bi)
    t.flags.writeable = False  # pending groups may hold views of it after the tensor changes
    if hit is None and len(nc.hbm_f32) >= 4:
        nc.hbm_f32.pop(next(iter(nc.hbm_f32)))
    nc.hbm_f32[key] = [mem.version, t, 0]
    return t


@functools.cache
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(4, thread_name_prefix="trnsim-convert")


def _on_all_cores(fn, n: int, step: int) -> None:
    """fn(lo, hi) over [0, n) in parts aligned to `step`, one per CPU core, side by side (numpy releases
    the GIL while it converts, so threads share out a conversion that would keep one core busy)."""
    parts = max(1, min(os.cpu_count() or 1, 4, n // step))
    if parts == 1:
        fn(0, n)
        return
    cuts = [n * p // parts // step * step for p in range(parts)] + [n]
    list(_pool().map(lambda p: fn(cuts[p], cuts[p + 1]), range(parts)))


def _all_set(flags) -> bool:
    """Whether every flag is set; the first flag alone answers for a region no group covers (the usual miss)."""
    return flags.size == 0 or bool(flags[0, 0] and flags.all())


def open_group(ins, nc) -> None:
    """Decide whether this matmul overwrites or accumulates (attribute `accumulated`) and open its group.

    Group state depends on the program, not on values, so this runs with the checks (also when a
    timing-only run computes no values) and the record says whether the instruction read PSUM.
    """
    dst = ins.dst
    key = _key(dst)
    acc = ins.attrs.get("accumulate")
    if acc is None:  # open groups are remembered by region, so the byte flags need a scan only on a miss
        accumulate = key in nc.psum_open or _all_set(group_flags(nc, dst))
    else:
        accumulate = bool(acc)
    if key not in nc.psum_open:
        group_flags(nc, dst)[...] = 1
        nc.psum_open.add(key)
    ins.attrs["accumulated"] = accumulate


def matmul_into(ins, nc, a, b, am, bm, akey=None):
    """Add a.T @ b (a[K, M] FP32 from the bytes `akey` names, b[K, N] any storage; owned or read-only; column
    masks or None) to dst."""
    dst, key, accumulate = ins.dst, _key(ins.dst), ins.attrs["accumulated"]
    if not nc.lazy_psum:
        g = Group(dst, accumulate)
        g.add(a, b, am, bm, akey)
        g.compute()
        return
    g = nc.psum_pending.get(key)
    if g is None:  # pending regions never overlap each other, so only a new one can overlap any
        for k in [k for k in nc.psum_pending if _overlap(k, key)]:
            nc.psum_pending.pop(k).compute()
    if g is None or not accumulate:
        if g is not None:
            g.compute()
        g = nc.psum_pending[key] = Group(dst, accumulate)
    g.add(a, b, am, bm, akey)


def flush(nc):
    """Compute every pending accumulation group (before anything else touches PSUM)."""
    buckets: dict[tuple, list] = {}
    for g in nc.psum_pending.values():  # groups over the same stationary bytes share one GEMM, cached or not
        buckets.setdefault(tuple(g.akeys), []).append(g)
    nc.psum_pending.clear()
    for groups in buckets.values():
        compute_together(groups)
