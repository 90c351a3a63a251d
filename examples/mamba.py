"""The selective scan of a Mamba layer, fused into one kernel, in three versions (a Vector-engine-bound kernel).

    out[b, c, t] = sum_s C[b, s, t] * h[b, c, s, t],   h[.., t] = exp(delta[b, c, t] * A[c, s]) * h[.., t - 1]
                                                                 + delta[b, c, t] * u[b, c, t] * B[b, s, t]

delta, u: [batch, channels, seq]; A: [channels, state]; B, C: [batch, state, seq]; fp32. Channels go on
partitions (128 per tile) and the sequence on the free axis. Per (batch, state, channel tile) a step is:
exp(delta * A) on ScalarE (the scale folds the multiply in), delta * u and then * B on VectorE (B broadcast
over partitions by a DMA), the recurrence as one tensor_tensor_scan, * C, and a sum over states.
The algorithm follows the description of the AWS NKI fused Mamba tutorial
(nki/guides/tutorials/fused_mamba.rst); the code is this project's own.

    v1  loops batch, state, channel tile: delta and u are loaded again for every state
    v2  loops batch, channel tile, state: delta and u are loaded once per channel tile, and the state sum
        of one tile is stored when its state loop ends
    v3  v2 with the sequence tiled (512 per tile), the scan carried across tiles through its initial value

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


def _bcast(row_hbm):
    """A [1, n] row of HBM on all partitions: one DMA whose source steps 0 bytes per partition (the
    engines stay free for the math)."""
    t = nl.ndarray((P, row_hbm.shape[1]), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=nl.broadcast_to(row_hbm, (P, row_hbm.shape[1])))
    return t


def _step(delta_t, u_t, a_col, b_bc, c_bc, acc, n, initial=0.0):
    """One state for one channel tile: acc += C * scan(exp(delta * A), delta * u * B). Returns the scan."""
    dA = nl.ndarray((P, n), nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=dA, op=nl.exp, data=delta_t, scale=a_col)
    dBu = nl.ndarray((P, n), nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=dBu, data1=delta_t, data2=u_t, op=nl.multiply)
    nisa.tensor_tensor(dst=dBu, data1=dBu, data2=b_bc, op=nl.multiply)
    h = nl.ndarray((P, n), nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor_scan(dst=h, data0=dA, data1=dBu, initial=initial, op0=nl.multiply, op1=nl.add)
    hc = nl.ndarray((P, n), nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=hc, data1=h, data2=c_bc, op=nl.multiply)
    nisa.tensor_tensor(dst=acc, data1=acc, data2=hc, op=nl.add)
    return h


def _load(src):
    t = nl.ndarray(src.shape, nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src)
    return t


@nki.jit
def mamba_v1(delta, u, A, B, C):
    batch, channels, seq = delta.shape
    state = A.shape[1]
    tiles = channels // P
    out = nl.ndarray(delta.shape, nl.float32, buffer=nl.shared_hbm)
    for b in nl.affine_range(batch):
        acc = [nl.ndarray((P, seq), nl.float32, buffer=nl.sbuf) for _ in range(tiles)]  # every tile's state sum
        for c in nl.affine_range(tiles):
            nisa.memset(dst=acc[c], value=0.0)
        for s in nl.sequential_range(state):  # the state sum is carried in acc
            b_bc = _bcast(B[b, s:s + 1, :])
            c_bc = _bcast(C[b, s:s + 1, :])
            for c in nl.affine_range(tiles):
                rows = slice(c * P, (c + 1) * P)
                delta_t, u_t = _load(delta[b, rows, :]), _load(u[b, rows, :])
                a_col = _load(A[rows, s:s + 1])
                _step(delta_t, u_t, a_col, b_bc, c_bc, acc[c], seq)
        for c in nl.affine_range(tiles):
            nisa.dma_copy(dst=out[b, c * P:(c + 1) * P, :], src=acc[c])
    return out


@nki.jit
def mamba_v2(delta, u, A, B, C):
    batch, channels, seq = delta.shape
    state = A.shape[1]
    out = nl.ndarray(delta.shape, nl.float32, buffer=nl.shared_hbm)
    for b in nl.affine_range(batch):
        for c in nl.affine_range(channels // P):
            rows = slice(c * P, (c + 1) * P)
            delta_t, u_t, a_t = _load(delta[b, rows, :]), _load(u[b, rows, :]), _load(A[rows, :])
            acc = nl.ndarray((P, seq), nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=acc, value=0.0)
            for s in nl.sequential_range(state):
                _step(delta_t, u_t, a_t[:, s:s + 1], _bcast(B[b, s:s + 1, :]), _bcast(C[b, s:s + 1, :]), acc, seq)
            nisa.dma_copy(dst=out[b, rows, :], src=acc)
    return out


@nki.jit
def mamba_v3(delta, u, A, B, C):
    batch, channels, seq = delta.shape
    state = A.shape[1]
    n = min(SEQ_TILE, seq)
    out = nl.ndarray(delta.shape, nl.float32, buffer=nl.shared_hbm)
    for b in nl.affine_range(batch):
        for c in nl.affine_range(channels // P):
            rows = slice(c * P, (c + 1) * P)
            a_t = _load(A[rows, :])
            carry = nl.ndarray((P, state), nl.float32, buffer=nl.sbuf)  # each state's scan value so far
            nisa.memset(dst=carry, value=0.0)
            for t in nl.sequential_range(seq // n):
                cols = slice(t * n, (t + 1) * n)
                delta_t, u_t = _load(delta[b, rows, cols]), _load(u[b, rows, cols])
                acc = nl.ndarray((P, n), nl.float32, buffer=nl.sbuf)
                nisa.memset(dst=acc, value=0.0)
                for s in nl.sequential_range(state):
                    h = _step(delta_t, u_t, a_t[:, s:s + 1], _bcast(B[b, s:s + 1, cols]), _bcast(C[b, s:s + 1, cols]),
                              acc, n, initial=carry[:, s:s + 1])
                    nisa.tensor_copy(dst=carry[:, s:s + 1], src=h[:, n - 1:n])
                nisa.dma_copy(dst=out[b, rows, cols], src=acc)
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
