# cython: boundscheck=False, wraparound=False
"""An interval map over byte offsets: who last wrote and who has read each byte range since.

Segments are kept as sorted boundaries, each with what the scheduler knows of its bytes: its last writer (an
event index, -1 for none), its readers since (event indices, at most one per engine track, the latest, in the
order they read), the tile that owns the bytes (-1: none the compiler placed; NOTHING: nothing recorded there)
and the engine track of the writer (-1: none). A lookup costs a bisection plus the segments it overlaps; buffers
a kernel reuses keep the map small. This is what makes dependence tracking O(n log n) over a stream instead of
comparing every pair of instructions.

The fields live in arrays indexed by segment (arrays.py: lists in the Python build, C arrays of integers in the
compiled one, which cimports arrays.pxd in its place), so that the compiled build walks a map without a Python
object per segment; the scheduler reads and changes the maps only through the functions here.

The compiled build (trnsim/compiled.py) indexes without negative-index or bounds checks (the directives above):
every index in this module is a valid, non-negative one, so keep it that way.
"""
from __future__ import annotations

from trnsim.core.timing import arrays

NOTHING = -2  # the owner of a segment where nothing was recorded
KEPT = 32  # the most segments a write keeps apart (note): a bound on the segments every later write walks


class IntervalMap:
    """Segments over [0, inf): segment i < n starts at byte lo[i] (lo[0] = 0) and runs to lo[i + 1] (the last one
    without end); writer[i] on track[i] wrote it last, tile owner[i] owns it, and the count[i] events
    readers[i * width], readers[i * width + 1], ... read it since. `cap`: the segments the arrays have room for;
    `hint`: the segment `seek` found last."""

    __slots__ = ("n", "cap", "width", "hint", "lo", "writer", "owner", "track", "count", "readers")

    def __init__(self):
        self.n, self.cap, self.width, self.hint = 1, 8, 2, 0
        self.lo = arrays.new(8)
        self.writer = arrays.new(8)
        self.owner = arrays.new(8)
        self.track = arrays.new(8)
        self.count = arrays.new(8)
        self.readers = arrays.new(16)
        self.lo[0] = 0
        _empty(self, 0)

    def __dealloc__(self):  # the compiled build's C arrays; never called on a Python class
        arrays.release(self.lo)
        arrays.release(self.writer)
        arrays.release(self.owner)
        arrays.release(self.track)
        arrays.release(self.count)
        arrays.release(self.readers)

    def segments(self) -> list:
        """Per segment, in order: (its first byte, None where nothing was recorded, else (writer, readers, owner,
        track))."""
        out = []
        for i in range(self.n):
            if self.owner[i] == NOTHING:
                out.append((self.lo[i], None))
                continue
            readers = []
            for k in range(self.count[i]):
                readers.append(self.readers[i * self.width + k])
            out.append((self.lo[i], (self.writer[i], readers, self.owner[i], self.track[i])))
        return out


class Waits:
    """The events an instruction waits for, each once, in the order found (_wait): `n` of them in `at`, which has
    room for `cap`. An array rather than a list: the compiled build keeps C integers, and emptying it (n = 0)
    keeps its room."""

    __slots__ = ("n", "cap", "at")

    def __init__(self):
        self.n, self.cap = 0, 8
        self.at = arrays.new(8)

    def __dealloc__(self):  # the compiled build's C array; never called on a Python class
        arrays.release(self.at)

    def found(self) -> list:
        """The events, as a list."""
        out = []
        for k in range(self.n):
            out.append(self.at[k])
        return out


class Ends:
    """Per event placed so far, by index: its engine track and when it ends (ns), `n` of them in arrays with room
    for `cap` (C arrays in the compiled build: a lookup reads a C integer and a C double, not boxed ones)."""

    __slots__ = ("n", "cap", "track", "end")

    def __init__(self):
        self.n, self.cap = 0, 1024
        self.track = arrays.new(1024)
        self.end = arrays.new_reals(1024)

    def __dealloc__(self):  # the compiled build's C arrays; never called on a Python class
        arrays.release(self.track)
        arrays.release(self.end)


def ended(ends: Ends, track: int, end: float) -> None:
    """Enter the next event: on `track`, ending at `end`."""
    k = ends.n
    if k == ends.cap:
        ends.cap = 2 * k
        ends.track = arrays.resized(ends.track, ends.cap)
        ends.end = arrays.resized_reals(ends.end, ends.cap)
    ends.track[k] = track
    ends.end[k] = end
    ends.n = k + 1


