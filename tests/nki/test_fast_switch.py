"""TRNSIM_FAST=0 turns the speed layer off (core/fast/) and changes no output bit."""
import ml_dtypes
import numpy as np

from trnsim import nki
from trnsim.core.builder import REFERENCE
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl


@nki.jit
def blocks(a_t, b):
    """A [K, 256] and B [K, 1024] resident in SBUF; each of the 2 x 2 output tiles accumulates over K in its
    own PSUM bank, so every stationary slice feeds two matmuls."""
    K, M = a_t.shape
    N = b.shape[1]
    kt, tn = K // 128, N // 2
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    at = nl.ndarray((128, kt, M), a_t.dtype, buffer=nl.sbuf)
    bt = nl.ndarray((128, kt, N), b.dtype, buffer=nl.sbuf)
    for k in range(kt):
        nisa.dma_copy(dst=at[:, k, :], src=a_t[k * 128:(k + 1) * 128])
        nisa.dma_copy(dst=bt[:, k, :], src=b[k * 128:(k + 1) * 128])
    accs = [nl.ndarray((128, tn), nl.float32, buffer=nl.psum) for _ in range(4)]
    for k in range(kt):
        for i in range(2):
            for j in range(2):
                nisa.nc_matmul(accs[2 * i + j], at[:, k, i * 128:(i + 1) * 128], bt[:, k, j * tn:(j + 1) * tn])
    for i in range(2):
        for j in range(2):
            res = nl.ndarray((128, tn), nl.float32)
            nisa.tensor_copy(res, accs[2 * i + j])
            nl.store(out[i * 128:(i + 1) * 128, j * tn:(j + 1) * tn], res)
    return out


def test_speed_layer_off_gives_the_same_bits(monkeypatch, trn):
    """Groups over the same stationary bytes share one GEMM whether or not the widened tile was cached."""
    rng = np.random.default_rng(3)
    a_t = rng.standard_normal((512, 256)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((512, 1024)).astype(ml_dtypes.bfloat16)
    fast = blocks(a_t, b)
    monkeypatch.setenv("TRNSIM_FAST", "0")
    slow = blocks(a_t, b)
    assert blocks.last_cores[0].builder is REFERENCE
    np.testing.assert_array_equal(fast.view(np.uint32), slow.view(np.uint32))
    ref = a_t.astype(np.float32).T @ b.astype(np.float32)
    np.testing.assert_allclose(fast, ref, rtol=1e-5, atol=1e-4)


@nki.jit
def k_stream(a_t, b):
    """out[M, 2N] = a_t.T @ b: each of two PSUM banks accumulates one K tile per matmul, both fed by the same
    stationary slice (so the two groups share the speed layer's batched call)."""
    K, M = a_t.shape
    N = b.shape[1] // 2
    out = nl.ndarray((M, 2 * N), nl.float32, buffer=nl.shared_hbm)
    accs = [nl.ndarray((M, N), nl.float32, buffer=nl.psum) for _ in range(2)]
    for k in range(K // 128):
        at = nl.load(a_t[k * 128:(k + 1) * 128])
        bt = nl.load(b[k * 128:(k + 1) * 128])
        for j in range(2):
            nisa.nc_matmul(accs[j], at, bt[:, j * N:(j + 1) * N])
    for j in range(2):
        res = nl.ndarray((M, N), nl.float32)
        nisa.tensor_copy(res, accs[j])
        nl.store(out[:, j * N:(j + 1) * N], res)
    return out


def _in_issue_order(a_t, b, tile=128):
    """FP32 PSUM in issue order: each K tile's product, then (((P1 + P2) + P3) + ...) in float32.

    The inputs hold small integers times a power of two per K tile, so every tile's product is exact
    whatever the order inside it (float64 here): only the order across tiles decides the bits."""
    acc = None
    for k in range(0, a_t.shape[0], tile):
        p = (a_t[k:k + tile].astype(np.float64).T @ b[k:k + tile].astype(np.float64)).astype(np.float32)
        acc = p if acc is None else acc + p
    return acc


def test_matmul_bits_are_those_of_issue_order(monkeypatch, trn):
    """A 24-deep bf16 accumulation: identical bits with the speed layer on and off, equal to each matmul
    adding its own product into PSUM in order (which is not what one GEMM over the whole K gives)."""
    rng = np.random.default_rng(7)
    kt, m, n = 24, 128, 256
    scale = np.repeat(2.0 ** rng.integers(-12, 13, kt), 128)[:, None]
    a_t = (rng.integers(-8, 9, (kt * 128, m)) * scale).astype(ml_dtypes.bfloat16)
    b = rng.integers(-8, 9, (kt * 128, 2 * n)).astype(ml_dtypes.bfloat16)
    ref = _in_issue_order(a_t, b)
    one_gemm = a_t.astype(np.float32).T @ b.astype(np.float32)
    assert (one_gemm != ref).sum() > 1000  # the order across tiles matters for these inputs
    fast = k_stream(a_t, b)
    monkeypatch.setenv("TRNSIM_FAST", "0")
    slow = k_stream(a_t, b)
    assert k_stream.last_cores[0].builder is REFERENCE
    np.testing.assert_array_equal(fast.view(np.uint32), ref.view(np.uint32))
    np.testing.assert_array_equal(slow.view(np.uint32), ref.view(np.uint32))


def test_random_stream_same_bits_on_and_off(monkeypatch, trn):
    """Random bf16 tiles (BLAS order inside each product): the speed layer's batched products and in-order
    sums give the bits of computing each matmul as issued."""
    rng = np.random.default_rng(11)
    a_t = rng.standard_normal((16 * 128, 128)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((16 * 128, 1024)).astype(ml_dtypes.bfloat16)
    fast = k_stream(a_t, b)
    monkeypatch.setenv("TRNSIM_FAST", "0")
    slow = k_stream(a_t, b)
    np.testing.assert_array_equal(fast.view(np.uint32), slow.view(np.uint32))


def test_bits_do_not_depend_on_the_hosts_blas_threads(trn):
    """OpenBLAS sums differently on one thread and on several; trnsim's products run on one, so a kernel's
    bits are the same whatever thread count the host's BLAS is set to."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(5)
    a_t = rng.standard_normal((512, 256)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((512, 1024)).astype(ml_dtypes.bfloat16)
    with threadpool_limits(limits=1, user_api="blas"):
        one = blocks(a_t, b)
    with threadpool_limits(limits=4, user_api="blas"):
        four = blocks(a_t, b)
    np.testing.assert_array_equal(one.view(np.uint32), four.view(np.uint32))
