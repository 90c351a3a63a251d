"""PSUM accumulation groups computed together: the speed layer's matmuls.

In a kernel launch a group stays pending until anything next touches PSUM or the kernel ends; then all its
products are computed in one batched call and added in issue order (by the SGEMM call that computes each,
where numpy's OpenBLAS gives the same bits: fast/blas.py), and groups that share their stationary tiles (one
row block accumulating into several banks) share that call. Nothing can observe PSUM in
between, and the bits are those of computing each matmul as issued (isa/psum.py: add_product, the same
products with the same shapes).

A group that overwrote a whole PSUM tile is not computed even then: its values are owed to the tile (Owed,
written when the tile's bytes are first touched: Allocation.settle), and a plain copy of the whole tile
(the eviction to SBUF, the DMA of that tile to HBM) passes the debt on instead of moving bytes. When any
owed value is first read, every group owed so far is computed together (Batch): row blocks that share their
moving tiles share one SGEMM call per K tile, their stationary tiles side by side, which packs each moving
tile once for several row blocks. Each element's sum keeps its order and roundings (the same products,
checked per call shape: blas.exact), and each copy's conversion is the one it would have made as issued.

A moving tile that a plain DMA loaded from an HBM tensor, unchanged since on both sides, is read from one
FP32 conversion of that tensor (fast/loads.py) rather than copied and converted at every load: a kernel
that streams B past each row block of A loads B many times but converts it once (on all CPU cores), and
when the tiles of a GEMM sit side by side in that conversion, the GEMM reads them in place.

The FP32 arrays this work makes (stationary tiles, conversions, running sums) take the memory of earlier
ones once those are freed (fp32): a host that hands freed memory back makes the first touch of a fresh
page cost more than the arithmetic that fills it, and a launch makes as many as its operands are large.
"""
from __future__ import annotations

import ctypes
import functools
import math
import mmap
import os
import sys
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

from trnsim import numerics
from trnsim.core.fast import blas, loads
from trnsim.core.isa.psum import _key, _overlap, land, one_blas_thread, onto, prior, widen_into
from trnsim.core.memory import POISON_BYTE, Space
from trnsim.core.tensor import View


class Group:
    """Matmuls accumulating into one PSUM region, in issue order, waiting to be computed."""

    def __init__(self, dst, onto: bool):
        self.dst, self.onto = dst, onto  # onto: add to the PSUM contents present when the group opened
        self.a, self.b, self.amask, self.bmask = [], [], None, None
        self.akeys = []  # which bytes each stationary tile came from (stationary_key)
        # once owed (dst None): its sums [N, M], the Batch that will compute them, or the future computing them
        self.result, self.batch, self.future = None, None, None
        self.keys = None  # once owed: what its stationary and moving tiles are (Batch.add)

    def add(self, a, b, am, bm, akey=None):
        """Add operands a[K, M] (any storage, owned; read from the bytes `akey` names) and b[K, N] (a Piece, or
        an array of any storage, owned or read-only) and their column masks."""
        self.akeys.append(akey if akey is not None else id(a))
        self.a.append(a)
        self.b.append(b)
        if am is not None or bm is not None:
            m = a.shape[1], b.shape[1]
            self.amask = (self.amask if self.amask is not None else np.zeros(m[0], bool)) | (am if am is not None else False)
            self.bmask = (self.bmask if self.bmask is not None else np.zeros(m[1], bool)) | (bm if bm is not None else False)

    def start(self, first):
        """The running sum after the group's first product `first` [N, M]."""
        return onto(self.dst, first) if self.onto else first.copy()

    def finish(self, acc_t):
        if self.dst is None:  # owed: kept for the copies that read it
            self.result = acc_t
        else:
            land(self.dst, acc_t, self.amask, self.bmask, self.onto)

    def compute(self):
        compute_together([[self]])

    def values(self) -> np.ndarray:
        """An owed group's sums as PSUM holds them ([M, N], FP32), computed with every group owed so far."""
        if self.result is None:
            if self.future is not None:
                self.future.result()
            else:
                self.batch.compute()
        return self.result.T


