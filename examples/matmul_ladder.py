"""The matmul optimisation ladder: result[M, N] = lhsT.T @ rhs in four steps, each faster than the last.

bf16 inputs, fp32 accumulation, bf16 output; lhsT is [K, M], rhs is [K, N]. The tiles are the PE
array's: 128 along K (partitions), 128 along M (stationary free size), 512 along N (moving free size,
one PSUM bank of fp32).

    tiled      every input tile is loaded again for every output tile it touches
    hoisted    each M tile's lhsT column and each N tile's rhs column are loaded once per use
    blocked    2 M tiles x 2 N tiles per block: every loaded column feeds two output tiles
    optimized  16 M x 2 N x 8 K tiles per block, K blocks summed in SBUF, 2-4 KiB DMA runs

Run it (`python examples/matmul_ladder.py [trn1|trn2|trn3]`) to time all four at the published shape
(M=4096, N=8192, K=8192) in timing-only mode, or profile one: `trnsim profile examples/matmul_ladder.py
--kernel matmul_optimized --timing-only`.
"""
import sys

import numpy as np

import trnsim
import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl

TILE_K, TILE_M, TILE_N = 128, 128, 512


@nki.jit
def matmul_tiled(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                lhsT_tile = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lhsT_tile, src=lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
                nisa.dma_copy(dst=rhs_tile, src=rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
                nisa.nc_matmul(dst=acc, stationary=lhsT_tile, moving=rhs_tile)
            out_tile = nl.ndarray((TILE_M, TILE_N), dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=out_tile, src=acc)
            nisa.dma_copy(dst=result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N], src=out_tile)
    return result


@nki.jit
def matmul_hoisted(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    KT = K // TILE_K
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    # Resident K columns, reloaded slice by slice: slice k is refilled once its last matmul has read it.
    lhsT_tiles = nl.ndarray((TILE_K, KT, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
    rhs_tiles = nl.ndarray((TILE_K, KT, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
    for m in nl.affine_range(M // TILE_M):
        for k in nl.affine_range(KT):
            nisa.dma_copy(dst=lhsT_tiles[:, k, :], src=lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
        for n in nl.affine_range(N // TILE_N):
            for k in nl.affine_range(KT):
                nisa.dma_copy(dst=rhs_tiles[:, k, :], src=rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
            acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(KT):
                nisa.nc_matmul(dst=acc, stationary=lhsT_tiles[:, k, :], moving=rhs_tiles[:, k, :])
            out_tile = nl.ndarray((TILE_M, TILE_N), dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=out_tile, src=acc)
            nisa.dma_copy(dst=result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N], src=out_tile)
    return result


@nki.jit
def matmul_blocked(lhsT, rhs, tiles_m=2, tiles_n=2):
    K, M = lhsT.shape
    _, N = rhs.shape
    KT, BM, BN = K // TILE_K, TILE_M * tiles_m, TILE_N * tiles_n
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    # One resident column of each: a whole K column of rhs for two N tiles fills most of SBUF.
    lhsT_tiles = nl.ndarray((TILE_K, KT, BM), dtype=lhsT.dtype, buffer=nl.sbuf)
    rhs_tiles = nl.ndarray((TILE_K, KT, BN), dtype=rhs.dtype, buffer=nl.sbuf)
    for m2 in nl.affine_range(M // BM):
        for k in nl.affine_range(KT):
            for bm in nl.affine_range(tiles_m):
                m0 = m2 * BM + bm * TILE_M
                nisa.dma_copy(dst=lhsT_tiles[:, k, bm * TILE_M:(bm + 1) * TILE_M],
                              src=lhsT[k * TILE_K:(k + 1) * TILE_K, m0:m0 + TILE_M])
        for n2 in nl.affine_range(N // BN):
            for k in nl.affine_range(KT):
                for bn in nl.affine_range(tiles_n):
                    n0 = n2 * BN + bn * TILE_N
                    nisa.dma_copy(dst=rhs_tiles[:, k, bn * TILE_N:(bn + 1) * TILE_N],
                                  src=rhs[k * TILE_K:(k + 1) * TILE_K, n0:n0 + TILE_N])
            # K outermost, one PSUM bank per output tile of the block: slice k of the columns is free
            # for the next block's loads as soon as its matmuls are done.
            accs = [nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum) for _ in range(tiles_m * tiles_n)]
            for k in nl.affine_range(KT):
                for bm in nl.affine_range(tiles_m):
                    for bn in nl.affine_range(tiles_n):
                        nisa.nc_matmul(dst=accs[bm * tiles_n + bn],
                                       stationary=lhsT_tiles[:, k, bm * TILE_M:(bm + 1) * TILE_M],
                                       moving=rhs_tiles[:, k, bn * TILE_N:(bn + 1) * TILE_N])
            for bm in nl.affine_range(tiles_m):
                for bn in nl.affine_range(tiles_n):
                    out_tile = nl.ndarray((TILE_M, TILE_N), dtype=result.dtype, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=out_tile, src=accs[bm * tiles_n + bn])
                    m0, n0 = m2 * BM + bm * TILE_M, n2 * BN + bn * TILE_N
                    nisa.dma_copy(dst=result[m0:m0 + TILE_M, n0:n0 + TILE_N], src=out_tile)
    return result


@nki.jit
def matmul_optimized(lhsT, rhs, tiles_m=16, tiles_n=2, tiles_k=8):
    K, M = lhsT.shape
    _, N = rhs.shape
    BM, BN, BK = TILE_M * tiles_m, TILE_N * tiles_n, TILE_K * tiles_k
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    # The output block stays in SBUF in fp32 while the K blocks are summed into it.
    block = nl.ndarray((TILE_M, tiles_m, BN), dtype=nl.float32, buffer=nl.sbuf)
    for n2 in nl.affine_range(N // BN):
        for m2 in nl.affine_range(M // BM):
            nisa.memset(dst=block, value=0.0)
            for k2 in nl.affine_range(K // BK):
                lhsT_tiles = nl.ndarray((TILE_K, tiles_k, BM), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tiles = nl.ndarray((TILE_K, tiles_k, BN), dtype=rhs.dtype, buffer=nl.sbuf)
                for bk in nl.affine_range(tiles_k):
                    k0 = k2 * BK + bk * TILE_K
                    nisa.dma_copy(dst=lhsT_tiles[:, bk, :], src=lhsT[k0:k0 + TILE_K, m2 * BM:(m2 + 1) * BM])
                    nisa.dma_copy(dst=rhs_tiles[:, bk, :], src=rhs[k0:k0 + TILE_K, n2 * BN:(n2 + 1) * BN])
                for bm in nl.affine_range(tiles_m):
                    for bn in nl.affine_range(tiles_n):
                        acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
                        for bk in nl.affine_range(tiles_k):
                            nisa.nc_matmul(dst=acc, stationary=lhsT_tiles[:, bk, bm * TILE_M:(bm + 1) * TILE_M],
                                           moving=rhs_tiles[:, bk, bn * TILE_N:(bn + 1) * TILE_N])
                        part = block[:, bm, bn * TILE_N:(bn + 1) * TILE_N]
                        nisa.tensor_tensor(dst=part, data1=part, data2=acc, op=nl.add)
            for bm in nl.affine_range(tiles_m):
                out_rows = nl.ndarray((TILE_M, BN), dtype=result.dtype, buffer=nl.sbuf)
                nisa.tensor_copy(dst=out_rows, src=block[:, bm, :])
                m0 = m2 * BM + bm * TILE_M
                nisa.dma_copy(dst=result[m0:m0 + TILE_M, n2 * BN:(n2 + 1) * BN], src=out_rows)
    return result


LADDER = (matmul_tiled, matmul_hoisted, matmul_blocked, matmul_optimized)
SHAPE = {"M": 4096, "N": 8192, "K": 8192}  # the published problem


def inputs(M=SHAPE["M"], N=SHAPE["N"], K=SHAPE["K"], seed=0):
    """lhsT [K, M] and rhs [K, N] in bf16."""
    rng = np.random.default_rng(seed)
    bf16 = nl.bfloat16.np
    return rng.standard_normal((K, M), np.float32).astype(bf16), rng.standard_normal((K, N), np.float32).astype(bf16)


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else "trn1"
    lhsT, rhs = (np.zeros((SHAPE["K"], SHAPE[d]), nl.bfloat16.np) for d in "MN")
    for kernel in LADDER:
        r = trnsim.benchmark(kernel, lhsT, rhs, target=target, timing_only=True)
        print(f"{kernel.__name__:18s} {r.latency / 1e6:8.2f} ms  HFU {r.hfu:6.2%}  bound by {r.bound}")
