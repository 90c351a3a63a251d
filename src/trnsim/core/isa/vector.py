"""Vector (and GpSimd) elementwise instructions: tensor_tensor, tensor_scalar, scalar_tensor_tensor,
tensor_copy, memset, reciprocal, tensor_reduce. Arithmetic runs in FP32 with free casts on input and
output; bitvec operators work on integer bit patterns; GpSimd does integer arithmetic natively.
"""
from __future__ import annotations

import math

import numpy as np

from trnsim import numerics, specs
from trnsim.core.errors import DTypeError, GenerationError, KernelError, MemorySpaceError, OperandTypeError, ShapeError
from trnsim.core.isa.alu import alu, op_name, reduce_ufunc
from trnsim.core.isa.opcodes import Engine, Op
from trnsim.core.isa.registry import (REGISTRY, activation_copy, define, masks, pf, put, same_free, same_partitions,
                                      stream_cost)
from trnsim.core.memory import Space
from trnsim.core.tensor import View


def scalar_operand(x, p: int) -> np.ndarray:
    """A scalar operand: an immediate, or a [P, 1] tensor giving one value per partition (as FP32 [P, 1])."""
    if isinstance(x, View):
        return pf(x).reshape(p, 1)
    return np.float32(x)


def check_scalar_operand(ins, name, p):
    v = ins.operands.get(name)
    if v is not None and (v.partitions != p or v.free_size != 1):
        raise ShapeError(f"{ins.op.value}: {name} {v.name!r} {list(v.shape)} must be a scalar or a [{p}, 1] tensor")


def _is_int(v: View) -> bool:
    return v.dtype.is_int or v.dtype.kind == "bool"


def _ints(*views):
    return all(_is_int(v) for v in views if isinstance(v, View))


def _int_operand(x, p: int):
    """An operand of integer arithmetic or a bitvec op: a [P, 1] tile, or an immediate a 32-bit lane holds."""
    if isinstance(x, View):
        return x.array().reshape(p, 1).astype(np.int64)
    if not (np.isfinite(float(x)) and -2**31 <= float(x) < 2**32):
        raise OperandTypeError(f"an integer or bitvec operand is a 32-bit integer (-2**31 .. 2**32 - 1); got {x!r}")
    return np.int64(x)


def bitvec_check(ins, ops, *views):
    """A bitvec op (on integer bit patterns) of `ops` needs integer operands; refused by name on float ones (with
    no views: the instruction computes on fp32 values of its own, such as range_select's indices)."""
    for k in ops:
        o = ins.attrs.get(k)
        if o is not None and alu(o).kind == "bitvec" and not (views and _ints(*views)):
            raise DTypeError(f"{ins.op.value}: {k} {alu(o).name} works on integer bit patterns; the operands are "
                             + ", ".join(v.dtype.name for v in views if isinstance(v, View)))


def _whole(x) -> np.ndarray:
    """Integer values held as floats, as int64 (NaN, a never-written element's, as 0)."""
    return np.clip(np.nan_to_num(np.asarray(x, np.float64)), -2.0**62, 2.0**62).astype(np.int64)


def apply(op, a, b, *, integer=False, reverse=False):
    """One ALU stage; `reverse` swaps the operands (operand op data)."""
    o = alu(op)
    if reverse:
        a, b = b, a
    if o.kind == "bitvec" and (np.asarray(a).dtype.kind == "f" or np.asarray(b).dtype.kind == "f"):
        # integer values a scan or a reduction carries as fp32 (its operands are integer tiles): their bits
        return o.fn(_whole(a), _whole(b)).astype(np.float32)
    if o.kind == "bitvec" or integer:
        return o.fn(a, b)
    out = np.asarray(o.fn(a, b), dtype=np.float32)
    if o.kind == "unary":  # of one input: as wide as both, as a binary op's result is
        out = np.broadcast_to(out, np.broadcast_shapes(np.shape(a), np.shape(b)))
    return out


