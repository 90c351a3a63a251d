# cython: boundscheck=False, wraparound=False
"""An interval map over byte offsets: who last wrote and who has read each byte range since.

Segments are kept as sorted boundaries with one value each, so a lookup costs a bisection plus the
segments it overlaps; buffers a kernel reuses keep the map small. A Cell (or list) value is mutable and
owned by its segment (the scheduler changes it in place as the bytes are read and written): splitting a
segment gives the new side its own copy. This is what makes dependence
tracking O(n log n) over a stream instead of comparing every pair of instructions.

The compiled build (trnsim/compiled.py) indexes lists here without negative-index or bounds checks (the
directives above): every index in this module is a valid, non-negative one, so keep it that way.
"""
from __future__ import annotations

from bisect import bisect_right


class Cell:
    """What the scheduler knows of a byte range: its last writer (an event index, -1 for none), its readers
    since (event indices, at most one per engine track, the latest, in the order they read), the tile
    that owns the bytes (-1: none the compiler placed) and the engine track of the writer (-1: none), which
    every lookup of a producer asks for."""

    __slots__ = ("writer", "readers", "owner", "track")

    def __init__(self, writer: int, readers: list[int], owner: int, track: int = -1):
        self.writer, self.readers, self.owner, self.track = writer, readers, owner, track

    def __repr__(self):
        return f"Cell({self.writer}, {self.readers}, {self.owner}, {self.track})"


def cell(writer: int, readers: list[int], owner: int, track: int) -> Cell:
    """Cell(writer, readers, owner, track), made without calling its constructor (whose arguments the compiled
    build parses at every call): the scheduler makes one per write."""
    c = Cell.__new__(Cell)
    c.writer, c.readers, c.owner, c.track = writer, readers, owner, track
    return c


def own(x):
    """A segment's own copy of value `x`: a Cell or cell list (and any dict in it) copied, anything else shared."""
    if type(x) is Cell:
        c = x
        return cell(c.writer, list(c.readers), c.owner, c.track)
    if type(x) is not list:
        return x
    return [y.copy() if type(y) is dict else y for y in x]


class IntervalMap:
    """Values over [0, inf) in segments; `None` where nothing was recorded. `hint`: the segment `seek` found last."""

    __slots__ = ("bounds", "values", "hint")

    def __init__(self):
        self.bounds, self.values, self.hint = [0], [None], 0

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


def right(a, x) -> int:
    """bisect.bisect_right(a, x): where `x` goes in the sorted list `a`, after any equal items. Written out so
    that the compiled build searches in a C loop on C doubles (the scheduler's times): calling bisect costs more
    than the search in the short lists it keeps."""
    lo, hi = 0, len(a)
    while lo < hi:
        mid = (lo + hi) // 2
        y = a[mid]
        if x < y:
            hi = mid
        else:
            lo = mid + 1
    return lo


def covers(b, i, lo, hi) -> bool:
    """Whether segment `i` of the sorted bounds `b` is exactly [lo, hi) (the last one runs on without end)."""
    if i + 1 >= len(b):
        return False
    first, after = b[i], b[i + 1]
    return first == lo and after == hi


def seek(m, x) -> int:
    """The segment of map `m` that holds byte `x` (bisect_right(m.bounds, x) - 1), searched from the one found last
    (`m.hint`): a kernel tends to walk its tensors in order, so the answer is often that segment or the next."""
    b = m.bounds
    lo, hi, i = 0, len(b), m.hint  # the count of bounds <= x lies in [lo, hi]
    if i < hi:
        edge = b[i]
        if edge > x:
            hi = i
        else:
            lo = i + 1
            if lo < hi:
                edge = b[lo]
                if x < edge:
                    return i
                lo += 1
                if lo < hi:
                    edge = b[lo]
                    if x < edge:
                        hi = lo
    while lo < hi:
        mid = (lo + hi) // 2
        edge = b[mid]
        if x < edge:
            hi = mid
        else:
            lo = mid + 1
    m.hint = lo - 1
    return lo - 1