class Latest:
    """Per PSUM tile, by its number (Region.tile): the event of its last access so far (-1: none yet) and when that
    access ends, in arrays with room for `cap` tile numbers (C arrays in the compiled build: no dict lookup and no
    boxed number or time per access). Grown by reach."""

    __slots__ = ("cap", "event", "end")

    def __init__(self):
        self.cap = 0
        self.event = arrays.new(0)
        self.end = arrays.new_reals(0)

    def __dealloc__(self):  # the compiled build's C arrays; never called on a Python class
        arrays.release(self.event)
        arrays.release(self.end)


def reach(latest, tile: int) -> None:
    """Give `latest` room for tile number `tile`, the tiles it adds with no access yet."""
    cap = latest.cap
    if tile >= cap:
        n = max(2 * cap, tile + 1, 256)
        latest.event = event = arrays.resized(latest.event, n)
        latest.end = arrays.resized_reals(latest.end, n)
        for k in range(cap, n):
            event[k] = -1
        latest.cap = n


class Pending:
    """The segments an instruction read that hold earlier accesses, whose reader it becomes once its end is known
    (touch, noted): `n` of them, segment `at[k]` of map `maps[k]`, with room for `cap`. Emptied by its count
    (n = 0), which keeps its room: no list freed and grown again per step."""

    __slots__ = ("n", "cap", "maps", "at")

    def __init__(self):
        self.n, self.cap = 0, 8
        self.maps = [None] * 8
        self.at = arrays.new(8)

    def __dealloc__(self):  # the compiled build's C array; never called on a Python class
        arrays.release(self.at)


def touch(m, lo: int, hi: int, w: bool, tile: int, eng: int, dma: bool, index: int, accumulated: bool,
          waits: Waits, fed: list, pending: Pending) -> bool:
    """Event `index`'s access of bytes [lo, hi), when they are exactly one segment of map `m`: its producers go to
    `waits` and `fed` (_wait), and the access is recorded (a read of bytes read or written before needs the
    reader's end, _read: `m` and the segment are left in `pending` for `noted`). False, and nothing done, when
    [lo, hi) is not one segment."""
    i = seek(m, lo)
    if i + 1 >= m.n:  # covers(m, i, lo, hi), written out (the Python build pays for calls)
        return False
    first, after = m.lo[i], m.lo[i + 1]
    if first != lo or after != hi:
        return False
    nothing = m.owner[i] == NOTHING  # nobody to wait for, no reader to compare with
    if not nothing:
        _wait(m, i, w, tile, eng, dma, waits, fed)
    if w:  # _write, written out (the Python build pays for calls)
        m.writer[i] = index
        m.owner[i] = tile
        m.track[i] = eng
        if accumulated:
            m.readers[i * m.width] = index
            m.count[i] = 1
        else:
            m.count[i] = 0
    elif nothing:  # _read of a segment nothing was recorded in, written out
        m.owner[i] = tile
        m.readers[i * m.width] = index
        m.count[i] = 1
    else:  # left for noted (written out, as above)
        k = pending.n
        if k == pending.cap:
            pending.cap = 2 * k
            pending.maps.extend([None] * k)
            pending.at = arrays.resized(pending.at, 2 * k)
        pending.maps[k] = m
        pending.at[k] = i
        pending.n = k + 1
    return True


def noted(pending: Pending, index: int, mine: float, eng: int, ends: Ends) -> None:
    """Note event `index`, which ends at `mine` on track `eng`, as the reader of the segments `touch` left in
    `pending` (no map changed its segments since)."""
    maps, at = pending.maps, pending.at
    for k in range(pending.n):
        _read(maps[k], at[k], index, -1, mine, eng, ends)


def producers(m, lo: int, hi: int, w: bool, tile: int, eng: int, dma: bool, waits: Waits, fed: list) -> None:
    """The producers of an access of bytes [lo, hi) in map `m`, into `waits` and `fed` (_wait)."""
    n = m.n
    if n == 1 and m.owner[0] == NOTHING:
        return  # nothing recorded in this map yet
    i = seek(m, lo)
    while i < n:
        edge = m.lo[i]
        if edge >= hi:
            break
        _wait(m, i, w, tile, eng, dma, waits, fed)
        i += 1


