"""TRNSIM_FAST=0 turns the speed layer off (core/fast.py) and changes no output bit."""
import ml_dtypes
import numpy as np

from trnsim import nki
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
    assert not blocks.last_cores[0].fast
    np.testing.assert_array_equal(fast.view(np.uint32), slow.view(np.uint32))
    ref = a_t.astype(np.float32).T @ b.astype(np.float32)
    np.testing.assert_allclose(fast, ref, rtol=1e-5, atol=1e-4)
