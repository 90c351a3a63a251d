"""Integer conversions, one test per path, as the NKI ISA reference states them (docs/numerics.md, "Integer
conversions per path"): a DMA between equal dtypes moves bytes, between different dtypes goes through FP32
(nki.isa.dma_copy, "Data types"); tensor_copy is bit-exact between equal dtypes and goes through FP32 between
different ones (nki.isa.tensor_copy); the Scalar engine computes in FP32 always (nki.isa.tensor_copy); all-int32
tensor_tensor runs on GpSimd in native 32-bit integers, on Vector in FP32 (nki.isa.tensor_tensor)."""
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
import trnsim.nki.beta as bnki
import trnsim.nki.beta.language as bnl
from trnsim.core.errors import DTypeError

I32 = np.array([[16777217, -1, 0x7FFFFFFF, -5, 3]], np.int32)  # 2^24 + 1 is the first int32 FP32 cannot hold
U32 = np.array([[0xFFFFFFFF, 16777217, 0x80000000, 1, 0]], np.uint32)


def via_fp32(x, dtype):
    """numpy: to FP32 (round to nearest even), then to an integer dtype rounding and saturating (NaN: 0)."""
    f = x.astype(np.float32).astype(np.float64)
    info = np.iinfo(dtype)
    return np.clip(np.rint(f), info.min, info.max).astype(dtype)


def _kernel(path):
    @nki.jit
    def k(x, like):
        out = nl.ndarray(x.shape, like.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, x.dtype)
        nisa.dma_copy(t, x)  # equal dtypes: bytes
        if path == "dma":
            nisa.dma_copy(out, t)
            return out
        u = nl.ndarray(x.shape, like.dtype)
        if path in ("vector", "gpsimd"):
            nisa.tensor_copy(u, t, engine=getattr(nisa.engine, path))
        elif path == "scalar":
            nisa.activation(u, nl.copy, t)
        elif path == "add_gpsimd":
            nisa.tensor_tensor(u, t, t, nl.add)  # all int32: GpSimd by default
        elif path == "add_vector":
            nisa.tensor_tensor(u, t, t, nl.add, engine=nisa.vector_engine)
        nisa.dma_copy(out, u)
        return out
    return k


@pytest.mark.parametrize("x, dtype", [(I32, np.int32), (U32, np.uint32)], ids=["int32", "uint32"])
def test_dma_between_equal_dtypes_moves_bytes(x, dtype):
    got = _kernel("dma")(x, np.zeros(1, dtype))
    np.testing.assert_array_equal(got.view(np.uint32), x.view(np.uint32))


@pytest.mark.parametrize("x, dtype", [(U32, np.int32), (I32, np.uint32), (I32, np.int16), (U32, np.uint8)])
def test_dma_between_different_dtypes_goes_through_fp32(x, dtype):
    """A uint32 0xFFFFFFFF becomes 2^32 in FP32, then the int32 maximum: the reference's two-step cast."""
    got = _kernel("dma")(x, np.zeros(1, dtype))
    np.testing.assert_array_equal(got, via_fp32(x, dtype))
    if x is U32 and dtype is np.int32:
        assert got[0, 0] == 2147483647


def test_dma_hwdge_copies_raw_bytes_so_dtypes_must_match():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, nl.int32, buffer=nl.shared_hbm)
        nisa.dma_copy(out, x, dge_mode=nisa.dge_mode.hwdge)
        return out
    with pytest.raises(DTypeError, match="raw bytes"):
        k(U32)


@pytest.mark.parametrize("engine", ["vector", "gpsimd"])
def test_tensor_copy_is_bit_exact_between_equal_dtypes(engine):
    np.testing.assert_array_equal(_kernel(engine)(I32, np.zeros(1, np.int32)), I32)


@pytest.mark.parametrize("engine", ["vector", "gpsimd"])
@pytest.mark.parametrize("x, dtype", [(I32, np.uint32), (U32, np.int32)])
def test_tensor_copy_between_different_dtypes_goes_through_fp32(engine, x, dtype):
    got = _kernel(engine)(x, np.zeros(1, dtype))
    np.testing.assert_array_equal(got, via_fp32(x, dtype))
    assert got[x == 16777217] == 16777216  # 2^24 + 1 does not survive FP32


def test_scalar_engine_copy_goes_through_fp32_even_between_equal_dtypes():
    np.testing.assert_array_equal(_kernel("scalar")(I32, np.zeros(1, np.int32)), via_fp32(I32, np.int32))


def test_int32_add_on_gpsimd_is_native_integer_arithmetic():
    """Two's complement: exact past 2^24, wrapping past 2^31."""
    got = _kernel("add_gpsimd")(I32, np.zeros(1, np.int32))
    np.testing.assert_array_equal(got, (I32.astype(np.int64) * 2).astype(np.int32))


def test_int32_add_on_vector_is_fp32_arithmetic():
    got = _kernel("add_vector")(I32, np.zeros(1, np.int32))
    np.testing.assert_array_equal(got, via_fp32(I32.astype(np.float32).astype(np.float64) * 2, np.int32))


# -- the beta API: nl.load / nl.store are DMAs, nl.copy a tensor_copy --------------------------------------------
@bnki.jit
def beta_store_as(x, like):
    out = bnl.ndarray(x.shape, like.dtype, buffer=bnl.shared_hbm)
    bnl.store(out, bnl.load(x))
    return out


@bnki.jit
def beta_load_as_int16(x):
    out = bnl.ndarray(x.shape, bnl.int16, buffer=bnl.shared_hbm)
    bnl.store(out, bnl.load(x, dtype=bnl.int16))
    return out


@bnki.jit
def beta_copy_as_uint32(x):
    out = bnl.ndarray(x.shape, bnl.uint32, buffer=bnl.shared_hbm)
    bnl.store(out, bnl.copy(bnl.load(x), dtype=bnl.uint32))
    return out


def test_beta_store_of_uint32_into_int32_hbm_goes_through_fp32():
    np.testing.assert_array_equal(beta_store_as(U32, np.zeros(1, np.int32)), via_fp32(U32, np.int32))
    np.testing.assert_array_equal(beta_store_as(U32, np.zeros(1, np.uint32)), U32)


def test_beta_load_with_a_dtype_goes_through_fp32():
    np.testing.assert_array_equal(beta_load_as_int16(I32), via_fp32(I32, np.int16))


def test_beta_copy_with_a_dtype_goes_through_fp32():
    np.testing.assert_array_equal(beta_copy_as_uint32(I32), via_fp32(I32, np.uint32))
