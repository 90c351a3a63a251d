"""Kernel files the CLI tests write and run: a matmul into PSUM, an activation out of it, DMA both ways."""

MATMUL_EXP = """
import numpy as np
import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl


@nki.jit
def matmul_exp(a, b):
    out = nl.ndarray((a.shape[1], b.shape[1]), nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    y = nl.ndarray(b.shape, b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    nisa.dma_copy(dst=y, src=b)
    acc = nl.ndarray((a.shape[1], b.shape[1]), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=x, moving=y)
    res = nl.ndarray(acc.shape, nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=res, op=nl.exp, data=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def inputs():
    return np.ones((128, 128), np.float32), np.ones((128, 512), np.float32)
"""