# -- tensor_tensor ------------------------------------------------------------------------------------------
def _tensor_tensor_pick(operands, attrs, nc):
    ints = all(_is_int(v) for v in operands.values())
    if op_name(attrs.get("op")) == "power" or (ints and alu(attrs.get("op")).kind != "bitvec"
                                                 and any(v.dtype.bits == 32 for v in operands.values())):
        return Engine.GPSIMD
    return None


def _tensor_tensor_check(ins, nc):
    same_partitions(ins, "dst", "data1", "data2")
    same_free(ins, "dst", "data1", "data2")
    if ins.data1.space is Space.PSUM and ins.data2.space is Space.PSUM:
        raise KernelError(f"tensor_tensor: data1 {ins.data1.name!r} and data2 {ins.data2.name!r} cannot both be in PSUM")
    o = alu(ins.attrs.get("op"))
    if o.kind == "bitvec" and not _ints(ins.data1, ins.data2, ins.dst):
        raise DTypeError(f"tensor_tensor: bitvec op {o.name} needs integer operands; got {ins.data1.dtype.name}, "
                         f"{ins.data2.dtype.name} -> {ins.dst.dtype.name}")


def _tensor_tensor_semantics(ins, nc):
    d1, d2, dst = ins.data1, ins.data2, ins.dst
    o = alu(ins.attrs.get("op"))
    p = d1.partitions
    if o.kind == "bitvec":  # on the bit patterns, at data1's width
        a = d1.array().reshape(p, -1)
        out = o.fn(a, d2.array().reshape(p, -1).astype(a.dtype))
    elif ins.engine is Engine.GPSIMD and _ints(d1, d2, dst):  # GpSimd integer arithmetic is native
        out = o.fn(d1.array().reshape(p, -1).astype(np.int64), d2.array().reshape(p, -1).astype(np.int64))
    else:
        out = apply(o.name, pf(d1), pf(d2))
    put(dst, out.reshape(dst.shape), _mask_for(out.shape, dst, d1, d2))


def _mask_for(shape, dst, *views):
    m = masks(shape, *views)
    return None if m is None else m.reshape(dst.shape)


_TT_ONE_PASS_OPS = ("add", "multiply", "subtract")


def _tensor_tensor_cost(rec, spec):
    """2N cycles: both tensors stream; N with one input in PSUM (its own read interface), and N on VectorE when
    both inputs are in SBUF with unit stride along the free dim, every operand is BF16 and the op is add,
    multiply or subtract (the nki.isa tensor_tensor cost note). v3+'s perf mode doubles the throughput on top
    of that, "compared to NeuronCore-v2" (trainium2_arch.rst; core/timing/rules.py)."""
    ops = rec.operands
    d1, d2 = ops["data1"], ops["data2"]
    one_pass = (rec.engine is Engine.VECTOR and d1.space == d2.space == "sbuf"
                and all(r.dtype == "bfloat16" for r in ops.values()) and op_name(rec.attrs.get("op")) in _TT_ONE_PASS_OPS
                and _unit_stride(d1) and _unit_stride(d2))
    return stream_cost(rec, spec, inputs=2, per_memory=True, factor=0.5 if one_pass else 1.0, vector_mode="two_tensor")


def _unit_stride(r) -> bool:
    """Whether a region's elements are adjacent along its innermost free dim (its contiguous runs hold a row)."""
    return r.contiguous >= r.shape[-1] * numerics.dtype(r.dtype).itemsize


define(Op.TENSOR_TENSOR, (Engine.VECTOR, Engine.GPSIMD), _tensor_tensor_check, _tensor_tensor_semantics,
       _tensor_tensor_cost, pick=_tensor_tensor_pick,
       pure=True)


