"""numerics: the NeuronCore's data types, casts (RNE and stochastic rounding) and MX block formats.

The layers above use this API:
- `DType` records, one module attribute per nki.language name (`bfloat16`, `float8_e4m3fn_x4`, `bool_`...)
  and `dtype(x)` to resolve names, numpy dtypes and scalar types; `dtype_name` and `family` read the one table
  of short spellings (`bf16`, `f8e4m3fn`) the CLI, the XLA cost model and the planner share.
- `cast(x, dtype, rounding=None, rng=None)`, `pack`/`unpack` for the x4 containers.
- `rounding(mode, seed=None)` and `rounding_mode()`: the rounding mode, from NEURON_RT_STOCHASTIC_ROUNDING_EN
  unless overridden.
- `quantize_mx`, `dequantize_mx`, `mx_matmul`: OCP MX block formats (MXFP8, MXFP4) and their matmul.
- `matmul_fp32`, `reduce_fp32`, `widen`: exact narrow products accumulated in FP32 in a fixed order.
See docs/numerics.md.
"""
from trnsim.numerics.accumulate import matmul_fp32, reduce_fp32, widen
from trnsim.numerics.casts import cast, pack, unpack
from trnsim.numerics.dtypes import (
    ALIASES, ALL, SHORT, TFLOAT32_HOST, DType, bfloat16, bool_, dtype, float4_e2m1fn, float4_e2m1fn_x4, float8_e3m4, float8_e4m3,
    float8_e4m3fn, float8_e4m3fn_x4, float8_e5m2, float8_e5m2_x4, float8_e8m0fnu, float16, float32,
    int8, int16, int32, int64, tfloat32, uint8, uint16, uint32, dtype_name, family,
)
from trnsim.numerics.errors import (
    BlockShapeError, NumericsError, PackedWidthError, RoundingEnvError, RoundingModeError,
)
from trnsim.numerics.modes import rounding, rounding_mode
from trnsim.numerics.mx import dequantize_mx, mx_matmul, quantize_mx

__all__ = [
    "DType", "ALL", "ALIASES", "SHORT", "TFLOAT32_HOST", "dtype", "dtype_name", "family", "cast", "pack", "unpack", "rounding", "rounding_mode",
    "quantize_mx", "dequantize_mx", "mx_matmul", "matmul_fp32", "reduce_fp32", "widen",
    "NumericsError", "PackedWidthError", "BlockShapeError", "RoundingModeError", "RoundingEnvError",
    "float32", "tfloat32", "bfloat16", "float16", "float8_e4m3", "float8_e4m3fn", "float8_e5m2", "float8_e3m4",
    "float8_e8m0fnu", "float4_e2m1fn", "float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "bool_",
]
