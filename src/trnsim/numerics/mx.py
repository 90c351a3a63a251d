"""OCP Microscaling (MX v1.0): blocks of 32 elements sharing one E8M0 power-of-two scale.

MXFP8 elements are float8_e4m3fn or float8_e5m2, MXFP4 elements float4_e2m1fn. Quantizing a block V:

    X = 2^(floor(log2(max|V|)) - emax_elem)    emax_elem = 8 (e4m3fn), 15 (e5m2), 2 (e2m1)
    P = V / X rounded to the element type, clamped to its largest normal (saturation)

with the scale exponent clamped to E8M0's range [-127, 127]; an all-zero block gets 2^-127 (as the
hardware does); a block holding NaN gets the NaN scale 0xFF, which makes every value of the block NaN
when dequantized, and so does a block holding inf (its amax has no E8M0 exponent). A value is P * X.

Trainium's `nisa.quantize_mx` uses a scale two times larger than the specification's sample algorithm,
keeping one binade of headroom so the largest values round without saturating (docs:
nki/api/generated/nki.isa.quantize_mx); `scale="trainium"` selects that rule.
"""
from __future__ import annotations

import numpy as np

from trnsim.numerics import dtypes as dt
from trnsim.numerics.accumulate import matmul_fp32
from trnsim.numerics.casts import cast, pack, unpack
from trnsim.numerics.errors import BlockShapeError, NumericsError, PackedWidthError

EMAX = {dt.float8_e4m3fn: 8, dt.float8_e5m2: 15, dt.float4_e2m1fn: 2}  # OCP MX v1.0, table of formats
SCALE_RULES = ("ocp", "trainium")
_PACKED = {t.elem: t for t in dt.PACKED}


def _elem(dtype) -> dt.DType:
    t = dt.dtype(dtype)
    t = t.elem if t.is_packed else t
    if t not in EMAX:
        raise NumericsError(f"MX elements must be one of {', '.join(e.name for e in EMAX)} "
                            f"(or their x4 containers); got {t.name}")
    return t


def _check_blocks(n: int, block: int, axis: int, what: str) -> None:
    if block <= 0 or block % 4:
        raise BlockShapeError(f"the MX block must be a positive multiple of 4 (the x4 packing); got {block}")
    if n % block:
        raise BlockShapeError(f"{what}: axis {axis} has length {n}, not a multiple of the MX block {block} "
                              f"(remainder {n % block})")


def quantize_mx(x, dtype, axis: int = -1, block: int = 32, rounding: str | None = None, rng=None,
                scale: str = "ocp") -> tuple[np.ndarray, np.ndarray]:
    """Quantize `x` to MX along `axis`: returns (x4-packed elements in their containers, float8_e8m0fnu scales).

    The packed array has x.shape[axis] / 4 containers along `axis`, the scales x.shape[axis] / block.
    Elements round by `rounding` (None: the active mode). `scale` is 'ocp' or 'trainium' (see module doc).
    """
    t = _elem(dtype)
    if scale not in SCALE_RULES:
        raise NumericsError(f"MX scale rule must be one of {', '.join(SCALE_RULES)}; got {scale!r}")
    v = cast(x, dt.float32)
    ax = axis % v.ndim
    _check_blocks(v.shape[ax], block, axis, "quantize_mx")
    v = np.moveaxis(v, ax, -1)
    blocks = v.reshape(*v.shape[:-1], v.shape[-1] // block, block)
    amax = np.max(np.abs(blocks), axis=-1)
    _, e = np.frexp(amax)  # amax = f * 2^e with f in [0.5, 1): floor(log2(amax)) = e - 1, exactly
    sexp = e - 1 - EMAX[t] + (1 if scale == "trainium" else 0)
    sexp = np.clip(np.where(amax == 0, -127, sexp), -127, 127)
    with np.errstate(invalid="ignore"):
        p = np.ldexp(blocks, -sexp[..., None].astype(np.int32))  # a power-of-two scaling: exact
        p = np.clip(p, -t.max, t.max)  # saturate, as the specification's conversion does; NaN stays NaN
    elems = cast(p.reshape(v.shape), t, rounding, rng)
    bits = np.where(np.isfinite(amax), sexp + 127, 255).astype(np.uint8)
    data = np.moveaxis(pack(elems, _PACKED[t]), -1, ax)
    return data, np.moveaxis(bits.view(dt.float8_e8m0fnu.np), -1, ax)


def dequantize_mx(data, scales, dtype, axis: int = -1, block: int = 32) -> np.ndarray:
    """FP32 values P * X of MX data: `data` as x4 containers or as elements, `scales` as E8M0."""
    t = _elem(dtype)
    d = np.asarray(data)
    ax = axis % d.ndim
    d = np.moveaxis(d, ax, -1)
    box = _PACKED[t].np
    if d.dtype not in (box, t.np):
        raise PackedWidthError(f"MX data of {t.name} comes as {_PACKED[t].name} ({box}) or as {t.name} "
                               f"elements; got {d.dtype}")
    p = (unpack(d, _PACKED[t]) if d.dtype == box else d).astype(np.float32)
    s = np.moveaxis(np.asarray(scales), ax, -1)
    _check_blocks(p.shape[-1], block, axis, "dequantize_mx")
    if s.shape != p.shape[:-1] + (p.shape[-1] // block,):
        raise BlockShapeError(f"dequantize_mx: {p.shape[-1]} elements along axis {axis} take "
                              f"{p.shape[-1] // block} scales of block {block}; got scales of shape "
                              f"{np.asarray(scales).shape} for data of shape {np.asarray(data).shape}")
    sbits = np.repeat(s.view(np.uint8).astype(np.int32), block, axis=-1)
    with np.errstate(over="ignore"):
        out = np.ldexp(p, sbits - 127)
    out[sbits == 255] = np.nan
    return np.moveaxis(out, -1, ax)


def mx_matmul(a, a_scales, b, b_scales, a_dtype, b_dtype, block: int = 32, acc=None) -> np.ndarray:
    """a[M, K] @ b[K, N] on MX operands scaled in blocks along K (a's axis 1, b's axis 0), in FP32.

    Each product of elements is exact and scaled by 2^(sa + sb); products add along K in order in FP32
    (MXFP4 x MXFP8 mixing allowed), as `nc_matmul_mx` does on Trn3. `acc` is PSUM to add into.
    """
    A = dequantize_mx(a, a_scales, a_dtype, axis=1, block=block)
    B = dequantize_mx(b, b_scales, b_dtype, axis=0, block=block)
    if A.shape[1] != B.shape[0]:
        raise NumericsError(f"mx_matmul needs equal K: a has {A.shape[1]} values along K, b {B.shape[0]}")
    return matmul_fp32(A, B, acc)
