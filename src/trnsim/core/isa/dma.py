"""DMA instructions: dma_copy (with casts and indirect gather/scatter), dma_transpose, sendrecv (LNC 2)."""
from __future__ import annotations


import numpy as np

from trnsim import numerics
from trnsim.core.errors import DTypeError, GenerationError, OutOfBoundsError, ShapeError
from trnsim.core.isa.opcodes import Engine, Op
from trnsim.core.isa.registry import define
from trnsim.core.memory import Space
from trnsim.core.tensor import View

DGE_MODES = ("unknown", "swdge", "hwdge", "none")


def _mode(x) -> str:
    name = getattr(x, "name", x)
    return "unknown" if name is None else str(name)


def _dma_cost(rec, spec):
    dst = next(r for n, r in rec.operands.items() if n in rec.writes)
    nbytes = int(np.prod(dst.shape)) * numerics.dtype(dst.dtype).itemsize
    src = rec.operands.get("src")
    runs = [r.contiguous for r in (src, dst) if r is not None and r.contiguous]
    return {"engine": "dma", "bytes": nbytes, "partitions": max(dst.partitions, src.partitions if src else 1),
            "dge_mode": rec.attrs.get("dge_mode", "unknown"), "src": src.space if src else None, "dst": dst.space,
            "chunk_bytes": min(runs) if runs else nbytes}


def _moved(ins, nc, dst, src_mask, values, mask=None):
    """Write `values` to dst; never-written values reaching HBM are an error (strict) or a warning."""
    if src_mask is not None and dst.space is Space.HBM:
        nc.never_written(f"reach HBM tensor {dst.name!r} through {ins.op.value}", ins.operands.get("src", dst), src_mask, ins.location)
    mask = src_mask if mask is None else mask
    dst.store(values.reshape(dst.shape), None if mask is None else mask.reshape(dst.shape))


def _rows_kept(ins, nc, v):
    """For an indirect view: which row indices are in range (None when all are); oob_mode=error raises.
    The DMA reads a tile of indices now: never-written ones are reported (strict: raised)."""
    if v.indirect is None:
        return None
    idx = v.indirect[0]
    if isinstance(idx, View) and idx.poisoned():
        nc.never_written(f"index the rows of {v.name!r} (vector_offset)", idx, idx.mask(), ins.location)
    rows, row_elems = v.rows(), v.indirect[1]
    limit = v.alloc_elems // max(row_elems, 1)
    bad = (rows < 0) | (rows >= limit)
    if not bad.any():
        return None
    if ins.attrs.get("oob_mode", "error") in ("error", 0):
        raise OutOfBoundsError(f"{ins.op.value}: indirect row index {int(rows[bad][0])} outside {v.name!r} "
                               f"rows 0..{limit - 1} ({int(bad.sum())} of {rows.size} indices); oob_mode=skip drops them")
    return ~bad


def _with_rows(v, rows, keep=None):
    shape = v.shape if keep is None else (int(keep.sum()),) + v.shape[1:]
    return View(v.alloc, v.dtype, shape, v.strides, v.offset, v.poff, (rows, v.indirect[1]))


# -- dma_copy -------------------------------------------------------------------------------------------
def _dma_copy_check(ins, nc):
    src, dst = ins.src, ins.dst
    if src.size != dst.size:
        raise ShapeError(f"dma_copy: src {src.name!r} {list(src.shape)} has {src.size} elements, dst {dst.name!r} "
                         f"{list(dst.shape)} has {dst.size}; they must match")
    mode = _mode(ins.attrs.get("dge_mode"))
    if mode not in DGE_MODES:
        raise ShapeError(f"dma_copy: dge_mode {mode!r} is not one of {', '.join(DGE_MODES)}")
    if mode == "hwdge":
        if nc.gen < 3:
            raise GenerationError(f"dma_copy: dge_mode=hwdge needs NeuronCore-v3 or newer; this core is v{nc.gen}")
        if src.dtype != dst.dtype:
            raise DTypeError(f"dma_copy with dge_mode=hwdge copies raw bytes: src {src.dtype.name} and dst "
                             f"{dst.dtype.name} must match")
        if src.indirect is not None or dst.indirect is not None:
            raise GenerationError("dma_copy: indirect gather/scatter (vector_offset) needs dge_mode=swdge, not hwdge")
    queue = str(ins.attrs.get("queue_engine") or "unknown")
    if queue not in ("unknown", "0") and mode != "hwdge":
        raise GenerationError(f"dma_copy: engine={queue} picks the queue of a hardware DGE; it needs dge_mode=hwdge, "
                              f"not {mode}")
    if src.dtype != dst.dtype and (src.dtype.is_packed or dst.dtype.is_packed):
        raise DTypeError(f"dma_copy cannot cast packed MX data: src {src.dtype.name}, dst {dst.dtype.name}")


