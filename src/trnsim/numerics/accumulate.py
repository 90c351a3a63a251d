"""Accumulation as the engines do it: exact products of narrow inputs summed in FP32, in order.

The Tensor engine multiplies bf16/fp16/tf32/fp8 inputs exactly (their significands are short enough that a
product fits in FP32) and adds the products down its array in FP32; the Vector and Scalar engines reduce
in FP32 along the free axis. numpy's matmul (BLAS blocking, FMA) and sum (pairwise) use other orders and
would give other bits on other machines, so these helpers fix the order: k = 0, 1, 2, ... The result is
cast back to a narrow type with `cast`, under the active rounding mode.
"""
from __future__ import annotations

import numpy as np

from trnsim.errors import UnknownNameError
from trnsim.numerics import dtypes as dt
from trnsim.numerics.casts import unpack
from trnsim.numerics.errors import NumericsError

REDUCE_OPS = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum}


def widen(x, dtype=None) -> np.ndarray:
    """The exact FP32 values of an array in any storage; `dtype` is needed only for x4 containers."""
    a = np.asarray(x)
    if dtype is not None and dt.dtype(dtype).is_packed:
        a = unpack(a, dtype)
    return a.astype(np.float32)


def matmul_fp32(a, b, acc=None) -> np.ndarray:
    """a[M, K] @ b[K, N] with each product rounded to FP32 (exact for narrow inputs) and the K products
    added in order in FP32; the total is then added to `acc` (the PSUM contents), if given."""
    a, b = widen(a), widen(b)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise NumericsError(f"matmul needs a[M, K] and b[K, N] with equal K; got {a.shape} and {b.shape}")
    out = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(a.shape[1]):
        out += a[:, k, None] * b[None, k, :]  # two FP32 roundings, no FMA: the product is exact anyway
    if acc is not None:
        out += widen(acc)
    return out


def reduce_fp32(x, op: str = "add", axis: int = -1, keepdims: bool = False) -> np.ndarray:
    """Reduce along `axis` in FP32, element after element (add, multiply, maximum, minimum).

    maximum/minimum propagate NaN as numpy's do [UNCERTAIN: the engines' NaN rule is not documented].
    """
    if op not in REDUCE_OPS:
        raise UnknownNameError("reduce op", op, list(REDUCE_OPS))
    a = widen(x)
    ufunc = REDUCE_OPS[op]
    if op in ("add", "multiply"):  # accumulate runs strictly left to right; reduce may not
        r = np.take(ufunc.accumulate(a, axis=axis, dtype=np.float32), [-1], axis=axis)
        return r if keepdims else np.squeeze(r, axis=axis)
    return ufunc.reduce(a, axis=axis, keepdims=keepdims)
