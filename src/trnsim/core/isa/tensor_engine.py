"""Tensor engine (PE array) instructions: nc_matmul, nc_matmul_mx and nc_transpose (on Tensor or Vector).

`nc_matmul` computes dst[M, N] (+)= stationary[K, M].T @ moving[K, N] with FP32 accumulation in PSUM.
How results land in PSUM (accumulation groups) is in psum.py.
"""
from __future__ import annotations

import math

import numpy as np

from trnsim import numerics, specs
from trnsim.core.errors import DTypeError, FreeSizeError, GenerationError, PSUMBankError, ShapeError
from trnsim.core.isa.opcodes import Engine, Op
from trnsim.core.isa.psum import open_group, pe_matmul
from trnsim.core.isa.registry import define, stream_cost
from trnsim.core.isa.work import PE
from trnsim.core.memory import Space

_WIDE = {"float32", "tfloat32"}


def _matmul_cost(rec, spec, packing: int = 1) -> PE:
    """stationary [K, M] against moving [K, N]; `packing` values per element along K (MX: 4). FP8 double row
    reads two K rows per partition in the same time (stationary [K, 2, M], moving [K, 2, N]). FP32 data runs
    at the FP32 rate, a transpose-mode one at the transpose rate (the catalog's, core/timing/rules.py)."""
    st, mv = rec.operands["stationary"], rec.operands["moving"]
    m, n = math.prod(st.shape[1:]), math.prod(mv.shape[1:])
    if rec.attrs.get("perf_mode") == "double_row":
        packing, m, n = 2 * packing, m // 2, n // 2
    transpose = bool(rec.attrs.get("is_transpose"))
    perf = ("fp32_transpose" if transpose else "fp32") if mv.dtype == "float32" else None
    return PE("matmul", st.partitions, m, n, packing, perf, model=not transpose)


def _bank_check(nc, dst, what):
    r = dst.region()
    bank = nc.bank_bytes
    lo, hi = r.byte_lo, r.byte_hi - 1
    if lo // bank != hi // bank:
        if not nc.can("matmul_multibank_output"):
            raise PSUMBankError(f"{what}: output {dst.name!r} spans PSUM bytes {lo}..{hi}, crossing a {bank} B bank; "
                                f"a matmul output must fit one bank on v{nc.gen}")
        if lo % bank:
            raise PSUMBankError(f"{what}: a multi-bank output must start on a bank boundary; {dst.name!r} starts at byte {lo}")


