"""FP32 accumulation helpers: exact narrow products, a fixed summation order, reductions."""
import ml_dtypes
import numpy as np
import pytest

import trnsim.numerics as tn
from trnsim.errors import UnknownNameError


def sequential_fp32(a, b):
    """Written-out reference: for each output, acc = fp32(acc + fp32(a[i,k] * b[k,j])) for k in order."""
    out = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            acc = np.float32(0)
            for k in range(a.shape[1]):
                acc = np.float32(acc + np.float32(np.float64(a[i, k]) * np.float64(b[k, j])))
            out[i, j] = acc
    return out


@pytest.mark.parametrize("storage", [ml_dtypes.bfloat16, np.float16, ml_dtypes.float8_e4m3, ml_dtypes.float8_e5m2])
def test_matmul_products_are_exact_and_summed_in_order(storage):
    """Narrow inputs: products are exact in FP32 and the sum follows k = 0, 1, 2 ... bit for bit."""
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((6, 40)) * 4).astype(storage)
    b = (rng.standard_normal((40, 5)) * 4).astype(storage)
    prod = a.astype(np.float64)[:, :, None] * b.astype(np.float64)[None, :, :]
    assert np.array_equal(prod.astype(np.float32).astype(np.float64), prod)  # exact in FP32
    assert np.array_equal(tn.matmul_fp32(a, b), sequential_fp32(a, b))


def test_matmul_order_is_visible_and_psum_accumulates():
    """[1e8, 1, -1e8, 1] sums to 1 in order (pairwise would give 0), and `acc` is added afterwards."""
    a = np.array([[1e8, 1, -1e8, 1]], np.float32)
    b = np.ones((4, 1), np.float32)
    assert tn.matmul_fp32(a, b)[0, 0] == 1.0
    assert tn.matmul_fp32(a, b, acc=np.full((1, 1), 2.5, np.float32))[0, 0] == 3.5


def test_matmul_shape_mismatch_is_named():
    """Unequal K raises with both shapes."""
    with pytest.raises(tn.NumericsError, match=r"equal K; got \(2, 3\) and \(4, 5\)"):
        tn.matmul_fp32(np.ones((2, 3), np.float32), np.ones((4, 5), np.float32))


def test_reduce_add_is_sequential_fp32():
    """reduce_fp32('add') is a left-to-right FP32 sum, not numpy's pairwise one."""
    x = np.random.default_rng(1).standard_normal((3, 5000)).astype(ml_dtypes.bfloat16)
    want = np.zeros(3, np.float32)
    for k in range(x.shape[1]):
        want = (want + x[:, k].astype(np.float32)).astype(np.float32)
    got = tn.reduce_fp32(x, "add", axis=1)
    assert got.dtype == np.float32 and np.array_equal(got, want)
    assert tn.reduce_fp32(x, "add", axis=1, keepdims=True).shape == (3, 1)


def test_reduce_max_min_multiply():
    """maximum, minimum and multiply reduce in FP32; an unknown op suggests the known ones."""
    x = np.array([[1.5, -2.0, 4.0], [0.5, 8.0, -1.0]], np.float16)
    assert tn.reduce_fp32(x, "maximum", axis=0).tolist() == [1.5, 8.0, 4.0]
    assert tn.reduce_fp32(x, "minimum", axis=-1).tolist() == [-2.0, -1.0]
    assert tn.reduce_fp32(x, "multiply", axis=-1).tolist() == [-12.0, -4.0]
    with pytest.raises(UnknownNameError, match="did you mean maximum"):
        tn.reduce_fp32(x, "maximun")


def test_result_goes_back_to_bf16_under_the_active_mode():
    """The PSUM result cast back to bf16 uses the active rounding mode."""
    acc = np.full(100_000, 1 + 2**-9, np.float32)
    assert np.all(tn.cast(acc, "bfloat16").astype(np.float32) == 1.0)
    with tn.rounding("stochastic", seed=1):
        up = (tn.cast(acc, "bfloat16").astype(np.float32) > 1).mean()
    assert 0.24 < up < 0.26


def test_widen_unpacks_x4_containers():
    """widen gives exact FP32 values, unpacking x4 containers when told their type."""
    x = np.array([[1.5, -2.0, 0.25, 448.0]], np.float32)
    assert np.array_equal(tn.widen(tn.cast(x, "float8_e4m3fn_x4"), "float8_e4m3fn_x4"), x)