# -- tensor_scalar: (data op0 operand0) op1 operand1 ----------------------------------------------------------
def _tensor_scalar_check(ins, nc):
    same_partitions(ins, "dst", "data")
    same_free(ins, "dst", "data")
    p = ins.data.partitions
    check_scalar_operand(ins, "operand0", p)
    check_scalar_operand(ins, "operand1", p)
    ops = [alu(ins.attrs.get("op0")), alu(ins.attrs.get("op1"))]
    kinds = {o.kind for o in ops if o.name != "bypass"}
    if len(kinds - {"unary"}) > 1 or ("bitvec" in kinds and "unary" in kinds):  # a unary op computes on fp32 values
        raise DTypeError(f"tensor_scalar: op0 {ops[0].name} and op1 {ops[1].name} must both be arithmetic or both bitvec")
    bitvec_check(ins, ("op0", "op1"), ins.data)
    if ins.engine is Engine.SCALAR:
        allowed = nc.can("scalar_tensor_scalar")  # false, true, or the (op0, op1) pairs it takes
        if not allowed:
            raise GenerationError(f"tensor_scalar on the scalar engine needs {specs.having('scalar_tensor_scalar')}; "
                                  f"this core is v{nc.gen}")
        pair = (ops[0].name, ops[1].name)
        if allowed is not True and list(pair) not in [list(x) for x in allowed]:
            raise KernelError(f"tensor_scalar on the v{nc.gen} scalar engine supports "
                              f"{', '.join(str(tuple(x)).replace('bypass', 'None') for x in allowed)}; got {pair}")


def _tensor_scalar_semantics(ins, nc):
    data, dst = ins.data, ins.dst
    p = data.partitions
    ops = [alu(ins.attrs.get("op0")), alu(ins.attrs.get("op1"))]
    bitvec = any(o.kind == "bitvec" for o in ops)
    if bitvec:
        x = data.array().reshape(p, -1)
        for o, key, rev in ((ops[0], "operand0", "reverse0"), (ops[1], "operand1", "reverse1")):
            if o.name != "bypass":
                x = apply(o.name, x, _int_operand(ins.operands.get(key, ins.attrs.get(key)), p).astype(x.dtype),
                          integer=True, reverse=ins.attrs.get(rev, False))
    else:
        x = pf(data)
        for o, key, rev in ((ops[0], "operand0", "reverse0"), (ops[1], "operand1", "reverse1")):
            if o.name != "bypass":
                x = apply(o.name, x, scalar_operand(ins.operands.get(key, ins.attrs.get(key)), p),
                          reverse=ins.attrs.get(rev, False))
    put(dst, x.reshape(dst.shape), _mask_for(x.shape, dst, data, ins.operands.get("operand0"), ins.operands.get("operand1")))


define(Op.TENSOR_SCALAR, (Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD), _tensor_scalar_check, _tensor_scalar_semantics,
       lambda rec, spec: stream_cost(rec, spec, vector_mode="copy"), pure=True)


# -- scalar_tensor_tensor: (data op0 operand0) op1 operand1-tile ------------------------------------------------
def _stt_check(ins, nc):
    if "operand1" not in ins.operands:
        v = ins.attrs.get("operand1")
        raise OperandTypeError(f"scalar_tensor_tensor operand 'operand1' is a tile (the tensor of the second "
                               f"stage); got {type(v).__name__} {str(v)[:40]!r}")
    same_partitions(ins, "dst", "data", "operand1")
    same_free(ins, "dst", "data", "operand1")
    check_scalar_operand(ins, "operand0", ins.data.partitions)


def _stt_semantics(ins, nc):
    data, dst = ins.data, ins.dst
    p = data.partitions
    x = apply(ins.attrs["op0"], pf(data), scalar_operand(ins.operands.get("operand0", ins.attrs.get("operand0")), p),
              reverse=ins.attrs.get("reverse0", False))
    x = apply(ins.attrs["op1"], x, pf(ins.operand1), reverse=ins.attrs.get("reverse1", False))
    put(dst, x.reshape(dst.shape), _mask_for(x.shape, dst, data, ins.operands.get("operand0"), ins.operand1))