def note(m, lo: int, hi: int, w: bool, index: int, tile: int, eng: int, accumulated: bool, mine: float,
         ends: Ends) -> None:
    """Note event `index` (on track `eng`, ending at `mine`, of tile `tile`) as the writer or a reader of bytes
    [lo, hi) of map `m`: lo and hi become boundaries (each new segment a copy of the one it was cut from). A write
    keeps the boundaries inside (up to KEPT segments), so that the slices a kernel reads a tile by stay single
    segments when it writes the tile again; more it merges into one. An access of exactly one segment, the common
    case of a kernel reusing its tiles, cuts nothing."""
    i = seek(m, lo)
    if covers(m, i, lo, hi):
        j = i + 1
    else:
        i = _cut(m, lo)
        j = _cut(m, hi)
        if w and j > i + KEPT:
            _merge(m, i + 1, j)
            j = i + 1
    if w:  # the new writer; a matmul accumulating into PSUM also read what it added to
        for k in range(i, j):
            _write(m, k, index, tile, eng, accumulated)
        return
    for k in range(i, j):
        _read(m, k, index, tile, mine, eng, ends)


def forget(m, lo: int, hi: int) -> None:
    """Nothing recorded in bytes [lo, hi) of map `m` any more."""
    if m.n == 1 and m.owner[0] == NOTHING:
        return
    i = _cut(m, lo)
    j = _cut(m, hi)
    if j > i + 1:
        _merge(m, i + 1, j)
    _empty(m, i)


def _wait(m, i: int, w: bool, tile: int, eng: int, dma: bool, waits: Waits, fed: list) -> None:
    """What an access of segment i of map `m` waits for, each event once in `waits`, in the order found: its writer
    and, for a write, its readers. A write into bytes that last belonged to another compiler-placed tile waits for
    nobody: that tile is dead (the allocator reused its bytes), and the compiler gives a new tile a free buffer
    instead of waiting for the old one's readers, so the reuse is an address coincidence, not a dependency. A DMA
    queue keeps its own writes in order, so a transfer does not wait for its queue's earlier writes. A compute
    read of a tile its own engine wrote also leaves the writer in `fed`."""
    owner = m.owner[i]
    if w and tile >= 0 and owner >= 0 and owner != tile:
        return  # renamed: the old tile's readers and writer need not finish first
    writer = m.writer[i]
    if writer >= 0:
        track = m.track[i]
        if not dma or not w or track != eng:
            at, n = waits.at, waits.n  # add(waits, writer), written out but for growing
            for k in range(n):
                if at[k] == writer:
                    break
            else:
                if n < waits.cap:
                    at[n] = writer
                    waits.n = n + 1
                else:
                    add(waits, writer)
            if not w and not dma and track == eng:
                fed.append(writer)
    if w:
        base = i * m.width
        for k in range(m.count[i]):
            add(waits, m.readers[base + k])


def room(waits, n: int) -> None:
    """Give array `waits` room for `n` items, its items kept (used as a plain array: Scheduler.tiles)."""
    if n > waits.cap:
        waits.at = arrays.resized(waits.at, n)
        waits.cap = n


def add(waits, x: int) -> None:
    """Append event `x` to `waits` unless it is there."""
    at, n = waits.at, waits.n
    for k in range(n):
        if at[k] == x:
            return
    if n == waits.cap:
        waits.cap = 2 * n
        waits.at = at = arrays.resized(at, 2 * n)
    at[n] = x
    waits.n = n + 1


def _write(m, i: int, index: int, tile: int, eng: int, accumulated: bool) -> None:
    """Event `index`, of tile `tile` on track `eng`, is segment i's writer (and reader, accumulating into PSUM)."""
    m.writer[i] = index
    m.owner[i] = tile
    m.track[i] = eng
    if accumulated:
        m.readers[i * m.width] = index
        m.count[i] = 1
    else:
        m.count[i] = 0


def _read(m, i: int, index: int, tile: int, mine: float, eng: int, ends: Ends) -> None:
    """Note event `index`, which ends at `mine` on track `eng`, as a reader of segment i. A track keeps one reader,
    the one that ends last (a writer waits for it, and so for all of that track's readers): with reordering, a
    later reader may end first. A tie goes to the later reader. Bytes nothing was recorded in become `tile`'s."""
    base, n = i * m.width, m.count[i]
    if m.owner[i] == NOTHING:
        m.owner[i] = tile
        m.readers[base] = index
        m.count[i] = 1
        return
    for k in range(n):
        j = m.readers[base + k]
        track = ends.track[j]
        if track == eng:
            theirs = ends.end[j]
            if theirs > mine:
                return
            readers = m.readers  # it goes last: the later ones (one or two) move up, without a call
            for j in range(base + k, base + n - 1):
                readers[j] = readers[j + 1]
            readers[base + n - 1] = index
            return
    if n == m.width:
        _widen(m)
        base = i * m.width
    m.readers[base + n] = index
    m.count[i] = n + 1


