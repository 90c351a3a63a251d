"""numerics: the NeuronCore's data types, casts (RNE and stochastic rounding) and MX block formats.

The layers above use this API:
- `DType` records, one module attribute per nki.language name (`bfloat16`, `float8_e4m3fn_x4`, `bool_`...)
  and `dtype(x)` to resolve names, numpy dtypes and scalar types.
- `cast(x, dtype, rounding=None, rng=None)`, `pack`/`unpack` for the x4 containers.
- `rounding(mode, seed=None)` and `rounding_mode()`: the rounding mode, from NEURON_RT_STOCHASTIC_ROUNDING_EN
  unless overridden.
See docs/numerics.md.
"""
from trnsim.numerics.cast import cast, pack, unpack
from trnsim.numerics.dtypes import (
    ALL, DType, bfloat16, bool_, dtype, float4_e2m1fn, float4_e2m1fn_x4, float8_e3m4, float8_e4m3,
    float8_e4m3fn, float8_e4m3fn_x4, float8_e5m2, float8_e5m2_x4, float8_e8m0fnu, float16, float32,
    int8, int16, int32, tfloat32, uint8, uint16, uint32,
)
from trnsim.numerics.errors import (
    BlockShapeError, NumericsError, PackedWidthError, RoundingEnvError, RoundingModeError,
)
from trnsim.numerics.rounding import rounding, rounding_mode

__all__ = [
    "ALL", "DType", "dtype", "cast", "pack", "unpack", "rounding", "rounding_mode",
    "NumericsError", "PackedWidthError", "BlockShapeError", "RoundingModeError", "RoundingEnvError",
] + [t.name for t in ALL]