def _dma_copy_semantics(ins, nc):
    src, dst = ins.src, ins.dst
    if nc.fast and nc.peer is None and dst.remember_source(src, defer=True):
        return  # a plain load of a whole tile, made when the tile is first read (View.store)
    ks, kd = _rows_kept(ins, nc, src), _rows_kept(ins, nc, dst)
    if ks is not None:  # oob_mode=skip: read row 0 in place of a bad row, then leave its destination alone
        src = _with_rows(src, np.where(ks, src.rows(), 0))
    m = src.mask() if src.poisoned() else None
    if src.dtype == dst.dtype:
        values = src.array()  # raw bytes: bit-exact
    else:  # DMA casts through FP32
        values = numerics.cast(src.array().astype(np.float32), dst.dtype)
    values, store_mask = values.reshape(src.shape), None
    if ks is not None:
        keep = ks.reshape((-1,) + (1,) * (src.ndim - 1))
        m = None if m is None else (m & keep)
        values = np.where(keep, values, dst.array().reshape(src.shape))
        store_mask = np.where(keep, False if m is None else m, dst.mask().reshape(src.shape))
    if kd is not None:
        values = values.reshape(dst.shape)[kd]
        m = None if m is None else m.reshape(dst.shape)[kd]
        dst = _with_rows(dst, dst.rows()[kd], kd)
    _moved(ins, nc, dst, m, values, store_mask)
    if nc.fast and m is None and ks is None and kd is None:
        dst.remember_source(src)


define(Op.DMA_COPY, Engine.DMA, _dma_copy_check, _dma_copy_semantics, _dma_cost)


# -- dma_transpose ----------------------------------------------------------------------------------------
_PERMS = {2: [(1, 0)], 3: [(2, 1, 0)], 4: [(3, 1, 2, 0)]}


def _dma_transpose_check(ins, nc):
    src, dst = ins.src, ins.dst
    axes = tuple(ins.attrs.get("axes") or tuple(reversed(range(src.ndim))))
    if axes not in _PERMS.get(src.ndim, []):
        raise ShapeError(f"dma_transpose: axes {axes} for a {src.ndim}-d src; supported: {_PERMS.get(src.ndim, [])}")
    want = tuple(src.shape[a] for a in axes)
    if dst.shape != want:
        raise ShapeError(f"dma_transpose: dst {list(dst.shape)} must be the transposed src shape {list(want)}")
    if dst.space is not Space.SBUF:
        raise ShapeError(f"dma_transpose writes SBUF; dst {dst.name!r} is in {dst.space.value}")
    if src.dtype.itemsize not in (2, 4) or src.dtype != dst.dtype:
        raise DTypeError(f"dma_transpose moves 2- or 4-byte elements unchanged: src {src.dtype.name}, dst {dst.dtype.name}")
    ins.attrs["axes"] = axes


def _dma_transpose_semantics(ins, nc):
    m = ins.src.mask()
    ins.dst.store(np.transpose(ins.src.array(), ins.axes), np.transpose(m, ins.axes) if m.any() else None)


define(Op.DMA_TRANSPOSE, Engine.DMA, _dma_transpose_check, _dma_transpose_semantics, _dma_cost)


# -- sendrecv: exchange tiles between the two cores of an LNC 2 ----------------------------------------
def _sendrecv_check(ins, nc):
    if nc.num_programs < 2 or nc.peer is None:
        raise GenerationError("sendrecv exchanges tiles between the 2 cores of an LNC 2 launch (kernel[2](...)); "
                              "this kernel runs on 1 core")
    if ins.src.shape != ins.dst.shape or ins.src.dtype != ins.dst.dtype:
        raise ShapeError(f"sendrecv: src {list(ins.src.shape)} {ins.src.dtype.name} and dst {list(ins.dst.shape)} "
                         f"{ins.dst.dtype.name} must match")


def _sendrecv_semantics(ins, nc):
    pipe = ins.attrs.get("pipe_id", 0)
    nc.peer.mailbox.put(pipe, (ins.src.array().copy(), ins.src.mask().copy()))
    values, mask = nc.mailbox.get(nc.turns, nc.program_id, pipe)
    ins.dst.store(values, mask if mask.any() else None)


define(Op.SENDRECV, (Engine.DMA, Engine.GPSIMD), _sendrecv_check, _sendrecv_semantics, _dma_cost, min_gen=3)
