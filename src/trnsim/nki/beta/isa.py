"""`neuronxcc.nki.isa` (beta): instructions that return their output tile, with `mask=` and `dtype=`.

Each call allocates its output (SBUF, or PSUM for the tensor engine) and issues the current-API
instruction of the same name on every box the mask keeps. Where the beta API named or ordered
arguments differently (iota and affine_select take an affine expression, memset a shape,
nc_stream_shuffle `(src, dst, ...)`), this module does the translation.
"""
from __future__ import annotations

import numpy as np

from trnsim import numerics
from trnsim.core.errors import KernelError, OperandTypeError, ShapeError, locate_all
from trnsim.core.tensor import View
from trnsim.nki import isa as cur
from trnsim.nki.isa import (dge_mode, engine, get_nc_sub_version, get_nc_version, nc_version,  # noqa: F401
                            oob_mode, reduce_cmd)
from trnsim.nki.beta import language as nl
from trnsim.nki.beta._grid import ALU_CMP, Cond, Expr, Mask, MaskExpressionError
from trnsim.nki.beta._tile import Tile, as_tile, each_box, emit, new_tile, part, promote, wrap_results

NkiValidationError = KernelError
tensor_engine, vector_engine, scalar_engine, gpsimd_engine = engine.tensor, engine.vector, engine.scalar, engine.gpsimd
unknown_engine = engine.unknown


def _dt(dtype, default):
    return numerics.dtype(dtype if dtype is not None else default)


# -- Tensor engine ----------------------------------------------------------------------------------------------
def nc_matmul(stationary, moving, is_stationary_onezero=False, is_moving_onezero=False, is_transpose=False,
              tile_position=(), tile_size=(), mask=None, perf_mode=None, **kwargs) -> Tile:
    """stationary.T @ moving into a PSUM tile; `psum[...] += nisa.nc_matmul(a, b)` accumulates in place.
    The beta API names the FP8 double-row mode "double_row_gen3" (the current API's double_row)."""
    perf = str(getattr(perf_mode, "value", perf_mode) or "none")
    perf = "double_row" if perf.startswith("double_row") else perf
    mv = as_tile(moving)
    free = mv.shape[1:]
    if perf != "none" or len(free) < 2:
        return nl.pending_matmul(stationary, mv, mask, is_stationary_onezero=is_stationary_onezero,
                                 is_moving_onezero=is_moving_onezero, is_transpose=is_transpose,
                                 tile_position=tile_position, tile_size=tile_size, perf_mode=perf)
    # The free dims of the moving operand's access pattern flatten into N (nc_matmul: moving [K, N] with N its
    # free size); the result keeps them: [M, *free].
    flat = nl.pending_matmul(stationary, mv.reshape((mv.shape[0], int(np.prod(free)))), mask,
                             is_stationary_onezero=is_stationary_onezero, is_moving_onezero=is_moving_onezero,
                             is_transpose=is_transpose, tile_position=tile_position, tile_size=tile_size, perf_mode=perf)
    inner = flat.pending

    def run(dst, acc):
        if tuple(dst.shape) != shape:
            raise ShapeError(f"matmul result {list(shape)} assigned to a tile of shape {list(dst.shape)}")
        inner(dst.reshape(flat.shape), acc)
    shape = (flat.shape[0],) + tuple(free)
    return Tile(None, (), (), shape, pending=run)


def nc_transpose(data, mask=None, dtype=None, engine=None, **kwargs) -> Tile:
    """Partition <-> free transpose: tensor engine (into PSUM) or, within vector_transpose_max (32x32), the vector engine."""
    data = as_tile(data)
    p, f = data.shape[0], int(np.prod(data.shape[1:]))
    cap = cur.core().limit("vector_transpose_max")
    on_vector = engine == cur.engine.vector or (engine in (None, cur.engine.unknown) and p <= cap and f <= cap)
    out = new_tile((f, p), data.dtype, "sbuf" if on_vector else "psum")
    emit(cur.nc_transpose, dst=out.view(), data=data.view(),
         engine=cur.engine.vector if on_vector else cur.engine.tensor)
    return out if dtype is None or numerics.dtype(dtype) == data.dtype else nl.copy(out, dtype=dtype)


