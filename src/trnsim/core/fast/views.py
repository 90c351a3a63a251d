"""Views kept by index and layout numbers: the speed layer's view caches.

A kernel slices its tiles the same way in every iteration. A tensor the core gives out keeps the views
indexing it gives (Parts, in View._parts), so the same index gives the same view again, with its layout
computed once (a view never changes, so sharing one is safe). A part taken the same way from a tile laid
out the same way is laid out the same way, so its shape, strides and offsets are kept by (the tile's layout
without its memory, the index) for the next iteration's new tiles and the next launch's, with the part's layout
number while the tile's stays the same. Layout numbers (keyed) name a
view's place, dtype, shape, strides and offsets: the signature parts of the verdict memo (fast/memo.py).
"""
from __future__ import annotations

import itertools

_PARTS = 1024  # views a tensor remembers by index before it starts again
_LAYOUTS: dict = {}  # view layout -> its number (keyed)
_LAYOUT_OF: dict = {}  # layout number -> the view layout (loop stamping shifts them: fast/stamp.py)
_DERIVED: dict = {}  # (a tile's layout number without its memory, hashable index) -> the part's shape, strides,
# offsets, and the layout numbers of the last tile it was taken from and of the part there
_FREE: dict = {}  # a tile's layout number -> the number of its layout without its memory (`_part`'s key)
_LAYOUT_NUMBERS = itertools.count()
_LAYOUTS_MAX = 1 << 16
# While loop iterations are watched (fast/stamp.py): per part given, its layout (place, dtype, shape, strides,
# offset, partition offset) and (the tensor's place, dtype, shape, strides, offset, partition offset, whether on
# chip, the key, and the part's shape, strides, offset, partition offset): numbers only, so watching keeps no
# tile alive.
WATCH: list | None = None


def fresh() -> None:
    """A launch's start: tables past half their size start again (numbers are never reused, so views keeping
    theirs stay right; nothing of an earlier launch's is looked up by number). A table never starts again in a
    launch before it is full, and loop stamping refuses past half (fast/stamp.py): so a long process stamps its
    later kernels as it stamped its first."""
    if len(_LAYOUTS) > _LAYOUTS_MAX // 2 or len(_DERIVED) > _LAYOUTS_MAX // 2 or len(_FREE) > _LAYOUTS_MAX // 2:
        _LAYOUTS.clear()
        _LAYOUT_OF.clear()
        _DERIVED.clear()
        _FREE.clear()


def keyed(v) -> tuple:
    """(place, layout number, placement) of view `v` while its tile stays where it is, computed once per view
    (View._keyed). Views laid out the same way (the same place, dtype, shape, strides, offsets) share the
    number."""
    k, a = v._keyed, v.alloc
    if k is None or k[0] is not a.place:
        k = v._keyed = (a.place, layout_number((a.place[:5], a.partitions, a.kind, v.dtype, v.shape, v.strides,
                                                v.offset, v.poff)), v.placement())
    return k


def layout_number(layout: tuple) -> int:
    """The number of a view layout (place, partitions, kind, dtype, shape, strides, offset, partition offset),
    numbered now if new."""
    layouts = _LAYOUTS  # (tables cleared in place, never rebound: the compiled build calls them as dicts)
    n = layouts.get(layout)
    if n is None:
        numbered = _LAYOUT_OF
        if len(layouts) >= _LAYOUTS_MAX:
            layouts.clear()  # numbers are never reused, so views keeping theirs stay right
            numbered.clear()
        n = layouts[layout] = next(_LAYOUT_NUMBERS)
        numbered[n] = layout
    return n


class Parts:
    """The views indexing one tensor gave, by index (View._parts: the hook View.__getitem__ calls)."""

    __slots__ = ("kept",)

    def __init__(self):
        self.kept = {}

    def part(self, view, key):
        """view[key]: the view given for this index before, or a new one kept."""
        k = _hashable(key)
        if k is None:
            return view._index(key)
        kept = self.kept
        v = kept.get(k)
        if v is None:
            if len(kept) >= _PARTS:
                kept.clear()
            v = kept[k] = _part(view, key, k)
        if WATCH is not None:
            place = view.alloc.place
            WATCH.append(((place, view.dtype, v.shape, v.strides, v.offset, v.poff), (
                place, view.dtype, view.shape, view.strides, view.offset, view.poff, view.on_chip, key, v.shape, v.strides,
                v.offset, v.poff)))
        return v


def keep_parts(v):
    """Tensor view `v`, keeping the views indexing it gives."""
    v._parts = Parts()
    return v


def _part(view, key, k):
    """view[key], `k` its hashable form, its layout number kept: from the shape, strides and offsets of the same
    part of a tile laid out the same way, in whichever memory (an earlier launch's too), when one was taken."""
    a = view.alloc
    n = keyed(view)[1]
    free = _FREE.get(n)
    if free is None:
        if len(_FREE) >= _LAYOUTS_MAX:
            _FREE.clear()
        place = a.place
        free = _FREE[n] = layout_number((place[0], place[2], place[3], place[4], a.partitions, a.kind, view.dtype,
                                         view.shape, view.strides, view.offset, view.poff))  # (no view layout has 11 items)
    key_of = (free, k)
    got = _DERIVED.get(key_of)
    if got is None:
        v = view._index(key)
        if len(_DERIVED) >= _LAYOUTS_MAX:
            _DERIVED.clear()
        _DERIVED[key_of] = (v.shape, v.strides, v.offset, v.poff, n, keyed(v)[1])
        return v
    shape, strides, offset, poff, tile, number = got
    v = view._sub(shape, strides, offset, poff, view.dtype, view.gather_rows)
    if tile == n:
        v._keyed = (a.place, number, v.placement())
    else:  # the same part of a tile laid out alike elsewhere: its own number, kept for the next part of this tile
        _DERIVED[key_of] = (shape, strides, offset, poff, n, keyed(v)[1])
    return v


def _hashable(key):
    """An index made only of ints and step-less int slices as a hashable tuple (slices do not hash before
    Python 3.12), else None."""
    out = []
    for k in (key if type(key) is tuple else (key,)):
        c = type(k)
        if c is int:
            out.append(k)
        elif c is slice:
            sl = k  # a slice (the compiled build reads its bounds directly)
            start, stop = sl.start, sl.stop
            if sl.step is not None or not (start is None or type(start) is int) or not (stop is None or type(stop) is int):
                return None
            out.append((start, stop))
        else:
            return None
    return tuple(out)
