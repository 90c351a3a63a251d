"""RMSNorm written as an NKI kernel author would, for real hardware. Run it on a laptop:

    trnsim run examples/rmsnorm.py            # values, checked against numpy
    trnsim profile examples/rmsnorm.py        # time, trace and HTML report

The file imports `nki` exactly as on a Trainium; `trnsim run` resolves it to the emulator.
"""
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def rmsnorm(x, gamma):
    """y = x / sqrt(mean(x^2) + 1e-6) * gamma, 128 rows per tile."""
    rows, d = x.shape
    out = nl.ndarray((rows, d), dtype=x.dtype, buffer=nl.shared_hbm)
    g = nl.ndarray((128, d), dtype=gamma.dtype, buffer=nl.sbuf)  # gamma on every partition:
    nisa.dma_copy(dst=g, src=gamma.reshape((1, d)).broadcast(0, 128))  # broadcast in HBM, not on chip
    for t in nl.affine_range(rows // 128):
        tile = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x[t * 128:(t + 1) * 128, :])
        sq = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        ssum = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=sq, op=nl.square, data=tile, reduce_op=nl.add, reduce_res=ssum)
        rms = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=rms, data=ssum, op0=nl.multiply, operand0=1.0 / d, op1=nl.add, operand1=1e-6)
        inv = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=inv, op=nl.rsqrt, data=rms)
        y = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y, data=tile, op0=nl.multiply, operand0=inv)
        nisa.tensor_tensor(dst=y, data1=y, data2=g, op=nl.multiply)
        nisa.dma_copy(dst=out[t * 128:(t + 1) * 128, :], src=y)
    return out


def inputs():
    """The kernel's arguments (what `trnsim profile` runs it on)."""
    rng = np.random.default_rng(0)
    return rng.standard_normal((512, 1024)).astype(np.float32), rng.standard_normal(1024).astype(np.float32)


if __name__ == "__main__":
    x, gamma = inputs()
    got = rmsnorm(x, gamma)
    want = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6) * gamma
    print(f"rmsnorm {x.shape}: max |error| vs numpy {np.abs(got - want).max():.2e}")