# -- Scalar engine ---------------------------------------------------------------------------------------------
def activation(op, data, bias=None, scale=1.0, mask=None, dtype=None, reduce_op=None, reduce_res=None,
               reduce_cmd=reduce_cmd.idle, **kwargs) -> Tile:
    """op(data * scale + bias) on the scalar engine; bias and a tensor scale are [P, 1] tiles."""
    data = as_tile(data)
    out = new_tile(data.shape, _dt(dtype, data.dtype))
    extra = {k: as_tile(v) for k, v in (("bias", bias), ("scale", scale)) if isinstance(v, Tile)}

    def go(b):
        ops = {k: part(v, b, out.shape, False) for k, v in extra.items()}
        res = as_tile(reduce_res).view(((b[0][0], b[0][1]), (0, 1))) if reduce_res is not None else None
        emit(cur.activation, dst=out.view(b), op=op, data=data.view(b), bias=ops.get("bias", bias),
             scale=ops.get("scale", scale), reduce_op=reduce_op, reduce_res=res, reduce_cmd=reduce_cmd)
    each_box(out, mask, [data], go)
    return out


def activation_reduce(op, data, reduce_op, reduce_res, bias=None, scale=1.0, mask=None, dtype=None, **kwargs) -> Tile:
    return activation(op, data, bias, scale, mask, dtype, reduce_op, reduce_res, reduce_cmd.reset_reduce)


# -- Vector / GpSimd ----------------------------------------------------------------------------------------------
def _tiles(what: str, **operands) -> None:
    """Refuse by name an operand that is not a tile, before the language op it lowers to reads it as one."""
    for name, x in operands.items():
        if not isinstance(x, (Tile, View)):
            raise OperandTypeError(f"{what} operand {name!r} is a tile; got {type(x).__name__} {str(x)[:40]!r}")


def _same_rank(what: str, dst: Tile, **operands) -> None:
    """Operands indexed by the destination's box have its rank (a [P, 1] tile has the rank of a [P, F] one)."""
    for name, x in operands.items():
        if isinstance(x, Tile) and len(x.shape) != len(dst.shape):
            raise ShapeError(f"{what}: {name} {list(x.shape)} and dst {list(dst.shape)} differ in rank")


def tensor_tensor(data1, data2, op, dtype=None, mask=None, engine=None, **kwargs) -> Tile:
    _tiles("tensor_tensor", data1=data1, data2=data2)
    name = getattr(op, "op_name", None) or getattr(op, "__name__", None) or str(op)
    out = new_tile(nl._shape_of(data1, data2), _dt(dtype, promote(data1, data2)))
    return nl._binary_into(out, name, data1, data2, mask, engine)


def tensor_scalar(data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False, dtype=None, mask=None,
                  engine=None, **kwargs) -> Tile:
    """(data op0 operand0) op1 operand1; operands are scalars or [P, 1] tiles."""
    data = as_tile(data)
    out = new_tile(data.shape, _dt(dtype, data.dtype))
    opnd = [as_tile(o) if isinstance(o, Tile) else o for o in (operand0, operand1)]
    each_box(out, mask, [data], lambda b: emit(
        cur.tensor_scalar, dst=out.view(b), data=data.view(b), op0=op0, reverse0=reverse0, op1=op1, reverse1=reverse1,
        operand0=part(opnd[0], b, out.shape, False) if isinstance(opnd[0], Tile) else opnd[0],
        operand1=part(opnd[1], b, out.shape, False) if isinstance(opnd[1], Tile) else opnd[1],
        engine=engine if engine is not None else cur.engine.unknown))
    return out


def tensor_copy(src, mask=None, dtype=None, engine=None, **kwargs) -> Tile:
    src = as_tile(src)
    out = new_tile(src.shape, _dt(dtype, src.dtype))
    each_box(out, mask, [src], lambda b: emit(cur.tensor_copy, dst=out.view(b), src=src.view(b),
                                              engine=engine if engine is not None else cur.engine.unknown))
    return out


def memset(shape, value, dtype, mask=None, engine=None, **kwargs) -> Tile:
    """A new SBUF tile of `shape` filled with `value` (the beta form takes a shape, not a dst)."""
    out = new_tile(cur._ints("memset shape", shape), dtype)
    each_box(out, mask, [], lambda b: emit(cur.memset, dst=out.view(b), value=value,
                                           engine=engine if engine is not None else cur.engine.unknown))
    return out


def reciprocal(data, dtype=None, mask=None, engine=None, **kwargs) -> Tile:
    """1/x on the vector engine (more precise than the scalar engine's approximation; any engine= runs it there)."""
    return nl.reciprocal(data, dtype=dtype, mask=mask)


