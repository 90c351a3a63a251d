"""Scalar engine (ACT) instructions: activation and activate2, with the lane accumulator registers.

`dst = op(data * scale + bias)` per element; an optional reduction of the result along the free dims
goes into 128 per-lane 32-bit registers (`reduce_cmd`), read out into `reduce_res` ([P, 1]).
"""
from __future__ import annotations

import numpy as np

from trnsim import specs
from trnsim.core.errors import DTypeError, EngineError, GenerationError, ShapeError
from trnsim.core.isa.alu import activation_fn, alu, op_name, reduce_ufunc
from trnsim.core.isa.opcodes import Engine, Op
from trnsim.core.isa.registry import define, masks, pf, put, same_free, same_partitions, stream_cost
from trnsim.core.isa.vector import apply, check_scalar_operand, scalar_operand
from trnsim.core.tensor import View

REDUCE_CMDS = ("idle", "reset", "reduce", "reset_reduce", "load_reduce")


def reduce_cmd(x) -> str:
    name = getattr(x, "name", x)
    if isinstance(name, int):
        name = REDUCE_CMDS[name]
    return name or "idle"


def accumulate(nc, engine, ins, data: View, values, mask, reduce_op, init=None):
    """Apply `reduce_cmd` to the lane registers of `engine`, then read them out into `reduce_res`."""
    cmd = reduce_cmd(ins.attrs.get("reduce_cmd"))
    res = ins.operands.get("reduce_res")
    if res is not None and cmd == "idle":
        cmd = "reset_reduce"  # a read-out without a command reduces this instruction alone
    if cmd == "idle" and res is None:
        return
    o = reduce_ufunc(reduce_op or "add")
    lanes = slice(data.region().partition, data.region().partition + data.partitions)
    acc, bad = nc.accumulators[engine], nc.accumulator_poison[engine]
    if cmd in ("reset", "reset_reduce"):
        acc[lanes], bad[lanes] = o.identity, False
    if cmd == "load_reduce":
        acc[lanes], bad[lanes] = scalar_operand(init if init is not None else 0.0, data.partitions).reshape(-1), False
    if cmd in ("reduce", "reset_reduce", "load_reduce"):
        acc[lanes] = o.fn(acc[lanes], o.reduce.reduce(values, axis=1, dtype=np.float32))
        if mask is not None:
            bad[lanes] |= mask.any(axis=1)
    if res is not None:
        put(res, acc[lanes].reshape(res.shape), bad[lanes].reshape(res.shape) if bad[lanes].any() else None)


def reduce_check(ins, data: View, default_op="add"):
    """What `accumulate` needs of an instruction's reduction: a [P, 1] reduce_res and a reduction op the fp32
    lane accumulators can apply (a bitwise one is not emulated)."""
    res = ins.operands.get("reduce_res")
    if res is not None and (res.partitions != data.partitions or res.free_size != 1):
        raise ShapeError(f"{ins.op.value}: reduce_res {list(res.shape)} must be [{data.partitions}, 1]")
    if res is None and reduce_cmd(ins.attrs.get("reduce_cmd")) == "idle":
        return
    if not data.free_size:
        raise ShapeError(f"{ins.op.value}: a reduction of {data.name!r} {list(data.shape)}, which holds no element "
                         f"per partition")
    o = reduce_ufunc(ins.attrs.get("reduce_op") or default_op)
    if o.kind == "bitvec":
        raise DTypeError(f"{ins.op.value}: reduce_op {o.name} is bitwise; the lane accumulators reduce in fp32 "
                         f"here, and a bitwise reduction is not emulated")


def _act_common_check(ins, nc):
    """The shared rules; on the GpSimd engine (NeuronCore-v4 on), without the Scalar engine's accumulator."""
    same_partitions(ins, "dst", "data")
    same_free(ins, "dst", "data")
    if ins.engine is Engine.GPSIMD:
        if not nc.can("gpsimd_activation"):
            raise GenerationError(f"{ins.op.value} on the gpsimd engine needs {specs.having('gpsimd_activation')}; "
                                  f"this core is v{nc.gen} ({nc.spec.target}): run it on the scalar engine")
        if ins.operands.get("reduce_res") is not None or reduce_cmd(ins.attrs.get("reduce_cmd")) != "idle":
            raise EngineError(f"{ins.op.value}: the accumulator (reduce_res, reduce_cmd="
                              f"{reduce_cmd(ins.attrs.get('reduce_cmd'))}) is the scalar engine's only; on the "
                              f"gpsimd engine reduce the result with a separate nisa.tensor_reduce")
    reduce_check(ins, ins.data)


