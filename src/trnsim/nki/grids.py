"""Tile and block grids (NKI 0.7): a tensor navigated in tile or block coordinates, and the grids that own one
new allocation (nki.language.tiles / blocks / alloc_tiles / alloc_blocks, NkiTileGrid, NkiBlockGrid).

A grid is a view: `tile_shape` covers the trailing dims of the source, leading dims stay untiled (one slab per
coordinate), the last tile along a dim is clamped to the source's extent. Indexing with ints or slices keeps a
grid; `.data` is the selection as one tensor operand. In HBM the backing tensor has the logical extent; in SBUF
and PSUM alloc_tiles lays the tiles side by side in the free dim, each tile's first dim on the partitions (the
"dense rank-two capacity layout"), so a selection within one tile row is one operand and one spanning tile rows
is not representable (`is_data_representable`).
"""
from __future__ import annotations

from trnsim.core import View
from trnsim.core.errors import ShapeError
from trnsim.nki import versions as _versions


def _ints(name, shape, at_least=1) -> tuple:
    if not isinstance(shape, tuple) or len(shape) < at_least or any(
            type(n) is not int or n <= 0 for n in shape):
        raise ShapeError(f"{name}={shape!r}: a tuple of at least {at_least} positive Python ints")
    return shape


class NkiGrid:
    """A tensor region in tile (or block) coordinates: `lo`/`hi` are the selected element bounds per source dim,
    `step` the elements per grid coordinate, `layout` how the bytes lie (None: the source's own dims)."""

    def __init__(self, source, tile_shape, lo, hi, step, layout=None):
        self._source, self.tile_shape, self._lo, self._hi, self._step = source, tuple(tile_shape), lo, hi, step
        self._layout = layout

    # -- what it holds ----------------------------------------------------------------------------------------
    @property
    def dtype(self):
        return self._source.dtype

    @property
    def buffer(self):
        return self._source.buffer

    @property
    def element_shape(self) -> tuple:
        return tuple(h - lo for lo, h in zip(self._lo, self._hi))

    @property
    def index_step_elements(self) -> tuple:
        return tuple(self._step)

    @property
    def shape(self) -> tuple:
        return tuple(-(-(h - lo) // s) for lo, h, s in zip(self._lo, self._hi, self._step))

    @property
    def is_remainder(self) -> bool:
        """Whether the selection holds a tile clamped by the source's extent."""
        return any((h - lo) % s for lo, h, s in zip(self._lo, self._hi, self._step))

    @property
    def is_data_representable(self) -> bool:
        return self._layout is None or self._layout.representable(self._lo, self._hi)

    @property
    def data(self) -> View:
        if self._layout is not None:
            return self._layout.view(self._lo, self._hi)
        return self._source[tuple(slice(lo, h) for lo, h in zip(self._lo, self._hi))]

    # -- navigation -------------------------------------------------------------------------------------------
    def _select(self, key):
        key = key if isinstance(key, tuple) else (key,)
        if len(key) > len(self._lo):
            raise ShapeError(f"grid index {key!r}: the grid has {len(self._lo)} dims")
        lo, hi = list(self._lo), list(self._hi)
        for d, k in enumerate(key):
            n = -(-(self._hi[d] - self._lo[d]) // self._step[d])
            if isinstance(k, slice):
                a, b, st = k.indices(n)
                if st != 1 or a >= b:
                    raise ShapeError(f"grid index {k!r} on dim {d}: a non-empty slice with step 1")
            else:
                a = int(k) + (n if int(k) < 0 else 0)
                if not 0 <= a < n:
                    raise ShapeError(f"grid index {k} on dim {d}: the grid has {n} there")
                b = a + 1
            lo[d] = self._lo[d] + a * self._step[d]
            hi[d] = min(self._hi[d], self._lo[d] + b * self._step[d])
        return lo, hi

    def __getitem__(self, key):
        lo, hi = self._select(key)
        return type(self)(self._source, self.tile_shape, lo, hi, self._step, self._layout)

    def __repr__(self):
        return f"<{type(self).__name__} {list(self.shape)} of tiles {list(self.tile_shape)} {self.dtype}>"


class NkiTileGrid(NkiGrid):
    """A tensor view in tile coordinates."""


class NkiBlockGrid(NkiGrid):
    """A tensor view in block coordinates: each block groups `block_shape` tiles along the tiled dims."""

    def __init__(self, source, tile_shape, lo, hi, step, layout=None, block_shape=()):
        super().__init__(source, tile_shape, lo, hi, step, layout)
        self.block_shape = tuple(block_shape)

    def __getitem__(self, key):
        lo, hi = self._select(key)
        return NkiBlockGrid(self._source, self.tile_shape, lo, hi, self._step, self._layout, self.block_shape)


class _Capacity:
    """alloc_tiles' on-chip layout: tile (r, c) of a [R, C] tile grid at free offset (r * C + c) * width."""

    def __init__(self, storage: View, tile_shape, cols: int):
        self.storage, self.tile_shape, self.cols = storage, tile_shape, cols

    def representable(self, lo, hi) -> bool:
        p = self.tile_shape[0]
        return lo[0] // p == (hi[0] - 1) // p

    def view(self, lo, hi) -> View:
        if not self.representable(lo, hi):
            raise ShapeError(f"grid data of rows {lo[0]}:{hi[0]}: an on-chip tile grid's selection spanning tile rows "
                             f"of {self.tile_shape[0]} partitions is no single operand; select one tile row")
        p, w = self.tile_shape
        r, q = divmod(lo[0], p)
        start = (r * self.cols) * w + lo[1]
        return self.storage[q:q + hi[0] - lo[0], start:start + hi[1] - lo[1]]


def _grid(cls, source, tile_shape, extra=None, layout=None, lo=None, hi=None):
    tile_shape = _ints("tile_shape", tile_shape, 2)
    shape = tuple(hi[d] - lo[d] for d in range(len(lo))) if lo is not None else tuple(source.shape)
    if len(tile_shape) > len(shape):
        raise ShapeError(f"tile_shape {tile_shape} has more dims than the tensor {list(shape)}")
    lead = len(shape) - len(tile_shape)
    step = (1,) * lead + tile_shape
    lo = list(lo) if lo is not None else [0] * len(shape)
    hi = list(hi) if hi is not None else list(shape)
    if extra is None:
        return cls(source, tile_shape, lo, hi, step, layout)
    block = _ints("block_shape", extra)
    if len(block) != len(tile_shape):
        raise ShapeError(f"block_shape {block} must have the rank of tile_shape {tile_shape}")
    step = (1,) * lead + tuple(t * b for t, b in zip(tile_shape, block))
    return cls(source, tile_shape, lo, hi, step, layout, block)


def tiles(source, *, tile_shape=None) -> NkiTileGrid:
    """`source` (a tensor, or a tile or block grid) in tile coordinates."""
    _versions.added("nl.tiles")
    if isinstance(source, NkiGrid):
        return _grid(NkiTileGrid, source._source, tile_shape or source.tile_shape, layout=source._layout,
                     lo=source._lo, hi=source._hi)
    if tile_shape is None:
        raise ShapeError("nl.tiles of a tensor needs tile_shape")
    return _grid(NkiTileGrid, source, tile_shape)


def blocks(source, *, tile_shape=None, block_shape) -> NkiBlockGrid:
    """`source` in block coordinates: blocks of `block_shape` tiles."""
    _versions.added("nl.blocks")
    if isinstance(source, NkiGrid):
        return _grid(NkiBlockGrid, source._source, tile_shape or source.tile_shape, block_shape, source._layout,
                     source._lo, source._hi)
    if tile_shape is None:
        raise ShapeError("nl.blocks of a tensor needs tile_shape")
    return _grid(NkiBlockGrid, source, tile_shape, block_shape)


def _allocate(tile_shape, element_shape, buffer, dtype, address, name):
    from trnsim.nki._frontend import buffer_name, ndarray
    tile_shape, element_shape = _ints("tile_shape", tile_shape, 2), _ints("element_shape", element_shape)
    if len(tile_shape) > len(element_shape):
        raise ShapeError(f"tile_shape {tile_shape} has more dims than element_shape {element_shape}")
    kind = buffer_name(buffer)
    if kind not in ("sbuf", "psum"):
        return ndarray(element_shape, dtype, buffer, name, address), None
    if len(tile_shape) != 2 or len(element_shape) != 2:
        raise ShapeError(f"alloc_tiles in {kind}: 2-d tiles of a 2-d extent are emulated; got tile_shape "
                         f"{tile_shape}, element_shape {element_shape}")
    rows, cols = (-(-e // t) for e, t in zip(element_shape, tile_shape))
    storage = ndarray((tile_shape[0], rows * cols * tile_shape[1]), dtype, buffer, name, address)
    return storage, _Capacity(storage, tile_shape, cols)


def alloc_tiles(*, tile_shape, element_shape, buffer, dtype, address=None, name="") -> NkiTileGrid:
    """A new, uninitialised allocation of `element_shape` elements in tiles of `tile_shape`."""
    _versions.added("nl.alloc_tiles")
    storage, layout = _allocate(tile_shape, element_shape, buffer, dtype, address, name)
    return _grid(NkiTileGrid, storage, tile_shape, layout=layout, lo=[0] * len(element_shape), hi=list(element_shape))


def alloc_blocks(*, tile_shape, block_shape, element_shape, buffer, dtype, address=None, name="") -> NkiBlockGrid:
    """alloc_tiles with blocks of `block_shape` tiles above the tiles (no other layout, no more allocations)."""
    _versions.added("nl.alloc_blocks")
    storage, layout = _allocate(tile_shape, element_shape, buffer, dtype, address, name)
    return _grid(NkiBlockGrid, storage, tile_shape, block_shape, layout, [0] * len(element_shape), list(element_shape))


__all__ = ["NkiGrid", "NkiTileGrid", "NkiBlockGrid", "tiles", "blocks", "alloc_tiles", "alloc_blocks"]
