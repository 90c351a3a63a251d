"""The matmul ladder example: right values at a small shape, consistent figures, the published order."""
import numpy as np
import pytest

from trnsim.core.timing import benchmark

SMALL = {"M": 256, "N": 1024, "K": 512}
OPT_SMALL = {"tiles_m": 2, "tiles_n": 1, "tiles_k": 2}


@pytest.mark.parametrize("step", ["matmul_tiled", "matmul_hoisted", "matmul_blocked", "matmul_optimized"])
def test_ladder_step_matches_numpy(ladder, step):
    """Each ladder kernel computes lhsT.T @ rhs (bf16 in, fp32 accumulation, bf16 out) like numpy."""
    lhsT, rhs = ladder.inputs(**SMALL)
    kernel = getattr(ladder, step)
    out = kernel(lhsT, rhs, **(OPT_SMALL if step == "matmul_optimized" else {}))
    ref = lhsT.astype(np.float32).T @ rhs.astype(np.float32)
    assert out.shape == ref.shape and out.dtype == lhsT.dtype
    np.testing.assert_allclose(out.astype(np.float32), ref, rtol=2 ** -7, atol=1e-2)


def test_tiled_figures_follow_from_the_kernel(ladder):
    """FLOPs, DMA bytes and HFU of the tiled kernel equal what its loops imply (trn1, timing only)."""
    M, N, K = 512, 1024, 256
    lhsT, rhs = ladder.inputs(M=M, N=N, K=K)
    r = benchmark(ladder.matmul_tiled, lhsT, rhs, target="trn1", timing_only=True)
    tiles = (M // 128) * (N // 512) * (K // 128)
    assert r.flops == 2 * M * N * K
    assert r.dma_bytes == tiles * (128 * 128 + 128 * 512) * 2 + M * N * 2
    assert r.hbm_write_bytes == M * N * 2
    assert r.hfu == pytest.approx(2 * M * N * K / (2 * 128 * 128 * 2.8e9 * r.latency * 1e-9))
    assert r.instructions == {"TensorE": tiles, "VectorE": (M // 128) * (N // 512), "DMA": 2 * tiles + (M // 128) * (N // 512)}


def test_ladder_comes_out_in_published_order(ladder):
    """At M=2048, N=2048, K=1024 on trn1 each step is faster than the one before; tiled is DMA-bound."""
    lhsT, rhs = ladder.inputs(M=2048, N=2048, K=1024)
    results = [benchmark(k, lhsT, rhs, target="trn1", timing_only=True) for k in ladder.LADDER]
    latencies = [r.latency for r in results]
    assert latencies == sorted(latencies, reverse=True)
    assert results[0].bound.startswith("DMA")
