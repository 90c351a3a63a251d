"""The dtype table: nki names, numpy storage, sizes, flags and the resolver."""
import ml_dtypes
import numpy as np
import pytest

import trnsim.numerics as tn
from trnsim.errors import UnknownNameError

NKI_NAMES = ("bool_ int8 int16 int32 uint8 uint16 uint32 float16 float32 bfloat16 tfloat32 float8_e4m3 "
             "float8_e4m3fn float8_e5m2 float8_e8m0fnu float8_e5m2_x4 float8_e4m3fn_x4 float4_e2m1fn_x4").split()


@pytest.mark.parametrize("name", NKI_NAMES + ["float8_e3m4", "float4_e2m1fn"])
def test_every_nki_name_is_a_module_attribute(name):
    """Each nki.language dtype name is an attribute holding a DType of that name."""
    t = getattr(tn, name)
    assert isinstance(t, tn.DType) and t.name == name and tn.dtype(name) is t


@pytest.mark.parametrize("name, storage, itemsize, bits", [
    ("float32", np.float32, 4, 32), ("tfloat32", np.float32, 4, 19), ("bfloat16", ml_dtypes.bfloat16, 2, 16),
    ("float16", np.float16, 2, 16), ("float8_e4m3", ml_dtypes.float8_e4m3, 1, 8),
    ("float8_e4m3fn", ml_dtypes.float8_e4m3fn, 1, 8), ("float8_e5m2", ml_dtypes.float8_e5m2, 1, 8),
    ("float8_e3m4", ml_dtypes.float8_e3m4, 1, 8), ("float8_e8m0fnu", ml_dtypes.float8_e8m0fnu, 1, 8),
    ("float4_e2m1fn", ml_dtypes.float4_e2m1fn, 1, 4), ("float8_e4m3fn_x4", np.uint32, 4, 32),
    ("float8_e5m2_x4", np.uint32, 4, 32), ("float4_e2m1fn_x4", np.uint16, 2, 16),
    ("int8", np.int8, 1, 8), ("uint16", np.uint16, 2, 16), ("int32", np.int32, 4, 32), ("bool_", np.bool_, 1, 8),
])
def test_storage_and_sizes(name, storage, itemsize, bits):
    """Storage dtype, bytes per element and bits follow the documented choices."""
    t = tn.dtype(name)
    assert (t.np, t.itemsize, t.bits) == (np.dtype(storage), itemsize, bits)


def test_flags():
    """is_float / is_int / is_packed partition the table."""
    assert tn.bfloat16.is_float and not tn.bfloat16.is_int and not tn.bfloat16.is_packed
    assert tn.uint8.is_int and tn.int32.is_int and not tn.bool_.is_int
    assert tn.float4_e2m1fn_x4.is_packed and tn.float4_e2m1fn_x4.elem is tn.float4_e2m1fn
    assert sum(t.is_float + t.is_int + t.is_packed for t in tn.ALL) == len(tn.ALL) - 1  # bool_ is none


@pytest.mark.parametrize("t", [t for t in tn.ALL if t.is_float and t.name != "tfloat32"])
def test_format_fields_agree_with_ml_dtypes(t):
    """mant, exp, bias and max describe the same format ml_dtypes implements."""
    fi = ml_dtypes.finfo(t.np)
    assert (t.mant, t.emin) == (fi.nmant, fi.minexp)
    assert t.max == float(fi.max)


def test_resolver_accepts_numpy_dtypes_and_scalar_types():
    """numpy dtypes and scalar types map to the type a plain array of that storage means."""
    assert tn.dtype(np.float32) is tn.float32 and tn.dtype(np.dtype("uint32")) is tn.uint32
    assert tn.dtype(ml_dtypes.bfloat16) is tn.bfloat16 and tn.dtype(np.bool_) is tn.bool_
    assert tn.dtype(tn.tfloat32) is tn.tfloat32 and tn.dtype("bool") is tn.bool_


def test_unknown_names_raise_with_a_suggestion():
    """A misspelt or unsupported dtype is an UnknownNameError naming close matches."""
    with pytest.raises(UnknownNameError, match="unknown dtype 'bfloat61'; did you mean bfloat16"):
        tn.dtype("bfloat61")
    with pytest.raises(UnknownNameError, match="unknown dtype 'float64'"):
        tn.dtype(np.float64)


def test_dtypes_are_their_name_strings():
    """Current-API dtypes print and compare as their names, hash as them, and stay one object per type."""
    import pickle
    assert str(tn.float32) == "float32" and tn.float32 == "float32" and f"{tn.bfloat16}" == "bfloat16"
    assert tn.bfloat16 != tn.float16 and tn.float32 != "float16"
    assert {"bfloat16": 1}[tn.bfloat16] == 1
    assert pickle.loads(pickle.dumps(tn.float8_e5m2)) is tn.float8_e5m2
    assert np.dtype(tn.bfloat16) == np.dtype(ml_dtypes.bfloat16)
