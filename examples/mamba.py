"""The selective scan of a Mamba layer, fused into one kernel, in three versions (a Vector-engine-bound kernel).

    out[b, c, t] = sum_s C[b, s, t] * h[b, c, s, t],   h[.., t] = exp(delta[b, c, t] * A[c, s]) * h[.., t - 1]
                                                                 + delta[b, c, t] * u[b, c, t] * B[b, s, t]

delta, u: [batch, channels, seq]; A: [channels, state]; B, C: [batch, state, seq]; fp32. Channels go on
partitions (128 per tile) and the sequence on the free axis. Per (batch, state, channel tile) a step is:
exp(delta * A) on ScalarE (the scale folds the multiply in), delta * u and then * B on VectorE, the
recurrence as one tensor_tensor_scan, * C, and a sum over states. B and C rows are loaded to one partition
and spread over the 128 partitions by a ones-matmul on TensorE (the tutorial's partition broadcast), which
lands in PSUM: the multiplies that read them have one input in PSUM.
The algorithm and loop structure follow the AWS NKI fused Mamba tutorial (nki/guides/tutorials/fused_mamba.rst
and its kernels); the code is this project's own.

    v1  loops batch, state, channel tile: delta and u are loaded again for every state
    v2  loops batch, channel tile, state: delta and u are loaded once per channel tile, and the state sum
        of one tile is stored when its state loop ends
    v3  v2 with the sequence tiled (512 per tile) inside the state loop, the scan carried across tiles
        through its initial value

`python examples/mamba.py [trn1|trn2|trn3]` times the published sweep in timing-only mode.
"""
import sys

import numpy as np

import trnsim
import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl

P = 128  # channels per tile (partitions)
SEQ_TILE = 512  # v3's sequence tile