# -- activation ---------------------------------------------------------------------------------------------
def _activation_check(ins, nc):
    _act_common_check(ins, nc)
    p = ins.data.partitions
    activation_fn(ins.attrs.get("op"))
    check_scalar_operand(ins, "scale", p)
    check_scalar_operand(ins, "bias", p)
    bias = ins.attrs.get("bias")
    if bias is not None and not isinstance(bias, View) and not nc.can("activation_immediate_bias"):
        raise GenerationError(f"activation: an immediate bias needs {specs.having('activation_immediate_bias')}; on "
                              f"v{nc.gen} pass a [{p}, 1] tensor")
    b = ins.operands.get("bias")
    if b is not None and b.dtype.name == "tfloat32":
        raise DTypeError("activation bias cannot be tfloat32")
    s = ins.operands.get("scale")
    if s is not None and s.dtype.name != "float32":
        raise DTypeError(f"activation scale must be float32 (an immediate or a [P, 1] tensor); got {s.dtype.name}")
    red = ins.attrs.get("reduce_op")
    if red is not None and op_name(red) != "add" and not nc.can("activation_reduce_any_op"):
        raise GenerationError(f"activation reduces with add only on v{nc.gen}; {op_name(red)} needs "
                              f"{specs.having('activation_reduce_any_op')} (activate2)")


def _activation_semantics(ins, nc):
    data, dst = ins.data, ins.dst
    p = data.partitions
    x = pf(data)
    scale = ins.operands.get("scale", ins.attrs.get("scale", 1.0))
    bias = ins.operands.get("bias", ins.attrs.get("bias"))
    x = x * scalar_operand(1.0 if scale is None else scale, p)
    if bias is not None:
        x = x + scalar_operand(bias, p)
    y = activation_fn(ins.attrs.get("op"), ins.attrs.get("relu_param", 0.0))(x)
    m = masks(y.shape, data, ins.operands.get("scale"), ins.operands.get("bias"))
    put(dst, y.reshape(dst.shape), None if m is None else m.reshape(dst.shape))
    accumulate(nc, Engine.SCALAR, ins, data, y, m, ins.attrs.get("reduce_op"))


def _activation_cost(rec, spec):
    c = stream_cost(rec, spec, inputs=1)
    c.reduce = "reduce_res" in rec.operands
    return c


define(Op.ACTIVATION, (Engine.SCALAR, Engine.GPSIMD), _activation_check, _activation_semantics, _activation_cost,
       writes=("dst", "reduce_res"), pure=True)


# -- activate2 (v4): op((data op0 imm0) op1 imm1) ----------------------------------------------------------------
_PAIRS = {("multiply", "add"), ("multiply", "subtract"), ("multiply", "bypass"), ("add", "bypass"),
          ("subtract", "bypass"), ("bypass", "bypass")}


def _activate2_check(ins, nc):
    _act_common_check(ins, nc)
    activation_fn(ins.attrs.get("op"))
    pair = (alu(ins.attrs.get("op0")).name, alu(ins.attrs.get("op1")).name)
    if pair not in _PAIRS:
        raise ShapeError(f"activate2: (op0, op1) = {pair} is not one of {sorted(_PAIRS)}")
    for k in ("imm0", "imm1"):
        check_scalar_operand(ins, k, ins.data.partitions)


def _activate2_semantics(ins, nc):
    data, dst = ins.data, ins.dst
    p = data.partitions
    x = pf(data)
    for op, imm, rev in (("op0", "imm0", "reverse0"), ("op1", "imm1", "reverse1")):
        if alu(ins.attrs.get(op)).name != "bypass":
            x = apply(ins.attrs.get(op), x, scalar_operand(ins.operands.get(imm, ins.attrs.get(imm, 0.0)), p),
                      reverse=ins.attrs.get(rev, False))
    y = activation_fn(ins.attrs.get("op"), ins.attrs.get("relu_param", 0.0))(x)
    m = masks(y.shape, data, ins.operands.get("imm0"), ins.operands.get("imm1"))
    put(dst, y.reshape(dst.shape), None if m is None else m.reshape(dst.shape))
    accumulate(nc, Engine.SCALAR, ins, data, y, m, ins.attrs.get("reduce_op"))


define(Op.ACTIVATE2, (Engine.SCALAR, Engine.GPSIMD), _activate2_check, _activate2_semantics, _activation_cost,
       writes=("dst", "reduce_res"), needs="activate2")
