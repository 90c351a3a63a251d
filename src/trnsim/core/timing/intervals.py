"""An interval map over byte offsets: who last wrote and who has read each byte range since.

Segments are kept as sorted boundaries with one value each, so a lookup costs a bisection plus the
segments it overlaps; buffers a kernel reuses keep the map small. A Cell (or list) value is mutable and
owned by its segment (the scheduler changes it in place as the bytes are read and written): splitting a
segment gives the new side its own copy. This is what makes dependence
tracking O(n log n) over a stream instead of comparing every pair of instructions.
"""
from __future__ import annotations

from bisect import bisect_right


class Cell:
    """What the scheduler knows of a byte range: its last writer (an event index, -1 for none), its readers
    since (event indices, at most one per engine track, the latest, in the order they read) and the tile
    that owns the bytes (-1: none the compiler placed)."""

    __slots__ = ("writer", "readers", "owner")

    def __init__(self, writer: int, readers: list[int], owner: int):
        self.writer, self.readers, self.owner = writer, readers, owner

    def __repr__(self):
        return f"Cell({self.writer}, {self.readers}, {self.owner})"


def cell(writer: int, readers: list[int], owner: int) -> Cell:
    """Cell(writer, readers, owner), made without calling its constructor (whose arguments the compiled build
    parses at every call): the scheduler makes one per write."""
    c = Cell.__new__(Cell)
    c.writer, c.readers, c.owner = writer, readers, owner
    return c


def own(x):
    """A segment's own copy of value `x`: a Cell or cell list (and any dict in it) copied, anything else shared."""
    if type(x) is Cell:
        c = x
        return cell(c.writer, list(c.readers), c.owner)
    if type(x) is not list:
        return x
    return [y.copy() if type(y) is dict else y for y in x]


class IntervalMap:
    """Values over [0, inf) in segments; `None` where nothing was recorded."""

    __slots__ = ("bounds", "values")

    def __init__(self):
        self.bounds, self.values = [0], [None]

    def _split(self, x: int) -> int:
        """Make `x` a boundary; return the index of the segment that starts there."""
        i = bisect_right(self.bounds, x) - 1
        if self.bounds[i] != x:
            i += 1
            self.bounds.insert(i, x)
            self.values.insert(i, own(self.values[i - 1]))
        return i

    def overlapping(self, lo: int, hi: int):
        """Values of the segments that overlap [lo, hi)."""
        b, v = self.bounds, self.values
        i = bisect_right(b, lo) - 1
        n = len(b)
        while i < n and b[i] < hi:
            if v[i] is not None:
                yield v[i]
            i += 1

    def assign(self, lo: int, hi: int, value) -> None:
        """Set [lo, hi) to one value, merging the segments inside."""
        i, j = self._split(lo), self._split(hi)
        self.bounds[i:j] = [lo]
        self.values[i:j] = [value]

    def update(self, lo: int, hi: int, fn) -> None:
        """Replace each segment's value inside [lo, hi) by fn(value)."""
        i, j = self._split(lo), self._split(hi)
        v = self.values
        for k in range(i, j):
            v[k] = fn(v[k])
