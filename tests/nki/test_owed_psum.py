"""PSUM sums copied out before they are computed (core/fast/psum.py: Owed): the eviction and the store pass the
debt on, and whatever reads the values first (a later matmul, a vector op, a DMA back from HBM, the kernel's
output) finds the bits of computing each matmul as issued: the products added in issue order in FP32, each
copy converting as it would have. References: numpy here, and the speed layer off (TRNSIM_FAST=0)."""
import warnings

import ml_dtypes
import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from trnsim import nki, numerics
from trnsim.core.builder import REFERENCE
from trnsim.core.fast import psum
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl

MB, KT, NB, TN = 5, 3, 2, 256  # row blocks of 128, K tiles of 128, PSUM banks of TN columns


@nki.jit
def evicted(a_t, b, w, x, how, dtype):
    """out[M, N] = a_t.T @ b as NKI's tiled matmul: per row block, NB banks accumulate over K, then each is
    copied to SBUF (as `dtype`) and stored. `how` reads the evicted values once more into out2:
    'matmul' (w.T @ res), 'vector' (2 res + 1), 'reload' (loaded back from out, then + 1); or changes
    them: 'partial' (res columns 0..63 overwritten by x first), 'hbm' (out's block columns 0..63 overwritten
    by x after the store), 'accumulate' (one more product onto the evicted bank, stored to out2); or
    'skip': the last row block's first bank is never stored."""
    res_dtype = getattr(nl, dtype)
    out = nl.ndarray((MB * 128, NB * TN), res_dtype, buffer=nl.shared_hbm)
    out2 = nl.ndarray((MB * 128, NB * TN), nl.float32, buffer=nl.shared_hbm)
    accs = [nl.ndarray((128, TN), nl.float32, buffer=nl.psum) for _ in range(NB)]
    wt = nl.load(w)
    xt = nl.load(x)
    for m in range(MB):
        at = nl.ndarray((128, KT, 128), a_t.dtype)
        for k in range(KT):
            nisa.dma_copy(at[:, k, :], a_t[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
        for k in range(KT):
            bt = nl.load(b[k * 128:(k + 1) * 128, :])
            for n in range(NB):
                nisa.nc_matmul(accs[n], at[:, k, :], bt[:, n * TN:(n + 1) * TN])
        for n in range(NB):
            block = (slice(m * 128, (m + 1) * 128), slice(n * TN, (n + 1) * TN))
            res = nl.ndarray((128, TN), res_dtype)
            nisa.tensor_copy(res, accs[n])
            if how == "partial":
                nisa.tensor_copy(res[:, 0:64], xt[:, 0:64])
            if how != "skip" or (m, n) != (MB - 1, 0):
                nisa.dma_copy(out[block], res)
            if how == "hbm":
                nisa.dma_copy(out[m * 128:(m + 1) * 128, n * TN:n * TN + 64], xt[:, 0:64])
            if how in ("matmul", "accumulate"):
                more = nl.ndarray((128, TN), nl.float32, buffer=nl.psum)
                if how == "matmul":
                    nisa.nc_matmul(more, wt, res)
                else:
                    more = accs[n]
                    nisa.nc_matmul(more, at[:, 0, :], bt[:, n * TN:(n + 1) * TN], accumulate=True)
                r2 = nl.ndarray((128, TN), nl.float32)
                nisa.tensor_copy(r2, more)
                nisa.dma_copy(out2[block], r2)
            elif how in ("vector", "reload"):
                src = res
                if how == "reload":
                    src = nl.ndarray((128, TN), res_dtype)
                    nisa.dma_copy(src, out[block])
                r2 = nl.ndarray((128, TN), nl.float32)
                nisa.tensor_scalar(r2, src, nl.multiply, 2.0 if how == "vector" else 1.0, op1=nl.add, operand1=1.0)
                nisa.dma_copy(out2[block], r2)
    return (out,) if how in ("store", "partial", "hbm", "skip") else (out, out2)


def _product(moving, stationary):
    """One matmul's product [N, M] as the PE array's reference computes it: single-threaded BLAS on FP32
    [N, K] @ [K, M]."""
    bt = np.ascontiguousarray(moving.astype(np.float32).T)
    with threadpool_limits(1, "blas"):
        return bt @ np.ascontiguousarray(stationary.astype(np.float32))


def _reference(a_t, b, w, x, how, res_dtype):
    """The kernel's outputs in numpy: each bank's products summed in issue order in FP32."""
    out = np.empty((MB * 128, NB * TN), res_dtype)
    out2 = np.empty((MB * 128, NB * TN), np.float32)
    for m in range(MB):
        for n in range(NB):
            cols = slice(n * TN, (n + 1) * TN)
            acc = None
            for k in range(KT):
                p = _product(b[k * 128:(k + 1) * 128, cols], a_t[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
                acc = p if acc is None else acc + p
            bank = acc.T  # [M, N] as PSUM holds it
            res = bank.astype(res_dtype)
            if how == "partial":
                res[:, 0:64] = x[:, 0:64].astype(res_dtype)
            rows = slice(m * 128, (m + 1) * 128)
            out[rows, cols] = res
            if how == "hbm":
                out[rows, n * TN:n * TN + 64] = x[:, 0:64].astype(res_dtype)
            if how == "matmul":
                out2[rows, cols] = _product(res, w).T
            elif how == "accumulate":
                last = KT - 1  # the last K tile's moving tile is still loaded
                more = _product(b[last * 128:(last + 1) * 128, cols], a_t[0:128, m * 128:(m + 1) * 128])
                out2[rows, cols] = (acc + more).T
            elif how == "vector":
                out2[rows, cols] = res.astype(np.float32) * np.float32(2) + np.float32(1)
            elif how == "reload":
                out2[rows, cols] = out[rows, cols].astype(np.float32) + np.float32(1)
    return out, out2


@pytest.mark.parametrize("how", ["store", "matmul", "vector", "reload", "partial", "hbm", "accumulate"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_owed_sums_read_every_way_keep_the_issue_order_bits(how, dtype, monkeypatch, trn):
    res_dtype = np.float32 if dtype == "float32" else ml_dtypes.bfloat16
    rng = np.random.default_rng(11)
    a_t = rng.standard_normal((KT * 128, MB * 128)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((KT * 128, NB * TN)).astype(ml_dtypes.bfloat16)
    w = rng.standard_normal((128, 128)).astype(res_dtype)
    x = rng.standard_normal((128, TN)).astype(res_dtype)
    passed = []
    owed_copy = psum.owed_copy
    monkeypatch.setattr(psum, "owed_copy", lambda *args: passed.append(owed_copy(*args)) or passed[-1])
    fast = evicted(a_t, b, w, x, how, dtype)
    # each eviction passed the debt on, and each store of an evicted tile not overwritten in part
    assert passed.count(True) >= (1 if how == "partial" else 2) * MB * NB
    want = _reference(a_t, b, w, x, how, res_dtype)
    monkeypatch.setenv("TRNSIM_FAST", "0")
    slow = evicted(a_t, b, w, x, how, dtype)
    assert evicted.last_cores[0].builder is REFERENCE
    assert len(fast) == len(slow)
    for got, ref, off in zip(fast, want, slow):
        np.testing.assert_array_equal(got.view(np.uint8), off.view(np.uint8))
        np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8))


@pytest.mark.parametrize("how", ["store", "skip"])
def test_an_output_stored_in_owed_blocks_is_never_written_exactly_where_no_block_landed(how, monkeypatch):
    rng = np.random.default_rng(5)
    a_t = rng.standard_normal((KT * 128, MB * 128)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((KT * 128, NB * TN)).astype(ml_dtypes.bfloat16)
    w, x = np.zeros((128, 128), np.float32), np.zeros((128, TN), np.float32)  # loaded, unused
    want = _reference(a_t, b, w, x, "store", np.float32)[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (fast,) = evicted(a_t, b, w, x, how, "float32")
        monkeypatch.setenv("TRNSIM_FAST", "0")
        (slow,) = evicted(a_t, b, w, x, how, "float32")
    warned = [str(w.message) for w in caught if "never-written" in str(w.message)]
    written = np.ones(want.shape, bool)
    if how == "skip":
        written[(MB - 1) * 128:, 0:TN] = False
    # both runs name the unwritten block, with the same count, and agree on every written bit
    assert len(warned) == (0 if how == "store" else 2)
    assert all(f"({128 * TN} of {want.size};" in m for m in warned)
    np.testing.assert_array_equal(fast[written].view(np.uint32), want[written].view(np.uint32))
    np.testing.assert_array_equal(fast[written].view(np.uint32), slow[written].view(np.uint32))


class _Place:
    def __init__(self, offset, shape, strides):
        self.dtype, self.offset, self.shape, self.strides = numerics.dtype("float32"), offset, shape, strides


@pytest.mark.parametrize("seed", range(8))
def test_covering_says_whether_blocks_write_every_element_as_a_mask_of_them_does(seed):
    rng = np.random.default_rng(seed)
    rows, cols = 64, 96
    alloc = type("Alloc", (), {"nbytes": rows * cols * 4})()
    parts, mask = [], np.zeros(rows * cols, bool)
    for _ in range(int(rng.integers(1, 40))):
        h, w = int(rng.integers(1, 33)), int(rng.integers(1, 49))
        r, c = int(rng.integers(0, rows - h + 1)), int(rng.integers(0, cols - w + 1))
        if rng.random() < 0.7:  # mostly a grid of blocks, which may cover it all
            h, w = rows // 4, cols // 3
            r, c = int(rng.integers(4)) * h, int(rng.integers(3)) * w
        parts.append(_Place(r * cols + c, (h, w), (cols, 1)))
        mask.reshape(rows, cols)[r:r + h, c:c + w] = True
    assert psum._covering(alloc, parts) == bool(mask.all())
    full = [_Place(r * cols + c, (rows // 4, cols // 3), (cols, 1)) for r in range(0, rows, rows // 4)
            for c in range(0, cols, cols // 3)]
    assert psum._covering(alloc, full) and not psum._covering(alloc, full[1:])


@nki.jit
def gathered_after_store(a_t, b, ids):
    """The first row block of a_t.T @ b stored to HBM (owed), then rows of it gathered back by an indirect DMA."""
    mid = nl.ndarray((128, TN), nl.float32, buffer=nl.shared_hbm)
    out = nl.ndarray((128, TN), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, TN), nl.float32, buffer=nl.psum)
    at = nl.load(a_t[0:128, 0:128])
    bt = nl.load(b[0:128, 0:TN])
    nisa.nc_matmul(acc, at, bt)
    res = nl.ndarray((128, TN), nl.float32)
    nisa.tensor_copy(res, acc)
    nisa.dma_copy(mid, res)
    idx = nl.load(ids)
    rows = nl.ndarray((128, TN), nl.float32)
    nisa.dma_copy(rows, mid.ap(pattern=[[TN, 128], [1, TN]], offset=0, vector_offset=idx, indirect_dim=0),
                  dge_mode=nisa.dge_mode.swdge)
    nl.store(out, rows)
    return out


def test_rows_gathered_from_owed_sums_read_their_values(monkeypatch):
    rng = np.random.default_rng(3)
    a_t = rng.standard_normal((128, 128)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((128, TN)).astype(ml_dtypes.bfloat16)
    ids = rng.integers(0, 128, (128, 1)).astype(np.int32)
    want = _product(b, a_t).T[ids[:, 0]]
    fast = gathered_after_store(a_t, b, ids)
    monkeypatch.setenv("TRNSIM_FAST", "0")
    slow = gathered_after_store(a_t, b, ids)
    np.testing.assert_array_equal(fast.view(np.uint32), want.view(np.uint32))
    np.testing.assert_array_equal(fast.view(np.uint32), slow.view(np.uint32))


def test_a_fresh_output_is_zeros_and_faulting_its_pages_in_leaves_its_bytes():
    """The bytes an output is made with (psum._zeroed) are zeros; faulting its pages in (psum._populate, run
    behind the kernel while it writes them) changes none of them."""
    n = 3 * (1 << 20) + 123
    x = psum._zeroed(n)
    assert x.shape == (1, n) and x.dtype == np.uint8 and x.flags.writeable and not x.any()
    pattern = (np.arange(n) % 251 + 1).astype(np.uint8)
    x[0, ::2] = pattern[::2]  # the kernel's first writes
    psum._populate(x)
    want = np.zeros(n, np.uint8)
    want[::2] = pattern[::2]
    np.testing.assert_array_equal(x[0], want)
