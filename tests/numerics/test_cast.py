"""RNE casts against ml_dtypes and an independent tf32 reference; integers, bool, packing, bad input."""
import ml_dtypes
import numpy as np
import pytest

import trnsim.numerics as tn
from trnsim.numerics.casts import _round_float

ML_TARGETS = [t for t in tn.ALL if t.is_float and t.name not in ("float32", "tfloat32")]
ENGINE_TARGETS = [t for t in ML_TARGETS if t.name != "float8_e8m0fnu"]


def _uint(t):
    return {1: np.uint8, 2: np.uint16, 4: np.uint32}[t.itemsize]


def _codes(t):
    """Every finite non-negative value of t, ascending, as float64 (from ml_dtypes' decoding)."""
    n = 256 if t.itemsize == 1 else 65536
    with np.errstate(invalid="ignore"):
        v = np.arange(n, dtype=_uint(t)).view(t.np).astype(np.float64)
    return np.unique(v[np.isfinite(v) & (v >= 0)])


def _ties(t):
    """Every rounding tie of t (midpoints, including the one above the largest finite value), both signs,
    and the FP32 neighbours on either side of each."""
    v = _codes(t)
    mids = np.append((v[:-1] + v[1:]) / 2, v[-1] + (v[-1] - v[-2]) / 2).astype(np.float32)
    near = np.concatenate([mids, np.nextafter(mids, np.float32(0)), np.nextafter(mids, np.float32(np.inf))])
    return np.concatenate([near, -near])


@pytest.fixture(scope="module")
def values():
    """10^6 random FP32 bit patterns (all exponents, NaN payloads) plus the special values."""
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2**32, 1_000_000, dtype=np.uint64).astype(np.uint32)
    special = np.array([0x0, 0x80000000, 0x1, 0x80000001, 0x7FFFFF, 0x807FFFFF, 0x800000, 0x7F7FFFFF,
                        0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF],
                       np.uint32)
    subnormals = rng.integers(1, 2**23, 10_000, dtype=np.uint32)
    return np.concatenate([bits, special, subnormals, subnormals | np.uint32(0x80000000)]).view(np.float32)


def _same_bits(a, b, t):
    return np.array_equal(np.asarray(a).view(_uint(t)), np.asarray(b).view(_uint(t)))


@pytest.mark.parametrize("t", ML_TARGETS, ids=lambda t: t.name)
def test_rne_cast_is_bit_exact_with_ml_dtypes(t, values):
    """cast(x, t) under RNE equals ml_dtypes' conversion bit for bit, on random values, specials and ties."""
    x = values if t.name == "float8_e8m0fnu" else np.concatenate([values, _ties(t)])
    with np.errstate(all="ignore"):
        ref = x.astype(t.np)
    assert _same_bits(tn.cast(x, t, "rne"), ref, t)


@pytest.mark.parametrize("t", ENGINE_TARGETS, ids=lambda t: t.name)
def test_bit_pattern_engine_rne_is_bit_exact_with_ml_dtypes(t, values):
    """The bit-pattern engine that stochastic rounding uses, run with the RNE increment, equals ml_dtypes:
    so its neighbours, subnormals, carries and overflow codes are right."""
    x = np.concatenate([values, _ties(t)])
    with np.errstate(all="ignore"):
        ref = x.astype(t.np)
    assert _same_bits(_round_float(x, t, "rne", None), ref, t)


def _tf32_reference(x):
    """RNE to 11 significant bits in float64, FP32's exponent range, subnormal quantum 2^-136."""
    with np.errstate(all="ignore"):
        x64 = x.astype(np.float64)
        m, e = np.frexp(x64)
        e = np.maximum(e, -125)  # below 2^-126 the quantum is fixed
        r = np.ldexp(np.round(np.ldexp(x64, 11 - e)), e - 11)  # np.round: half to even
        return r.astype(np.float32)


def test_tfloat32_rne_matches_an_independent_reference(values):
    """tfloat32 rounds away the low 13 mantissa bits to nearest even, overflowing to inf."""
    x = np.concatenate([values, (np.arange(1 << 14, dtype=np.uint32) << 12).view(np.float32)])
    got, ref = tn.cast(x, "tfloat32", "rne"), _tf32_reference(x)
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32), ref[~nan].view(np.uint32))
    assert not (got.view(np.uint32) & 0x1FFF).any()


@pytest.mark.parametrize("src", [tn.bfloat16, tn.float16, tn.float8_e4m3, tn.float8_e5m2, tn.float4_e2m1fn])
def test_narrow_to_narrow_goes_through_fp32_once(src, values):
    """A narrow-to-narrow cast is exact widening then one rounding."""
    with np.errstate(all="ignore"):
        a = values[:100_000].astype(src.np)
        ref = a.astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    assert _same_bits(tn.cast(a, "float8_e4m3fn", "rne"), ref, tn.float8_e4m3fn)


