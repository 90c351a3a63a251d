"""Deferred DMA loads and where a tile's bytes came from: the speed layer's loads.

A plain DMA of a whole tile from an HBM tensor is noted on the tile (Allocation.source) and, in a launch
core (no LNC peer), not copied until the tile is first read (View.store with `defer`, Allocation.settle):
a tile that only matmuls read is never copied, because matmuls read it from one FP32 conversion of the
HBM tensor (fast/psum.py). The note is dropped by any write over the tile's bytes (View.store;
Memory.written for tensors placed over each other) and is void once the HBM tensor is written (its
version changes).
"""
from __future__ import annotations

from trnsim.core.errors import ShapeError
from trnsim.core.memory import Space


def remember_source(dst, src, defer: bool = False) -> bool:
    """Note that the whole on-chip tensor `dst` holds the bytes of HBM view `src` unchanged (a plain DMA load);
    with `defer` the load itself is made here, deferred. Returns whether the note was taken."""
    a = dst.alloc
    if (src.space is not Space.HBM or (src.dtype is not dst.dtype and src.dtype != dst.dtype)
            or src.gather_rows is not None or not dst.on_chip or not dst.covers_alloc()
            or (defer and (a.shared or src.poisoned()))):
        return False
    try:  # partition p, element f of the tile is element [p, f] of src seen as [P, F]
        flat = src.reshape((dst.partitions, dst.free_size))
    except ShapeError:
        return _remember_blocks(dst, src, defer)
    mem = src.alloc.memory
    if defer:
        dst.store(Load(flat), defer=mem)
    a.source = (mem, mem.version, dst.dtype, flat.offset, flat.strides[0], flat.strides[1])
    a.memory.sourced[a.id] = a
    return True


def _remember_blocks(dst, src, defer: bool) -> bool:
    """remember_source for a `src` whose free dims collapse to two strides and no fewer (a permuted or strided
    view: the K tiles of a row block side by side): element f of a tile partition is element (f // n, f % n) of
    those two dims, n the inner one's size."""
    if src.shape[0] != dst.partitions or src.alloc.b0:
        return False
    dims = []  # the free dims (size, element stride), outer first, adjacent ones merged
    for n, s in zip(src.shape[1:], src.strides[1:]):
        if n == 1:
            continue
        if dims and dims[-1][1] == n * s:
            dims[-1] = (dims[-1][0] * n, s)
        else:
            dims.append((n, s))
    if len(dims) != 2 or min(dims[0][1], dims[1][1]) < 0:
        return False
    mem = src.alloc.memory
    if defer:
        dst.store(Load(src), defer=mem)
    dst.alloc.source = (mem, mem.version, dst.dtype, src.offset, src.strides[0], (dims[0], dims[1]))
    dst.alloc.memory.sourced[dst.alloc.id] = dst.alloc
    return True


class Load:
    """A deferred load: its HBM view ([P, ...]), read and written into the tile's bytes when the tile is first
    touched (Allocation.settle), which is before that HBM tensor is next written (its `readers`). A tile only
    matmuls read is never touched: its moving and stationary tiles are read from the HBM source."""

    __slots__ = ("src",)

    def __init__(self, src):
        self.src = src

    def settle(self, a) -> None:
        x = self.src.array()
        m, rows, cols = a.memory, slice(a.p0, a.p0 + a.partitions), slice(a.b0, a.b0 + a.nbytes)
        m.data[rows, cols].view(x.dtype).reshape(x.shape)[...] = x
        m.poison[rows, cols] = 0


def origin(v):
    """(HBM memory, element offset, element strides) of view `v`'s values in the HBM tensor its tile was
    loaded from unchanged (remember_source); None when there is no such source."""
    src = v.alloc.source
    if src is None or v.gather_rows is not None:
        return None
    mem, version, dtype, off, sp, sf = src
    if mem.version != version or (dtype is not v.dtype and dtype != v.dtype):  # (DType's == runs Python)
        return None
    st = v.strides
    if type(sf) is tuple:
        return _in_blocks(v, mem, off + v.poff * sp, sp, sf)
    strides = (st[0] * sp, st[1] * sf) if len(st) == 2 else (st[0] * sp,) + tuple([s * sf for s in st[1:]])
    return mem, off + v.poff * sp + v.offset * sf, strides


def _in_blocks(v, mem, off, sp, dims):
    """origin for a tile whose source has two free dims (_remember_blocks): each of the view's free dims must
    step whole outer elements or stay inside one inner run (no carry from inner to outer), else None."""
    (n1, s1), (n2, s2) = dims
    outer, inner = divmod(v.offset, n2)
    reach, strides = inner, [v.strides[0] * sp]
    for n, t in zip(v.shape[1:], v.strides[1:]):
        if t < 0:
            return None
        if n == 1 or t % n2 == 0:
            strides.append(t // n2 * s1)
        else:
            reach += (n - 1) * t
            strides.append(t * s2)
    if reach >= n2:
        return None
    return mem, off + outer * s1 + inner * s2, tuple(strides)
