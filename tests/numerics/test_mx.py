"""MX quantize/dequantize against a plain reference written here, error bounds, mx_matmul, bad shapes."""
import math

import ml_dtypes
import numpy as np
import pytest

import trnsim.numerics as tn

# element type -> (ml_dtypes type, emax of the element format, largest normal, mantissa bits, emin)
FORMATS = {
    "float8_e4m3fn": (ml_dtypes.float8_e4m3fn, 8, 448.0, 3, -6),
    "float8_e5m2": (ml_dtypes.float8_e5m2, 15, 57344.0, 2, -14),
    "float4_e2m1fn": (ml_dtypes.float4_e2m1fn, 2, 6.0, 1, 0),
}


def reference_quantize(x, name, block=32, headroom=0):
    """The specification's algorithm, one block at a time, in plain float64 and ml_dtypes."""
    ml, emax, vmax, _, _ = FORMATS[name]
    rows = x.reshape(-1, block).astype(np.float64)
    elems, scales = [], []
    for v in rows:
        amax = np.max(np.abs(v))
        if not np.isfinite(amax):
            scales.append(255)
            elems.append(np.zeros(block, ml))
            continue
        e = -127 if amax == 0 else math.floor(math.log2(amax)) - emax + headroom
        e = min(max(e, -127), 127)
        scales.append(e + 127)
        elems.append(np.clip(v / 2.0**e, -vmax, vmax).astype(np.float32).astype(ml))
    return np.array(elems).reshape(x.shape), np.array(scales, np.uint8).reshape(*x.shape[:-1], -1)


def reference_dequantize(elems, scales, block=32):
    s = np.repeat(scales.astype(np.float64), block, axis=-1)
    return np.where(s == 255, np.nan, elems.astype(np.float64) * 2.0 ** (s - 127))