def _tile_check(nc, ins, k, m):
    pos, size = tuple(ins.attrs.get("tile_position") or ()), tuple(ins.attrs.get("tile_size") or ())
    if len(pos) != 2 or len(size) != 2:
        raise ShapeError(f"nc_matmul: tile_position {pos} and tile_size {size} must both be (row, column) pairs")
    pe = nc.spec.pe_rows  # the array splits in 2 (v2+) or 4 (v3+) along rows and columns
    sizes = tuple(sorted(pe // s for s in nc.can("pe_tile_splits")))
    for what, p, s in (("row", pos[0], size[0]), ("column", pos[1], size[1])):
        if s not in sizes or p % s or p + s > pe:
            raise ShapeError(f"nc_matmul: {what} tile size {s} at {p}: sizes {sizes} on v{nc.gen}, start a multiple of the size")
    if k > size[0] or m > size[1]:
        raise FreeSizeError(f"nc_matmul: K={k} and M={m} must fit the PE tile of {size[0]} rows x {size[1]} columns")
    if ins.attrs.get("perf_mode") == "double_row" and size[1] != nc.spec.pe_cols:
        raise ShapeError("nc_matmul: double_row cannot be combined with column tiling")


def _nc_matmul_check(ins, nc):
    st, mv, dst, attrs = ins.stationary, ins.moving, ins.dst, ins.attrs
    perf = attrs.get("perf_mode")
    perf = attrs["perf_mode"] = perf if type(perf) is str else str(getattr(perf, "name", perf) or "none")
    lim, k = nc.spec.limits, st.partitions
    if k != mv.partitions:
        raise ShapeError(f"nc_matmul: contraction dims differ: stationary {st.name!r} K={k}, moving {mv.name!r} K={mv.partitions}")
    if perf == "double_row":
        fp8 = set(nc.can("double_row_dtypes"))
        if not fp8:
            raise GenerationError(f"nc_matmul perf_mode=double_row needs {specs.having('double_row_dtypes')}; this "
                                  f"core is v{nc.gen}")
        if st.dtype.name not in fp8 or mv.dtype.name not in fp8:
            raise DTypeError(f"nc_matmul double_row needs FP8 inputs ({', '.join(sorted(fp8))}); got stationary "
                             f"{st.dtype.name}, moving {mv.dtype.name}")
        if st.ndim != 3 or mv.ndim != 3 or st.shape[1] != 2 or mv.shape[1] != 2:
            raise ShapeError(f"nc_matmul double_row takes stationary [K, 2, M] and moving [K, 2, N]; got "
                             f"{list(st.shape)} and {list(mv.shape)}")
        m, n = st.shape[2], mv.shape[2]
    else:
        m, n = st.free_size, mv.free_size
    if not m or not n:
        raise ShapeError(f"nc_matmul: stationary {list(st.shape)} and moving {list(mv.shape)} must each hold an "
                         f"element per partition (M={m}, N={n})")
    # nki/api/nki/isa/__init__.py: nc_matmul: on v2 is_transpose only marks the instruction as a transpose for
    # profiling; it stays a plain matmul (FP32 PSUM result, not bit-accurate with NaN/Inf).
    if attrs.get("is_transpose") and nc.can("matmul_transpose_mode"):
        if dst.dtype is not st.dtype:
            raise DTypeError(f"nc_matmul is_transpose writes the input dtype {st.dtype.name}; dst is {dst.dtype.name}")
        if dst.partitions != m or dst.free_size != k:
            raise ShapeError(f"nc_matmul is_transpose: dst {list(dst.shape)} must be [{m}, {k}]")
        return
    if m > lim["gemm_stationary_fmax"]:
        raise FreeSizeError(f"nc_matmul: stationary free size M={m} exceeds gemm_stationary_fmax {lim['gemm_stationary_fmax']}")
    out = dst.dtype.name
    nmax = lim["gemm_moving_fmax"] if not nc.can("matmul_multibank_output") else \
        lim["gemm_moving_fmax_bf16_multibank" if out == "bfloat16" else "gemm_moving_fmax_fp32_multibank"]
    if n > nmax:
        raise FreeSizeError(f"nc_matmul: moving free size N={n} exceeds {nmax} on v{nc.gen} (one PSUM bank of "
                            f"{lim['psum_bank_fmax']} FP32 on v2/v3)")
    if (st.dtype.name in _WIDE) != (mv.dtype.name in _WIDE):
        raise DTypeError(f"nc_matmul: fp32/tf32 inputs pair only with fp32/tf32; got stationary {st.dtype.name}, moving {mv.dtype.name}")
    outs = nc.can("matmul_dst_dtypes")
    if out not in outs:
        raise DTypeError(f"nc_matmul dst dtype must be {' or '.join(outs)} on v{nc.gen}; got {out}")
    if dst.partitions != m or dst.free_size != n:
        raise ShapeError(f"nc_matmul: dst {dst.name!r} {list(dst.shape)} must be [M={m}, N={n}] for stationary "
                         f"{list(st.shape)} and moving {list(mv.shape)}")
    _bank_check(nc, dst, "nc_matmul")
    if attrs.get("tile_position") or attrs.get("tile_size"):
        _tile_check(nc, ins, k, m)


def _nc_matmul_state(ins, nc):
    """A matmul into PSUM opens or extends an accumulation group (a transpose-mode one writes plainly)."""
    if not (ins.attrs.get("is_transpose") and nc.can("matmul_transpose_mode")):
        open_group(ins, nc)


def _nc_matmul_semantics(ins, nc):
    st, mv, dst = ins.stationary, ins.moving, ins.dst
    if ins.attrs.get("is_transpose") and nc.can("matmul_transpose_mode"):  # bit-exact, NaN/Inf safe
        nc.builder.flush(nc)
        a = st.array().reshape(st.partitions, -1)
        m = st.mask().reshape(st.partitions, -1).T if st.poisoned() else None
        dst.store(a.T.reshape(dst.shape), None if m is None else m.reshape(dst.shape))
        return
    # double_row: K = partitions x the leading free dim of 2, so both rows of a partition contract.
    k = st.partitions * (2 if ins.attrs["perf_mode"] == "double_row" else 1)
    am = st.mask().reshape(k, -1).any(axis=0) if st.poisoned() else None
    bm = mv.mask().reshape(k, -1).any(axis=0) if mv.poisoned() else None
    b = nc.builder  # the hook points (core/builder.py)
    a, akey = b.stationary(nc, st, k)
    b.matmul_into(ins, nc, a, b.moving(nc, mv, k), am, bm, akey)


define(Op.NC_MATMUL, Engine.TENSOR, _nc_matmul_check, _nc_matmul_semantics, _matmul_cost, pure=True,
       state=_nc_matmul_state)


# -- nc_transpose: PE (<=128x128, SBUF->PSUM) or Vector (<=32x32) -----------------------------------------
def _nc_transpose_check(ins, nc):
    data, dst = ins.data, ins.dst
    p, f = data.partitions, data.free_size
    cap = nc.limit("pe_transpose_max" if ins.engine is Engine.TENSOR else "vector_transpose_max")
    if p > cap or f > cap:
        raise FreeSizeError(f"nc_transpose on the {ins.engine.value} engine takes at most [{cap}, {cap}]; data "
                            f"{data.name!r} is [{p}, {f}]")
    if dst.partitions != f or dst.free_size != p:
        raise ShapeError(f"nc_transpose: dst {list(dst.shape)} must be [{f}, {p}] for data {list(data.shape)}")
    # v2 has no transpose mode: its PE transpose is a matmul with the identity, which writes FP32 to PSUM as every
    # matmul does (trainium_inferentia2_arch.rst; trainium2_arch.rst, built-in transpose support)
    widened = (ins.engine is Engine.TENSOR and not nc.can("matmul_transpose_mode") and dst.dtype.name == "float32"
               and dst.space is Space.PSUM)
    if dst.dtype != data.dtype and not widened:
        raise DTypeError(f"nc_transpose keeps the dtype: data {data.dtype.name}, dst {dst.dtype.name}")
    if ins.engine is Engine.TENSOR and data.space is not Space.SBUF:
        raise ShapeError(f"nc_transpose on the tensor engine reads SBUF; {data.name!r} is in {data.space.value}")


def _nc_transpose_semantics(ins, nc):
    data, dst = ins.data, ins.dst
    a = data.array().reshape(data.partitions, -1)
    m = data.mask().reshape(data.partitions, -1)
    if ins.engine is Engine.TENSOR and not nc.can("matmul_transpose_mode"):
        # v2: a real matmul with the identity: a NaN or Inf in column f smears over row f of the output.
        out = pe_matmul(a, np.eye(a.shape[0], dtype=np.float32))
        dst.store(numerics.cast(out, dst.dtype).reshape(dst.shape),
                  np.repeat(m.any(0)[:, None], a.shape[0], 1).reshape(dst.shape) if m.any() else None)
        return
    dst.store(a.T.reshape(dst.shape), m.T.reshape(dst.shape) if m.any() else None)


def _transpose_cost(rec, spec):
    """On TensorE a matmul of the data [P, F] as stationary against the identity as moving (N = P), FP32 at the
    transpose rate; on VectorE a stream of the data."""
    if rec.engine is not Engine.TENSOR:
        return stream_cost(rec, spec)
    d = rec.operands["data"]
    p = d.partitions
    return PE("transpose", p, math.prod(d.shape[1:]), p, perf="fp32_transpose" if d.dtype == "float32" else None,
              model=False)


define(Op.NC_TRANSPOSE, (Engine.TENSOR, Engine.VECTOR), _nc_transpose_check, _nc_transpose_semantics, _transpose_cost,
       pure=True)
