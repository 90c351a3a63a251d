"""A tile loaded by one DMA from a permuted HBM view (the K tiles of a row block side by side, as NKI's tiled
matmul loads its stationary tiles) is loaded deferred and read in place by the matmuls (core/fast/loads.py:
_remember_blocks, origin; fast/psum.py: stationary): each product, and the tile's own bytes when something
else reads them, keep the bits of the copy made at the DMA. References: numpy here, and the speed layer off
(TRNSIM_FAST=0)."""
import ml_dtypes
import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from trnsim import nki
from trnsim.compiled import enabled
from trnsim.core.fast import loads
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl

KT, M, N = 3, 256, 512


@nki.jit
def permuted(a_t, b, how):
    """out[m block] = sum over k of the stationary view named by `how` against b's K tile k. 'tile': at[:, k*128:
    (k+1)*128], one K tile; 'straddle': 128 columns from the middle of K tile k to the middle of the next (they
    cross from one block of the permuted source to another); 'strided': the first 64 columns of two K tiles;
    'overwritten': K tile 0 partly overwritten after the load; 'copied': 'tile', and the whole tile copied out
    to out2 (the deferred load lands); 'late': 'tile', and the row block's first K tile of a_t zeroed after its
    matmuls, before their sums are read (the products read a_t as it was; later row blocks read its copy)."""
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    out2 = nl.ndarray((M // 128 * 128, KT * 128), a_t.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, N), nl.float32, buffer=nl.psum)
    for m in range(M // 128):
        at = nl.ndarray((128, KT * 128), a_t.dtype)
        nisa.dma_copy(at, a_t[:, m * 128:(m + 1) * 128].reshape((KT, 128, 128)).permute((1, 0, 2)))
        if how == "overwritten":
            nisa.memset(at[:, 0:32], 1.5)
        if how == "copied":
            nisa.dma_copy(out2[m * 128:(m + 1) * 128, :], at)
        for k in range(KT):
            bt = nl.load(b[k * 128:(k + 1) * 128, :])
            if how == "straddle":
                lo = min(k * 128 + 64, (KT - 1) * 128)
                st = at[:, lo:lo + 128]
            elif how == "strided":
                st = at.reshape((128, KT, 128))[:, k % 2:k % 2 + 2, 0:64]
            else:
                st = at[:, k * 128:(k + 1) * 128]
            nisa.nc_matmul(acc, st, bt)
        if how == "late":
            zero = nl.ndarray((128, 128), a_t.dtype)
            nisa.memset(zero, 0.0)
            nisa.dma_copy(a_t[0:128, m * 128:(m + 1) * 128], zero)
        res = nl.ndarray((128, N), nl.float32)
        nisa.tensor_copy(res, acc)
        nisa.dma_copy(out[m * 128:(m + 1) * 128, :], res)
    return out, out2


def _reference(a_t, b, how):
    """The kernel's outputs in numpy: each matmul's product by single-threaded BLAS ([N, K] @ [K, M]), summed in
    issue order in FP32."""
    out = np.empty((M, N), np.float32)
    for m in range(M // 128):
        at = a_t[:, m * 128:(m + 1) * 128].reshape(KT, 128, 128).transpose(1, 0, 2).reshape(128, KT * 128).copy()
        if how == "overwritten":
            at[:, 0:32] = ml_dtypes.bfloat16(1.5)
        acc = None
        for k in range(KT):
            if how == "straddle":
                lo = min(k * 128 + 64, (KT - 1) * 128)
                st = at[:, lo:lo + 128]
            elif how == "strided":
                st = at.reshape(128, KT, 128)[:, k % 2:k % 2 + 2, 0:64].reshape(128, 128)
            else:
                st = at[:, k * 128:(k + 1) * 128]
            mv = np.ascontiguousarray(b[k * 128:(k + 1) * 128].astype(np.float32).T)
            with threadpool_limits(1, "blas"):
                p = mv @ np.ascontiguousarray(st.astype(np.float32))
            acc = p if acc is None else acc + p
        out[m * 128:(m + 1) * 128] = acc.T
    return out


@pytest.mark.parametrize("how", ["tile", "straddle", "strided", "overwritten", "copied", "late"])
def test_a_permuted_load_read_in_place_keeps_the_bits(how, monkeypatch):
    rng = np.random.default_rng(5)
    a_t = rng.standard_normal((KT * 128, M)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((KT * 128, N)).astype(ml_dtypes.bfloat16)
    found = []
    origin = loads.origin

    def traced(v):  # what origin gives for views of tiles loaded from a permuted view
        got = origin(v)
        if v.alloc.source is not None and type(v.alloc.source[-1]) is tuple:
            found.append(got)
        return got

    monkeypatch.setattr(loads, "origin", traced)
    out, out2 = permuted(a_t.copy(), b, how)
    read = [f for f in found if f is not None]
    if not enabled():  # the speed layer off (TRNSIM_FAST=0): no load deferred, both runs the reference
        assert not found
    elif how in ("tile", "copied", "strided", "late"):  # every stationary tile read in place
        assert len(read) == len(found) == M // 128 * KT
    elif how == "straddle":  # the views that cross K tiles are read from SBUF
        assert 0 < len(read) < len(found)
    want = _reference(a_t, b, how)
    np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32))
    if how == "copied":
        np.testing.assert_array_equal(out2.view(np.uint16), np.concatenate(
            [a_t[:, m * 128:(m + 1) * 128].reshape(KT, 128, 128).transpose(1, 0, 2).reshape(128, -1)
             for m in range(M // 128)]).view(np.uint16))
    monkeypatch.setenv("TRNSIM_FAST", "0")
    slow, slow2 = permuted(a_t.copy(), b, how)
    np.testing.assert_array_equal(out.view(np.uint32), slow.view(np.uint32))
    if how == "copied":
        np.testing.assert_array_equal(out2.view(np.uint16), slow2.view(np.uint16))


def test_only_views_inside_one_inner_run_map_to_the_source():
    """_in_blocks by hand: a tile of 3 outer x 4 inner elements per partition, source strides 100 (outer) and 1
    (inner), partition stride 1000."""
    class Mem:
        version = 0

    class Alloc:
        source = (Mem, 0, "d", 7, 1000, ((3, 100), (4, 1)))

    class V:
        alloc, gather_rows, dtype = Alloc, None, "d"

        def __init__(self, shape, strides, offset, poff=0):
            self.shape, self.strides, self.offset, self.poff = shape, strides, offset, poff

    # element (p, f) of the tile is at 7 + 1000 p + 100 (f // 4) + (f % 4)
    assert loads.origin(V((2, 4), (1, 1), 4)) == (Mem, 107, (1000, 1))
    assert loads.origin(V((2, 3, 2), (1, 4, 1), 2, poff=1)) == (Mem, 1009, (1000, 100, 1))
    assert loads.origin(V((2, 2), (1, 2), 1)) == (Mem, 8, (1000, 2))
    assert loads.origin(V((2, 4), (1, 1), 2)) is None  # f = 2..5 crosses into the next inner run
    assert loads.origin(V((2, 2), (1, 5), 0)) is None  # a step of 5 carries
    assert loads.origin(V((2, 2), (1, -1), 3)) is None
