"""Vector-engine reductions, scans, selections and statistics: tensor_scalar_reduce, tensor_tensor_scan,
select_reduce, range_select, exponential, bn_stats, bn_aggr, max8, nc_find_index8, nc_match_replace8,
nc_stream_shuffle. Reductions into the lane accumulators share `accumulate` with the scalar engine.
"""
from __future__ import annotations

import numpy as np

from trnsim.core.errors import DTypeError, FreeSizeError, ShapeError
from trnsim.core.isa.alu import alu, op_name
from trnsim.core.isa.opcodes import Engine, Op
from trnsim.core.isa.registry import define, masks, pf, put, same_free, same_partitions, stream_cost
from trnsim.core.isa.scalar import accumulate, reduce_check, reduce_cmd
from trnsim.core.isa.vector import _int_operand, apply, bitvec_check, check_scalar_operand, scalar_operand

_RED = ("dst", "reduce_res")


def _operand(ins, key, p, default=0.0):
    return scalar_operand(ins.operands.get(key, ins.attrs.get(key, default)), p)


def _same(ins, *names):
    same_partitions(ins, *names)
    same_free(ins, *names)


# -- tensor_scalar_reduce: dst = data op0 operand0, reduced along the free axis into reduce_res ------------------
def _tsr_check(ins, nc):
    _same(ins, "dst", "data")
    check_scalar_operand(ins, "operand0", ins.data.partitions)
    bitvec_check(ins, ("op0",), ins.data)
    reduce_check(ins, ins.data)


def _tsr_semantics(ins, nc):
    data, dst, p = ins.data, ins.dst, ins.data.partitions
    x = apply(ins.attrs["op0"], pf(data), _operand(ins, "operand0", p), reverse=ins.attrs.get("reverse0", False))
    m = masks(x.shape, data, ins.operands.get("operand0"))
    put(dst, x.reshape(dst.shape), None if m is None else m.reshape(dst.shape))
    if ins.attrs.get("reduce_cmd") is None:
        ins.attrs["reduce_cmd"] = "reset_reduce"
    accumulate(nc, Engine.VECTOR, ins, data, x, m, ins.attrs.get("reduce_op"), ins.attrs.get("reduce_init"))
    res = ins.operands.get("reduce_res")
    if res is not None and ins.attrs.get("reduce_res_negate"):
        res.store(-res.array(), res.mask() if res.poisoned() else None)


def _tsr_cost(rec, spec):
    """max(MIN_II, N) + MIN_II Vector cycles (the nki.isa.tensor_scalar_reduce cost note): the streamed
    tensor_scalar, then the reduction read out of the accumulators."""
    c = stream_cost(rec, spec)
    c.reduce = True
    return c


define(Op.TENSOR_SCALAR_REDUCE, Engine.VECTOR, _tsr_check, _tsr_semantics, _tsr_cost, writes=_RED)


# -- tensor_tensor_scan: r[i] = op1(op0(data0[i], r[i-1]), data1[i]), r[-1] = initial -------------------------
def _scan_check(ins, nc):
    _same(ins, "dst", "data0", "data1")
    check_scalar_operand(ins, "initial", ins.data0.partitions)
    bitvec_check(ins, ("op0", "op1"), ins.data0, ins.data1, ins.dst)


def _scan_semantics(ins, nc):
    d0, d1, dst = ins.data0, ins.data1, ins.dst
    p = d0.partitions
    a, b = pf(d0), pf(d1)
    r = np.broadcast_to(_operand(ins, "initial", p), (p, 1)).reshape(p).astype(np.float32)
    out = np.empty_like(a)
    op0, op1 = op_name(ins.attrs["op0"]), op_name(ins.attrs["op1"])
    for i in range(a.shape[1]):  # a true scan: each step depends on the last
        r = apply(op1, apply(op0, a[:, i], r, reverse=ins.attrs.get("reverse0", False)), b[:, i],
                  reverse=ins.attrs.get("reverse1", False))
        out[:, i] = r
    m = masks(a.shape, d0, d1, ins.operands.get("initial"))
    put(dst, out.reshape(dst.shape), None if m is None else np.logical_or.accumulate(m, axis=1).reshape(dst.shape))


define(Op.TENSOR_TENSOR_SCAN, Engine.VECTOR, _scan_check, _scan_semantics, lambda r, s: stream_cost(r, s, inputs=2),
       pure=True)


