"""The cyclic garbage collector kept out of a kernel launch and of a stream's scheduling."""
from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def collector_off():
    """The cyclic collector off while a kernel runs or its stream is replayed: they make a few objects per
    instruction and free them by reference counting (nothing they make forms a cycle), so its passes over
    the growing stream would find nothing.

    Every object it tracks then moves to its oldest generation (gc.freeze and
    gc.unfreeze, each O(1)): the young collection that would follow would walk the whole stream once to
    find nothing again. Garbage that was in a cycle before is then collected by the next full collection
    instead of a young one."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        if collecting:
            gc.enable()
