"""numpy's own BLAS called with beta = 1: a matmul's product added into its PSUM running sum by the call that
computes it.

A group's running sum is ((prior + P1) + P2) + ..., each Pk one matmul's product rounded to FP32 and then
added (isa/psum.py). numpy's matmul has no beta, so the emulator computes each product into a buffer and adds
it in a second pass over memory. SGEMM with beta = 1 writes round(C + 1 * AB) where its kernel adds the
finished product to C: the same one rounding, in the same pass. Whether this BLAS does so for a given call
shape, and whether a product split into row blocks has the bits of the one numpy call the reference makes,
is checked once per shape on random operands (`exact`); a shape that fails keeps numpy's product-then-add.
Only OpenBLAS builds whose symbol names say their integer width are used (the 64-bit interface numpy's
wheels ship, or the 32-bit one scipy's name marks); any other BLAS keeps numpy's way.
"""
from __future__ import annotations

import ctypes
import functools
import os

import numpy as np
from threadpoolctl import ThreadpoolController

from trnsim.core.isa.psum import one_blas_thread

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_SYMBOLS = (("scipy_cblas_sgemm64_", ctypes.c_int64), ("cblas_sgemm64_", ctypes.c_int64),
            ("scipy_cblas_sgemm", ctypes.c_int))


@functools.cache
def _sgemm():
    """cblas_sgemm of the OpenBLAS numpy runs on (else of the first OpenBLAS loaded), or None."""
    libs = [c for c in ThreadpoolController().select(user_api="blas").lib_controllers if c.internal_api == "openblas"]
    home = os.path.dirname(os.path.dirname(np.__file__))
    libs.sort(key=lambda c: not os.path.realpath(c.filepath).startswith(os.path.realpath(home)))
    for c in libs:
        lib = ctypes.CDLL(c.filepath)
        for name, integer in _SYMBOLS:
            fn = getattr(lib, name, None)
            if fn is not None:
                e, n, f, p = ctypes.c_int, integer, ctypes.c_float, ctypes.c_void_p
                fn.argtypes = [e, e, e, n, n, n, f, p, n, p, n, f, p, n]
                fn.restype = None
                return fn
    return None


def _operand(x) -> int | None:
    """The leading dimension of a 2-D FP32 array whose rows are unit-stride, or None."""
    if x.dtype != np.float32 or x.strides[1] != 4 or x.strides[0] % 4 or x.strides[0] // 4 < max(1, x.shape[1]):
        return None
    return x.strides[0] // 4


def accumulate(c, a, b, add: bool) -> None:
    """c = a @ b, plus c when `add`, in one SGEMM call (a[R, K], b[K, M] unit-stride rows; c writable,
    unit-stride rows). The caller holds BLAS at one thread (isa/psum.one_blas_thread)."""
    _sgemm()(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, c.shape[0], c.shape[1], a.shape[1], 1.0, a.ctypes.data, _operand(a),
             b.ctypes.data, _operand(b), 1.0 if add else 0.0, c.ctypes.data, _operand(c))


def accumulate_tn(c, a, b, add: bool) -> None:
    """c = a.T @ b, plus c when `add`, in one SGEMM call (a[K, R], b[K, M] unit-stride rows; c writable,
    unit-stride rows): `accumulate`'s product with its left operand given K-major, as a moving tile lies in its
    tensor; or, with the operands swapped, that product in the layout of its transpose, so that sums land as
    PSUM holds them ([M, N]) with no transposing copy after. The caller holds BLAS at one thread."""
    _sgemm()(_ROW_MAJOR, _TRANS, _NO_TRANS, c.shape[0], c.shape[1], a.shape[0], 1.0, a.ctypes.data, _operand(a),
             b.ctypes.data, _operand(b), 1.0 if add else 0.0, c.ctypes.data, _operand(c))


def usable(*arrays) -> bool:
    """Whether these operands can go to `accumulate` (an OpenBLAS is found and their layouts suit it)."""
    return _sgemm() is not None and all(_operand(x) is not None for x in arrays)


@functools.cache
def exact(groups: int, n: int, k: int, m: int, cuts: tuple, blocks: int = 1, transposed: bool = False,
          k_major: bool = False) -> bool:
    """Whether summing `groups` stacked products [n, k] @ [k, blocks * m] by `accumulate` over the row blocks
    `cuts` of their [groups * n] rows gives the bits of numpy's one call per product [n, k] @ [k, m] (each of
    the `blocks` column blocks on its own) and its FP32 add, both for the first product (beta = 0) and for one
    added onto a running sum, zeros' signs included. With `k_major`, the stacked products' operand is given as
    [k, groups * n] (`accumulate_tn`); with `transposed` too, the sums are made in the transposed layout
    ([blocks * m, groups * n]), `cuts` cutting its columns."""
    with one_blas_thread():
        return _exact(groups, n, k, m, cuts, blocks, transposed, k_major)


def _exact(groups, n, k, m, cuts, blocks, transposed, k_major) -> bool:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((groups * n, k), np.float32)
    b = rng.standard_normal((k, blocks * m), np.float32)
    prior = rng.standard_normal((groups * n, blocks * m), np.float32)
    # the sign of an exact zero: a product of -0.0 rows onto -0.0 keeps it only if the kernel's sum can be -0.0
    a[0], prior[0], b[:, 0] = -0.0, -0.0, np.abs(b[:, 0])
    first = np.concatenate([np.concatenate([np.matmul(a[j * n:(j + 1) * n], np.ascontiguousarray(b[:, i * m:(i + 1) * m]))
                                            for i in range(blocks)], axis=1) for j in range(groups)])
    a_k = a.T.copy()  # the same operand K-major
    if transposed:  # (tobytes reads a transposed view in its own row-major order)
        if not k_major:
            return False
        got, summed = np.empty(prior.shape[::-1], np.float32), prior.T.copy()
        for lo, hi in zip(cuts, cuts[1:]):
            accumulate_tn(got[:, lo:hi], b, a_k[:, lo:hi], False)
            accumulate_tn(summed[:, lo:hi], b, a_k[:, lo:hi], True)
        got, summed = got.T, summed.T
    else:
        got, summed = np.empty_like(prior), prior.copy()
        for lo, hi in zip(cuts, cuts[1:]):
            for out, add in ((got, False), (summed, True)):
                if k_major:
                    accumulate_tn(out[lo:hi], a_k[:, lo:hi], b, add)
                else:
                    accumulate(out[lo:hi], a[lo:hi], b, add)
    return got.tobytes() == first.tobytes() and summed.tobytes() == (prior + first).tobytes()
