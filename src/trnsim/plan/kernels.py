"""Representative NKI kernels the planner times to learn what one NeuronCore achieves per op.

    matmul     result[M, N] = lhsT.T @ rhs, the matmul ladder's fully optimised structure generalised
               to any shape: up to 16 M tiles x 2 N tiles x 8 K tiles per block, K blocks summed in
               SBUF in fp32 (one K block drains PSUM straight to the output), contiguous DMA runs
    attention  one head of flash attention: K and V resident in SBUF, scores transposed (keys on
               partitions) so exp(S^T) feeds the PV matmul as its stationary operand, software
               pipelined so TensorE and ScalarE overlap; the scores never leave the chip
    vector     a tensor_tensor add over SBUF-resident tiles: the Vector engine's element rate
    stream     HBM -> SBUF -> HBM copies over every DMA engine: the core's achieved HBM bytes/s

The elementwise kernels isolate one resource each, so an op's time is the slowest of its elements
on its engine and its bytes through DMA, each at the simulated rate.
"""
from __future__ import annotations

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl


def _tiles() -> tuple[int, int, int]:
    """The running core's partitions, stationary free size and moving free size (one PSUM bank), from the catalog."""
    ts = nl.tile_size
    return ts.pmax, ts.gemm_stationary_fmax, ts.gemm_moving_fmax


@nki.jit
def matmul(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    TILE_K, TILE_M, TILE_N = _tiles()
    tk, tm, tn = min(K, TILE_K), min(M, TILE_M), min(N, TILE_N)
    # tiles per block: 8 K x 16 M tiles of 2-byte operands, half each of fp32, so a block takes the same
    # SBUF bytes in every dtype (under Trn1's 192 KiB per partition, double-buffered)
    wide = max(2, lhsT.dtype.itemsize) // 2
    bk, bm, bn = min(8 // wide, K // tk), min(16 // wide, M // tm), min(2, N // tn)
    BK, BM, BN = tk * bk, tm * bm, tn * bn
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    summed = K > BK  # more than one K block: accumulate the blocks in SBUF
    block = nl.ndarray((tm, bm, BN), dtype=nl.float32, buffer=nl.sbuf) if summed else None
    for n2 in nl.affine_range(N // BN):
        for m2 in nl.affine_range(M // BM):
            if not summed:  # allocated per block, so the next block fills while this one is stored
                block = nl.ndarray((tm, bm, BN), dtype=result.dtype, buffer=nl.sbuf)
            if summed:
                nisa.memset(dst=block, value=0.0)
            for k2 in nl.affine_range(K // BK):
                lhsT_tiles = nl.ndarray((tk, bk, BM), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tiles = nl.ndarray((tk, bk, BN), dtype=rhs.dtype, buffer=nl.sbuf)
                for k in nl.affine_range(bk):
                    k0 = k2 * BK + k * tk
                    nisa.dma_copy(dst=lhsT_tiles[:, k, :], src=lhsT[k0:k0 + tk, m2 * BM:(m2 + 1) * BM])
                    nisa.dma_copy(dst=rhs_tiles[:, k, :], src=rhs[k0:k0 + tk, n2 * BN:(n2 + 1) * BN])
                for m in nl.affine_range(bm):
                    for n in nl.affine_range(bn):
                        acc = nl.ndarray((tm, tn), dtype=nl.float32, buffer=nl.psum)
                        for k in nl.affine_range(bk):
                            nisa.nc_matmul(dst=acc, stationary=lhsT_tiles[:, k, m * tm:(m + 1) * tm],
                                           moving=rhs_tiles[:, k, n * tn:(n + 1) * tn])
                        part = block[:, m, n * tn:(n + 1) * tn]
                        if summed:
                            nisa.tensor_tensor(dst=part, data1=part, data2=acc, op=nl.add)
                        else:
                            nisa.tensor_copy(dst=part, src=acc)
            for m in nl.affine_range(bm):
                m0 = m2 * BM + m * tm
                if summed:
                    out_rows = nl.ndarray((tm, BN), dtype=result.dtype, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=out_rows, src=block[:, m, :])
                    nisa.dma_copy(dst=result[m0:m0 + tm, n2 * BN:(n2 + 1) * BN], src=out_rows)
                else:
                    nisa.dma_copy(dst=result[m0:m0 + tm, n2 * BN:(n2 + 1) * BN], src=block[:, m, :])
    return result


@nki.jit
def attention(qT, kT, v):
    """O[Sq, D] = exp(Q K^T) V for one head; qT [D, Sq], kT [D, S], v [S, D], D <= 128."""
    D, Sq = qT.shape
    S = kT.shape[1]
    TILE_K, TILE_M, TILE_N = _tiles()
    tq = min(Sq, TILE_N)
    out = nl.ndarray((Sq, D), dtype=qT.dtype, buffer=nl.shared_hbm)
    keys = nl.ndarray((D, S), dtype=kT.dtype, buffer=nl.sbuf)
    values = nl.ndarray((TILE_K, S // TILE_K, D), dtype=v.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=keys, src=kT)
    for t in nl.affine_range(S // TILE_K):
        nisa.dma_copy(dst=values[:, t, :], src=v[t * TILE_K:(t + 1) * TILE_K, :])
    for q in nl.affine_range(Sq // tq):
        queries = nl.ndarray((D, tq), dtype=qT.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=queries, src=qT[:, q * tq:(q + 1) * tq])
        accs = [nl.ndarray((TILE_M, D), dtype=nl.float32, buffer=nl.psum) for _ in range(tq // TILE_M)]
        ready = None  # software pipelined: TensorE scores block t while ScalarE exponentiates block t-1
        for t in nl.affine_range(S // TILE_K + 1):
            if t < S // TILE_K:
                scores = nl.ndarray((TILE_K, tq), dtype=nl.float32, buffer=nl.psum)  # S^T: keys x queries
                nisa.nc_matmul(dst=scores, stationary=keys[:, t * TILE_K:(t + 1) * TILE_K], moving=queries)
            if ready is not None:
                probs, tp = ready
                for j in nl.affine_range(tq // TILE_M):
                    nisa.nc_matmul(dst=accs[j], stationary=probs[:, j * TILE_M:(j + 1) * TILE_M],
                                   moving=values[:, tp, :])
            if t < S // TILE_K:
                probs = nl.ndarray((TILE_K, tq), dtype=qT.dtype, buffer=nl.sbuf)
                nisa.activation(dst=probs, op=nl.exp, data=scores)
                ready = (probs, t)
        for j in nl.affine_range(tq // TILE_M):
            rows = nl.ndarray((TILE_M, D), dtype=qT.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=rows, src=accs[j])
            q0 = q * tq + j * TILE_M
            nisa.dma_copy(dst=out[q0:q0 + TILE_M, :], src=rows)
    return out


@nki.jit
def vector(x):
    """x: [tiles, 128, F] in HBM, loaded once; the adds run on an SBUF-resident tile, each on the last one's
    result (an add of unchanged inputs would be computed once: the compiler hoists it, core/hoist.py)."""
    T, P, F = x.shape
    a = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=x[0])
    for t in nl.sequential_range(T):
        nisa.tensor_tensor(dst=a, data1=a, data2=a, op=nl.add)
    return x


@nki.jit
def stream(x):
    """x: [tiles, 128, F] in HBM, copied through SBUF to a result of the same shape."""
    T, P, F = x.shape
    result = nl.ndarray((T, P, F), dtype=x.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range(T):
        tile = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x[t])
        nisa.dma_copy(dst=result[t], src=tile)
    return result