def _stt_cost(rec, spec):
    """2N cycles: both tensors stream; N when both are BF16, op0 is subtract, op1 multiply and N is even (reference
    1.12, from the nki.isa cost notes: the fused softmax-backward step streams them side by side)."""
    data, t1 = rec.operands["data"], rec.operands["operand1"]
    fused = (data.dtype == t1.dtype == "bfloat16" and op_name(rec.attrs.get("op0")) == "subtract"
             and op_name(rec.attrs.get("op1")) == "multiply" and math.prod(data.shape[1:]) % 2 == 0)
    return stream_cost(rec, spec, inputs=1 if fused else 2)


define(Op.SCALAR_TENSOR_TENSOR, (Engine.VECTOR, Engine.GPSIMD), _stt_check, _stt_semantics, _stt_cost, pure=True)


# -- tensor_copy -----------------------------------------------------------------------------------------------
def _tensor_copy_check(ins, nc):
    same_partitions(ins, "dst", "src")
    same_free(ins, "dst", "src")
    if ins.engine is Engine.SCALAR and not nc.can("scalar_tensor_copy"):
        raise GenerationError(f"tensor_copy on the scalar engine is not supported on {nc.spec.name}; "
                              "use activation(op=copy)")


def _tensor_copy_semantics(ins, nc):
    """Bit-exact between equal dtypes; between different ones through FP32 on every engine, integers included
    (nki/api/nki/isa/__init__.py: tensor_copy; docs/numerics.md, "Integer conversions per path")."""
    src, dst = ins.src, ins.dst
    if nc.builder.copy(nc, dst, src):
        return  # values owed to src, now owed to dst (core/builder.py)
    m = src.mask() if src.poisoned() else None
    if src.dtype == dst.dtype:
        values = src.array()
    else:
        values = numerics.cast(src.array().astype(np.float32), dst.dtype)
    dst.store(np.asarray(values).reshape(dst.shape), m.reshape(dst.shape) if m is not None and m.any() else None)


def _tensor_copy_cost(rec, spec):
    """A stream in the Vector engine's copy mode; a copy the compiler put on NeuronCore-v2's Scalar engine is
    the activation(op=copy) it emits there, and costs as one (registry.activation_copy)."""
    if activation_copy(rec.op, rec.engine, spec):
        return REGISTRY[Op.ACTIVATION].cost(rec, spec)
    return stream_cost(rec, spec, vector_mode="copy")


define(Op.TENSOR_COPY, (Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD), _tensor_copy_check, _tensor_copy_semantics,
       _tensor_copy_cost, pure=True)


# -- tensor_copy_predicated ---------------------------------------------------------------------------------------
# Docs: nki/api/generated/nki.isa.tensor_copy_predicated.html (v2.33): dst = src where the predicate is non-zero
# (zero with reverse_pred), dst unchanged elsewhere; src a tensor or a Python number.
_PREDICATES = ("uint8", "uint16", "uint32", "bool_")  # bool: one byte of 0 or 1, read as uint8