# -- tensor_scalar_cumulative: reg = op1(op0(src[i], imm0), reg); dst[i] = reg, in the lane accumulators ------------
# nki/api/nki/isa/__init__.py: tensor_scalar_cumulative. The register starts from op1's identity (reset_reduce),
# imm1 (load_reduce) or where the last accumulating instruction left it (reduce), and stays there afterwards.
_CUMULATIVE = {"add": 0.0, "subtract": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf}
_CUMULATIVE_ALIASES = {"mult": "multiply", "max": "maximum", "min": "minimum"}


def _cumulative_op(ins):
    name = op_name(ins.attrs["op1"])
    return _CUMULATIVE_ALIASES.get(name, name)


def _cumulative_check(ins, nc):
    _same(ins, "dst", "src")
    for k in ("imm0", "imm1"):
        check_scalar_operand(ins, k, ins.src.partitions)
    bitvec_check(ins, ("op0",), ins.src)
    if _cumulative_op(ins) not in _CUMULATIVE:
        raise ShapeError(f"tensor_scalar_cumulative: op1 {op_name(ins.attrs['op1'])} is not one of "
                         f"{', '.join(_CUMULATIVE)}")
    for v in (ins.src, ins.dst):
        if v.dtype.name in ("int32", "uint32"):
            raise DTypeError(f"tensor_scalar_cumulative: {v.name!r} is {v.dtype.name}; 32-bit integers are not "
                             f"supported")


def _cumulative_semantics(ins, nc):
    src, dst, p = ins.src, ins.dst, ins.src.partitions
    cmd = reduce_cmd(ins.attrs.get("reduce_cmd") or "reset_reduce")
    op1 = _cumulative_op(ins)
    lanes = slice(src.region().partition, src.region().partition + p)
    acc, bad = nc.accumulators[Engine.VECTOR], nc.accumulator_poison[Engine.VECTOR]
    if cmd in ("reset", "reset_reduce"):
        acc[lanes], bad[lanes] = _CUMULATIVE[op1], False
    elif cmd == "load_reduce":
        acc[lanes], bad[lanes] = _operand(ins, "imm1", p).reshape(-1), masks((p, 1), ins.operands.get("imm1")) is not None
    imm0 = ins.operands.get("imm0", ins.attrs.get("imm0", 0.0))
    if alu(ins.attrs["op0"]).kind == "bitvec":  # on the integer src's bit patterns, then scanned in fp32
        a = src.array().reshape(p, -1)
        x = apply(ins.attrs["op0"], a, _int_operand(imm0, p).astype(a.dtype), integer=True,
                  reverse=ins.attrs.get("reverse0", False)).astype(np.float32)
    else:
        x = apply(ins.attrs["op0"], pf(src), scalar_operand(imm0, p), reverse=ins.attrs.get("reverse0", False))
    reg, out = acc[lanes].astype(np.float32), np.empty_like(x)
    for i in range(x.shape[1]):  # a true scan: each step depends on the last
        reg = apply(op1, x[:, i], reg)
        out[:, i] = reg
    acc[lanes] = reg
    m = masks(x.shape, src, ins.operands.get("imm0"))
    m = (np.zeros(x.shape, bool) if m is None else np.logical_or.accumulate(m, axis=1)) | bad[lanes][:, None]
    bad[lanes] = m[:, -1] if m.shape[1] else bad[lanes]
    put(dst, out.reshape(dst.shape), m.reshape(dst.shape) if m.any() else None)


define(Op.TENSOR_SCALAR_CUMULATIVE, Engine.VECTOR, _cumulative_check, _cumulative_semantics, stream_cost)


# -- select_reduce: dst = pred ? on_true : on_false, optional max-reduce --------------------------------------
def _select_reduce_check(ins, nc):
    _same(ins, "dst", "predicate", "on_true")
    if ins.predicate.free_size == 0:
        raise ShapeError(f"select_reduce: predicate {ins.predicate.name!r} {list(ins.predicate.shape)} has no element "
                         f"per partition to select or reduce")
    reduce_check(ins, ins.predicate, "maximum")
    f = ins.operands.get("on_false")
    if f is not None and f.free_size != 1:
        _same(ins, "dst", "on_false")
    elif f is not None and f.partitions != ins.predicate.partitions:
        raise ShapeError(f"select_reduce: on_false {f.name!r} {list(f.shape)} must be a number, a "
                         f"[{ins.predicate.partitions}, 1] tile or a tile like dst")


