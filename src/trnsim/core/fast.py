"""The speed layer's one switch: TRNSIM_FAST=0 turns off the shortcuts that only make a run faster.

Behind it: the lazy evaluation of PSUM accumulation groups in a kernel launch (isa/psum.py: a group's
products computed in one batched call when something next touches PSUM, then added in issue order),
deferred DMA loads (a whole-tile load is copied when first read), matmul operands read from one FP32
conversion of their HBM source (with its thread pool) instead of the tile's own bytes, and the cache of
widened stationary tiles, and the timing scheduler's sharing of one Region between records of the same
placement (Record.regions). For timing-only speed: check verdicts kept by instruction signature (an
instruction whose check is pure, issued again on operands laid out the same way, skips the checks but not
their stateful part), each cost rule asked once per signature in the scheduler, signatures built from
layout numbers kept on each view (View.keyed), views shared by index (View.keep_parts), and never-written
memory made when first read. And the hottest modules run compiled by Cython from their own sources, when
built (trnsim/compiled.py). With it off, each matmul adds its product into PSUM as it is issued, which
defines the bits. None of them changes a value or an instruction: tests/replay runs every kernel the
tests launch both ways and compares output bits and streams, and tests/core/test_compiled.py compares the
compiled modules' runs with a process running them all as Python.
"""
from __future__ import annotations

from trnsim.compiled import ENV, enabled  # noqa: F401  read when a core is made (compiled modules: at import)