def _empty(m, i: int) -> None:
    """Nothing recorded in segment i."""
    m.writer[i] = -1
    m.owner[i] = NOTHING
    m.track[i] = -1
    m.count[i] = 0


def _cut(m, x: int) -> int:
    """Make byte x a boundary of map `m`; the segment that starts there."""
    i = seek(m, x)
    edge = m.lo[i]
    if edge != x:
        i += 1
        _split(m, i, x)
    return i


def _split(m, i: int, x: int) -> None:
    """Cut segment i - 1 at byte x: the new segment i starts there, with a copy of what segment i - 1 holds."""
    n, width = m.n, m.width
    if n == m.cap:
        _grow(m)
    arrays.moved(m.lo, i + 1, i, n - i)
    arrays.moved(m.writer, i + 1, i, n - i)
    arrays.moved(m.owner, i + 1, i, n - i)
    arrays.moved(m.track, i + 1, i, n - i)
    arrays.moved(m.count, i + 1, i, n - i)
    arrays.moved(m.readers, (i + 1) * width, i * width, (n - i) * width)
    m.lo[i] = x
    m.writer[i] = m.writer[i - 1]
    m.owner[i] = m.owner[i - 1]
    m.track[i] = m.track[i - 1]
    m.count[i] = m.count[i - 1]
    arrays.moved(m.readers, i * width, (i - 1) * width, m.count[i])
    m.n = n + 1


def _merge(m, i: int, j: int) -> None:
    """Drop segments i .. j - 1: segment i - 1 runs on over their bytes."""
    n, width = m.n, m.width
    arrays.moved(m.lo, i, j, n - j)
    arrays.moved(m.writer, i, j, n - j)
    arrays.moved(m.owner, i, j, n - j)
    arrays.moved(m.track, i, j, n - j)
    arrays.moved(m.count, i, j, n - j)
    arrays.moved(m.readers, i * width, j * width, (n - j) * width)
    m.n = n - (j - i)


def _grow(m) -> None:
    """Twice the room for segments."""
    cap = 2 * m.cap
    m.lo = arrays.resized(m.lo, cap)
    m.writer = arrays.resized(m.writer, cap)
    m.owner = arrays.resized(m.owner, cap)
    m.track = arrays.resized(m.track, cap)
    m.count = arrays.resized(m.count, cap)
    m.readers = arrays.resized(m.readers, cap * m.width)
    m.cap = cap


def _widen(m) -> None:
    """Twice the reader slots per segment (a segment read from more tracks than the map had room for)."""
    width, old = m.width, m.readers
    wide = arrays.new(m.cap * 2 * width)
    for i in range(m.n):
        for k in range(m.count[i]):
            wide[i * 2 * width + k] = old[i * width + k]
    arrays.release(old)
    m.readers = wide
    m.width = 2 * width


def right(a, x) -> int:
    """bisect.bisect_right(a, x): where `x` goes in the sorted list `a`, after any equal items. Written out so
    that the compiled build searches in a C loop on C doubles (the scheduler's times): calling bisect costs more
    than the search in the short lists it keeps. (Halved by a shift: `//` on C integers also corrects for a
    negative operand, which these never are.) The last item is compared first: the scheduler mostly places work
    after all that is booked."""
    lo, hi = 0, len(a)
    if hi == 0:
        return 0
    y = a[hi - 1]
    if not x < y:
        return hi
    while lo < hi:
        mid = (lo + hi) >> 1
        y = a[mid]
        if x < y:
            hi = mid
        else:
            lo = mid + 1
    return lo


def covers(m, i: int, lo: int, hi: int) -> bool:
    """Whether segment i of map `m` is exactly bytes [lo, hi) (the last one runs on without end)."""
    if i + 1 >= m.n:
        return False
    first, after = m.lo[i], m.lo[i + 1]
    return first == lo and after == hi


def seek(m, x: int) -> int:
    """The segment of map `m` that holds byte `x`, searched from the one found last (`m.hint`): a kernel tends to
    walk its tensors in order, so the answer is often that segment or the next."""
    b = m.lo
    lo, hi, i = 0, m.n, m.hint  # the count of bounds <= x lies in [lo, hi]
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
        mid = (lo + hi) >> 1
        edge = b[mid]
        if x < edge:
            hi = mid
        else:
            lo = mid + 1
    m.hint = lo - 1
    return lo - 1
