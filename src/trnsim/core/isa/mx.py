"""Microscaling (MX, v4): quantize_mx on the Vector engine and nc_matmul_mx on the Tensor engine.

Layout shared by both: an x4 tensor [P, F] packs 4 values per container (uint32 fp8, uint16 fp4); for a matmul operand the 4 values
of partition p are K indices 4p..4p+3, so K = 4 x partitions (up to 512). A scale group is 32 values:
8 partitions x one container (4 values). Group g = p // 8 keeps its E8M0 scale in partition
32 * (g // 4) + g % 4 of the scale tensor, i.e. 4 partitions per 32-partition quadrant.
"""
from __future__ import annotations

import numpy as np

from trnsim import numerics
from trnsim.core.errors import DTypeError, FreeSizeError, ShapeError
from trnsim.core.isa.opcodes import Engine, Op
from trnsim.core.isa.registry import define, stream_cost
from trnsim.core.isa.psum import open_group
from trnsim.core.isa.tensor_engine import _bank_check, _matmul_cost


def scale_rows(nc, partitions: int) -> np.ndarray:
    """The scale-tensor partition of each group of data partitions (catalog limits mx_group_partitions, 8, and
    quadrant_partitions, 32: four groups' scales at the start of each quadrant)."""
    group, quadrant = nc.limit("mx_group_partitions"), nc.limit("quadrant_partitions")
    g, per = np.arange(partitions // group), quadrant // group
    return quadrant * (g // per) + g % per


def _check_scale(nc, what, data, scale):
    if scale.dtype.name not in ("float8_e8m0fnu", "uint8"):
        raise DTypeError(f"{what} scale must be float8_e8m0fnu or uint8; got {scale.dtype.name}")
    need = int(scale_rows(nc, data.partitions)[-1]) + 1 if data.partitions >= nc.limit("mx_group_partitions") else 1
    if scale.partitions < need or scale.free_size != data.free_size:
        raise ShapeError(f"{what} scale {list(scale.shape)} must have >= {need} partitions and {data.free_size} "
                         f"elements per partition for data {list(data.shape)}")


def dequantize(nc, data, scale) -> np.ndarray:
    """[4P, F] FP32 values of an x4 operand (K along rows)."""
    p, f = data.partitions, data.free_size
    elems = numerics.unpack(data.array().reshape(p, f), data.dtype).astype(np.float32).reshape(p, f, 4)
    sbits = scale.array().reshape(scale.partitions, f).view(np.uint8)[scale_rows(nc, p)].astype(np.int32)
    s = np.repeat(sbits, nc.limit("mx_group_partitions"), axis=0)[:, :, None]
    with np.errstate(over="ignore"):
        vals = np.ldexp(elems, s - 127)
    vals[np.broadcast_to(s == 255, vals.shape)] = np.nan
    return vals.transpose(0, 2, 1).reshape(4 * p, f)


# -- nc_matmul_mx ---------------------------------------------------------------------------------------------
def _nc_matmul_mx_check(ins, nc):
    st, mv, dst = ins.stationary, ins.moving, ins.dst
    for name in ("stationary", "moving"):
        v = ins.operands[name]
        if not v.dtype.is_packed:
            raise DTypeError(f"nc_matmul_mx {name} must be an x4 MX dtype (float8_e4m3fn_x4, float8_e5m2_x4, "
                             f"float4_e2m1fn_x4); got {v.dtype.name}")
        if v.partitions % nc.limit("quadrant_partitions"):
            raise ShapeError(f"nc_matmul_mx: {name} partition dim {v.partitions} must be a multiple of "
                             f"{nc.limit('quadrant_partitions')}")
        _check_scale(nc, f"nc_matmul_mx {name}", v, ins.operands[name + "_scale"])
    if st.partitions != mv.partitions:
        raise ShapeError(f"nc_matmul_mx: contraction partitions differ: {st.partitions} vs {mv.partitions}")
    if st.free_size > nc.limit("gemm_stationary_fmax") or st.free_size % 2:
        raise FreeSizeError(f"nc_matmul_mx: stationary free size {st.free_size} must be even and <= "
                            f"{nc.limit('gemm_stationary_fmax')}")
    if mv.free_size > nc.limit("gemm_moving_fmax"):
        raise FreeSizeError(f"nc_matmul_mx: moving free size {mv.free_size} exceeds {nc.limit('gemm_moving_fmax')}")
    if dst.dtype.name not in ("float32", "bfloat16") or dst.partitions != st.free_size or dst.free_size != mv.free_size:
        raise ShapeError(f"nc_matmul_mx: dst {list(dst.shape)} {dst.dtype.name} must be [{st.free_size}, "
                         f"{mv.free_size}] float32 or bfloat16")
    _bank_check(nc, dst, "nc_matmul_mx")
    open_group(ins, nc)


def _nc_matmul_mx_semantics(ins, nc):
    st, mv = ins.stationary, ins.moving
    sm, mm = st.mask().reshape(st.partitions, -1), mv.mask().reshape(mv.partitions, -1)
    nc.builder.matmul_into(ins, nc, dequantize(nc, st, ins.stationary_scale), dequantize(nc, mv, ins.moving_scale),
                sm.any(0) if sm.any() else None, mm.any(0) if mm.any() else None)


define(Op.NC_MATMUL_MX, Engine.TENSOR, _nc_matmul_mx_check, _nc_matmul_mx_semantics,
       lambda rec, spec: _matmul_cost(rec, spec, packing=4), needs="mx")  # four values per element along K


# -- quantize_mx: BF16/FP16 [P, 4F] -> x4 [P, F] + E8M0 scales -----------------------------------------------------
def _quantize_mx_check(ins, nc):
    src, dst = ins.src, ins.dst
    if src.dtype.name not in ("bfloat16", "float16"):
        raise DTypeError(f"quantize_mx reads bfloat16 or float16; src is {src.dtype.name}")
    if dst.dtype.name not in ("float8_e4m3fn_x4", "float8_e5m2_x4"):
        raise DTypeError(f"quantize_mx writes float8_e4m3fn_x4 or float8_e5m2_x4; dst is {dst.dtype.name}")
    q = nc.limit("quadrant_partitions")
    if src.partitions % q or src.partitions != dst.partitions or src.free_size != 4 * dst.free_size:
        raise ShapeError(f"quantize_mx: src {list(src.shape)} must be [P, 4F] with P a multiple of {q} and dst "
                         f"[P, F]; dst is {list(dst.shape)}")
    _check_scale(nc, "quantize_mx dst", dst, ins.dst_scale)


def _quantize_mx_semantics(ins, nc):
    src, dst, scale = ins.src, ins.dst, ins.dst_scale
    p, f, gp = dst.partitions, dst.free_size, nc.limit("mx_group_partitions")
    groups = src.array().reshape(p // gp, gp, f, 4).transpose(0, 2, 1, 3).reshape(p // gp, f, 4 * gp)
    packed, scales = numerics.quantize_mx(groups, dst.dtype, axis=-1, block=4 * gp, scale="trainium")
    m = src.mask().reshape(p // gp, gp, f, 4).any(axis=(1, 3))
    dst.store(packed.reshape(p // gp, f, gp).transpose(0, 2, 1).reshape(dst.shape),
              np.repeat(m, gp, axis=0).reshape(dst.shape) if m.any() else None)
    rows = scale_rows(nc, p)
    full = scale.array().reshape(scale.partitions, f).copy()
    full_mask = scale.mask().reshape(scale.partitions, f).copy()
    full[rows] = scales.reshape(p // gp, f).view(np.uint8).view(full.dtype)
    full_mask[rows] = m
    scale.store(full.reshape(scale.shape), full_mask.reshape(scale.shape) if full_mask.any() else None)


define(Op.QUANTIZE_MX, Engine.VECTOR, _quantize_mx_check, _quantize_mx_semantics, stream_cost,
       writes=("dst", "dst_scale"), needs="mx")
