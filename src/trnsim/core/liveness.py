"""Tile lifetimes as the compiler sees them: a tile made in a loop iteration is dead when it ends.

The compiler scopes a tensor to the block that made it (a loop body, one iteration at a time) and frees
it after its last use; Python would keep it while a name still holds it (until the name is rebound in
the next iteration, after the new tile is made). `iterations` runs a loop's iterations so that the
tensors an iteration makes are held (memory.Memory.held) through it and the next one, even where the
program drops them, so consecutive iterations use different buffers; when an iteration ends they expire
(memory.py). Held and expired bytes are taken back, oldest first, whenever an allocation would not fit
otherwise: the number of buffers shrinks to what fits, down to one. A tile used after its bytes went
elsewhere is refused with OutOfScopeError: on hardware it would read another tensor's data.
"""
from __future__ import annotations

import weakref


class Iteration:
    """The on-chip tensors made while one loop iteration runs (weak references: the memory holds them)."""

    __slots__ = ("allocs",)

    def __init__(self):
        self.allocs: list[weakref.ref] = []

    def add(self, a) -> None:
        self.allocs.append(weakref.ref(a))
        a.memory.held[a.id] = a

    def expire(self) -> list:
        """Mark the tensors still live as expired; return them, for the loop to release after the next one."""
        held = []
        for ref in self.allocs:
            a = ref()
            if a is None or a.evicted or a.expired or a.id not in a.memory.live:
                continue
            a.expired = True
            a.memory.expired[a.id] = a
            held.append(a)
        return held


def iterations(nc, indices):
    """Yield `indices`, one Iteration scope each on core `nc`; the previous iteration's tensors stay held
    through the next one (as its buffers), then are released to the program's references."""
    prev: list = []
    try:
        for i in indices:
            scope = Iteration()
            nc.scopes.append(scope)
            try:
                yield i
            finally:
                if scope in nc.scopes:
                    nc.scopes.remove(scope)
                _release(prev)
                prev = scope.expire()
    finally:
        _release(prev)


def _release(allocs) -> None:
    for a in allocs:
        a.memory.held.pop(a.id, None)
