"""PSUM accumulation groups: how matmul results land in PSUM.

With `accumulate=None` the first matmul into a region overwrites and later ones accumulate in FP32
(read-accumulate-write); a region's group closes when another engine reads or writes it (the eviction).

The hardware's order defines the bits: each matmul adds its own FP32 product into PSUM as it is issued,
so a group holds (((prior + P1) + P2) + ...), where Pk is that one matmul's product (the sum over its K
partitions runs in FP32 in BLAS order; the PE array's own order is undocumented). Products are computed
by single-threaded BLAS: OpenBLAS's sums depend on its thread count, so bits would otherwise depend on
how many CPU cores the host has. Here each product is computed and added as its matmul is issued
(`add_product`); a builder (core/builder.py) may compute them later, together, as long as the bits are
these.
"""
from __future__ import annotations

import functools

import numpy as np
from threadpoolctl import ThreadpoolController

from trnsim import numerics


@functools.cache
def _blas() -> ThreadpoolController:
    return ThreadpoolController()


def one_blas_thread():
    """A context in which BLAS runs on one thread: the products' bits are then the same on every host."""
    return _blas().limit(limits=1, user_api="blas")


def pe_matmul(a, b) -> np.ndarray:
    """a[K, M].T @ b[K, N] in FP32 (narrow products are exact in FP32)."""
    return np.matmul(numerics.widen(a).T, numerics.widen(b))


def _key(v):
    """The PSUM bytes a view reaches: (partition, partitions, byte_lo, byte_hi), a rectangle."""
    return v.region()[2:6]  # a Region's partition, partitions, byte_lo, byte_hi


def _overlap(k1, k2):
    return k1[0] < k2[0] + k2[1] and k2[0] < k1[0] + k1[1] and k1[2] < k2[3] and k2[2] < k1[3]


def _minus(a, b):
    """The parts of rectangle `a` outside rectangle `b` (which overlaps it): at most four rectangles."""
    a_end, b_end = a[0] + a[1], b[0] + b[1]
    lo, hi = max(a[0], b[0]), min(a_end, b_end)
    out = []
    if a[0] < lo:
        out.append((a[0], lo - a[0], a[2], a[3]))
    if hi < a_end:
        out.append((hi, a_end - hi, a[2], a[3]))
    if a[2] < b[2]:
        out.append((lo, hi - lo, a[2], b[2]))
    if b[3] < a[3]:
        out.append((lo, hi - lo, b[3], a[3]))
    return out


def _clear(nc, key) -> None:
    """The bytes of `key` leave every open group: each open rectangle keeps only its parts outside them."""
    hit = [k for k in nc.psum_open if _overlap(k, key)]
    for k in hit:
        nc.psum_open.discard(k)
        nc.psum_open.update(_minus(k, key))


def _covered(nc, key) -> bool:
    """Whether every byte of `key` is inside an open group (the open rectangles are disjoint, so their
    overlaps with `key` cover it exactly when their areas add up to its own)."""
    if key[1] == 0 or key[2] == key[3]:
        return True
    area = 0
    for k in nc.psum_open:
        if _overlap(k, key):
            area += ((min(k[0] + k[1], key[0] + key[1]) - max(k[0], key[0]))
                     * (min(k[3], key[3]) - max(k[2], key[2])))
    return area == key[1] * (key[3] - key[2])


def accumulating(nc, key) -> bool:
    """Whether an accumulation group is open over any byte of rectangle `key`."""
    return any(_overlap(k, key) for k in nc.psum_open)


def close(nc, v) -> None:
    """Another engine touched PSUM region `v`: the accumulation groups over it close."""
    if nc.psum_open:
        _clear(nc, _key(v))


def widen_into(out: np.ndarray, x: np.ndarray) -> None:
    """Write x (any storage) into the FP32 array `out` exactly."""
    if x.dtype == numerics.bfloat16.np:  # bf16 is the top half of fp32: a shift widens it exactly
        np.left_shift(x.view(np.uint16), 16, out=out.view(np.uint32), dtype=np.uint32)
    else:
        np.copyto(out, x, casting="unsafe")


def product(a, b) -> np.ndarray:
    """One matmul's FP32 product, transposed ([N, M]): moving b[K, N] (any storage) laid out [N, K] row-major
    times stationary a[K, M] (FP32), by single-threaded BLAS. BLAS's sum over K depends on the call's
    shapes, so whoever computes products computes them with these shapes."""
    bt = np.empty((b.shape[1], b.shape[0]), np.float32)
    widen_into(bt, b.T)
    with one_blas_thread():
        return np.matmul(bt, np.ascontiguousarray(a))


def prior(dst, n: int, m: int) -> np.ndarray:
    """What PSUM region `dst` holds, as FP32 [N, M] (FP32 is read in place)."""
    held = dst.array().reshape(m, n).T
    return held if held.dtype == np.float32 else held.astype(np.float32)


def onto(dst, first) -> np.ndarray:
    """The running sum after a group's first product `first` [N, M] when the group opened onto what PSUM
    region `dst` held."""
    return first + prior(dst, *first.shape)


def land(dst, acc_t, amask, bmask, added: bool) -> None:
    """Store a running sum [N, M] into PSUM region `dst`; never-written inputs mark the columns (amask, M)
    and rows (bmask, N) they reach, and with `added` the never-written elements of what it was added to."""
    mask = None
    if amask is not None or bmask is not None:
        m = acc_t.shape[1], acc_t.shape[0]
        mask = ((amask if amask is not None else np.zeros(m[0], bool))[:, None]
                | (bmask if bmask is not None else np.zeros(m[1], bool))[None, :])
    if added and dst.poisoned():
        pm = dst.mask().reshape(acc_t.shape[1], acc_t.shape[0])
        mask = pm if mask is None else (mask | pm)
    out = acc_t.T.reshape(dst.shape)
    dst.store(out if dst.dtype.name == "float32" else numerics.cast(out, dst.dtype),
              None if mask is None else mask.reshape(dst.shape))


def add_product(ins, nc, a, b, am, bm) -> None:
    """Add a.T @ b (a[K, M] FP32, b[K, N] any storage; am, bm: never-written columns of each, or None) into
    the matmul's PSUM region now: overwrite or accumulate as open_group decided."""
    p = product(a, b)
    added = ins.attrs["accumulated"]
    land(ins.dst, onto(ins.dst, p) if added else p, am, bm, added)


def open_group(ins, nc) -> None:
    """Decide whether this matmul overwrites or accumulates (attribute `accumulated`) and open its group.

    Group state depends on the program, not on values, so this runs with the checks (also when a
    timing-only run computes no values) and the record says whether the instruction read PSUM.
    """
    key = _key(ins.dst)
    acc = ins.attrs.get("accumulate")
    if acc is None:  # the bytes inside open groups are kept as disjoint rectangles (nc.psum_open)
        accumulate = key in nc.psum_open or _covered(nc, key)
    else:
        accumulate = bool(acc)
    if key not in nc.psum_open:
        _clear(nc, key)
        nc.psum_open.add(key)
    ins.attrs["accumulated"] = accumulate