def tensor_reduce(op, data, axis, mask=None, dtype=None, negate=False, keepdims=False, **kwargs) -> Tile:
    _tiles("tensor_reduce", data=data)
    cur._ints("tensor_reduce axis", axis if isinstance(axis, (tuple, list)) else (axis,))
    name = getattr(op, "op_name", None) or getattr(op, "__name__", None) or str(op)
    return nl._reduce(name)(data, axis, dtype=dtype, mask=mask, keepdims=keepdims, negate=negate)


def dropout(data, prob, mask=None, dtype=None, **kwargs) -> Tile:
    return nl.dropout(data, prob, dtype=dtype, mask=mask)


def _stats(fn, width):
    def op(data, mask=None, dtype=None, **kwargs) -> Tile:
        data = as_tile(data)
        out = new_tile((data.shape[0], width), _dt(dtype, data.dtype))
        emit(fn, dst=out.view(), data=data.view())
        return out
    op.__name__ = fn.__name__
    return op


bn_stats, bn_aggr = _stats(cur.bn_stats, 6), _stats(cur.bn_aggr, 2)


def tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0=False, reverse1=False, dtype=None, mask=None,
                       **kwargs) -> Tile:
    _tiles("tensor_tensor_scan", data0=data0, data1=data1)
    d0, d1 = as_tile(data0), as_tile(data1)
    _same_rank("tensor_tensor_scan", d0, data1=d1)
    out = new_tile(d0.shape, _dt(dtype, promote(d0, d1)))
    init = part(as_tile(initial), ((0, d0.shape[0]), (0, 1)), out.shape, False) if isinstance(initial, Tile) else initial
    emit(cur.tensor_tensor_scan, dst=out.view(), data0=d0.view(), data1=d1.view(), initial=init, op0=op0, op1=op1,
         reverse0=reverse0, reverse1=reverse1)
    return out


def nc_stream_shuffle(src, dst, shuffle_mask, dtype=None, mask=None, **kwargs):
    """Shuffle partitions within each 32-partition quadrant; beta order is (src, dst, shuffle_mask)."""
    emit(cur.nc_stream_shuffle, dst=as_tile(dst).view(), src=as_tile(src).view(), shuffle_mask=shuffle_mask)


# -- GpSimd: affine patterns -------------------------------------------------------------------------------------------
def _affine(expr: Expr, shape, box):
    """(channel_multiplier, [[step, num], ...], offset) of an affine expression over one box of `shape`."""
    k = len(shape) - expr.ndim
    coef = [expr.coefs.get(a - k, 0) for a in range(len(shape))]
    offset = expr.const + sum(c * lo for c, (lo, _) in zip(coef, box))
    return coef[0], [[coef[a], hi - lo] for a, (lo, hi) in enumerate(box) if a > 0], offset


def iota(expr, dtype, mask=None, **kwargs) -> Tile:
    """A tile of the values of an affine expression of nl.arange grids, computed on GpSimd (int32, then cast).
    A scalar expression (program_id, loop indices: no grid at all) is a [1, 1] tile of its value; a 1-d grid
    is the compiler's err_1d_arange_not_supported."""
    expr = Expr.lift(expr)
    if expr.ndim == 1:
        raise ShapeError("err_1d_arange_not_supported: iota needs a 2-d grid expression (nl.arange(n)[:, None] ...)"
                         " or a scalar one")
    out = new_tile(expr.shape if expr.ndim else (1, 1), dtype)

    def go(b):
        cm, pattern, offset = _affine(expr, out.shape, b)
        emit(cur.iota, dst=out.view(b), pattern=pattern, offset=offset, channel_multiplier=cm)
    each_box(out, mask, [], go)
    return out


def affine_select(pred, on_true_tile, on_false_value, mask=None, dtype=None, **kwargs) -> Tile:
    """pred ? on_true_tile : on_false_value, where pred compares an affine expression of grids (causal masks)."""
    if isinstance(pred, Mask) and len(pred.conds) == 1:
        pred = pred.conds[0]
    if not isinstance(pred, Cond):
        raise MaskExpressionError(f"affine_select pred={pred!r}: one comparison of an affine expression of nl.arange")
    src = as_tile(on_true_tile)
    out = new_tile(src.shape, _dt(dtype, src.dtype))

    def go(b):
        cm, pattern, offset = _affine(pred.expr, out.shape, b)
        emit(cur.affine_select, dst=out.view(b), pattern=pattern, channel_multiplier=cm, on_true_tile=src.view(b),
             on_false_value=on_false_value, cmp_op=ALU_CMP[pred.op], offset=offset)
    each_box(out, mask, [src], go)
    return out


