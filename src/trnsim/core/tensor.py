"""Tensor views: a dtype, a shape and a strided access pattern over one allocation's bytes.

On-chip (SBUF/PSUM) views keep dim 0 as the partition dim: its stride counts partitions and `poff`
is the first partition inside the allocation; the other dims step through elements inside a partition
from `offset`. HBM views are plain strided views of the tensor's bytes. A view never copies: `array()`
returns a numpy view straight onto the memory, so two views of overlapping bytes see each other's writes.

An indirect DMA view (a gather/scatter through `vector_offset`) holds in `gather_rows` one row index per
partition (or the tile holding them, read only when the DMA runs, as the hardware's DMA reads them) and the
elements between rows; the DMA reads or writes it element by element through those rows. Tensor Indirection
on chip (`indirect()`) is another thing: an `Indirection` of columns, gathered by the engine that reads it.
"""
from __future__ import annotations

import math
import operator
from typing import NamedTuple

import numpy as np

from trnsim import numerics
from trnsim.core.errors import DTypeError, KernelError, OutOfBoundsError, ShapeError
from trnsim.core.memory import Allocation, Space

_MASK_TYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_ALL = slice(None)
_HBM = Space.HBM  # read at every view made: an Enum class's attribute goes through its metaclass's __getattr__ hook


class Region(NamedTuple):
    """What an instruction touches, for the timing model: memory, partitions, bytes per partition."""

    space: str
    memory: int  # serial number of the SBUF/PSUM array or of the HBM tensor's buffer
    partition: int
    partitions: int
    byte_lo: int
    byte_hi: int  # exclusive
    shape: tuple
    dtype: str
    contiguous: int = 0  # bytes per contiguous run of the free dims (what one DMA descriptor can move)
    tile: int = -1  # the compiler-placed tile these bytes belong to (-1: HBM, or placed by the kernel)


