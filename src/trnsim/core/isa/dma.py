"""DMA instructions: dma_copy (with casts, indirect gather/scatter and read-modify-write), dma_compute,
dma_transpose, sendrecv (LNC 2)."""
from __future__ import annotations


import numpy as np

from trnsim import numerics, specs
from trnsim.core.errors import DTypeError, GenerationError, KernelError, OutOfBoundsError, ShapeError
from trnsim.core.isa.alu import op_name
from trnsim.core.isa.opcodes import Engine, Op
from trnsim.core.isa.registry import define
from trnsim.core.isa.work import Stream, Transfer
from trnsim.core.memory import Space
from trnsim.core.tensor import View

DGE_MODES = ("unknown", "swdge", "hwdge", "none")


def _mode(x) -> str:
    name = getattr(x, "name", x)
    return "unknown" if name is None else str(name)


def _dma_cost(rec, spec, transpose: bool = False) -> Transfer:
    """The destination's bytes, one descriptor per contiguous run of the shorter-run side; `transpose`: the
    engines write the destination transposed (dma_transpose)."""
    dst = next(r for n, r in rec.operands.items() if n in rec.writes)
    nbytes = int(np.prod(dst.shape)) * numerics.dtype(dst.dtype).itemsize
    src = rec.operands.get("src")
    runs = [r.contiguous for r in (src, dst) if r is not None and r.contiguous]
    return Transfer(max(dst.partitions, src.partitions if src else 1), nbytes, min(runs) if runs else nbytes,
                    transpose, rec.attrs.get("dge_mode", "unknown"), src.space if src else None, dst.space)


def _moved(ins, nc, dst, src_mask, values, mask=None):
    """Write `values` to dst; never-written values reaching HBM are an error (strict) or a warning, except in a
    compiler's spill save, which moves a tile's bytes whatever they hold (their marks go with them)."""
    if src_mask is not None and dst.space is Space.HBM and "spill" not in ins.attrs:
        nc.never_written(f"reach HBM tensor {dst.name!r} through {ins.op.value}", ins.operands.get("src", dst), src_mask, ins.location)
    mask = src_mask if mask is None else mask
    dst.store(values.reshape(dst.shape), None if mask is None else mask.reshape(dst.shape))


def _rows_kept(ins, nc, v):
    """For an indirect view: which row indices are in range (None when all are); oob_mode=error raises.
    The DMA reads a tile of indices now: never-written ones are reported (strict: raised)."""
    if v.gather_rows is None:
        return None
    idx = v.gather_rows[0]
    if isinstance(idx, View) and idx.poisoned():
        nc.never_written(f"index the rows of {v.name!r} (vector_offset)", idx, idx.mask(), ins.location)
    rows, row_elems = v.rows(), v.gather_rows[1]
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
    return View(v.alloc, v.dtype, shape, v.strides, v.offset, v.poff, (rows, v.gather_rows[1]))


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
        if not nc.can("hwdge"):
            raise GenerationError(f"dma_copy: dge_mode=hwdge needs {specs.having('hwdge')}; this core is v{nc.gen}")
        if src.dtype != dst.dtype:
            raise DTypeError(f"dma_copy with dge_mode=hwdge copies raw bytes: src {src.dtype.name} and dst "
                             f"{dst.dtype.name} must match")
        if src.gather_rows is not None or dst.gather_rows is not None:
            raise GenerationError("dma_copy: indirect gather/scatter (vector_offset) needs dge_mode=swdge, not hwdge")
    queue = str(ins.attrs.get("queue_engine") or "unknown")
    if queue not in ("unknown", "0") and mode != "hwdge":
        raise GenerationError(f"dma_copy: engine={queue} picks the queue of a hardware DGE; it needs dge_mode=hwdge, "
                              f"not {mode}")
    if src.dtype != dst.dtype and (src.dtype.is_packed or dst.dtype.is_packed):
        raise DTypeError(f"dma_copy cannot cast packed MX data: src {src.dtype.name}, dst {dst.dtype.name}")
    rmw = ins.attrs.get("dst_rmw_op")
    if rmw is not None:
        _rmw_check("dma_copy", rmw, ins.attrs.get("oob_mode", "error"), [src, dst])


def _dma_copy_semantics(ins, nc):
    src, dst = ins.src, ins.dst
    if ins.attrs.get("dst_rmw_op") is not None:
        _rows_kept(ins, nc, src), _rows_kept(ins, nc, dst)  # oob_mode=error: raises on a bad row
        return _accumulate(ins, nc, dst, [src])
    if nc.builder.load(nc, dst, src) or nc.builder.copy(nc, dst, src):
        return  # a plain DMA the builder copies later (core/builder.py)
    ks, kd = _rows_kept(ins, nc, src), _rows_kept(ins, nc, dst)
    if ks is not None:  # oob_mode=skip: read row 0 in place of a bad row, then leave its destination alone
        src = _with_rows(src, np.where(ks, src.rows(), 0))
    m = src.mask() if src.poisoned() else None
    if src.dtype == dst.dtype:
        values = src.array()  # raw bytes: bit-exact
    else:  # DMA casts through FP32 (nki.isa.dma_copy, "Data types"; docs/numerics.md, integer conversions)
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
    if m is None and ks is None and kd is None:
        nc.builder.loaded(nc, dst, src)