def random_blocks(rng, shape):
    """Normal data with a different magnitude per block, a zero block and tiny values."""
    mag = 2.0 ** rng.integers(-20, 20, (*shape[:-1], shape[-1] // 32)).repeat(32, -1)
    x = (rng.standard_normal(shape) * mag).astype(np.float32)
    x[0, :32] = 0
    x[1, :32] *= np.float32(1e-38)
    return x


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("scale, headroom", [("ocp", 0), ("trainium", 1)])
def test_quantize_matches_the_plain_reference(name, scale, headroom):
    """Packed elements and E8M0 scales equal the specification's algorithm written out in the test."""
    x = random_blocks(np.random.default_rng(0), (64, 256))
    data, scales = tn.quantize_mx(x, name, rounding="rne", scale=scale)
    ref_e, ref_s = reference_quantize(x, name, headroom=headroom)
    assert data.dtype == (np.uint16 if name == "float4_e2m1fn" else np.uint32) and data.shape == (64, 64)
    assert scales.dtype == ml_dtypes.float8_e8m0fnu and scales.shape == (64, 8)
    assert np.array_equal(scales.view(np.uint8), ref_s)
    assert np.array_equal(tn.unpack(data, name + "_x4").view(np.uint8), ref_e.view(np.uint8))
    assert ref_s[0, 0] == 0  # an all-zero block gets 2^-127


@pytest.mark.parametrize("name", FORMATS)
def test_round_trip_stays_within_the_format_bound(name):
    """|dequantize(quantize(x)) - x| <= half an element step at the value's binade, the subnormal half step,
    or the saturation excess, whichever applies."""
    _, emax, vmax, m, emin = FORMATS[name]
    x = random_blocks(np.random.default_rng(1), (32, 512))
    y = tn.dequantize_mx(*tn.quantize_mx(x, name, rounding="rne"), name)
    _, s = reference_quantize(x, name)
    X = 2.0 ** (np.repeat(s.astype(np.float64), 32, -1) - 127)
    a = np.abs(x.astype(np.float64))
    binade = 2.0 ** np.floor(np.log2(np.maximum(a / X, 2.0**emin)))
    bound = np.where(a / X > vmax, a - vmax * X, binade * 2.0 ** -(m + 1) * X)
    assert np.all(np.abs(y - a * np.sign(x)) <= bound * (1 + 1e-12) + 1e-45)
    assert np.array_equal(y, reference_dequantize(reference_quantize(x, name)[0], s))


def test_nan_or_inf_makes_the_block_nan():
    """A block holding NaN or inf gets scale 0xFF; every value of that block dequantizes to NaN."""
    x = np.ones((2, 64), np.float32)
    x[0, 3], x[1, 40] = np.nan, np.inf
    data, s = tn.quantize_mx(x, "float8_e5m2")
    assert s.view(np.uint8).tolist() == [[255, 127 - 15], [127 - 15, 255]]
    y = tn.dequantize_mx(data, s, "float8_e5m2")
    assert np.isnan(y[0, :32]).all() and np.isnan(y[1, 32:]).all() and (y[0, 32:] == 1).all()


def test_quantize_along_another_axis_and_with_sr():
    """axis=0 blocks run down the columns; SR elements are one of the two RNE neighbours."""
    x = np.random.default_rng(2).standard_normal((64, 5)).astype(np.float32)
    d0, s0 = tn.quantize_mx(x, "float8_e4m3fn", axis=0, rounding="rne")
    d1, s1 = tn.quantize_mx(x.T.copy(), "float8_e4m3fn", rounding="rne")
    assert d0.shape == (16, 5) and s0.shape == (2, 5)
    assert np.array_equal(d0, d1.T) and np.array_equal(s0.view(np.uint8), s1.view(np.uint8).T)
    ysr = tn.dequantize_mx(*tn.quantize_mx(x, "float8_e4m3fn", axis=0, rounding="stochastic", rng=1),
                           "float8_e4m3fn", axis=0)
    yrne = tn.dequantize_mx(d0, s0, "float8_e4m3fn", axis=0)
    step = 2.0 ** (np.floor(np.log2(np.abs(x))) - 3)
    assert np.all(np.abs(ysr - x) < step * 1.0001) and not np.array_equal(ysr, yrne)


@pytest.mark.parametrize("a_name, b_name", [("float8_e4m3fn", "float8_e4m3fn"), ("float8_e5m2", "float8_e4m3fn"),
                                            ("float4_e2m1fn", "float8_e5m2"), ("float4_e2m1fn", "float4_e2m1fn")])
def test_mx_matmul_matches_dequantize_then_matmul(a_name, b_name):
    """mx_matmul equals the dequantized operands multiplied with products added in order in FP32, and
    the exact float64 product within the FP32 accumulation bound."""
    rng = np.random.default_rng(3)
    a = random_blocks(rng, (16, 128))
    b = random_blocks(rng, (8, 128)).T.copy()
    (ad, as_), (bd, bs) = tn.quantize_mx(a, a_name), tn.quantize_mx(b, b_name, axis=0)
    got = tn.mx_matmul(ad, as_, bd, bs, a_name, b_name)
    A = reference_dequantize(*reference_quantize(a, a_name))
    B = reference_dequantize(*reference_quantize(b.T, b_name)).T
    seq = np.zeros((16, 8), np.float32)
    for k in range(128):
        seq = (seq + (A[:, k, None] * B[None, k, :]).astype(np.float32)).astype(np.float32)
    assert got.dtype == np.float32 and np.array_equal(got, seq)
    bound = 128 * 2.0**-24 * (np.abs(A) @ np.abs(B))
    assert np.all(np.abs(got - A @ B) <= bound)


def test_bad_mx_shapes_are_named():
    """An axis not divisible by the block, mismatched scales, or a non-MX element type raise with numbers."""
    with pytest.raises(tn.BlockShapeError, match=r"axis -1 has length 40, not a multiple of the MX block 32 "
                                                 r"\(remainder 8\)"):
        tn.quantize_mx(np.ones((2, 40), np.float32), "float8_e4m3fn")
    d, s = tn.quantize_mx(np.ones((2, 64), np.float32), "float8_e4m3fn")
    with pytest.raises(tn.BlockShapeError, match=r"64 elements along axis -1 take 2 scales"):
        tn.dequantize_mx(d, s[:, :1], "float8_e4m3fn")
    with pytest.raises(tn.NumericsError, match="MX elements must be one of .*; got bfloat16"):
        tn.quantize_mx(np.ones((2, 64), np.float32), "bfloat16")
    with pytest.raises(tn.PackedWidthError, match="got uint16"):
        tn.dequantize_mx(np.zeros((2, 16), np.uint16), s, "float8_e4m3fn")