def _ones():
    """The [1, P] stationary of the broadcast matmuls, made once per kernel."""
    t = nl.ndarray((1, P), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    return t


def _spread(row_hbm, ones):
    """A [1, n] row of HBM on all P partitions: loaded to one partition, then ones.T @ row on TensorE. Up
    to a PSUM bank it stays in PSUM; a longer row is spread bank by bank into SBUF."""
    n = row_hbm.shape[1]
    row = nl.ndarray((1, n), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=row, src=row_hbm)
    bank = nl.tile_size.psum_bank_fmax
    if n <= bank:
        t = nl.ndarray((P, n), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=t, stationary=ones, moving=row)
        return t
    t = nl.ndarray((P, n), nl.float32, buffer=nl.sbuf)
    for lo in range(0, n, bank):
        ps = nl.ndarray((P, bank), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=ones, moving=row[:, lo:lo + bank])
        nisa.tensor_copy(dst=t[:, lo:lo + bank], src=ps)
    return t


def _step(delta_t, u_t, a_col, b_row, c_row, ones, acc, initial=0.0):
    """One state for one channel tile: acc += C * scan(exp(delta * A), delta * u * B). Returns the scan."""
    n = delta_t.shape[1]
    dA = nl.ndarray((P, n), nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=dA, op=nl.exp, data=delta_t, scale=a_col)
    dU = nl.ndarray((P, n), nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=dU, data1=delta_t, data2=u_t, op=nl.multiply)
    dBu = nl.ndarray((P, n), nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=dBu, data1=dU, data2=_spread(b_row, ones), op=nl.multiply)
    h = nl.ndarray((P, n), nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor_scan(dst=h, data0=dA, data1=dBu, initial=initial, op0=nl.multiply, op1=nl.add)
    hc = nl.ndarray((P, n), nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=hc, data1=h, data2=_spread(c_row, ones), op=nl.multiply)
    nisa.tensor_tensor(dst=acc, data1=acc, data2=hc, op=nl.add)
    return h


def _load(src):
    t = nl.ndarray(src.shape, nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src)
    return t


def _zeros(n):
    t = nl.ndarray((P, n), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    return t


@nki.jit
def mamba_v1(delta, u, A, B, C):
    batch, channels, seq = delta.shape
    state = A.shape[1]
    tiles = channels // P
    out = nl.ndarray(delta.shape, nl.float32, buffer=nl.shared_hbm)
    ones = _ones()
    for b in nl.affine_range(batch):
        acc = [_zeros(seq) for _ in range(tiles)]  # every tile's state sum
        for s in nl.affine_range(state):  # acc sums over it: a reduction
            for c in nl.affine_range(tiles):
                rows = slice(c * P, (c + 1) * P)
                delta_t, a_col, u_t = _load(delta[b, rows, :]), _load(A[rows, s:s + 1]), _load(u[b, rows, :])
                _step(delta_t, u_t, a_col, B[b, s:s + 1, :], C[b, s:s + 1, :], ones, acc[c])
        for c in nl.affine_range(tiles):
            nisa.dma_copy(dst=out[b, c * P:(c + 1) * P, :], src=acc[c])
    return out


@nki.jit
def mamba_v2(delta, u, A, B, C):
    batch, channels, seq = delta.shape
    state = A.shape[1]
    out = nl.ndarray(delta.shape, nl.float32, buffer=nl.shared_hbm)
    ones = _ones()
    for b in nl.affine_range(batch):
        for c in nl.affine_range(channels // P):
            rows = slice(c * P, (c + 1) * P)
            acc = _zeros(seq)
            delta_t, u_t = _load(delta[b, rows, :]), _load(u[b, rows, :])
            for s in nl.affine_range(state):
                _step(delta_t, u_t, _load(A[rows, s:s + 1]), B[b, s:s + 1, :], C[b, s:s + 1, :], ones, acc)
            nisa.dma_copy(dst=out[b, rows, :], src=acc)
    return out


@nki.jit
def mamba_v3(delta, u, A, B, C):
    batch, channels, seq = delta.shape
    state = A.shape[1]
    n = min(SEQ_TILE, seq)
    out = nl.ndarray(delta.shape, nl.float32, buffer=nl.shared_hbm)
    ones = _ones()
    for b in nl.affine_range(batch):
        for c in nl.affine_range(channels // P):
            rows = slice(c * P, (c + 1) * P)
            acc = _zeros(seq)
            delta_t, u_t = _load(delta[b, rows, :]), _load(u[b, rows, :])
            for s in nl.affine_range(state):
                a_col = _load(A[rows, s:s + 1])
                carry = _zeros(1)  # the scan value at the end of the last sequence tile
                for t in nl.sequential_range(seq // n):
                    cols = slice(t * n, (t + 1) * n)
                    h = _step(delta_t[:, cols], u_t[:, cols], a_col, B[b, s:s + 1, cols], C[b, s:s + 1, cols], ones,
                              acc[:, cols], initial=carry)
                    nisa.tensor_copy(dst=carry, src=h[:, n - 1:n])
            nisa.dma_copy(dst=out[b, rows, :], src=acc)
    return out


KERNELS = (mamba_v1, mamba_v2, mamba_v3)


def reference(delta, u, A, B, C):
    """numpy: the recurrence step by step along the sequence."""
    dA = np.exp(delta[:, :, None, :] * A[None, :, :, None])  # [b, c, s, t]
    dBu = (delta * u)[:, :, None, :] * B[:, None, :, :]
    h = np.zeros(dA.shape[:3], np.float64)
    out = np.zeros(delta.shape, np.float64)
    for t in range(delta.shape[2]):
        h = dA[..., t] * h + dBu[..., t]
        out[..., t] = (h * C[:, None, :, t]).sum(axis=2)
    return out


def inputs(channels=256, seq=512, batch=1, state=16, rng=None):
    rng = rng or np.random.default_rng(0)
    f = np.float32
    return (rng.uniform(0.0, 0.1, (batch, channels, seq)).astype(f), rng.standard_normal((batch, channels, seq)).astype(f),
            -rng.uniform(0.5, 2.0, (channels, state)).astype(f), rng.standard_normal((batch, state, seq)).astype(f),
            rng.standard_normal((batch, state, seq)).astype(f))


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else "trn1"
    for k, ch, seq in ((mamba_v1, 256, 512), (mamba_v1, 4096, 512), (mamba_v2, 4096, 512), (mamba_v3, 4096, 512)):
        shapes = [np.zeros(x.shape, np.float32) for x in inputs(ch, seq, state=16)]
        r = trnsim.benchmark(k, *shapes, target=target, timing_only=True)
        print(f"{k.__name__} channels={ch} seq={seq}: {r.latency / 1e3:.1f} us, bound by {r.bound}, "
              f"VectorE {r.share.get('VectorE', 0):.1%}")
