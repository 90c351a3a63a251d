"""The speed layer's one switch: TRNSIM_FAST=0 turns off the shortcuts that only make a run faster.

Behind it: deferred DMA loads (a whole-tile load is copied when first read), matmul operands read from one
FP32 conversion of their HBM source (with its thread pool) instead of the tile's own bytes, and the cache of
widened stationary tiles, and the timing scheduler's sharing of one Region between records of the same
placement (Record.regions). None of them changes a value or an instruction: tests/replay runs every kernel the
tests launch both ways and compares output bits and streams.

Not behind it: the lazy evaluation of PSUM accumulation groups (isa/psum.py), which joins the K tiles of a
group into one GEMM; its FP32 sums run in BLAS order, so it defines today's matmul bits rather than
merely speeding them up.
"""
from __future__ import annotations

import os

ENV = "TRNSIM_FAST"


def enabled() -> bool:
    """Whether the speed layer is on (default) for a core made now."""
    return os.environ.get(ENV, "1") != "0"