def scalar_tensor_tensor(*, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, dtype=None, mask=None,
                         **kwargs) -> Tile:
    """(data op0 operand0) op1 operand1, operand0 a scalar or [P, 1] tile, operand1 a full tile."""
    data, t1 = as_tile(data), as_tile(operand1)
    out = new_tile(data.shape, _dt(dtype, data.dtype))
    o0 = as_tile(operand0) if isinstance(operand0, Tile) else operand0
    each_box(out, mask, [data, t1], lambda b: emit(
        cur.scalar_tensor_tensor, dst=out.view(b), data=data.view(b), op0=op0, op1=op1, operand1=t1.view(b),
        operand0=part(o0, b, out.shape, False) if isinstance(o0, Tile) else o0, reverse0=reverse0, reverse1=reverse1))
    return out


def tensor_scalar_reduce(*, data, op0, operand0, reduce_op, reduce_res, reverse0=False, dtype=None, mask=None,
                         **kwargs) -> Tile:
    """data op0 operand0, with its free-axis reduction written into `reduce_res` ([P, 1])."""
    data = as_tile(data)
    out = new_tile(data.shape, _dt(dtype, data.dtype))
    emit(cur.tensor_scalar_reduce, dst=out.view(), data=data.view(), op0=op0, operand0=operand0, reduce_op=reduce_op,
         reduce_res=as_tile(reduce_res).view(), reverse0=reverse0)
    return out


def tensor_partition_reduce(op, data, mask=None, dtype=None, **kwargs) -> Tile:
    """Reduce across partitions on GpSimd: [P, F] -> [1, F]."""
    data = as_tile(data)
    out = new_tile((1,) + data.shape[1:], _dt(dtype, data.dtype))
    emit(cur.tensor_partition_reduce, dst=out.view(), op=op, data=data.view())
    return out


# -- registers -------------------------------------------------------------------------------------------------------
def register_alloc(x=None):
    return cur.register_alloc(x)


def register_move(dst, imm=None, *, src=None):
    """Set a register; the beta form names the value `imm`."""
    cur.register_move(dst, imm if src is None else src)


def register_load(dst, src):
    """A register from a [1, 1] tile."""
    cur.register_load(dst, as_tile(src).view())


def register_store(dst, src):
    """A register into a [1, 1] tile."""
    cur.register_store(as_tile(dst).view(), src)


# -- DMA -------------------------------------------------------------------------------------------------------------
def dma_copy(src=None, dst=None, *, mask=None, dst_rmw_op=None, oob_mode=oob_mode.error, dge_mode=dge_mode.unknown,
             **kwargs):
    """A DMA from src to dst (HBM or SBUF) on the boxes the mask keeps; `(src, dst)` positionally, as in the beta API.
    `dst_rmw_op=np.add` adds src into dst (indirect rows named twice receive both)."""
    d, s = as_tile(dst), nl._sbuf_value(src)
    each_box(d, mask, [s], lambda b: emit(cur.dma_copy, dst=d.view(b), src=part(s, b, d.shape), oob_mode=oob_mode,
                                          dge_mode=dge_mode, dst_rmw_op=dst_rmw_op))


def dma_transpose(src, mask=None, dtype=None, **kwargs) -> Tile:
    """A transposed copy by DMA into a new SBUF tile (axes reversed; [3, 1, 2, 0] for 4-d)."""
    src = as_tile(src)
    perm = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}.get(src.ndim)
    if perm is None:
        raise ShapeError(f"err_exceed_max_supported_dimension: dma_transpose takes a 2-, 3- or 4-d tile; got {src.ndim}-d")
    out = new_tile(tuple(src.shape[a] for a in perm), src.dtype)
    emit(cur.dma_transpose, dst=out.view(), src=src.view(), axes=perm)
    return out if dtype is None or numerics.dtype(dtype) == src.dtype else nl.copy(out, dtype=dtype)


