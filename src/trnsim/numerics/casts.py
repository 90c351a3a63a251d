"""Casts between the NeuronCore types: round-to-nearest-even or stochastic rounding, on the bit pattern.

Every cast goes through FP32 as the hardware's does (the DMA and the Vector/Scalar engines convert
src -> fp32 -> dst), so a narrow-to-narrow cast is exact widening followed by one rounding.

RNE to an ml_dtypes type is ml_dtypes' own conversion. Stochastic rounding (and RNE to tfloat32) is
done here on the FP32 bits: the significand S of |x| is split at the target's quantum (d low bits);
SR adds d uniform random bits and truncates, so it rounds up with probability (S mod 2^d) / 2^d, the
distance to the lower neighbour over the gap. The same code with the increment 2^(d-1) - 1 + lsb
is RNE, which the tests check against ml_dtypes on every format.
"""
from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from trnsim.numerics import dtypes as dt
from trnsim.numerics.dtypes import DType
from trnsim.numerics.errors import PackedWidthError
from trnsim.numerics.modes import active_stream, check_mode, new_stream, rounding_mode

_CHUNK = 1 << 16  # elements per pass; keeps the engine's temporaries in cache
_BLOCK = 1 << 20  # elements per independently seeded block of random bits (a unit of parallel work)
_THREADS = min(os.cpu_count() or 1, 8)
_U = {8: np.uint8, 16: np.uint16, 32: np.uint32}
# Targets that take stochastic rounding: the runtime's SR applies to FP32 -> BF16/FP16/FP8/TF32 casts
# (and fp4 follows the fp8s). E8M0 is a scale format, always RNE here.
SR_TARGETS = frozenset(t for t in dt.FLOATS if t.name not in ("float32", "float8_e8m0fnu"))


def _stream(rng) -> np.random.Generator:
    if rng is None:
        return active_stream()
    if isinstance(rng, np.random.Generator):
        return rng
    return new_stream(int(rng))


