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
        return False
    mem = src.alloc.memory
    if defer:
        dst.store(flat.array(), defer=mem)
    a.source = (mem, mem.version, dst.dtype, flat.offset, flat.strides[0], flat.strides[1])
    a.memory.sourced[a.id] = a
    return True


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
    strides = (st[0] * sp, st[1] * sf) if len(st) == 2 else (st[0] * sp,) + tuple([s * sf for s in st[1:]])
    return mem, off + v.poff * sp + v.offset * sf, strides