# -- selections, top-8 and index searches ---------------------------------------------------------------------------
# Beta signatures from the 2.2x API pages (nki.isa.max8, nc_find_index8, nc_match_replace8, select_reduce,
# range_select, sequence_bounds, local_gather, tensor_copy_predicated, tensor_scalar_cumulative,
# tensor_copy_dynamic_src/dst, dma_copy): keyword operands, `mask=` and `dtype=`, results returned as tiles.
def _rows(data: Tile, mask):
    """The one box of `data` the mask keeps, for instructions that work along whole partitions."""
    from trnsim.nki.beta._grid import boxes, evaluate
    kept = boxes(evaluate(mask, data.shape), data.shape)
    if len(kept) != 1:
        raise MaskExpressionError(f"mask={mask!r} must keep one rectangle of {list(data.shape)} for this instruction")
    return kept[0]


def max8(*, src, mask=None, dtype=None, **kwargs) -> Tile:
    """The 8 largest values of each partition, descending: [P, 8]."""
    src = as_tile(src)
    b = _rows(src, mask)
    out = new_tile((src.shape[0], 8), _dt(dtype, src.dtype))
    emit(cur.max8, dst=out.view((b[0], (0, 8))), src=src.view(b))
    return out


def nc_find_index8(*, data, vals, mask=None, dtype=None, **kwargs) -> Tile:
    """The index of each of 8 values in each partition of data: [P, 8], uint32 unless dtype says otherwise."""
    data, vals = as_tile(data), as_tile(vals)
    b = _rows(data, mask)
    out = new_tile((data.shape[0], 8), _dt(dtype, numerics.uint32))
    emit(cur.nc_find_index8, dst=out.view((b[0], (0, 8))), data=data.view(b), vals=vals.view((b[0], (0, 8))))
    return out


def nc_match_replace8(*, data, vals, imm, dst_idx=None, mask=None, dtype=None, **kwargs) -> Tile:
    """data with the first match of each of 8 values per partition replaced by imm; their indices into dst_idx."""
    data, vals = as_tile(data), as_tile(vals)
    b = _rows(data, mask)
    out = new_tile(data.shape, _dt(dtype, data.dtype))
    idx = None if dst_idx is None else as_tile(dst_idx).view((b[0], (0, 8)))
    emit(cur.nc_match_replace8, dst=out.view(b), data=data.view(b), vals=vals.view((b[0], (0, 8))), imm=imm,
         dst_idx=idx)
    return out


def _col(t, b):
    """A [P, 1] operand (or a number) for the partitions of box b."""
    return as_tile(t).view((b[0], (0, 1))) if isinstance(t, (Tile, View)) else t


def select_reduce(*, dst, predicate, on_true, on_false, reduce_res=None, reduce_cmd=reduce_cmd.idle, reduce_op=None,
                  reverse_pred=False, mask=None, dtype=None, **kwargs) -> Tile:
    """dst = predicate ? on_true : on_false (a tile, a [P, 1] tile or a number), with an optional reduction."""
    _tiles("select_reduce", dst=dst, predicate=predicate, on_true=on_true)
    d, pred, t = as_tile(dst), as_tile(predicate), as_tile(on_true)
    _same_rank("select_reduce", d, predicate=pred, on_true=t)
    b = _rows(d, mask)
    f = on_false
    if isinstance(f, (Tile, View)):
        f = as_tile(f)
        f = f.view((b[0], (0, 1))) if f.shape[-1] == 1 else f.view(b)
    emit(cur.select_reduce, dst=d.view(b), predicate=pred.view(b), on_true=t.view(b), on_false=f,
         reduce_res=_col(reduce_res, b) if reduce_res is not None else None, reduce_cmd=reduce_cmd,
         reduce_op=reduce_op, reverse_pred=reverse_pred)
    return d


def range_select(*, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=reduce_cmd.reset_reduce,
                 reduce_res=None, reduce_op=None, range_start=0, on_false_value=None, mask=None, dtype=None,
                 **kwargs) -> Tile:
    """on_true_tile where bound0 comp_op0 i and i comp_op1 bound1 (i = range_start + free index), else
    on_false_value; the max (reduce_op) of the result goes to the lane accumulators and reduce_res."""
    src = as_tile(on_true_tile)
    b = _rows(src, mask)
    out = new_tile(src.shape, _dt(dtype, src.dtype))
    emit(cur.range_select, dst=out.view(b), on_true_tile=src.view(b), comp_op0=comp_op0, comp_op1=comp_op1,
         bound0=_col(bound0, b), bound1=_col(bound1, b), reduce_cmd=reduce_cmd,
         reduce_res=_col(reduce_res, b) if reduce_res is not None else None, reduce_op=reduce_op,
         range_start=range_start, on_false_value=on_false_value)
    return out