def _random_bits(rng: np.random.Generator, n: int, width: int) -> np.ndarray:
    """n uniform random integers of `width` bits (16 or 32), cut from full-range 64-bit draws."""
    per = 64 // width
    words = rng.integers(0, 2**64 - 1, -(-n // per), dtype=np.uint64, endpoint=True)  # raw 64-bit draws
    return words.view(_U[width])[:n]


def _round_wide(b: np.ndarray, t: DType, mode: str, rng, buf: np.ndarray) -> np.ndarray:
    """Round FP32 bits to a format with FP32's exponent (bf16, tf32): a fixed d = 23 - mant.

    Non-NaN bits plus the increment never carry into the sign bit: inf + inc stays inf once truncated,
    and the largest finite value rounding up carries into the exponent and becomes inf, as it should.
    """
    d = 23 - t.mant
    if mode == "stochastic":
        inc = _random_bits(rng, b.size, 16)
        if d < 16:
            inc &= np.uint16((1 << d) - 1)
    else:
        inc = (b >> np.uint32(d)) & np.uint32(1)
        inc += np.uint32((1 << (d - 1)) - 1)
    out = np.add(b, inc, out=buf[:b.size])
    out >>= np.uint32(d)
    return out


def _round_generic(b: np.ndarray, t: DType, mode: str, rng) -> np.ndarray:
    """Round FP32 bits to the target's bit layout, with the target's subnormals and overflow.

    |x| = S * 2^(E - 150) with S the 24-bit significand; the target's quantum there is 2^(E - 150 + d)
    with d = 23 - mant in its normal range and more below it. n = round(S / 2^d) quanta, and the target
    code is (max(E - emin, 0) << mant) + n: a carry out of n steps into the next binade by itself.
    Where d > 31 the low d - 31 bits of S are dropped first, which moves SR's chance of rounding up by
    less than 2^-31 (such values lie far below the smallest subnormal).
    """
    m = t.mant
    mag = b & np.uint32(0x7FFFFFFF)
    E = (mag >> np.uint32(23)).astype(np.int32)
    S = mag & np.uint32(0x7FFFFF)
    S |= (E != 0).astype(np.uint32) << np.uint32(23)
    Eeff = np.maximum(E, 1)
    emin_b = t.emin + 127  # the target's smallest normal exponent, FP32-biased
    d = (23 - m) + np.maximum(emin_b - Eeff, 0)
    dd = np.minimum(d, 31)
    S >>= np.minimum(d - dd, 24).astype(np.uint32)
    du = dd.astype(np.uint32)
    if mode == "stochastic":
        inc = _random_bits(rng, b.size, 32) >> (np.uint32(32) - du)
    else:
        inc = (np.uint32(1) << (du - np.uint32(1))) - np.uint32(1) + ((S >> du) & np.uint32(1))
    n = (S + inc) >> du
    code = (np.maximum(Eeff - emin_b, 0).astype(np.uint32) << np.uint32(m)) + n
    top = (2**(t.exp + t.mant) - 1) if t.overflow in ("nan", "saturate") else ((2**t.exp - 1) << m)
    np.minimum(code, np.uint32(top), out=code)  # past the largest finite value: inf, NaN or saturate
    code |= (b >> np.uint32(31)) << np.uint32(t.bits - 1)
    return code


def _round_block(flat, out_bits, t: DType, mode: str, rng) -> None:
    """Round one block of FP32 values into `out_bits`, a chunk at a time so temporaries stay in cache."""
    buf = np.empty(min(flat.size, _CHUNK), np.uint32)
    for s in range(0, flat.size, _CHUNK):
        chunk = flat[s:s + _CHUNK]
        b = chunk.view(np.uint32)
        if t.exp == 8:
            r = _round_wide(b, t, mode, rng, buf)
            if t is dt.tfloat32:
                r <<= np.uint32(13)
        else:
            r = _round_generic(b, t, mode, rng)
        if np.isnan(np.max(chunk)):  # max propagates NaN: a cheap test before finding them
            nan = np.isnan(chunk)
            # NaN keeps its sign and becomes the target's quiet NaN, as ml_dtypes converts it (fp4 has none)
            if t is dt.tfloat32:
                r[nan] = (b[nan] & np.uint32(0x80000000)) | np.uint32(0x7FC00000)
            else:
                with np.errstate(invalid="ignore"):
                    r[nan] = chunk[nan].astype(t.np).view(_U[max(8, t.bits)])
        out_bits[s:s + _CHUNK] = r


def _round_float(f: np.ndarray, t: DType, mode: str, rng) -> np.ndarray:
    """FP32 array -> array of target storage, rounded by `mode` on the bit pattern.

    SR draws one 64-bit key from the stream per cast; block i of _BLOCK values takes its random bits from
    a generator seeded by (key, i). The bits so depend only on the seed and the data's length, not on how
    many threads round the blocks (numpy releases the GIL, so blocks run in parallel).
    """
    flat = np.ascontiguousarray(f).reshape(-1)
    out = np.empty(flat.shape, t.np)
    out_bits = out.view(np.uint32 if t is dt.tfloat32 else _U[max(8, t.bits)])
    key = int(rng.integers(0, 2**63)) if mode == "stochastic" else 0
    starts = range(0, flat.size, _BLOCK)

    def block(s: int) -> None:
        g = new_stream((key, s // _BLOCK)) if mode == "stochastic" else None
        _round_block(flat[s:s + _BLOCK], out_bits[s:s + _BLOCK], t, mode, g)

    if len(starts) > 1 and _THREADS > 1:
        list(_pool().map(block, starts))
    else:
        for s in starts:
            block(s)
    return out.reshape(f.shape)


@functools.cache
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(_THREADS, thread_name_prefix="trnsim-cast")


def _to_int(a: np.ndarray, src: DType, t: DType) -> np.ndarray:
    """Round to nearest even and saturate to the integer range; NaN gives 0 (hardware and NKI simulator
    saturate where numpy would wrap)."""
    info = np.iinfo(t.np)
    if src.is_int or src is dt.bool_:
        return np.clip(a.astype(np.int64), info.min, info.max).astype(t.np)
    x = np.rint(a.astype(np.float32).astype(np.float64))
    x = np.nan_to_num(x, nan=0.0, posinf=info.max, neginf=info.min)
    return np.clip(x, info.min, info.max).astype(t.np)


def cast(x, dtype, rounding: str | None = None, rng=None) -> np.ndarray:
    """Cast `x` to `dtype` the way the NeuronCore does, returning an array in the type's storage.

    Args:
      x: array-like. Its numpy dtype names the source type (float32 for tfloat32 data); other numpy
        types (float64, int64) are first converted to float32, as loading them to the device would.
      dtype: target type (DType, nki name or numpy dtype). Floats follow the overflow/NaN rules in
        `trnsim.numerics.dtypes`; integers round to nearest even and saturate; x4 types cast to the
        element type and pack 4 values of the last axis into each uint32.
      rounding: 'rne' or 'stochastic'; None uses the active mode (`rounding(...)`, else the env).
      rng: SR random stream: a numpy Generator or an int seed; None uses the active stream.
    """
    t = dt.dtype(dtype)
    a = np.asarray(x)
    try:
        src = dt.dtype(a.dtype)
    except KeyError:
        with np.errstate(over="ignore"):
            a, src = a.astype(np.float32), dt.float32
    if t.is_packed:
        return pack(cast(a, t.elem, rounding, rng), t)
    if src is t:
        return a.copy()
    if t is dt.bool_:
        return a != 0
    if t.is_int:
        return _to_int(a, src, t)
    f = a.astype(np.float32, copy=False)  # exact for every narrow float; ints round to nearest even (through FP32)
    if t is dt.float32:
        return f
    mode = check_mode(rounding) if rounding is not None else rounding_mode()
    if mode == "stochastic" and t in SR_TARGETS:
        return _round_float(f, t, mode, _stream(rng))
    if t is dt.tfloat32:
        return _round_float(f, t, "rne", None)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow gives inf/NaN/max per type, silently
        return f.astype(t.np)


def pack(elems, dtype) -> np.ndarray:
    """Pack the last axis of element storage into x4 containers: element i of each group in bits
    [i * w, (i + 1) * w) of the container, w the element width (8 for fp8 in a uint32, 4 for fp4 in a uint16:
    nki/api/nki/isa/__init__.py: quantize_mx calls the fp8 x4 types 32-bit; a float4_e2m1fn_x4 is a uint16
    viewed as four fp4 values, as the NKI 0.3 update guide's dma_copy example shows).

    Shifts, not a memory view, set the bit order, so the result is the same on any machine.
    """
    t = dt.dtype(dtype)
    if not t.is_packed:
        raise PackedWidthError(f"pack needs an x4 dtype; got {t.name}")
    e = np.asarray(elems)
    if e.dtype != t.elem.np:
        raise PackedWidthError(f"{t.name} packs {t.elem.name} elements; got an array of {e.dtype}")
    if e.ndim == 0 or e.shape[-1] % 4:
        n = e.shape[-1] if e.ndim else 0
        raise PackedWidthError(f"{t.name} packs 4 elements per container: the last axis ({n}) "
                               f"must be a multiple of 4 (remainder {n % 4})")
    w, c = t.elem.bits, t.np.type
    u = (e.view(np.uint8) & np.uint8((1 << w) - 1)).reshape(*e.shape[:-1], e.shape[-1] // 4, 4).astype(c)
    return u[..., 0] | (u[..., 1] << c(w)) | (u[..., 2] << c(2 * w)) | (u[..., 3] << c(3 * w))


def unpack(words, dtype) -> np.ndarray:
    """The elements of x4 containers, 4 per container along the last axis, in the element's storage."""
    t = dt.dtype(dtype)
    if not t.is_packed:
        raise PackedWidthError(f"unpack needs an x4 dtype; got {t.name}")
    w = np.asarray(words)
    if w.dtype != t.np:
        raise PackedWidthError(f"{t.name} containers are {t.bits}-bit ({t.np} storage); got {w.dtype} "
                               f"({w.dtype.itemsize * 8}-bit)")
    bits, c = t.elem.bits, t.np.type
    b = (w[..., None] >> np.array([0, bits, 2 * bits, 3 * bits], c)) & c((1 << bits) - 1)
    return b.astype(np.uint8).reshape(*w.shape[:-1], w.shape[-1] * 4).view(t.elem.np)
