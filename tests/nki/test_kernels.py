"""Kernels written in the current NKI API, each checked against numpy computed here."""
import ml_dtypes
import numpy as np

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl

BF16 = ml_dtypes.bfloat16


@nki.jit
def vector_add(a, b):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    for i in range(a.shape[0] // 128):
        x = nl.load(a[i * 128:(i + 1) * 128, :])
        y = nl.load(b[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], nl.add(x, y))
    return out


def test_vector_add_many_tiles(rng, trn):
    """Adding two [1024, 384] fp32 arrays in 8 tiles matches numpy exactly."""
    a, b = rng.standard_normal((1024, 384), np.float32), rng.standard_normal((1024, 384), np.float32)
    np.testing.assert_array_equal(vector_add(a, b), a + b)


@nki.jit
def tiled_matmul(a_t, b):
    K, M = a_t.shape
    _, N = b.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in range(M // 128):
        for n in range(N // 512):
            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for k in range(K // 128):
                lhs = nl.ndarray((128, 128), dtype=a_t.dtype, buffer=nl.sbuf)
                rhs = nl.ndarray((128, 512), dtype=b.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lhs, src=a_t[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
                nisa.dma_copy(dst=rhs, src=b[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                nisa.nc_matmul(dst=acc, stationary=lhs, moving=rhs)
            res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[m * 128:(m + 1) * 128, n * 512:(n + 1) * 512], src=res)
    return out


def test_tiled_matmul_accumulates_over_k(rng, trn):
    """A bf16 [256x512]^T x [512x1024] matmul accumulated over 4 K tiles in PSUM matches fp32 numpy."""
    a_t = rng.standard_normal((512, 256)).astype(BF16)
    b = rng.standard_normal((512, 1024)).astype(BF16)
    ref = a_t.astype(np.float32).T @ b.astype(np.float32)
    np.testing.assert_allclose(tiled_matmul(a_t, b), ref, rtol=1e-5, atol=1e-3)


@nki.jit
def matmul_bias_gelu(x_t, w, bias):
    K, M = x_t.shape
    N = w.shape[1]
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    xs, ws = nl.load(x_t), nl.load(w)
    b = nl.load(bias)  # [M, 1]: one bias per output row
    acc = nl.ndarray((M, N), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(acc, xs, ws)
    y = nl.ndarray((M, N), nl.float32, buffer=nl.sbuf)
    nisa.activation(y, nl.gelu, acc, bias=b)
    nl.store(out, y)
    return out


def test_matmul_bias_gelu_fused(rng, trn):
    """matmul, then gelu(x + bias) fused on the scalar engine reading PSUM, matches numpy with erf."""
    from math import erf
    x_t = rng.standard_normal((128, 64), np.float32)
    w = rng.standard_normal((128, 256), np.float32) / 8
    bias = rng.standard_normal((64, 1), np.float32)
    z = x_t.T @ w + bias
    ref = 0.5 * z * (1 + np.vectorize(erf)(z / np.sqrt(2)))
    np.testing.assert_allclose(matmul_bias_gelu(x_t, w, bias), ref, rtol=1e-4, atol=1e-5)


@nki.jit
def row_softmax(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for i in range(x.shape[0] // 128):
        nl.store(out[i * 128:(i + 1) * 128], nl.softmax(nl.load(x[i * 128:(i + 1) * 128])))
    return out


def test_row_softmax(rng, trn):
    """Softmax along rows of a [256, 1000] array matches numpy's stable softmax."""
    x = rng.standard_normal((256, 1000), np.float32) * 4
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(row_softmax(x), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_timing_only_launch_records_the_same_stream(rng, trn):
    """With values off, the tiled matmul records the same stream, including which matmuls accumulate."""
    from trnsim.core import Op
    from trnsim.nki._frontend import launch
    a_t = rng.standard_normal((256, 128)).astype(BF16)
    b = rng.standard_normal((256, 512)).astype(BF16)

    def stream():  # the regions, without the ids of this run's memories; the engines the compiler may choose from
        return [(r.op, r.attrs.get("choices") or r.engine, {n: g._replace(memory=0) for n, g in r.operands.items()})
                for r in tiled_matmul.last_cores[0].stream]
    tiled_matmul(a_t, b)
    full = stream()
    launch(tiled_matmul, (a_t, b), {}, values=False)
    shapes = stream()
    assert shapes == full and sum(op is Op.NC_MATMUL for op, _, _ in shapes) == 2
    mms = [r for r in tiled_matmul.last_cores[0].stream if r.op is Op.NC_MATMUL]
    assert [r.accumulated for r in mms] == [False, True]  # the group: overwrite, then accumulate
    assert "dst" not in mms[0].reads and "dst" in mms[1].reads