def _copy_predicated_check(ins, nc):
    dst, pred, src = ins.dst, ins.predicate, ins.operands.get("src")
    same_partitions(ins, "dst", "src", "predicate")
    same_free(ins, "dst", "src", "predicate")
    if pred.dtype.name not in _PREDICATES:
        raise DTypeError(f"tensor_copy_predicated: predicate {pred.name!r} is {pred.dtype.name}; it must be "
                         f"{', '.join(_PREDICATES)}")
    if max(v.ndim for v in ins.operands.values()) > 4:
        raise ShapeError("tensor_copy_predicated: dst, src and predicate take at most 3 free dims")
    if src is None:
        value = ins.attrs.get("src")
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise DTypeError(f"tensor_copy_predicated: src must be a tensor or a Python int or float; got {value!r}")
        floating = isinstance(value, (float, np.floating))
        if floating != dst.dtype.is_float:
            raise DTypeError(f"tensor_copy_predicated: {'a float' if floating else 'an integer'} src {value!r} needs "
                             f"{'a float' if floating else 'an integer'} dst; {dst.name!r} is {dst.dtype.name}")
        return
    if src.dtype is not dst.dtype:
        raise DTypeError(f"tensor_copy_predicated: src {src.dtype.name} and dst {dst.dtype.name} must share a dtype")
    if src.space is Space.PSUM and pred.space is Space.PSUM:
        raise MemorySpaceError(f"tensor_copy_predicated: src {src.name!r} and predicate {pred.name!r} are both in "
                               f"PSUM; at most one of them may be")
    if ins.attrs.get("reverse_pred"):
        raise ShapeError("tensor_copy_predicated: reverse_pred needs a scalar src (a Python number)")


def _copy_predicated_semantics(ins, nc):
    dst, pred, src = ins.dst, ins.predicate, ins.operands.get("src")
    take = pred.array().reshape(dst.shape) != 0
    if ins.attrs.get("reverse_pred"):
        take = ~take
    if src is None:  # the number is materialised in dst's dtype
        value = ins.attrs["src"]
        values = (numerics.cast(np.full(dst.shape, value, np.float32), dst.dtype) if dst.dtype.is_float
                  else np.full(dst.shape, value).astype(dst.dtype.np))
        src_mask = False
    else:
        values = src.array().reshape(dst.shape)
        src_mask = src.mask().reshape(dst.shape) if src.poisoned() else False
    mask = np.where(take, src_mask, dst.mask())
    if pred.poisoned():  # a never-written predicate decides every element it covers
        mask = mask | pred.mask().reshape(dst.shape)
    dst.store(np.where(take, values, dst.array()), mask if mask.any() else None)


# N cycles when src and predicate lie in different memories (SBUF and PSUM each feed a stream), 2N when both
# are in SBUF (reference 1.12, OLD-ISA)
define(Op.TENSOR_COPY_PREDICATED, Engine.VECTOR, _copy_predicated_check, _copy_predicated_semantics,
       lambda rec, spec: stream_cost(rec, spec, inputs=1 + ("src" in rec.operands), per_memory=True))


# -- memset ------------------------------------------------------------------------------------------------------
def _memset_check(ins, nc):
    value, dst = ins.attrs.get("value", 0), ins.dst
    if dst.dtype.is_packed and value != 0:
        raise DTypeError(f"memset of packed {dst.dtype.name} {dst.name!r} accepts only 0; got {value}")
    if dst.dtype.is_int and not (np.isfinite(float(value)) and float(value) == int(float(value))):
        raise DTypeError(f"memset value {value} does not match the integer dtype {dst.dtype.name} of {dst.name!r}")
    if dst.dtype.is_int and not dst.dtype.is_packed:
        info = np.iinfo(dst.dtype.np)
        if not info.min <= int(float(value)) <= info.max:
            raise DTypeError(f"memset value {value} is outside the range of {dst.dtype.name} ({info.min}..{info.max}) "
                             f"of {dst.name!r}")


def _memset_semantics(ins, nc):
    dst, value = ins.dst, ins.attrs.get("value", 0)
    if dst.dtype.is_packed or dst.dtype.is_int:
        dst.store(np.full(dst.shape, int(value), dst.dtype.np))
    else:
        put(dst, np.full(dst.shape, value, np.float32))


def _memset_cost(rec, spec):
    """N cycles; N/2 for zero into a BF16/FP16 tile on VectorE (reference 1.12, OLD-ISA)."""
    half = (rec.engine is Engine.VECTOR and rec.attrs.get("value", 0) == 0
            and rec.operands["dst"].dtype in ("bfloat16", "float16"))
    return stream_cost(rec, spec, inputs=0, factor=0.5 if half else 1.0)


