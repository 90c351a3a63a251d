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
compiled modules' runs with a process running them all as Python. Also behind it: what a launch or a
replay made goes straight to the cyclic collector's oldest generation (`collector_off`).
"""
from __future__ import annotations

import contextlib
import gc

from trnsim.compiled import ENV, enabled  # noqa: F401  read when a core is made (compiled modules: at import)


@contextlib.contextmanager
def collector_off():
    """The cyclic collector off while a kernel runs or its stream is replayed: they make a few objects per
    instruction and free them by reference counting (nothing they make forms a cycle), so its passes over
    the growing stream would find nothing.

    With the speed layer on, every object it tracks then moves to its oldest generation (gc.freeze and
    gc.unfreeze, each O(1)): the young collection that would follow would walk the whole stream once to
    find nothing again. Garbage that was in a cycle before is then collected by the next full collection
    instead of a young one."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled():
            gc.freeze()
            gc.unfreeze()
        if collecting:
            gc.enable()