class View:
    """A strided view of a tensor in SBUF, PSUM or HBM (what NKI calls an NkiTensor)."""

    __slots__ = ("alloc", "dtype", "shape", "strides", "poff", "offset", "gather_rows", "on_chip", "_scanned", "_region",
                 "_parts", "_keyed", "__weakref__")

    def __init__(self, alloc: Allocation, dtype, shape, strides, offset=0, poff=0, gather_rows=None):
        self.alloc, self.dtype = alloc, numerics.dtype(dtype)
        self.shape, self.strides = tuple(map(int, shape)), tuple(map(int, strides))
        self.offset, self.poff, self.gather_rows = int(offset), int(poff), gather_rows
        self.on_chip = alloc.memory.space is not _HBM
        # caches: a view never changes (nor its tile's bytes, but by a spill); _parts and _keyed are a builder's
        # (core/builder.py: View.__getitem__)
        self._scanned = self._region = self._parts = self._keyed = None

    @classmethod
    def whole(cls, alloc: Allocation, dtype, shape) -> View:
        """The contiguous view of a fresh allocation."""
        shape = tuple(map(int, shape))
        on_chip = alloc.memory.space is not _HBM
        dims = shape[1:] if on_chip else shape
        strides = [1] * len(dims)
        for k in range(len(dims) - 2, -1, -1):
            strides[k] = strides[k + 1] * dims[k + 1]
        return cls(alloc, dtype, shape, [1] + strides if on_chip else strides)

    # -- facts -------------------------------------------------------------------------------------
    @property
    def space(self) -> Space:
        return self.alloc.memory.space

    @property
    def name(self) -> str:
        return self.alloc.name

    @property
    def buffer(self) -> str:
        """The NKI buffer: 'sbuf', 'psum', 'hbm', 'shared_hbm' or 'private_hbm'."""
        return self.alloc.kind

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def partitions(self) -> int:
        return self.shape[0] if self.on_chip else 1

    @property
    def free_size(self) -> int:
        """Elements per partition (on-chip) or in all (HBM)."""
        return math.prod(self.shape[1:]) if self.on_chip else self.size

    @property
    def alloc_elems(self) -> int:
        return self.alloc.nbytes // self.dtype.itemsize

    def __repr__(self):
        return f"<{self.space.value} tensor {self.name!r} {list(self.shape)} {self.dtype.name}>"

    def __bool__(self):
        """An HBM tensor is a present argument (`if bias:` on an optional kernel argument). On-chip values exist
        only at run time on the device: Python control flow cannot branch on them."""
        if not self.on_chip:
            return True
        raise KernelError(f"the truth value of tensor {self.name!r} {list(self.shape)} is not known while the kernel is "
                          f"traced; load it into a register (nisa.register_load) and use nl.while_loop/fori_loop")

    # -- memory access -------------------------------------------------------------------------
    def _layout(self):
        isz, mem, a = self.dtype.itemsize, self.alloc.memory, self.alloc
        if self.on_chip:
            off = (a.p0 + self.poff) * mem.row_bytes + a.b0 + self.offset * isz
            return off, (self.strides[0] * mem.row_bytes,) + tuple(s * isz for s in self.strides[1:])
        return a.b0 + self.offset * isz, tuple(s * isz for s in self.strides)

    def _raw(self, buf, np_dtype):
        if self.alloc.pending is not None:
            self.alloc.settle()
        off, strides = self._layout()
        return np.ndarray(self.shape, np_dtype, buffer=buf, offset=off, strides=strides)

    def array(self) -> np.ndarray:
        """The elements in their numpy storage dtype, as a writeable view onto the memory."""
        if self.gather_rows is not None:
            if self.alloc.pending is not None:
                self.alloc.settle()
            return self._flat(self.alloc.memory.data, self.dtype.np)[self._indices()]
        return self._raw(self.alloc.memory.data, self.dtype.np)

    def mask(self) -> np.ndarray:
        """True where an element was never written (any of its bytes)."""
        t = _MASK_TYPES[self.dtype.itemsize]
        if self.gather_rows is not None:
            if self.alloc.pending is not None:
                self.alloc.settle()
            return self._flat(self.alloc.memory.poison, t)[self._indices()] != 0
        return self._raw(self.alloc.memory.poison, t) != 0

    def poisoned(self) -> bool:
        """Whether any element of the view was never written.

        Cheap in the common case: once a whole tensor is seen clean it stays known clean until
        never-written bytes are set over it again (a masked store or an aliasing placement).
        """
        a = self.alloc
        if a.clean:
            return False
        if a.pending is not None:
            a.settle()
        mem = a.memory
        if not mem.poison[a.p0:a.p0 + a.partitions, a.b0:a.b0 + a.nbytes].any():
            a.clean = True
            return False
        if self.gather_rows is not None:
            return bool(self.mask().any())
        return bool(self._raw(mem.poison, _MASK_TYPES[self.dtype.itemsize]).any())

    def store(self, values: np.ndarray, mask: np.ndarray | None = None, defer=None) -> None:
        """Write values (already in this dtype's storage) and mark them written, or never-written where `mask`.

        With `defer`, the HBM memory that `values` views (a write of the whole tile, no mask), the bytes
        are written only when first touched (Allocation.settle), or before that memory is next written.
        With `defer=True`, `values` are a builder's (Allocation.settle), owed until the allocation is first
        touched: all of its debts so far when the view does not cover it.
        """
        a, mem = self.alloc, self.alloc.memory
        if self.gather_rows is not None and a.pending is not None:
            a.settle()  # bytes owed land before rows of them are written over
        was_clean = a.clean and a.pending is None  # its poison bytes are all 0 already
        if defer is None and not mem.data.flags.writeable:  # (a deferred write touches no byte yet)
            mem.data = mem.data.copy()  # the first write to a borrowed HBM tensor (see memory._HBMBuffer)
        mem.version += 1
        if a.shared and mem.sourced:  # tensors placed over each other: any of them may lose its source
            r = self.region()
            mem.written(r.partition, r.partitions, r.byte_lo, r.byte_hi)
        elif a.source is not None:  # no other tensor shares these bytes
            a.source = None
        elif not self.on_chip and mem.readers:
            mem.settle_readers()
        covers = self.covers_alloc()
        if covers:
            a.pending = None  # every byte is written next: what the tensor was owed is overwritten
        if defer is not None:
            a.pending = values
            if defer is not True:
                a.clean = True
                defer.readers[a.id] = a
            elif covers:
                a.clean = True
            return
        t = _MASK_TYPES[self.dtype.itemsize]
        marked = mask is not None and mask.any()
        if marked:
            r = self.region()
            mem.dirty(r.partition, r.partitions, r.byte_lo, r.byte_hi)
            a.clean = False
        elif covers:
            a.clean = True  # every byte of the tensor is now written
        flags = np.where(mask, t(int.from_bytes(b"\x01" * self.dtype.itemsize, "little")), t(0)) if marked else 0
        if self.gather_rows is not None:
            idx = self._indices()
            self._flat(mem.data, self.dtype.np)[idx] = values
            self._flat(mem.poison, t)[idx] = flags
            return
        self._raw(mem.data, self.dtype.np)[...] = values
        if marked or not was_clean:
            self._raw(mem.poison, t)[...] = flags

    def covers_alloc(self) -> bool:
        """Whether the view reaches every byte of its allocation (each once)."""
        a = self.alloc
        if self.gather_rows is not None or self.offset or self.poff:
            return False
        if self.on_chip and (self.shape[0] != a.partitions or (a.partitions > 1 and self.strides[0] != 1)):
            return False
        return self.free_size * self.dtype.itemsize == a.nbytes and self.is_contiguous()

    def _flat(self, buf, np_dtype):
        return buf[0, : self.alloc.nbytes].view(np_dtype)

    def rows(self) -> np.ndarray:
        """The row indices of an indirect view; a tile of them is read now, as its DMA runs (which reports
        never-written indices first: isa/dma.py)."""
        rows = self.gather_rows[0]
        return rows.array().reshape(-1).astype(np.int64) if isinstance(rows, View) else rows

    def _indices(self) -> np.ndarray:
        rows, row_elems = self.rows(), self.gather_rows[1]
        idx = self.offset + rows.reshape((-1,) + (1,) * (self.ndim - 1)) * row_elems
        for k in range(1, self.ndim):
            shape = [1] * self.ndim
            shape[k] = self.shape[k]
            idx = idx + np.arange(self.shape[k]).reshape(shape) * self.strides[k]
        return idx

    def region(self) -> Region:
        """The partitions and per-partition byte range this view touches."""
        r = self._region
        if r is None or r[0] is not self.alloc.place:  # a tile reloaded after a spill has new bytes
            r = self._region = (self.alloc.place, region_at(*self.placement()))
        return r[1]

    def placement(self) -> tuple:
        """What region() is computed from, holding no reference to the tensor: an instruction record keeps
        this and computes regions only when the timing model asks (Record.operands)."""
        return (self.alloc.place, self.dtype, self.shape, self.strides, self.offset, self.poff, self.on_chip,
                self.gather_rows is not None, self._scanned)

    def _scan(self) -> tuple[int, int, int]:
        """Lowest and highest element offset, and elements in the innermost contiguous run (cached)."""
        if self._scanned is None:
            self._scanned = _span(self.shape, self.strides, self.offset, self.on_chip)
        return self._scanned

    # -- views ---------------------------------------------------------------------------------
    def _derive(self, shape, strides, offset=None, poff=None, dtype=None, gather_rows=None, check=True) -> View:
        v = self._sub(tuple(map(int, shape)), tuple(map(int, strides)), int(self.offset if offset is None else offset),
                      int(self.poff if poff is None else poff), dtype or self.dtype,
                      gather_rows if gather_rows is not None else self.gather_rows)
        if check:
            v._check_bounds()
        return v

    def _sub(self, shape: tuple, strides: tuple, offset: int, poff: int, dtype, gather_rows) -> View:
        """A view of the same tensor from settled arguments (skips __init__'s conversions)."""
        v = View.__new__(View)
        v.alloc, v.on_chip, v._scanned, v._region, v._parts, v._keyed = self.alloc, self.on_chip, None, None, None, None
        v.dtype, v.shape, v.strides, v.offset, v.poff, v.gather_rows = dtype, shape, strides, offset, poff, gather_rows
        return v

    def _check_bounds(self):
        if self.gather_rows is not None or 0 in self.shape:
            return
        lo, hi, _ = self._scan()
        if lo < 0 or hi >= self.alloc_elems:
            raise OutOfBoundsError(f"view of {self.name!r} reaches elements {lo}..{hi} of a tensor holding "
                                   f"{self.alloc_elems} {self.dtype.name} elements per {'partition' if self.on_chip else 'tensor'}")
        if self.on_chip:
            last = self.poff + (self.shape[0] - 1) * self.strides[0]
            if self.poff < 0 or last >= self.alloc.partitions or (self.shape[0] > 1 and self.strides[0] < 1):
                raise OutOfBoundsError(f"view of {self.name!r} reaches partitions {self.poff}..{last} of a tensor "
                                       f"of {self.alloc.partitions} partitions")

    def __getitem__(self, key) -> View:
        parts = self._parts  # a hook point: a builder may keep this view's parts by index (core/builder.py)
        return self._index(key) if parts is None else parts.part(self, key)

    def _index(self, key) -> View:
        key = key if type(key) is tuple else (key,)
        nd = len(self.shape)
        if Ellipsis in key:
            i = key.index(Ellipsis)
            key = key[:i] + (_ALL,) * (nd - len(key) + 1) + key[i + 1:]
        if len(key) > nd:
            raise OutOfBoundsError(f"{len(key)} indices for the {self.ndim}-d tensor {self.name!r} {list(self.shape)}")
        shape, strides, offset, poff, drop = list(self.shape), list(self.strides), self.offset, self.poff, None
        on_chip = self.on_chip
        for d, k in enumerate(key):
            if type(k) is not slice and type(k) is not int:
                k = _as_index(k)
            n, s = shape[d], strides[d]
            if type(k) is slice:
                sl = k  # (the compiled build reads a slice's bounds directly)
                start, stop, step = sl.start, sl.stop, sl.step
                if start is None and stop is None and step is None:
                    continue  # the whole dim
                if step is None and type(start) is int and type(stop) is int and 0 <= start <= stop <= n:
                    shape[d] = stop - start  # the usual a[i:j]
                else:
                    start, stop, step = _slice_bounds(k, n, self, d)
                    shape[d], strides[d] = max(0, -(-(stop - start) // step)), s * step
            else:
                if not -n <= k < n:
                    raise OutOfBoundsError(f"index {k} out of bounds for dim {d} of size {n} of {self.name!r}")
                start, shape[d] = k % n, 1
                drop = [d] if drop is None else drop + [d]
            if d == 0 and on_chip:
                poff += start * s
            else:
                offset += start * s
        if drop is not None:
            keep_min = 2 if on_chip else 0
            for d in reversed(drop):
                if (d == 0 and on_chip) or len(shape) <= keep_min:
                    continue  # on-chip tensors keep the partition dim and at least 2 dims
                del shape[d], strides[d]
        return self._sub(tuple(shape), tuple(strides), offset, poff, self.dtype, self.gather_rows)  # in bounds: a part

    def slice(self, dim, start, end, step=1) -> View:
        key = [slice(None)] * self.ndim
        key[dim] = slice(start, end, step)
        return self[tuple(key)]

    def select(self, dim, index) -> View:
        v = self.slice(dim, int(index), int(index) + 1)
        return v.squeeze_dim(dim) if v.ndim > (2 if self.on_chip else 1) else v

    def permute(self, dims) -> View:
        dims = tuple(d % self.ndim for d in dims)
        if sorted(dims) != list(range(self.ndim)):
            raise ShapeError(f"permute{dims} is not a permutation of the {self.ndim} dims of {self.name!r}")
        if self.on_chip and dims[0] != 0:
            raise ShapeError(f"permute{dims} moves the partition dim of on-chip tensor {self.name!r}; dims[0] must be 0")
        return self._derive([self.shape[d] for d in dims], [self.strides[d] for d in dims])

    def broadcast(self, dim, size) -> View:
        if self.shape[dim] != 1 or (self.on_chip and dim == 0):
            raise ShapeError(f"broadcast of dim {dim} (size {self.shape[dim]}) of {self.name!r}: only size-1 free dims broadcast")
        shape, strides = list(self.shape), list(self.strides)
        shape[dim], strides[dim] = int(size), 0
        return self._derive(shape, strides)

    def expand_dim(self, dim) -> View:
        dim = dim % (self.ndim + 1)
        if self.on_chip and dim == 0:
            raise ShapeError(f"expand_dim(0) on on-chip tensor {self.name!r}: dim 0 is the partition dim")
        return self._derive(self.shape[:dim] + (1,) + self.shape[dim:], self.strides[:dim] + (0,) + self.strides[dim:])

    def squeeze_dim(self, dim) -> View:
        dim = dim % self.ndim
        if self.shape[dim] != 1 or (self.on_chip and dim == 0):
            raise ShapeError(f"squeeze_dim({dim}) of {self.name!r}: dim has size {self.shape[dim]}, not a free size-1 dim")
        return self._derive(self.shape[:dim] + self.shape[dim + 1:], self.strides[:dim] + self.strides[dim + 1:])

    def reshape(self, shape) -> View:
        shape = list(shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape)
        if shape == list(self.shape):
            return self
        if -1 in shape:
            known = math.prod(s for s in shape if s != -1)
            shape[shape.index(-1)] = self.size // max(known, 1)
        if math.prod(shape) != self.size:
            raise ShapeError(f"reshape of {self.name!r} {list(self.shape)} ({self.size} elements) to {shape}")
        lead = 1 if self.on_chip else 0
        if self.on_chip and shape[0] != self.shape[0]:
            raise ShapeError(f"reshape of on-chip {self.name!r} to {shape} changes the partition dim {self.shape[0]}")
        strides = _reshaped_strides(self.shape[lead:], self.strides[lead:], shape[lead:])
        if strides is None:
            raise ShapeError(f"reshape of {self.name!r} {list(self.shape)} to {shape}: its layout does not allow it "
                             f"without a copy")
        return self._derive(shape, list(self.strides[:lead]) + strides)

    def flatten_dims(self, start, end) -> View:
        end = end % self.ndim
        return self.reshape(self.shape[:start] + (math.prod(self.shape[start:end + 1]),) + self.shape[end + 1:])

    def reshape_dim(self, dim, shape) -> View:
        return self.reshape(self.shape[:dim] + tuple(shape) + self.shape[dim + 1:])

    def view(self, dtype) -> View:
        """Reinterpret the bytes as another dtype; the last dim is rescaled."""
        new = numerics.dtype(dtype)
        old_sz, new_sz = self.dtype.itemsize, new.itemsize
        if self.strides[-1] != 1 and self.shape[-1] != 1:
            raise ShapeError(f"view({new.name}) of {self.name!r}: the last dim must be contiguous")
        last = self.shape[-1] * old_sz
        lead = 1 if self.on_chip else 0
        scaled = [s * old_sz for s in self.strides[lead:-1]] + [self.offset * old_sz, last]
        if any(x % new_sz for x in scaled):
            raise ShapeError(f"view({new.name}) of {self.name!r} {list(self.shape)} {self.dtype.name}: "
                             f"{last} bytes in the last dim or its offsets are not a multiple of {new_sz}")
        strides = list(self.strides[:lead]) + [s * old_sz // new_sz for s in self.strides[lead:-1]] + [1]
        return self._derive(self.shape[:-1] + (last // new_sz,), strides, self.offset * old_sz // new_sz, dtype=new)

    reinterpret_cast = view

    def rearrange(self, src_pattern, dst_pattern, fixed_sizes: dict | None = None) -> View:
        """einops-style regrouping, e.g. rearrange("p (a b)", "p b a", {"a": 4}) or rearrange(("p", ("a", "b")),
        ("p", "b", "a"), {"a": 4}); never copies."""
        src, dst = _groups(src_pattern), _groups(dst_pattern)
        if len(src) != self.ndim:
            raise ShapeError(f"rearrange: pattern {src_pattern!r} names {len(src)} dims; {self.name!r} has {self.ndim}")
        sizes = dict(fixed_sizes or {})
        for group, n in zip(src, self.shape):
            unknown = [x for x in group if x not in sizes]
            known = math.prod(sizes[x] for x in group if x in sizes)
            if len(unknown) > 1:
                raise ShapeError(f"rearrange: sizes of {unknown} in {src_pattern!r} are ambiguous; pass fixed_sizes")
            if unknown:
                sizes[unknown[0]] = n // known
        names = [x for g in src for x in g]
        if sorted(names) != sorted(x for g in dst for x in g):
            raise ShapeError(f"rearrange: {src_pattern!r} and {dst_pattern!r} must name the same axes")
        flat = self.reshape([sizes[x] for x in names])
        v = flat.permute([names.index(x) for g in dst for x in g])
        return v.reshape([math.prod(sizes[x] for x in g) for g in dst])

    def is_contiguous(self) -> bool:
        """Whether the free dims (all dims in HBM) are row-major with no gaps."""
        lead = 1 if self.on_chip else 0
        expect = 1
        for n, s in reversed(list(zip(self.shape[lead:], self.strides[lead:]))):
            if n != 1 and s != expect:
                return False
            expect *= n
        return True

    def is_indirect(self) -> bool:
        return self.gather_rows is not None

    def indirect(self, index: View, num_elem: int | None = None):
        """Tensor Indirection (nki.language.NkiTensor.indirect, NeuronCore-v4+): `num_elem` columns of this
        on-chip view at the free offsets held in the SBUF tile `index` (all of its elements when None); an
        instruction gathers them where it reads the result and scatters into them where it writes it."""
        return Indirection(self, index, num_elem)

    def get_pattern(self) -> list[list[int]]:
        """The access pattern `[[step, num], ...]` (on-chip: the partition pair first, in elements)."""
        steps = list(self.strides)
        if self.on_chip:
            steps[0] *= self.alloc_elems
        return [[s, n] for s, n in zip(steps, self.shape)]

    def vector_select(self, dim: int, vector_offset) -> View:
        """Per-partition row gather from an HBM tensor: row i of the result is row vector_offset[i]."""
        if self.on_chip or dim != 0:
            raise ShapeError(f"vector_select gathers rows (dim 0) of an HBM tensor; {self.name!r} is in {self.space.value}")
        n = vector_offset.size if isinstance(vector_offset, View) else int(np.asarray(vector_offset).size)
        return self.ap([[self.strides[0], n]] + [[s, k] for s, k in zip(self.strides[1:], self.shape[1:])],
                       vector_offset=vector_offset)

    def ap(self, pattern, offset=None, vector_offset=None, indirect_dim=0, dtype=None, scalar_offset=None) -> View:
        """A raw access pattern `[[step, num], ...]` over the tensor's storage, from where this view starts:
        `offset` elements more (None: none). NKI 0.5 made the offset relative to the view (nki/api/nki/language/
        __init__.py: NkiTensor.ap); on a whole tensor the two readings agree."""
        dt = numerics.dtype(dtype) if dtype is not None else self.dtype
        root = View(self.alloc, dt, (1,), (1,))
        start = self.offset * self.dtype.itemsize
        if start % dt.itemsize:
            raise ShapeError(f".ap on {self.name!r}: the view starts {start} bytes into a partition, not a whole "
                             f"number of {dt.name} elements")
        offset = start // dt.itemsize + (self.poff * root.alloc_elems if self.on_chip else 0) + int(offset or 0)
        if scalar_offset is not None:
            if isinstance(scalar_offset, View):
                scalar_offset = int(scalar_offset.array().reshape(-1)[0])
            elif getattr(scalar_offset, "bits", 32) > 32 and self.on_chip:
                raise DTypeError(f".ap on {self.name!r}: a 64-bit scalar_offset addresses HBM only; on-chip "
                                 f"offsets are nl.int32 (nki.isa.scalar_load)")
            offset += operator.index(scalar_offset) * self._dim_step(indirect_dim)
        shape = [int(n) for _, n in pattern]
        steps = [int(s) for s, _ in pattern]
        if self.on_chip:
            whole = root.alloc_elems
            if steps[0] != whole and shape[0] > 1:
                raise OutOfBoundsError(f".ap on {self.name!r}: the first pair must step whole partitions "
                                       f"([{whole}, P]); got [{steps[0]}, {shape[0]}]")
            return root._derive(shape, [1] + steps[1:], offset % whole, offset // whole)
        gather_rows = None
        if vector_offset is not None:
            if indirect_dim != 0:
                raise ShapeError(f".ap on {self.name!r}: vector_offset works with indirect_dim=0 only; got {indirect_dim}")
            rows = vector_offset  # a tile is read when the DMA runs (_indices)
            if not isinstance(rows, View):
                rows = np.asarray(rows).reshape(-1).astype(np.int64)
            gather_rows = (rows, self._dim_step(0))
        return root._derive(shape, steps, offset, 0, gather_rows=gather_rows)

    def _dim_step(self, dim) -> int:
        """Elements between consecutive indices of `dim` as this view lays them out: a reshaped tensor's own
        dims, not its allocation's (an access pattern's indirect dim counts in the tensor it is taken of)."""
        if dim >= self.ndim:
            raise ShapeError(f".ap on {self.name!r}: indirect_dim={dim} of a {self.ndim}-d tensor")
        if self.on_chip and dim == 0:
            return self.alloc_elems
        return self.strides[dim] if self.shape[dim] > 1 else math.prod(self.shape[dim + 1:])

    def root_shape(self):
        return getattr(self.alloc, "shape", self.shape)


class Indirection:
    """An indirect view: `num_elem` columns of `base` chosen by the offsets in `index` (gather where read,
    scatter where written); shape (partitions of base, num_elem)."""

    __slots__ = ("base", "index", "num_elem")

    def __init__(self, base: View, index: View, num_elem: int | None = None):
        if not isinstance(index, View):
            raise ShapeError(f"{base.name!r}.indirect: index is an SBUF tensor of free offsets; got {index!r}")
        if not base.on_chip:
            raise ShapeError(f"{base.name!r}.indirect: Tensor Indirection addresses SBUF or PSUM; {base.name!r} is "
                             f"in {base.space.value} (a DMA takes .ap(vector_offset=...) there)")
        if base.gather_rows is not None:
            raise ShapeError(f"{base.name!r}.indirect: the view is indirect already (one indirection per view)")
        if index.partitions != base.partitions:
            raise ShapeError(f"{base.name!r}.indirect: index {list(index.shape)} has {index.partitions} partitions; "
                             f"it has the tensor's {base.partitions}")
        self.base, self.index = base, index
        self.num_elem = index.size if num_elem is None else int(num_elem)
        if self.num_elem < 1:
            raise ShapeError(f"{base.name!r}.indirect: num_elem {self.num_elem} must be at least 1")

    @property
    def shape(self) -> tuple:
        return (self.base.partitions, self.num_elem)

    @property
    def dtype(self):
        return self.base.dtype

    @property
    def name(self) -> str:
        return f"{self.base.name}.indirect({self.index.name})"

    def is_indirect(self) -> bool:
        return True

    def __repr__(self):
        return f"<indirect view of {self.base!r} by {self.index.name!r}, {list(self.shape)}>"


def region_at(place, dtype, shape, strides, offset, poff, on_chip, indirect, span) -> Region:
    """The Region of a view from its placement (View.placement)."""
    space, memory, p0, b0, nbytes, tile = place
    isz = dtype.itemsize
    if indirect:  # a gather/scatter may touch any row; each row's free dims are its contiguous runs
        lo, hi, run = 0, nbytes // isz - 1, _span(shape, strides, offset, True)[2]
    else:
        lo, hi, run = span or _span(shape, strides, offset, on_chip)
    return Region(space, memory, p0 + poff if on_chip else 0, shape[0] if on_chip else 1,
                  b0 + lo * isz, b0 + (hi + 1) * isz, shape, dtype.name, run * isz, tile if on_chip else -1)


def _span(shape, strides, offset, on_chip) -> tuple[int, int, int]:
    """Lowest and highest element offset of a view, and elements in its innermost contiguous run."""
    lo = hi = offset
    run, dense = 1, True
    for d in range(len(shape) - 1, 0 if on_chip else -1, -1):  # the free dims, innermost first
        n, s = shape[d], strides[d]
        if n == 1:
            continue
        step = (n - 1) * s
        if step > 0:
            hi += step
        else:
            lo += step
        if dense and s == run:
            run *= n
        else:
            dense = False
    return lo, hi, run


def _reshaped_strides(shape, strides, new_shape) -> list[int] | None:
    """Strides giving `new_shape` over the same elements in row-major order without a copy, or None.

    Groups of old and new dims with equal element counts are matched; the old dims of a group must be
    contiguous with each other (numpy's rule). Computed from the numbers alone: never touches memory.
    """
    new = [int(n) for n in new_shape]
    if 0 in new or 0 in shape:
        return [0] * len(new)
    old = [(n, s) for n, s in zip(shape, strides) if n != 1]
    out, oi, ni = [1] * len(new), 0, 0
    while oi < len(old) and ni < len(new):
        oj, nj, op, nq = oi + 1, ni + 1, old[oi][0], new[ni]
        while op != nq:
            if nq < op:
                nq, nj = nq * new[nj], nj + 1
            else:
                op, oj = op * old[oj][0], oj + 1
        if any(old[k][1] != old[k + 1][0] * old[k + 1][1] for k in range(oi, oj - 1)):
            return None
        out[nj - 1] = old[oj - 1][1]
        for k in range(nj - 1, ni, -1):
            out[k - 1] = out[k] * new[k]
        oi, ni = oj, nj
    for k in range(ni, len(new)):  # trailing size-1 dims
        out[k] = out[ni - 1] if ni else 1
    return out


def _groups(pattern) -> list[list[str]]:
    """The dims of a rearrange pattern, each a list of names: an einops string "p (a b)" or the tuple form the
    NKI reference writes, ('p', ('a', 'b'))."""
    if not isinstance(pattern, str):
        return [[x] if isinstance(x, str) else list(x) for x in pattern]
    import re
    return [m[0].split() if m[0] else [m[1]] for m in re.findall(r"\(([^)]*)\)|(\S+)", pattern)]


def _as_index(k):
    if isinstance(k, (slice, int, np.integer)):
        return int(k) if not isinstance(k, slice) else k
    if hasattr(k, "__index__"):
        return k.__index__()
    if hasattr(k, "start") and hasattr(k, "size"):  # nl.ds
        return slice(int(k.start), int(k.start) + int(k.size))
    raise ShapeError(f"cannot index a tensor with {k!r}")


def _slice_bounds(k: slice, n: int, view: View, dim: int):
    step = 1 if k.step is None else int(k.step)
    if step < 1:
        raise OutOfBoundsError(f"slice step {step} on dim {dim} of {view.name!r}: steps must be >= 1")
    start = 0 if k.start is None else int(k.start)
    stop = n if k.stop is None else int(k.stop)
    start, stop = (start + n if start < 0 else start), (stop + n if stop < 0 else stop)
    if not (0 <= start <= n and 0 <= stop <= n):
        raise OutOfBoundsError(f"slice {start}:{stop} out of bounds for dim {dim} of size {n} of {view.name!r}")
    return start, max(start, stop), step


