"""A beta-API kernel and its hand-ported current-API twin give bit-identical results and the same clock."""
import ml_dtypes
import numpy as np

import trnsim.nki as nki_cur
import trnsim.nki.isa as nisa_cur
import trnsim.nki.language as nl_cur
import trnsim.nki.beta as nki
import trnsim.nki.beta.isa as nisa
import trnsim.nki.beta.language as nl

BF16 = ml_dtypes.bfloat16


@nki.jit
def beta_mlp(x_t, w, bias):
    """out = gelu(x @ w + bias) row-tile by row-tile, beta style: returned tiles, grids, +=."""
    K, M = x_t.shape
    N = w.shape[1]
    out = nl.ndarray((M, N), nl.bfloat16, buffer=nl.shared_hbm)
    i_k, i_m, i_n = nl.arange(128)[:, None], nl.arange(M)[None, :], nl.arange(N)[None, :]
    b = nl.load(bias)
    acc = nl.zeros((M, N), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(K // 128):
        acc += nisa.nc_matmul(nl.load(x_t[k * 128 + i_k, i_m]), nl.load(w[k * 128 + i_k, i_n]))
    y = nisa.activation(op=nl.gelu, data=acc, bias=b, dtype=nl.bfloat16)
    nl.store(out, y)
    return out


@nki_cur.jit
def current_mlp(x_t, w, bias):
    """The same kernel in the current API: dst-first instructions, explicit tiles, a PSUM accumulation group."""
    K, M = x_t.shape
    N = w.shape[1]
    out = nl_cur.ndarray((M, N), nl_cur.bfloat16, buffer=nl_cur.shared_hbm)
    b = nl_cur.ndarray((M, 1), bias.dtype, buffer=nl_cur.sbuf)
    nisa_cur.dma_copy(dst=b, src=bias)
    acc = nl_cur.ndarray((M, N), nl_cur.float32, buffer=nl_cur.psum)  # the first matmul of the group overwrites
    for k in range(K // 128):
        lhs = nl_cur.ndarray((128, M), x_t.dtype, buffer=nl_cur.sbuf)
        rhs = nl_cur.ndarray((128, N), w.dtype, buffer=nl_cur.sbuf)
        nisa_cur.dma_copy(dst=lhs, src=x_t[k * 128:(k + 1) * 128, :])
        nisa_cur.dma_copy(dst=rhs, src=w[k * 128:(k + 1) * 128, :])
        nisa_cur.nc_matmul(dst=acc, stationary=lhs, moving=rhs)
    y = nl_cur.ndarray((M, N), nl_cur.bfloat16, buffer=nl_cur.sbuf)
    nisa_cur.activation(dst=y, op=nl_cur.gelu, data=acc, bias=b)
    nisa_cur.dma_copy(dst=out, src=y)
    return out


def test_beta_kernel_matches_its_current_api_twin(rng):
    """Same inputs, same instructions underneath: the bf16 outputs are bit-identical, and both match numpy."""
    from math import erf
    x_t = rng.standard_normal((256, 96)).astype(BF16)
    w = (rng.standard_normal((256, 200)) / 16).astype(BF16)
    bias = rng.standard_normal((96, 1)).astype(np.float32)
    beta, current = beta_mlp(x_t, w, bias), current_mlp(x_t, w, bias)
    np.testing.assert_array_equal(beta.view(np.uint16), current.view(np.uint16))
    z = x_t.astype(np.float32).T @ w.astype(np.float32) + bias
    ref = 0.5 * z * (1 + np.vectorize(erf)(z / np.sqrt(2)))
    np.testing.assert_allclose(beta.astype(np.float32), ref, rtol=1e-2, atol=1e-2)
    ops_beta = [r.op.value for r in beta_mlp.last_cores[0].stream]
    ops_cur = [r.op.value for r in current_mlp.last_cores[0].stream]
    assert ops_beta == ops_cur


def test_twins_take_the_same_time(rng):
    """The timing model gives the beta kernel and its twin the same latency: same instructions, same buffers
    (an affine_range double-buffers its tiles as the beta compiler's allocator does)."""
    import trnsim
    x_t = rng.standard_normal((512, 128)).astype(BF16)
    w = rng.standard_normal((512, 384)).astype(BF16)
    bias = rng.standard_normal((128, 1)).astype(np.float32)
    a = trnsim.benchmark(beta_mlp, x_t, w, bias, timing_only=True)
    b = trnsim.benchmark(current_mlp, x_t, w, bias, timing_only=True)
    assert a.latency > 0 and a.latency == b.latency


@nki.jit
def beta_matmul_tiled(lhsT, rhs):
    """The matmul tutorial's first step as beta kernels wrote it: mgrid indices, nl.zeros PSUM, +=, nl.copy."""
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    i_lhsT, i_rhs, i_res = nl.mgrid[0:128, 0:128], nl.mgrid[0:128, 0:512], nl.mgrid[0:128, 0:512]
    for m in nl.affine_range(M // 128):
        for n in nl.affine_range(N // 512):
            res_psum = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                lhsT_tile = nl.load(lhsT[k * 128 + i_lhsT.p, m * 128 + i_lhsT.x])
                rhs_tile = nl.load(rhs[k * 128 + i_rhs.p, n * 512 + i_rhs.x])
                res_psum += nl.matmul(lhsT_tile[...], rhs_tile[...], transpose_x=True)
            res_sb = nl.copy(res_psum, dtype=result.dtype)
            nl.store(result[m * 128 + i_res.p, n * 512 + i_res.x], value=res_sb)
    return result


def test_beta_tutorial_matmul_matches_the_current_ladder_kernel(rng):
    """The beta-style tiled matmul gives the current-API ladder kernel's values, instruction stream and latency."""
    import pathlib
    import sys

    import trnsim
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples"))
    import matmul_ladder

    lhsT = rng.standard_normal((512, 256)).astype(BF16)
    rhs = rng.standard_normal((512, 1024)).astype(BF16)
    got, ref = beta_matmul_tiled(lhsT, rhs), matmul_ladder.matmul_tiled(lhsT, rhs)
    np.testing.assert_array_equal(got.view(np.uint16), ref.view(np.uint16))
    np.testing.assert_allclose(got.astype(np.float32), lhsT.astype(np.float32).T @ rhs.astype(np.float32), rtol=2e-2,
                               atol=0.3)
    ops = [(r.op.value, r.engine.value) for r in beta_matmul_tiled.last_cores[0].stream]
    assert ops == [(r.op.value, r.engine.value) for r in matmul_ladder.matmul_tiled.last_cores[0].stream]
    a = trnsim.benchmark(beta_matmul_tiled, lhsT, rhs, target="trn1", timing_only=True)
    b = trnsim.benchmark(matmul_ladder.matmul_tiled, lhsT, rhs, target="trn1", timing_only=True)
    assert a.latency == b.latency