define(Op.MEMSET, (Engine.VECTOR, Engine.GPSIMD, Engine.SCALAR), _memset_check, _memset_semantics, _memset_cost,
       pure=True)


# -- reciprocal (Vector, FP32 divide: more precise than ScalarE's approximation) -----------------------------------
def _reciprocal_check(ins, nc):
    same_partitions(ins, "dst", "data")
    same_free(ins, "dst", "data")


def _reciprocal_semantics(ins, nc):
    x = pf(ins.data)
    with np.errstate(all="ignore"):
        out = np.float32(1.0) / x
    put(ins.dst, out.reshape(ins.dst.shape), _mask_for(x.shape, ins.dst, ins.data))


define(Op.RECIPROCAL, Engine.VECTOR, _reciprocal_check, _reciprocal_semantics,
       lambda rec, spec: stream_cost(rec, spec, factor=spec.cycles["reciprocal_per_element"]), pure=True)


# -- tensor_reduce: reduce trailing free axes ---------------------------------------------------------------------
def reduce_axes(ins, data: View):
    axis = ins.attrs.get("axis")
    axis = axis if isinstance(axis, (tuple, list)) else (axis,)
    if not all(hasattr(type(a), "__index__") and not isinstance(a, bool) for a in axis):
        raise OperandTypeError(f"{ins.op.value}: axis is an int or a tuple of ints; got {ins.attrs.get('axis')!r}")
    axes = tuple(sorted(a % data.ndim for a in axis))
    if 0 in axes and data.on_chip:
        raise ShapeError(f"{ins.op.value}: cannot reduce the partition dim (axis 0); use tensor_partition_reduce")
    if axes != tuple(range(data.ndim - len(axes), data.ndim)):
        raise ShapeError(f"{ins.op.value}: axis {axes} must be the trailing free axes of the {data.ndim}-d {data.name!r}")
    return axes


def _tensor_reduce_check(ins, nc):
    data, dst = ins.data, ins.dst
    axes = reduce_axes(ins, data)
    reduce_ufunc(ins.attrs.get("op"))
    kept = [n for d, n in enumerate(data.shape) if d not in axes]
    if not all(data.shape[a] for a in axes):
        raise ShapeError(f"tensor_reduce: axes {list(axes)} of {data.name!r} {list(data.shape)} hold no element to "
                         f"reduce")
    if dst.size != int(np.prod(kept)):
        raise ShapeError(f"tensor_reduce: dst {list(dst.shape)} must hold the reduced shape {kept} of {list(data.shape)}")


def _tensor_reduce_semantics(ins, nc):
    data, dst = ins.data, ins.dst
    axes = reduce_axes(ins, data)
    o = reduce_ufunc(ins.attrs.get("op"))
    if o.kind == "bitvec":
        out = o.reduce.reduce(data.array().astype(np.int64), axis=axes)
    else:
        out = o.reduce.reduce(data.array().astype(np.float32), axis=axes, dtype=np.float32)
        if ins.attrs.get("negate"):
            out = -out
    m = data.mask()
    put(dst, np.asarray(out).reshape(dst.shape), m.any(axis=axes).reshape(dst.shape) if m.any() else None)


def _tensor_reduce_cost(rec, spec):
    """N cycles; N/2 on VectorE when data and dst are BF16 and the op is add or max (reference 1.12, OLD-ISA)."""
    half = (rec.engine is Engine.VECTOR and all(r.dtype == "bfloat16" for r in rec.operands.values())
            and op_name(rec.attrs.get("op")) in ("add", "max", "maximum"))
    return stream_cost(rec, spec, factor=0.5 if half else 1.0)


define(Op.TENSOR_REDUCE, (Engine.VECTOR, Engine.GPSIMD), _tensor_reduce_check, _tensor_reduce_semantics,
       _tensor_reduce_cost, pure=True)