def _select_reduce_semantics(ins, nc):
    dst, pred, p = ins.dst, ins.predicate, ins.predicate.partitions
    c = pf(pred) != 0
    if ins.attrs.get("reverse_pred"):
        c = ~c
    f = ins.operands.get("on_false")
    on_false = pf(f) if f is not None and f.free_size != 1 else _operand(ins, "on_false", p)
    out = np.where(c, pf(ins.on_true), on_false).astype(np.float32)
    m = masks(out.shape, pred, ins.on_true, f)
    put(dst, out.reshape(dst.shape), None if m is None else m.reshape(dst.shape))
    accumulate(nc, Engine.VECTOR, ins, pred, out, m, ins.attrs.get("reduce_op") or "maximum")


define(Op.SELECT_REDUCE, Engine.VECTOR, _select_reduce_check, _select_reduce_semantics, stream_cost, writes=_RED)


# -- range_select: keep elements whose free index lies in the bounds, max-reduce ----------------------------------
def _range_select_check(ins, nc):
    _same(ins, "dst", "on_true_tile")
    for k in ("bound0", "bound1"):
        check_scalar_operand(ins, k, ins.on_true_tile.partitions)
    bitvec_check(ins, ("comp_op0", "comp_op1"))
    reduce_check(ins, ins.on_true_tile, "maximum")


def _range_select_semantics(ins, nc):
    src, dst, p = ins.on_true_tile, ins.dst, ins.on_true_tile.partitions
    x = pf(src)
    idx = (np.arange(x.shape[1], dtype=np.float32) + np.float32(ins.attrs.get("range_start", 0)))[None, :]
    keep = (apply(ins.attrs["comp_op0"], idx, _operand(ins, "bound0", p)) != 0) & \
           (apply(ins.attrs["comp_op1"], idx, _operand(ins, "bound1", p)) != 0)
    fill = ins.attrs.get("on_false_value")
    out = np.where(keep, x, np.float32(np.finfo(np.float32).min if fill is None else fill)).astype(np.float32)
    m = masks(out.shape, src, ins.operands.get("bound0"), ins.operands.get("bound1"))
    put(dst, out.reshape(dst.shape), None if m is None else m.reshape(dst.shape))
    if ins.attrs.get("reduce_cmd") is None:
        ins.attrs["reduce_cmd"] = "reset_reduce"
    accumulate(nc, Engine.VECTOR, ins, src, out, m, ins.attrs.get("reduce_op") or "maximum")


define(Op.RANGE_SELECT, Engine.VECTOR, _range_select_check, _range_select_semantics, stream_cost, writes=_RED, needs="range_select")


# -- exponential (v4): exp(src - max_value), optional sum --------------------------------------------------------
def _exponential_check(ins, nc):
    _same(ins, "dst", "src")
    check_scalar_operand(ins, "max_value", ins.src.partitions)


def _exponential_semantics(ins, nc):
    src, dst, p = ins.src, ins.dst, ins.src.partitions
    with np.errstate(all="ignore"):
        out = np.exp(pf(src) - _operand(ins, "max_value", p)).astype(np.float32)
    m = masks(out.shape, src, ins.operands.get("max_value"))
    put(dst, out.reshape(dst.shape), None if m is None else m.reshape(dst.shape))
    accumulate(nc, Engine.VECTOR, ins, src, out, m, "add", ins.attrs.get("reduce_init"))


define(Op.EXPONENTIAL, Engine.VECTOR, _exponential_check, _exponential_semantics, stream_cost, writes=_RED, needs="exponential")


# -- bn_stats / bn_aggr: per-partition mean and variance in chunks ------------------------------------------------
# bn_stats writes, per partition, (count, mean, count*variance) of the even-indexed and of the odd-indexed
# elements; bn_aggr merges any number of such triples (Chan et al.'s pairwise update) into (mean, variance).
def _bn_stats_check(ins, nc):
    same_partitions(ins, "dst", "data")
    if ins.data.free_size > nc.limit("bn_stats_fmax"):
        raise FreeSizeError(f"bn_stats: free size {ins.data.free_size} exceeds bn_stats_fmax {nc.limit('bn_stats_fmax')}")
    if ins.dst.free_size != 6:
        raise ShapeError(f"bn_stats: dst {list(ins.dst.shape)} must hold 6 values per partition")