def sequence_bounds(*, segment_ids, dtype=None, **kwargs) -> Tile:
    """[1, 2, n]: the start and end of each element's segment (id 0 is padding)."""
    ids = as_tile(segment_ids)
    out = new_tile((ids.shape[0], 2) + ids.shape[1:], _dt(dtype, ids.dtype))
    emit(cur.sequence_bounds, dst=out.view(), segment_ids=ids.view())
    return out


def local_gather(src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, mask=None, **kwargs) -> Tile:
    """Gathers inside each GpSimd core's partitions (gpsimd_core_partitions: 16), in src_buffer's dtype. With every
    index valid the result is [P, *index free dims, per-core partitions, num_elem_per_idx] (a core's indices in the order it reads them: partition
    fastest); else [P, num_valid_indices, num_elem_per_idx]."""
    src, idx = as_tile(src_buffer), as_tile(index)
    for what, v in (("num_elem_per_idx", num_elem_per_idx), ("num_valid_indices", num_valid_indices)):
        if not (v is None and what == "num_valid_indices") and not hasattr(type(v), "__index__"):
            raise OperandTypeError(f"local_gather {what} is an int; got {type(v).__name__} {str(v)[:40]!r}")
    per_core, k = min(idx.shape[0], cur.core().limit("gpsimd_core_partitions")), int(num_elem_per_idx)
    total = int(np.prod(idx.shape[1:])) * per_core
    n = total if num_valid_indices is None else int(num_valid_indices)
    shape = (src.shape[0],) + tuple(idx.shape[1:]) + (per_core, k) if n == total else (src.shape[0], n, k)
    out = new_tile(shape, src.dtype)
    emit(cur.local_gather, dst=out.view(), src_buffer=src.view(), index=idx.view(), num_elem_per_idx=num_elem_per_idx,
         num_valid_indices=num_valid_indices)
    return out


# -- copies --------------------------------------------------------------------------------------------------------
def tensor_copy_predicated(*, src, dst, predicate, reverse_pred=False, mask=None, dtype=None, **kwargs) -> Tile:
    """dst = src where predicate is non-zero (zero with reverse_pred), dst unchanged elsewhere."""
    _tiles("tensor_copy_predicated", dst=dst, predicate=predicate)
    d, pred = as_tile(dst), as_tile(predicate)
    s = as_tile(src) if isinstance(src, (Tile, View)) else src
    _same_rank("tensor_copy_predicated", d, predicate=pred, src=s)
    each_box(d, mask, [pred], lambda b: emit(cur.tensor_copy_predicated, dst=d.view(b), predicate=pred.view(b),
                                             src=s.view(b) if isinstance(s, Tile) else s, reverse_pred=reverse_pred))
    return d


def tensor_scalar_cumulative(*, src, op0, op1, imm0, imm1=None, reduce_cmd=reduce_cmd.reset_reduce, dst=None,
                             mask=None, dtype=None, **kwargs) -> Tile:
    """A running op1 of (src op0 imm0) along each partition, through the vector engine's lane accumulators."""
    _tiles("tensor_scalar_cumulative", src=src)
    src = as_tile(src)
    out = as_tile(dst) if dst is not None else new_tile(src.shape, _dt(dtype, src.dtype))
    _same_rank("tensor_scalar_cumulative", out, src=src)
    b = _rows(src, mask)
    emit(cur.tensor_scalar_cumulative, dst=out.view(b), src=src.view(b), op0=op0, op1=op1, imm0=_col(imm0, b),
         imm1=_col(imm1, b), reduce_cmd=reduce_cmd)
    return out


def tensor_copy_dynamic_src(src, *, mask=None, dtype=None, engine=None, **kwargs) -> Tile:
    """A copy of a tile whose free offset the kernel computed at run time (a register or nl.ds offset)."""
    return tensor_copy(src, mask=mask, dtype=dtype, engine=engine)


def tensor_copy_dynamic_dst(*, dst, src, mask=None, dtype=None, engine=None, **kwargs) -> Tile:
    """A copy into a tile whose free offset the kernel computed at run time (a register or nl.ds offset)."""
    d, s = as_tile(dst), as_tile(src)
    each_box(d, mask, [s], lambda b: emit(cur.tensor_copy, dst=d.view(b), src=part(s, b, d.shape),
                                          engine=engine if engine is not None else cur.engine.unknown))
    return d


wrap_results(globals(), skip={"dropout"})

locate_all(globals())  # after every definition: the names a kernel calls
