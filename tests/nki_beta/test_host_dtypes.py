"""Beta dtypes are numpy's own on the host and are accepted wherever a kernel takes a dtype; tensor methods
view(dtype), broadcast_to and expand_dims."""
import ml_dtypes
import numpy as np
import pytest

import trnsim.nki.beta as nki
import trnsim.nki.beta.language as nl
from trnsim import numerics


def test_host_dtypes_are_numpy():
    assert np.zeros(4, dtype=nl.bfloat16).dtype == ml_dtypes.bfloat16
    assert np.arange(3).astype(nl.uint16).dtype == np.uint16
    assert np.dtype(nl.bfloat16).itemsize == 2 and np.dtype(nl.float8_e5m2).itemsize == 1
    assert np.dtype(nl.tfloat32).itemsize == 4
    assert nl.float32 is np.float32 and nl.float8_e4m3 == np.dtype(ml_dtypes.float8_e4m3)
    assert numerics.dtype(nl.tfloat32) is numerics.tfloat32 and numerics.dtype(nl.bfloat16) is numerics.bfloat16


@pytest.mark.parametrize("dt", [nl.bfloat16, nl.float16, nl.float32, nl.tfloat32, nl.float8_e5m2, nl.int32])
def test_kernel_takes_host_dtypes(dt, rng):
    """A tile made with a host dtype has that dtype (it compares equal to it) and casts as the core casts."""
    x = rng.standard_normal((8, 16)).astype(np.float32)

    @nki.jit
    def k(a):
        t = nl.load(a, dtype=dt)
        assert t.dtype == dt
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.copy(t, dtype=nl.float32))
        return out
    target = numerics.dtype(dt)
    ref = numerics.cast(numerics.cast(x, target, "rne"), numerics.float32)
    np.testing.assert_array_equal(k(x), ref)


def test_promoted_dtype_equals_host_dtype(rng):
    """bf16 + fp16 promotes to fp32 (reference 2.5), and the tile's dtype equals nl.float32 (np.float32)."""
    @nki.jit
    def k(a, b):
        s = nl.add(nl.load(a), nl.load(b))
        assert s.dtype == nl.float32 and s.dtype != nl.bfloat16
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        nl.store(out, s)
        return out
    a = rng.standard_normal((4, 8)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((4, 8)).astype(np.float16)
    np.testing.assert_array_equal(k(a, b), a.astype(np.float32) + b.astype(np.float32))


def test_hbm_view_reinterprets_bytes(rng):
    """An HBM uint8 tensor viewed as fp8 e5m2 loads the same bytes as fp8 values."""
    bits = rng.integers(0, 0x7B, (16, 32), dtype=np.uint8)  # finite e5m2 patterns

    @nki.jit
    def k(a):
        t = nl.load(a.view(nl.float8_e5m2))
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.copy(t, dtype=nl.float32))
        return out
    np.testing.assert_array_equal(k(bits), bits.view(ml_dtypes.float8_e5m2).astype(np.float32))


def test_tensor_broadcast_to_and_expand_dims_methods(rng):
    x = rng.standard_normal((1, 24)).astype(np.float32)

    @nki.jit
    def k(a):
        t = nl.load(a)
        wide = t.broadcast_to((32, 24))
        out = nl.ndarray((32, 24), a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.copy(wide))
        assert t.expand_dims(1).shape == (1, 1, 24)
        return out
    np.testing.assert_array_equal(k(x), np.repeat(x, 32, axis=0))