@pytest.mark.parametrize("t", [tn.int8, tn.int16, tn.int32, tn.uint8, tn.uint16, tn.uint32])
def test_float_to_int_rounds_half_even_and_saturates(t):
    """fp32 -> int rounds to nearest even and saturates where numpy would wrap; NaN gives 0."""
    info = np.iinfo(t.np)
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.49, -3.51, 1e10, -1e10, np.inf, -np.inf, np.nan,
                  info.max * 2.0, info.min - 1e6], np.float32)
    want = [0, 2, 2, 0, -2, -2, 3, -4, info.max, info.min, info.max, info.min, 0, info.max, info.min]
    got = tn.cast(x, t)
    assert got.dtype == t.np and got.tolist() == np.clip(want, info.min, info.max).tolist()


def test_int_to_int_and_bool():
    """int -> int saturates; anything -> bool_ is (x != 0)."""
    assert tn.cast(np.array([300, -300, 5], np.int32), "int8").tolist() == [127, -128, 5]
    assert tn.cast(np.array([-1, 70000], np.int32), "uint16").tolist() == [0, 65535]
    assert tn.cast(np.array([0.0, -0.0, 2.0, np.nan], np.float32), "bool_").tolist() == [False, False, True, True]
    assert tn.cast(np.array([True, False]), "bfloat16").astype(np.float32).tolist() == [1.0, 0.0]


def test_int_to_float_rounds_through_fp32():
    """int32 values above 2^24 round to FP32 first, then to the target, as the hardware's conversion does."""
    x = np.array([2**24 + 1, 2**24 + 3, -(2**30) - 1], np.int32)
    ref = x.astype(np.float64).astype(np.float32).astype(ml_dtypes.bfloat16)
    assert _same_bits(tn.cast(x, "bfloat16"), ref, tn.bfloat16)


def test_float64_input_is_loaded_as_float32():
    """Inputs of types the device lacks become FP32 first."""
    x = np.array([1.0 + 2**-30, 1e300, 0.1])
    with np.errstate(over="ignore"):
        assert np.array_equal(tn.cast(x, "float32"), x.astype(np.float32))


@pytest.mark.parametrize("t, box, w", [(tn.float8_e4m3fn_x4, np.uint32, 8), (tn.float8_e5m2_x4, np.uint32, 8),
                                       (tn.float4_e2m1fn_x4, np.uint16, 4)])
def test_pack_puts_element_i_in_field_i(t, box, w):
    """An x4 cast rounds each value to the element type and packs 4 along the last axis, element i in bits
    [i*w, (i+1)*w): fp8 in a 32-bit container, fp4 in a 16-bit one."""
    x = np.random.default_rng(2).standard_normal((3, 8)).astype(np.float32)
    words = tn.cast(x, t, "rne")
    e = x.astype(t.elem.np).view(np.uint8).astype(np.int64).reshape(3, 2, 4)
    assert words.dtype == box and words.shape == (3, 2)
    assert np.array_equal(words, e[..., 0] + e[..., 1] * 2**w + e[..., 2] * 2**(2 * w) + e[..., 3] * 2**(3 * w))
    assert _same_bits(tn.unpack(words, t), x.astype(t.elem.np), t.elem)


def test_packed_container_of_wrong_width_is_named():
    """Packing a last axis not divisible by 4, or unpacking non-32-bit words, raises PackedWidthError."""
    with pytest.raises(tn.PackedWidthError, match=r"last axis \(6\) must be a multiple of 4 \(remainder 2\)"):
        tn.cast(np.ones((2, 6), np.float32), "float8_e4m3fn_x4")
    with pytest.raises(tn.PackedWidthError, match=r"32-bit \(uint32 storage\); got uint16 \(16-bit\)"):
        tn.unpack(np.zeros(4, np.uint16), "float8_e5m2_x4")


def test_bad_names_and_modes_are_named_errors():
    """Unknown dtypes and rounding modes raise named errors listing what is accepted."""
    with pytest.raises(tn.NumericsError, match="rounding mode must be one of rne, stochastic; got 'up'"):
        tn.cast(np.ones(2, np.float32), "bfloat16", rounding="up")
    with pytest.raises(KeyError, match="float8_e4m3fnuz"):
        tn.cast(np.ones(2, np.float32), "float8_e4m3fnuz")


def test_same_type_cast_is_an_exact_copy():
    """Casting to the source type changes no bits (NaN payloads included)."""
    a = np.array([0x7FC1, 0x0001, 0x8000], np.uint16).view(ml_dtypes.bfloat16)
    b = tn.cast(a, "bfloat16")
    assert b is not a and _same_bits(a, b, tn.bfloat16)