def _bn_stats_semantics(ins, nc):
    x = pf(ins.data).astype(np.float64)
    cols = []
    for half in (x[:, 0::2], x[:, 1::2]):
        n = half.shape[1]
        mean = half.mean(1) if n else np.zeros(x.shape[0])
        cols += [np.full(x.shape[0], n), mean, ((half - mean[:, None]) ** 2).sum(1)]
    m = ins.data.mask()
    bad = np.repeat(m.reshape(x.shape[0], -1).any(1)[:, None], 6, 1) if m.any() else None
    put(ins.dst, np.stack(cols, 1).astype(np.float32).reshape(ins.dst.shape), bad)


define(Op.BN_STATS, Engine.VECTOR, _bn_stats_check, _bn_stats_semantics, stream_cost)


def _bn_aggr_check(ins, nc):
    same_partitions(ins, "dst", "data")
    if ins.data.free_size % 3 or not ins.data.free_size or ins.dst.free_size != 2:
        raise ShapeError(f"bn_aggr: data {list(ins.data.shape)} must hold (count, mean, M2) triples and dst "
                         f"{list(ins.dst.shape)} 2 values (mean, variance) per partition")


def _bn_aggr_semantics(ins, nc):
    t = pf(ins.data).astype(np.float64).reshape(ins.data.partitions, -1, 3)
    n, mean, m2 = t[:, 0, 0], t[:, 0, 1], t[:, 0, 2]
    for j in range(1, t.shape[1]):
        nb, mb, m2b = t[:, j, 0], t[:, j, 1], t[:, j, 2]
        tot = n + nb
        d = mb - mean
        with np.errstate(all="ignore"):
            mean = np.where(tot > 0, mean + d * nb / tot, 0.0)
            m2 = m2 + m2b + np.where(tot > 0, d * d * n * nb / tot, 0.0)
        n = tot
    with np.errstate(all="ignore"):
        var = m2 / n
    m = ins.data.mask()
    bad = np.repeat(m.reshape(t.shape[0], -1).any(1)[:, None], 2, 1) if m.any() else None
    put(ins.dst, np.stack([mean, var], 1).astype(np.float32).reshape(ins.dst.shape), bad)


define(Op.BN_AGGR, Engine.VECTOR, _bn_aggr_check, _bn_aggr_semantics, stream_cost)


# -- max8 / nc_find_index8 / nc_match_replace8 ----------------------------------------------------------------------
def _max8_check(ins, nc):
    same_partitions(ins, "dst", "src")
    lo, hi = nc.limit("max8_fmin"), nc.limit("max8_fmax")
    if not lo <= ins.src.free_size <= hi or ins.dst.free_size != 8:
        raise FreeSizeError(f"max8: src free size {ins.src.free_size} must be {lo}..{hi} and dst hold 8 values; "
                            f"dst is {list(ins.dst.shape)}")


def _max8_semantics(ins, nc):
    x = pf(ins.src)
    top = -np.sort(-x, axis=1)[:, :8]
    m = ins.src.mask()
    put(ins.dst, top.reshape(ins.dst.shape), np.repeat(m.reshape(x.shape[0], -1).any(1)[:, None], 8, 1) if m.any() else None)


define(Op.MAX8, Engine.VECTOR, _max8_check, _max8_semantics, stream_cost)


def _find8_check(ins, nc):
    same_partitions(ins, "dst", "data", "vals")
    if ins.vals.free_size != 8 or ins.dst.free_size != 8:
        raise ShapeError(f"nc_find_index8: vals {list(ins.vals.shape)} and dst {list(ins.dst.shape)} hold 8 values per partition")


def find8(x, vals):
    """Index of the first occurrence of each value; a repeated value finds its next occurrence; missing: all ones."""
    p = x.shape[0]
    out = np.full((p, 8), 0xFFFFFFFF, np.uint64)
    for r in range(p):
        used = set()
        for j in range(8):
            hits = np.flatnonzero(x[r] == vals[r, j])
            free = [h for h in hits if h not in used]
            if free:
                out[r, j] = free[0]
                used.add(free[0])
    return out


def _find8_semantics(ins, nc):
    x, vals = pf(ins.data), pf(ins.vals)
    idx = find8(x, vals)
    m = [mk.any(1, keepdims=True) for mk in (masks(x.shape, ins.data), masks(vals.shape, ins.vals)) if mk is not None]
    ins.dst.store(idx.astype(ins.dst.dtype.np).reshape(ins.dst.shape),
                  np.broadcast_to(np.logical_or.reduce(m), idx.shape).reshape(ins.dst.shape) if m else None)


