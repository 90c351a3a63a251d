"""The speed layer: a builder (core/builder.py) whose hook points only make a run faster, and its one switch,
TRNSIM_FAST (0 turns it off), read once per launch by the front end (`builder()`).

Behind it: the lazy evaluation of PSUM accumulation groups in a kernel launch (fast/psum.py: a group's
products computed in one batched call when something next touches PSUM, then added in issue order; a group
over a whole tile owed past its eviction, the copies out of PSUM passing the debt on, and owed groups computed
together, in the background where row blocks can share no more),
deferred DMA loads (fast/loads.py: a whole-tile load is copied when first read), matmul operands read from
one FP32 conversion of their HBM source (with its thread pool) instead of the tile's own bytes, and the
cache of stationary tiles' copies (widened when computed). For timing-only speed: check verdicts kept by
instruction signature (fast/memo.py: an instruction whose check is pure, issued again on operands laid out the same way, skips
the checks but not their stateful part), numbered so that the timing scheduler asks each cost rule once
per signature and shares one Region between records of the same placement (Record.regions), signatures
built from layout numbers kept on each view, views shared by index (fast/views.py), and the middle iterations
of a loop recorded without running its Python where that is proven the same (fast/stamp.py). And these modules
and the scheduler run compiled by Cython from their own sources, when built (trnsim/compiled.py). With it
off, each matmul adds its product into PSUM as it is issued, which defines the bits. None of them changes
a value or an instruction: tests/replay runs every kernel the tests launch both ways and compares output
bits and streams, and tests/core/test_compiled.py compares the compiled modules' runs with a process
running them all as Python.
"""
from __future__ import annotations

import functools

from trnsim.compiled import ENV, enabled  # noqa: F401  read once per launch (compiled modules: at import)
from trnsim.core.builder import Builder
from trnsim.core.fast import loads, psum, stamp, views
from trnsim.core.fast.memo import Verdicts


class Speed(Builder):
    """One core's speed layer: its verdict memo, pending PSUM groups and FP32 conversions."""

    def __init__(self, launch: bool = False):
        self.verdicts = Verdicts(launch)  # a launch's cores share the process's tables (fast/memo.py)
        self.checked = self.verdicts.checked
        self.lazy = launch  # a kernel launch: nothing outside observes PSUM until it ends (host_read flushes)
        self.pending: dict = {}  # PSUM region -> its accumulation group not yet computed
        self.owed = psum.Batch()  # closed groups whose values are owed, computed when first read
        self.owing: dict = {}  # allocation id -> weak reference to an allocation owed values (fast/psum.py: Owed)
        self.stationaries: dict = {}  # copies of stationary tiles by the bytes they came from
        self.conversions: dict = {}  # FP32 conversions of whole HBM tensors that matmuls read
        self.stamped = 0  # loop iterations recorded without running their Python (fast/stamp.py)
        # the hooks every matmul calls, bound to their state: no Python frame of this class's per matmul
        self.stationary = functools.partial(psum.stationary, self.stationaries)
        self.moving = functools.partial(psum.moving, self.conversions)
        self.matmul_into = functools.partial(psum.matmul_into, self.pending, launch)

    def another(self):
        return Speed(self.lazy)

    def loop(self, nc, indices):
        return indices if nc.values else stamp.loop(nc, indices)

    def tensor(self, v):
        return views.keep_parts(v)

    def flush(self, nc) -> None:
        if self.pending:
            psum.flush(self.pending, self.owed if self.lazy else None, self.owing)

    def copy(self, nc, dst, src) -> bool:
        return src.alloc.pending is not None and psum.owed_copy(self.owing, dst, src)

    def sync(self, nc) -> None:
        self.flush(nc)
        psum.settle(self.owing)
        self.owed.wait()
        self.stationaries.clear()
        self.conversions.clear()

    def load(self, nc, dst, src) -> bool:
        return nc.peer is None and loads.remember_source(dst, src, defer=True)

    def loaded(self, nc, dst, src) -> None:
        loads.remember_source(dst, src)


def builder(launch: bool = False) -> Builder | None:
    """A core's builder as TRNSIM_FAST chooses it now: the speed layer, or None (the reference)."""
    if not enabled():
        return None
    if launch:
        views.fresh()
    return Speed(launch)