define(Op.DMA_COPY, Engine.DMA, _dma_copy_check, _dma_copy_semantics, _dma_cost, pure=True)


# -- read-modify-write DMA: dma_copy(dst_rmw_op=add) and dma_compute ------------------------------------------
# Docs: dma_copy dst_rmw_op (beta API pages, 2.2x; NKI 0.x dma_copy) and nki/api/nki/isa/__init__.py: dma_compute.
# The DMA engines add in FP32 and cast the sum to dst's dtype. Rows of an indirect dst named more than once each
# receive every contribution, as the hardware serialises the repeated read-modify-writes.
def _rmw_check(what, op, oob_mode, views):
    if op_name(op) != "add":
        raise KernelError(f"{what}: the read-modify-write op must be add (np.add / nl.add); got {op_name(op)}")
    if getattr(oob_mode, "name", oob_mode) not in ("error", 0):
        raise KernelError(f"{what}: a read-modify-write DMA takes oob_mode=error only; got {oob_mode}")
    for v in views:
        if v.dtype.is_packed:
            raise DTypeError(f"{what}: packed {v.dtype.name} ({v.name!r}) cannot be added")


def _sum(dst, srcs):
    """The FP32 elementwise sum of srcs in dst's shape, with the never-written mask of any term."""
    total, m = np.zeros(dst.shape, np.float32), np.zeros(dst.shape, bool)
    for s in srcs:
        total += s.array().astype(np.float32).reshape(dst.shape)
        if s.poisoned():
            m |= s.mask().reshape(dst.shape)
    return total, m


def _accumulate(ins, nc, dst, srcs):
    """dst = dst + sum(srcs) elementwise in FP32, each indirect dst row once per time it is named."""
    total, m = _sum(dst, srcs)
    if dst.gather_rows is not None:
        rows, inverse = np.unique(dst.rows(), return_inverse=True)
        target = View(dst.alloc, dst.dtype, (rows.size,) + dst.shape[1:], dst.strides, dst.offset, dst.poff,
                      (rows, dst.gather_rows[1]))
        sums, sm = np.zeros(target.shape, np.float32), np.zeros(target.shape, bool)
        np.add.at(sums, inverse, total)
        np.logical_or.at(sm, inverse, m)
        total, m, dst = sums, sm, target
    if dst.poisoned():
        m = m | dst.mask()
    values = numerics.cast(dst.array().astype(np.float32) + total, dst.dtype)
    _moved(ins, nc, dst, m if m.any() else None, values)


def _dma_compute_check(ins, nc):
    dst, srcs = ins.dst, [v for n, v in ins.operands.items() if n != "dst"]
    if not 1 <= len(srcs) <= nc.limit("dma_compute_max_srcs"):
        raise ShapeError(f"dma_compute takes 1 to {nc.limit('dma_compute_max_srcs')} srcs; got {len(srcs)}")
    for s in srcs:
        if s.size != dst.size:
            raise ShapeError(f"dma_compute: src {s.name!r} {list(s.shape)} has {s.size} elements, dst {dst.name!r} "
                             f"{list(dst.shape)} has {dst.size}; they must match")
    scales = ins.attrs.get("scales")
    if scales is not None and any(float(x) != 1.0 for x in scales):
        raise KernelError(f"dma_compute: every scale must be 1.0; got {list(scales)}")
    if not ins.attrs.get("unique_indices", True):
        raise KernelError("dma_compute: unique_indices=False (repeated scatter indices) is not supported by the DMA")
    _rmw_check("dma_compute", ins.attrs.get("reduce_op") or "add", ins.attrs.get("oob_mode", "error"), [dst] + srcs)


def _dma_compute_semantics(ins, nc):
    dst = ins.dst
    srcs = [v for n, v in ins.operands.items() if n != "dst"]
    for v in [dst] + srcs:
        _rows_kept(ins, nc, v)  # oob_mode=error: raises on a bad row
    total, m = _sum(dst, srcs)  # every source is read before dst is written: dst may be one of them
    _moved(ins, nc, dst, m if m.any() else None, numerics.cast(total, dst.dtype))


define(Op.DMA_COMPUTE, Engine.DMA, _dma_compute_check, _dma_compute_semantics, _dma_cost)


# -- dma_transpose ----------------------------------------------------------------------------------------
_PERMS = {2: [(1, 0)], 3: [(2, 1, 0)], 4: [(3, 1, 2, 0)]}


def _dma_transpose_check(ins, nc):
    src, dst = ins.src, ins.dst
    axes = tuple(ins.attrs.get("axes") or _PERMS.get(src.ndim, [()])[0])  # the documented default per rank
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


define(Op.DMA_TRANSPOSE, Engine.DMA, _dma_transpose_check, _dma_transpose_semantics,
       lambda rec, spec: _dma_cost(rec, spec, transpose=True))


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


def _sendrecv_cost(rec, spec):
    """A transfer on the DMA engines; issued from GpSimd, that engine only triggers it (no element of its own)."""
    if rec.engine is Engine.DMA:
        return _dma_cost(rec, spec)
    return Stream(rec.engine.value, rec.operands["dst"].partitions, 0, inputs=0)


define(Op.SENDRECV, (Engine.DMA, Engine.GPSIMD), _sendrecv_check, _sendrecv_semantics, _sendrecv_cost, needs="sendrecv")