define(Op.NC_FIND_INDEX8, Engine.VECTOR, _find8_check, _find8_semantics, stream_cost)


def _replace8_check(ins, nc):
    _same(ins, "dst", "data")
    same_partitions(ins, "data", "vals")
    if ins.vals.free_size != 8:
        raise ShapeError(f"nc_match_replace8: vals {list(ins.vals.shape)} must hold 8 values per partition")


def _replace8_semantics(ins, nc):
    x, vals = pf(ins.data).copy(), pf(ins.vals)
    idx = find8(x, vals[:, ::-1])[:, ::-1]  # the hardware walks the 8 values in reverse
    for r in range(x.shape[0]):
        for j in range(8):
            if idx[r, j] != 0xFFFFFFFF:
                x[r, int(idx[r, j])] = np.float32(ins.attrs.get("imm", 0.0))
    # A never-written value of a partition's 8 could match anywhere in its row: the whole row is unknown.
    rows = masks(vals.shape, ins.vals)
    rows = None if rows is None else np.repeat(rows.any(1, keepdims=True), x.shape[1], 1)
    m = masks(x.shape, ins.data)
    m = rows if m is None else m if rows is None else m | rows
    put(ins.dst, x.reshape(ins.dst.shape), None if m is None else m.reshape(ins.dst.shape))
    di = ins.operands.get("dst_idx")
    if di is not None:
        bad = None if m is None else np.repeat(m.any(1, keepdims=True), 8, 1)
        put(di, idx.astype(di.dtype.np).reshape(di.shape), bad)


define(Op.NC_MATCH_REPLACE8, Engine.VECTOR, _replace8_check, _replace8_semantics, stream_cost, writes=("dst", "dst_idx"))


# -- nc_stream_shuffle: move partitions within each 32-partition quadrant ------------------------------------------
def _shuffle_check(ins, nc):
    """nki/api/nki/isa/__init__.py: nc_stream_shuffle: same dtype and elements per partition; src and dst may
    access different partition counts; the active partitions (both rounded up to whole quadrants) fix
    where src and dst may start."""
    src, dst = ins.src, ins.dst
    same_free(ins, "dst", "src")
    if src.dtype != dst.dtype:
        raise DTypeError(f"nc_stream_shuffle keeps the dtype: src {src.dtype.name}, dst {dst.dtype.name}")
    q = nc.limit("quadrant_partitions")
    mask = list(ins.attrs.get("shuffle_mask", ()))
    if len(mask) != q or any(not (0 <= int(i) < q or int(i) == 255) for i in mask):
        raise ShapeError(f"nc_stream_shuffle: shuffle_mask needs {q} entries in 0..{q - 1} or 255 (keep dst); got {mask}")
    active = -(-max(src.partitions, dst.partitions) // q) * q
    step = active if active <= 2 * q else nc.limit("pmax")
    for name, v in (("src", src), ("dst", dst)):
        start = v.region().partition
        if start % step:
            raise ShapeError(f"nc_stream_shuffle: {active} active partitions (src {src.partitions}, dst "
                             f"{dst.partitions}) need {name} {v.name!r} to start at a multiple of {step}; it starts "
                             f"at partition {start}")


def _shuffle_semantics(ins, nc):
    """Each quadrant of dst copies partitions of the same quadrant of src by the mask (skipping partitions
    outside src or dst); a 1-partition src broadcasts with a mask of zeros."""
    src, dst = ins.src, ins.dst
    a, m = src.array().reshape(src.partitions, -1), src.mask().reshape(src.partitions, -1)
    out, om = dst.array().reshape(dst.partitions, -1).copy(), dst.mask().reshape(dst.partitions, -1).copy()
    mask = [int(i) for i in ins.attrs["shuffle_mask"]]
    for base in range(0, max(src.partitions, dst.partitions), len(mask)):
        for i, j in enumerate(mask):
            if j != 255 and base + i < dst.partitions and base + j < src.partitions:
                out[base + i], om[base + i] = a[base + j], m[base + j]
    dst.store(out.reshape(dst.shape), om.reshape(dst.shape) if om.any() else None)


define(Op.NC_STREAM_SHUFFLE, Engine.VECTOR, _shuffle_check, _shuffle_semantics, stream_cost)