class Batch:
    """Groups whose values are owed and not yet computed (held weakly: a group no copy reads any more is never
    computed). A stack of row blocks that can share no more (_STACKED columns, or moving tiles held in copies)
    is computed in the background as soon as it is owed, while the kernel goes on (half a stack, when the
    background is idle); the rest when any owed value is first read, or once their operands held in copies
    pass _HELD bytes."""

    def __init__(self):
        self.groups, self.held, self.running = [], 0, []
        self.numbers: dict = {}  # a group's stationary or moving key -> a number naming it (hashed once)

    def add(self, g) -> None:
        g.batch = self
        numbers = self.numbers  # its stationary and moving bytes, numbered (the group is closed)
        g.keys = numbers.setdefault(tuple(g.akeys), len(numbers)), numbers.setdefault(_moving_key(g), len(numbers))
        self.groups.append(weakref.ref(g))
        self.held += sum(x.nbytes for x in g.b if not isinstance(x, Piece))
        if self.held > _HELD:
            self.compute()

    def _stacks(self) -> list:
        """The owed groups not yet computed nor started, as stacks of row blocks (compute_together)."""
        groups = [g for r in self.groups if (g := r()) is not None and g.result is None and g.future is None]
        self.groups, self.held = [], 0
        buckets: dict[tuple, list] = {}
        for g in groups:  # row blocks: the groups over the same stationary bytes
            buckets.setdefault(g.keys[0], []).append(g)
        stacks: dict[tuple, list] = {}
        for blk in buckets.values():  # row blocks over the same moving tiles, their stationary tiles side by side
            stacks.setdefault((blk[0].a[0].shape, len(blk[0].a)) + tuple([g.keys[1] for g in blk]), []).append(blk)
        return list(stacks.values())

    def compute(self) -> None:
        for blocks in self._stacks():
            r = max(1, _STACKED // blocks[0][0].a[0].shape[1])
            for i in range(0, len(blocks), r):
                _compute_owed(blocks[i:i + r])

    def start(self) -> None:
        """Start the full stacks in the background; keep the others for later row blocks to join. While the
        background has nothing to compute, a stack half full starts too: the CPU cores it would leave idle
        cost more than its smaller SGEMM calls."""
        idle = all(f.done() for f in self.running)
        self.running = [f for f in self.running if not f.done() or f.exception() is not None]  # raised by wait
        for blocks in self._stacks():
            r = max(1, _STACKED // blocks[0][0].a[0].shape[1])
            shared = all(isinstance(p, Piece) for p in blocks[0][0].b)
            full = len(blocks) // r * r if shared else len(blocks)
            if idle and not full and 2 * len(blocks) >= r:
                full = len(blocks)
            for i in range(0, full, r):
                f = _in_background(blocks[i:i + r])
                for blk in blocks[i:i + r]:
                    for g in blk:
                        g.future = f
                self.running.append(f)
            for blk in blocks[full:]:
                for g in blk:
                    self.groups.append(weakref.ref(g))

    def wait(self) -> None:
        """Every computation started has finished (the end of a launch)."""
        running, self.running = self.running, []
        for f in running:
            f.result()


def _compute_owed(blocks) -> None:
    compute_together(blocks)
    for blk in blocks:
        for g in blk:
            g.a = g.b = g.akeys = None


@functools.cache
def _background() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(1, thread_name_prefix="trnsim-owed")


_RUNNING = {"count": 0, "switch": None}  # computations started in the background and not finished
_RUNNING_LOCK = threading.Lock()


def _in_background(blocks):
    """Start computing `blocks` in the background (a future). While any such computation runs, the interpreter
    switches threads every _SWITCH seconds: each SGEMM call needs the GIL back from the kernel's Python."""
    with _RUNNING_LOCK:
        if not _RUNNING["count"]:
            _RUNNING["switch"] = sys.getswitchinterval()
            sys.setswitchinterval(min(_RUNNING["switch"], _SWITCH))
        _RUNNING["count"] += 1
    return _background().submit(_finished, blocks)


def _finished(blocks) -> None:
    try:
        _compute_owed(blocks)
    finally:
        with _RUNNING_LOCK:
            _RUNNING["count"] -= 1
            if not _RUNNING["count"]:
                sys.setswitchinterval(_RUNNING["switch"])


def _moving_key(g) -> tuple:
    """What a group's moving tiles are: equal keys, equal tiles (a tile held in a copy is its own)."""
    return tuple((id(p.table), p.offset, p.shape, p.strides) if isinstance(p, Piece) else id(p) for p in g.b)


class Part:
    """One write owed to an allocation: an owed group's values, converted by each copy that moved them
    (`casts`: the dtypes they went through after FP32), landing in the view placed as recorded (no reference
    to the allocation, which holds this)."""

    __slots__ = ("group", "casts", "dtype", "shape", "strides", "offset", "poff", "whole", "place")

    def __init__(self, group, casts: tuple, v):
        self.group, self.casts = group, casts
        self.dtype, self.shape, self.strides, self.offset, self.poff = v.dtype, v.shape, v.strides, v.offset, v.poff
        self.whole = v.covers_alloc()
        self.place = (v.dtype, v.shape, v.strides, v.offset, v.poff)  # a later part here replaces this one

    def values(self) -> np.ndarray:
        x = self.group.values()
        for d in self.casts:  # as each copy converts: through FP32 (isa/vector.py, isa/dma.py)
            x = numerics.cast(x.astype(np.float32), d)
        return x.reshape(self.shape)


class Owed:
    """Values owed to an allocation (its `pending`): parts written in order when its bytes are first touched
    (`parts`: by place, each owed last in the dict's order).

    `fresh`: the allocation is an HBM tensor no byte of which was written before its first part (an output),
    whose bytes were made for it, unfilled: when the parts write every byte, its never-written fill and its
    poison bytes are never made (the poison, all 0, when first asked for)."""

    __slots__ = ("parts", "fresh")

    def __init__(self, part, fresh: bool):
        self.parts, self.fresh = {part.place: part}, fresh

    def settle(self, alloc) -> None:
        parts = list(self.parts.values())
        alloc.clean = self.fresh and _covering(alloc, parts)  # else the parts' poison bytes are written now
        if self.fresh and not alloc.clean:  # the never-written fill the bytes were made without (memory._HBMBuffer)
            mem = alloc.memory
            mem.data.fill(POISON_BYTE)
            mem.poison = np.ones_like(mem.data)
        for p in parts:
            View(alloc, p.dtype, p.shape, p.strides, p.offset, p.poff).store(p.values())


def _covering(alloc, parts) -> bool:
    """Whether `parts` together write every byte of HBM tensor `alloc` (one row of bytes): their runs of
    contiguous elements, in the order they start, leave no gap."""
    size = parts[0].dtype.itemsize
    if alloc.nbytes % size or any(not p.shape or p.strides[-1] != 1 or p.dtype.itemsize != size for p in parts):
        return False
    starts, ends = [], []
    for p in parts:
        at = np.array(p.offset)
        for n, s in zip(p.shape[:-1], p.strides[:-1]):
            at = np.add.outer(at, np.arange(n) * s)
        starts.append(at.ravel())
        ends.append(starts[-1] + p.shape[-1])
    first = np.concatenate(starts)
    if not first.size:
        return False
    order = np.argsort(first, kind="stable")
    first, reach = first[order], np.maximum.accumulate(np.concatenate(ends)[order])
    return bool(first[0] <= 0 and reach[-1] >= alloc.nbytes // size and (first[1:] <= reach[:-1]).all())


def owe(owing, v, part) -> None:
    """View `v` is written with `part`'s values, owed until its allocation is first touched; `owing` keeps
    the allocations owed values (id -> weak reference), to settle at the end of the launch."""
    a, held = v.alloc, v.alloc.pending
    mem = a.memory
    fresh = type(held) is Owed and held.fresh
    if mem.space is Space.HBM and "data" not in vars(mem):  # never written: its bytes made now, unfilled (Owed)
        mem.data = _zeroed(mem.row_bytes)
        fresh = True
    if part.whole or type(held) is not Owed:
        if held is not None and not part.whole:
            a.settle()  # the fill of a fresh tensor, or a deferred load, lands first
        owed = Owed(part, fresh)
    else:  # one more part (only the allocation holds its Owed)
        owed = held
        owed.fresh = fresh
        owed.parts.pop(part.place, None)
        owed.parts[part.place] = part
    v.store(owed, defer=True)
    owing[a.id] = weakref.ref(a)
    n = len(owing)
    if n >= 1024 and not n & (n - 1):  # now and then, forget the allocations freed since
        for k in [k for k, r in owing.items() if r() is None]:
            del owing[k]


def _zeroed(n: int) -> np.ndarray:
    """n zero bytes ([1, n] uint8) whose pages are touched now, early and in order (a first touch at the end, in
    the parts' order, costs more): in the background where the host can fault pages in without writing them
    (Linux's MADV_POPULATE_WRITE: the kernel's own writes may land meanwhile), else here."""
    x = np.zeros((1, n), np.uint8)
    if n < _POPULATE or _madvise() is None:
        x.fill(0)
    else:
        _pool().submit(_populate, x)
    return x


def _populate(x) -> None:
    """Fault in the whole pages of array `x` for writing, leaving its bytes as they are."""
    page = mmap.PAGESIZE
    lo = -(-x.ctypes.data // page) * page
    hi = (x.ctypes.data + x.nbytes) // page * page
    if hi > lo:
        _madvise()(lo, hi - lo, _POPULATE_WRITE)


@functools.cache
def _madvise():
    """libc's madvise where it takes MADV_POPULATE_WRITE (Linux 5.14 on), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], ctypes.c_int
    probe = np.zeros(2 * mmap.PAGESIZE, np.uint8)
    page = -(-probe.ctypes.data // mmap.PAGESIZE) * mmap.PAGESIZE  # a whole page inside it
    return fn if fn(page, mmap.PAGESIZE, _POPULATE_WRITE) == 0 else None


def owed_copy(owing, dst, src) -> bool:
    """A plain copy of all of `src` into `dst`: when every byte of `src` is owed one group's values, `dst` is
    owed them too, converted as the copy converts (True); else False, nothing done."""
    owed = src.alloc.pending
    if type(owed) is not Owed or len(owed.parts) != 1 or src.gather_rows is not None:
        return False
    part = next(iter(owed.parts.values()))
    if not part.whole:
        return False
    if part.dtype != src.dtype or dst.gather_rows is not None or dst.alloc.shared or not src.covers_alloc():
        return False
    owe(owing, dst, Part(part.group, part.casts if dst.dtype == src.dtype else part.casts + (dst.dtype,), dst))
    return True


# One computation of products at a time (the main thread's and the background's): BLAS's thread limit is the
# process's (one_blas_thread), and the bits hold only with one BLAS thread per product.
_BLAS = threading.RLock()
# Products computed by one np.matmul call, at most (elements): bounds the memory a deep group takes at once.
_CHUNK = 1 << 23
_HELD = 1 << 28  # bytes of copied operands owed groups may hold before they are computed
_SWITCH = 2e-4  # seconds: the interpreter's switch interval while owed groups are computed in the background
_STACKED = 1024  # stationary columns of one SGEMM call when row blocks share their moving tiles
_CACHED = 1 << 19  # per group and thread: products summed while still in the CPU's cache
_ROWS = 16  # a row block's row count is a multiple of this (whole SIMD rows for the SGEMM kernel)
_SUMS = 1 << 23  # bytes of running sums one SGEMM call adds into, at most (more rows per call pack fewer tiles)
_POPULATE = 1 << 20  # bytes of a fresh output from which its pages are faulted in in the background
_POPULATE_WRITE = 23  # madvise's MADV_POPULATE_WRITE (linux/mman.h)


def compute_together(blocks):
    """Compute row blocks of groups, in issue order: each block's groups share their stationary tiles, and
    every block's j-th group has the same moving tiles (one block, or row blocks stacked: Batch).

    The bits are those of the hardware's order: each matmul adds its own FP32 product into PSUM, so a
    group's result is (((prior + P1) + P2) + ...), each Pk = moving_k.T @ stationary_k computed as one
    matmul on its own, transposed ([N, M]): BLAS's sum over K depends on the call's shapes, so the same
    shapes are used whether a matmul is computed eagerly or here. The speed comes from batching: each
    tile's products of all groups go through one SGEMM call per row block that adds them into the running
    sums (_fused), or else np.matmul over stacked operands (a call per slice, each bit-identical to the
    single call) and a sum after it; shared out over the CPU cores, moving tiles read in place when they are
    adjacent blocks of one HBM tensor's FP32 conversion, laid out [N, K] row-major otherwise. Stacked row
    blocks are computed together only by _fused where its call shapes give each block's own bits.
    """
    with _BLAS:
        _compute_together(blocks)


def _compute_together(blocks):
    groups = blocks[0]
    a, t_n = groups[0].a, len(groups[0].a)
    shapes = {x.shape for blk in blocks for x in blk[0].a}
    n_set = {g.b[0].shape[1] for g in groups}
    if len(shapes) != 1 or len(n_set) != 1 or any(p.shape[1] != g.b[0].shape[1] for g in groups for p in g.b):
        with one_blas_thread():
            for g in (g for blk in blocks for g in blk):  # ragged tiles: one call per matmul
                acc = g.start(_moving_t(g.b[0]) @ _wide(g.a[0]))
                for x, piece in zip(g.a[1:], g.b[1:]):
                    acc += _moving_t(piece) @ _wide(x)
                g.finish(acc)
        return
    (k, m), n, g_n, r = shapes.pop(), n_set.pop(), len(groups), len(blocks)
    bt = _grid(groups)
    if bt is None:
        bt = np.empty((t_n, g_n, n, k), np.float32)
        for j, g in enumerate(groups):
            for i, piece in enumerate(g.b):
                widen_into(bt[i, j], _array(piece).T)
    # [T, K, r * M]: each stationary tile serves every group of its block, the blocks' tiles side by side
    at = fp32((t_n, k, r * m))
    _on_all_cores(_widen_blocks, r, 1, at, blocks, m)

    with one_blas_thread():
        acc = _fused(blocks, bt, at)
        if acc is None and r > 1:
            for blk in blocks:
                compute_together([blk])
            return
        if acc is None:
            acc = fp32((g_n, n, r * m))
            _batched(groups, bt, at, acc)
    for i, blk in enumerate(blocks):
        for j, g in enumerate(blk):
            g.finish(acc[j, :, i * m:(i + 1) * m])


_SPARE: dict = {}  # element count -> FP32 buffers whose arrays were all freed, kept to be used again
_SPARED = [0]  # their bytes
_SPARE_LOCK = threading.Lock()
_SPARE_MAX = 1 << 29  # bytes kept at most


def fp32(shape: tuple) -> np.ndarray:
    """A new FP32 array of `shape`, in the memory of one freed before where it was kept: on a host that hands
    freed memory back (a virtual machine), the first touch of a fresh page costs more than the arithmetic that
    fills it. Its memory is kept again once it and every view of it are freed."""
    n = math.prod(shape)
    with _SPARE_LOCK:
        kept = _SPARE.get(n)
        x = kept.pop() if kept else None
        if x is not None:
            _SPARED[0] -= x.nbytes
    if x is None:
        x = np.empty(n, np.float32)
    y = np.frombuffer(memoryview(x), np.float32)  # based on a memoryview: views of `y` keep `y` itself alive
    weakref.finalize(y, _spare, x)
    return y.reshape(shape)


def _spare(x) -> None:
    with _SPARE_LOCK:
        if _SPARED[0] + x.nbytes <= _SPARE_MAX:
            _SPARE.setdefault(x.size, []).append(x)
            _SPARED[0] += x.nbytes


def _batched(groups, bt, at, acc) -> None:
    """The groups' running sums acc [G, N, M]: the products by np.matmul over stacked operands, then added."""
    (t_n, g_n, n, _), m = bt.shape, at.shape[2]
    if bt.strides[3] != 4:  # each product's moving operand [N, K] row-major, as the reference's
        bt = np.ascontiguousarray(bt)
    if g_n == 1:  # the products side by side on the CPU cores, then the sum
        step = max(1, _CHUNK // (n * m))
        prods = np.empty((min(step, t_n), n, m), np.float32)
        for t0 in range(0, t_n, step):
            t1 = min(t_n, t0 + step)
            _on_all_cores(lambda lo, hi: np.matmul(bt[t0 + lo:t0 + hi, 0], at[t0 + lo:t0 + hi],
                                                   out=prods[lo:hi]), t1 - t0, 1)
            _add_in_order(acc, groups, 0, t0, prods[:t1 - t0])
    else:  # the groups shared out over the CPU cores, each summed while its products are in cache
        step = max(1, _CACHED // (n * m))

        def run(lo, hi):
            prods = np.empty((min(step, t_n), n, m), np.float32)
            for j in range(lo, hi):
                for t0 in range(0, t_n, step):
                    t1 = min(t_n, t0 + step)
                    _add_in_order(acc, groups, j, t0, np.matmul(bt[t0:t1, j], at[t0:t1], out=prods[:t1 - t0]))
        _on_all_cores(run, g_n, 1)


def _fused(blocks, bt, at):
    """The groups' running sums [G, N, r * M] computed by SGEMM calls that add each tile's products into them
    (fast/blas.py), or None, with nothing done, where that would not give the bits: a call per tile and slice
    of the sums, the rows of all groups stacked when the moving tiles are, the columns of the r row blocks
    side by side, the slices shared out over the CPU cores (_SUMS bytes of sums per call at most). Stacked row
    blocks (r > 1) are summed in the output's layout, [r * M, G * N] (each group's [M, N] as PSUM holds it,
    returned as a transposed view): with the calls' bigger shapes BLAS packs its operands less often, and the
    sums are read out with no transposing copy."""
    (t_n, g_n, n, k), m, r = bt.shape, at.shape[2], len(blocks)
    rows, start = g_n * n, blocks[0][0].onto
    if bt.strides[3] != 4 and bt.strides[2] != 4:  # strided moving tiles (neither K nor N unit-stride): copied
        bt = np.ascontiguousarray(bt)
    if (not rows or any(g.onto != start for blk in blocks for g in blk) or (start and r > 1)
            or (g_n > 1 and bt.strides[1] != n * bt.strides[2])):
        return None
    moving = np.lib.stride_tricks.as_strided(bt, (t_n, rows, k), bt.strides[:1] + bt.strides[2:], writeable=False)
    k_major = moving.strides[2] != 4  # as its tensor's FP32 conversion holds it: [K, rows] rows unit-stride
    if k_major:
        moving = moving.transpose(0, 2, 1)
    if r > 1 and k_major:
        out = _stacked(moving, at, r, g_n)
        if out is not None:
            return out
    acc = fp32((g_n, n, m))
    sums = acc.reshape(rows, m)
    cuts = _sum_cuts(rows, m)
    if not blas.usable(moving[0], at[0], sums) or not blas.exact(g_n, n, k, m // r, tuple(cuts), r, False, k_major):
        return None
    if start:
        for j, g in enumerate(blocks[0]):
            acc[j] = prior(g.dst, n, m)
    _on_all_cores(_run_fused, len(cuts) - 1, 1, cuts, sums, moving, at, start, k_major)
    return acc


def _run_fused(lo, hi, cuts, sums, moving, at, start, k_major) -> None:
    """_fused's calls for the slices cuts[lo:hi + 1] of the sums (moving [T, rows, K], or [T, K, rows] when
    `k_major`)."""
    for c0, c1 in zip(cuts[lo:hi], cuts[lo + 1:hi + 1]):
        for t in range(moving.shape[0]):
            if k_major:
                blas.accumulate_tn(sums[c0:c1], moving[t, :, c0:c1], at[t], start or t > 0)
            else:
                blas.accumulate(sums[c0:c1], moving[t, c0:c1], at[t], start or t > 0)


def _stacked(moving, at, r: int, g_n: int):
    """_fused's sums of r > 1 stacked row blocks (moving tiles [T, K, rows], read in place from their tensor's
    conversion) in the output's layout ([r * M, G * N], as a [G, N, r * M] view), its columns (the groups'
    moving rows) shared out; or None where the calls would not give the bits."""
    (t_n, k, rows), m = moving.shape, at.shape[2]
    sums = fp32((m, rows))
    cuts = _sum_cuts(rows, m)
    if not blas.usable(moving[0], at[0], sums) or not blas.exact(g_n, rows // g_n, k, m // r, tuple(cuts), r, True, True):
        return None
    _on_all_cores(_run_stacked, len(cuts) - 1, 1, cuts, sums, moving, at)
    return sums.reshape(m, g_n, rows // g_n).transpose(1, 2, 0)


def _run_stacked(lo, hi, cuts, sums, moving, at) -> None:
    for c0, c1 in zip(cuts[lo:hi], cuts[lo + 1:hi + 1]):
        for t in range(moving.shape[0]):
            blas.accumulate_tn(sums[:, c0:c1], at[t], moving[t, :, c0:c1], t > 0)


def _sum_cuts(rows: int, width: int) -> list:
    """Cuts of `rows` products' rows, each `width` running sums: one part per CPU core, each cut in calls of
    _SUMS bytes at most."""
    most = max(_ROWS, _SUMS // 4 // width // _ROWS * _ROWS)
    cores = _cuts(rows, _ROWS)
    return [lo for c0, c1 in zip(cores, cores[1:]) for lo in range(c0, c1, most)] + [rows]


def _add_in_order(acc, groups, j, t0, prods) -> None:
    """Add group j's products of tiles t0, t0 + 1, ... to its running sum acc[j], in issue order."""
    if t0 == 0:
        acc[j], prods = groups[j].start(prods[0]), prods[1:]
    for p in prods:
        acc[j] += p


def _moving_t(piece) -> np.ndarray:
    """A moving tile as FP32 [N, K] with unit stride along K (the operand layout every product uses)."""
    if isinstance(piece, Piece):
        return np.ascontiguousarray(piece.array().T)
    x = _array(piece)
    out = np.empty((x.shape[1], x.shape[0]), np.float32)
    widen_into(out, x.T)
    return out


def _grid(groups):
    """The moving tiles of `groups` as one [T, G, N, K] view of an FP32 conversion when they sit on a regular
    grid in it (tile t of group g at offset o + t * dt + g * dg, same strides); else None."""
    first = groups[0].b[0]
    if not isinstance(first, Piece):
        return None
    t_n, g_n = len(groups[0].b), len(groups)
    dt = groups[0].b[1].offset - first.offset if t_n > 1 and isinstance(groups[0].b[1], Piece) else 0
    dg = groups[1].b[0].offset - first.offset if g_n > 1 and isinstance(groups[1].b[0], Piece) else 0
    for j, g in enumerate(groups):
        for i, p in enumerate(g.b):
            if (type(p) is not Piece or p.table is not first.table or p.strides != first.strides
                    or p.shape != first.shape or p.offset != first.offset + i * dt + j * dg):
                return None
    (k, n), (sk, sn) = first.shape, first.strides
    if min(dt, dg) < 0:
        return None
    return np.ndarray((t_n, g_n, n, k), np.float32, first.table, first.offset * 4, (dt * 4, dg * 4, sn * 4, sk * 4))


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


def stationary_key(v, rows: int) -> tuple:
    """Names the bytes of stationary tile `v` as they are now (the memory's version counts its writes)."""
    return (id(v.alloc), v.poff, v.offset, v.strides, v.shape, v.dtype.name, rows, v.alloc.memory.version)


def stationary(cache: dict, nc, v, rows: int) -> tuple:
    """`v`'s bytes as [rows, -1] in their own storage, copied (widened to FP32 when its group is computed, in
    the background for owed groups, not by the kernel's thread), and the key naming them (stationary_key),
    reusing the last copy of the same bytes while they are unchanged. A tile loaded unchanged from HBM is
    read there (fast/loads.py: origin), so a deferred load that only matmuls read is never copied whole; from
    a kernel's input still borrowed (read-only: its first write copies it, memory._HBMBuffer) it is not copied
    at all."""
    key = stationary_key(v, rows)
    hit = cache.get(key)
    if hit is not None:  # the key kept with it: the groups sharing this tile compare their keys by identity
        return hit
    src = loads.origin(v)
    if src is None:
        a = np.array(v.array().reshape(rows, -1))
    else:
        mem, offset, strides = src
        size, data = v.dtype.itemsize, mem.data
        a = np.ndarray(v.shape, v.dtype.np, data, offset * size, tuple([s * size for s in strides]))
        a = (np.array(a) if data.flags.writeable else a).reshape(rows, -1)
    if len(cache) > 8:
        cache.clear()
    hit = cache[key] = a, key
    return hit


def _wide(x) -> np.ndarray:
    """A stationary tile (any storage) as contiguous FP32."""
    if x.dtype == np.float32:
        return np.ascontiguousarray(x)
    out = np.empty(x.shape, np.float32)
    widen_into(out, x)  # bf16 by a shift
    return out


def _widen_blocks(lo, hi, at, blocks, m) -> None:
    """Row blocks lo..hi's stationary tiles widened into their columns of `at` [T, K, r * M]: shared out over
    the CPU cores, which would otherwise wait for the stack's products."""
    for i in range(lo, hi):
        _widen_stacked(at[:, :, i * m:(i + 1) * m], blocks[i][0].a)


def _widen_stacked(out, tiles) -> None:
    """Stationary tiles [K, M] (any storage) widened into out [T, K, M]: in one pass when they share a dtype."""
    if all(x.dtype == tiles[0].dtype for x in tiles):
        widen_into(out, np.stack(tiles))
    else:
        for o, x in zip(out, tiles):
            widen_into(o, x)


def moving(conversions: dict, nc, v, k: int):
    """The moving tile as [K, N]: a Piece of its HBM source's FP32 conversion when the tile holds that
    source's bytes unchanged, else an owned copy of its bytes (widened when computed)."""
    origin = loads.origin(v)
    piece = None if origin is None else _in_source(conversions, v, k, *origin)
    return np.array(v.array().reshape(k, -1)) if piece is None else piece


def _in_source(conversions, v, k, mem, offset, strides):
    """Tile `v` as [K, N] in its HBM source's FP32 conversion (a Piece, or a read-only array when its free
    dims do not collapse to one stride), or None.

    The conversion sees the tensor as rows of `pitch` elements (the tile's partition stride), laid out as the
    tensor is ([rows, pitch] row-major): the moving tiles of a GEMM, side by side, then form a [K, N] operand
    with unit-stride rows, which BLAS packs faster than the [N, K] one, and converting it is one
    straight pass.
    """
    pitch, free, shape = strides[0], strides[1:], v.shape
    extent = 0
    for n, s in zip(shape[1:], free):
        if s < 0:
            return None
        extent += (n - 1) * s
    rows = mem.row_bytes // v.dtype.np.itemsize // pitch if pitch > 0 else 0
    r0, c0 = divmod(offset, pitch or 1)
    if r0 + shape[0] > rows or c0 + extent >= pitch:
        return None  # the tile is not a block of whole rows' columns
    size = v.size
    t = _hbm_f32(conversions, mem, v.dtype, pitch, rows, size)
    if t is None:
        return None
    step = free[0] if len(free) == 1 else _collapsed(shape[1:], free)
    if step is not None and shape[0] == k:
        return Piece(t, offset, (k, size // k), (pitch, step))
    view = np.ndarray(shape, np.float32, t, offset * 4, (pitch * 4,) + tuple(s * 4 for s in free))
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


def _hbm_f32(conversions: dict, mem, dtype, pitch: int, rows: int, need: int):
    """An HBM tensor's first rows x pitch elements as `dtype`, in FP32 ([rows, pitch]), converted once per
    version of its bytes; or None.

    After the first conversion, another one (the tensor was written since) waits until the moving
    elements read without it add up to the tensor's size, so a tensor rewritten between loads does not
    cost a whole conversion per matmul.
    """
    key = (mem, dtype.name, pitch)
    hit = conversions.get(key)
    if hit is not None:
        if hit[0] == mem.version:
            return hit[1]
        hit[2] += need
        if hit[2] < rows * pitch:
            return None
    src = mem.data[0, :rows * pitch * dtype.itemsize].view(dtype.np).reshape(rows, pitch)
    out = fp32((rows, pitch))
    t = out.view()
    t.flags.writeable = False  # pending groups may hold views of it after the tensor changes
    _on_all_cores(_convert, rows, 1, out, src)
    if hit is None and len(conversions) >= 4:
        conversions.pop(next(iter(conversions)))
    conversions[key] = [mem.version, t, 0]
    return t


def _convert(lo, hi, out, src) -> None:
    """Rows lo..hi of `out` = src in FP32 (one straight pass: the conversion keeps the tensor's layout)."""
    widen_into(out[lo:hi], src[lo:hi])


@functools.cache
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(4, thread_name_prefix="trnsim")


def _on_all_cores(fn, n: int, step: int, *args) -> None:
    """fn(lo, hi, *args) over [0, n) in parts aligned to `step`, one per CPU core, side by side (numpy releases
    the GIL while it converts, so threads share out a conversion that would keep one core busy)."""
    cuts = _cuts(n, step)
    if len(cuts) == 2:
        fn(0, n, *args)
        return
    list(_pool().map(lambda p: fn(cuts[p], cuts[p + 1], *args), range(len(cuts) - 1)))


def _cuts(n: int, step: int) -> list:
    """[0, n) cut into one part per CPU core (four at most), the cuts aligned to `step`."""
    parts = max(1, min(os.cpu_count() or 1, 4, n // step))
    return [n * p // parts // step * step for p in range(parts)] + [n]


def matmul_into(pending: dict, lazy: bool, ins, nc, a, b, am, bm, akey=None):
    """Add a.T @ b (a[K, M] any storage, owned, from the bytes `akey` names; b[K, N] any storage, owned or
    read-only; column masks or None) to dst.

    In a kernel launch (`lazy`) an FP32 group stays pending until something next touches PSUM
    (compute_together gives the bits of computing each matmul as issued). A narrower dst rounds its sum
    at every matmul, so it is computed as issued.
    """
    dst, key, accumulate = ins.dst, _key(ins.dst), ins.attrs["accumulated"]
    lazy = lazy and dst.dtype.name == "float32"
    g = pending.get(key) if lazy else None
    if g is None:  # pending regions never overlap each other, so only a new one can overlap any
        for k in [k for k in pending if _overlap(k, key)]:
            pending.pop(k).compute()
    elif not accumulate:
        pending.pop(key).compute()
        g = None
    if g is None:
        g = Group(dst, accumulate)
        if lazy:
            pending[key] = g
    g.add(a, b, am, bm, akey)
    if not lazy:
        g.compute()


def flush(pending: dict, batch=None, owing=None):
    """Compute every pending accumulation group (before anything else touches PSUM); with a `batch`, a group
    that overwrote a whole PSUM tile of FP32 with no never-written input is owed to the tile instead (Owed)."""
    buckets: dict[tuple, list] = {}
    for g in pending.values():  # groups over the same stationary bytes share one GEMM, cached or not
        dst = g.dst
        if (batch is not None and not g.onto and g.amask is None and g.bmask is None and not dst.alloc.shared
                and dst.covers_alloc()):
            g.dst = None  # the tile holds the group's debt: no reference back to it
            owe(owing, dst, Part(g, (), dst))
            batch.add(g)
            continue
        buckets.setdefault(tuple(g.akeys), []).append(g)
    pending.clear()
    for groups in buckets.values():
        compute_together([groups])
    if batch is not None and batch.groups:
        batch.start()


def settle(owing) -> None:
    """Write every value still owed (the end of a launch: memories hold their final values)."""
    for r in list(owing.values()):
        a = r()
        if a is not None and type(a.pending) is Owed:
            a.settle()
    owing.clear()
