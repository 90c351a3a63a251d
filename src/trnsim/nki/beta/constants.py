"""`neuronxcc.nki.language.constants` (beta): `sizeinbytes` and the dtypes, as kernels import them from there."""
from trnsim import numerics
from trnsim.nki.beta.language import (bfloat16, bool_, float8_e4m3, float8_e5m2, float16, float32, int8,  # noqa: F401
                                        int16, int32, tfloat32, uint8, uint16, uint32)


def sizeinbytes(dtype) -> int:
    """Bytes per element of a dtype (nl or numpy): 4 for float32, 2 for bfloat16, 1 for the fp8s."""
    return numerics.dtype(dtype).itemsize
