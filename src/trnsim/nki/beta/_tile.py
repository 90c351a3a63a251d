"""Beta-API tensors and tiles: lazy affine maps onto core tensors, made into core views per instruction.

A `Tensor` is what `nl.ndarray` allocates: a logical shape whose dims before `nl.par_dim` are block
dims, each block one core tensor (allocated on first use, or placed by `nki.compiler` direct
allocation). A `Tile` is a tensor seen through an index map: per tensor dim a constant plus one
coefficient per result axis, so slices, ints, strides, grids and transposed grids are all one map. The
map becomes a core `View` only when an instruction runs, on the box its mask keeps: masked-off indices
may lie outside the tensor and are never touched, and bounds are checked on what is touched.

Every value is computed by core instructions issued through `emit`; this module only builds views.
"""
from __future__ import annotations

import functools
import inspect
import itertools
import threading
import warnings
import weakref

import numpy as np

from trnsim import numerics
from trnsim.core import View
from trnsim.core.errors import KernelError, OperandTypeError, OutOfBoundsError, ShapeError, where
from trnsim.core.isa.opcodes import ELEMENTWISE, Op
from trnsim.core.liveness import read_later, releasers
from trnsim.nki import _frontend, isa as cur, lower
from trnsim.nki.beta._grid import Cond, Expr, Mask, MaskExpressionError, boxes, evaluate

_ctx = threading.local()


class ParDim(int):
    """`nl.par_dim(n)`: marks the partition dim of an on-chip tensor; dims before it are block dims."""


class AliasingError(KernelError):
    """Two live tensors placed on the same on-chip bytes: one overwrote data the other still needed."""


class Launch:
    """What the instances of one kernel launch share: HBM outputs, direct allocations, write stamps."""

    def __init__(self, grid=(), strict=True):
        self.grid, self.strict = tuple(grid), strict
        self.shared: dict[int, Tensor] = {}
        self.direct: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # alloc id -> Allocation
        self.labels: dict[int, str] = {}
        self.written: dict[int, tuple] = {}  # alloc id -> (stamp, partition lo, hi, byte lo, hi)
        self.coalesced: dict[int, tuple] = {}  # id(result tile) -> (weak ref, alloc id): see `coalesce`
        self.stamp = itertools.count(1)
        self.turns = None  # the programs' turns on the core (core/lnc.py) when the grid has several
        self.spawn = None  # starts a thread for the next programs, before a program waits
        self.meetings: dict = {}  # (call site, nth call, programs) -> the nl.all_reduce they meet at
        self.failed = False  # a program raised: the others stop where they wait
        self.affine = "error"  # how a loop-carried dependency in an affine_range loop is reported (core/races.py)


Abandoned = _frontend.Abandoned


class Instance:
    """One program of an SPMD grid: its grid index and its own per-call-site state."""

    def __init__(self, launch: Launch, index=(), turn=0):
        self.launch, self.index, self.turn = launch, tuple(index), turn
        self.calls: dict = {}  # call site -> how many times this program made the call there
        self.nshared = 0
        self.reducers: dict = {}
        self.loops: list = []  # (loop, index) of each kernel loop running now, outermost first


def instance() -> Instance:
    inst = getattr(_ctx, "instance", None)
    if inst is None:
        inst = _ctx.instance = Instance(Launch())
    return inst


def core():
    return _frontend.core()


# -- dtypes: the beta API's promotion rules (reference 2.5), in the lowering layer -----------------------------
weak_dtype, promote = lower.weak_dtype, lower.promote


# -- tensors ----------------------------------------------------------------------------------------------------
class Tensor:
    """An `nl.ndarray`: a logical shape, a dtype, a buffer and one core tensor per block."""

    def __init__(self, shape, dtype, buffer="sbuf", name=None, place=None, view: View | None = None):
        dims = list(lower.check_shape(shape, "nl.ndarray"))
        pars = [i for i, d in enumerate(dims) if isinstance(d, ParDim)]
        if len(pars) > 1:
            raise ShapeError(f"tensor shape {tuple(shape)} marks {len(pars)} partition dims; a tensor has one")
        self.shape = tuple(int(d) for d in dims)
        self.dtype = numerics.dtype(dtype)
        self.buffer = _frontend.buffer_name(buffer)
        self.on_chip = not self.buffer.endswith("hbm")
        self.pdim = (pars[0] if pars else 0) if self.on_chip else None
        self.name = name or ""
        self.place = place
        self.zeroed = None  # a deferred zero fill (PSUM `nl.zeros`): run before any other use
        self.nth = 0  # which new tile of the outermost front-end call made it (0: none)
        self._blocks: dict[tuple, View] = {(): view} if view is not None else {}
        # the loop iteration that declared a one-tile tensor: the compiler scopes it there, even when its first
        # write (which allocates it here) happens in a nested loop; a tensor of blocks keeps each block to the
        # iteration that first uses it (blocks used one per iteration share buffers)
        self._scopes = (list(core().scopes) if self.on_chip and view is None and place is None
                        and not self.block_shape else None)
        if self.on_chip and len(self.shape) <= self.pdim:
            raise ShapeError(f"on-chip tensor {name or ''} {list(self.shape)}: Insufficient rank; a tile needs a "
                             f"partition dim")

    @property
    def block_shape(self) -> tuple:
        return self.shape[: self.pdim] if self.on_chip else ()

    def block(self, idx: tuple) -> View:
        """The core tensor holding block `idx` (allocated on first use)."""
        v = self._blocks.get(idx)
        if v is not None:
            return v
        for i, n in zip(idx, self.block_shape):
            if not 0 <= i < n:
                raise OutOfBoundsError(f"err_tensor_access_out_of_bound: block {idx} of {self.name!r} with block "
                                       f"dims {list(self.block_shape)}")
        tile = self.shape[self.pdim:] if self.on_chip else self.shape
        if len(tile) == 1 and self.on_chip:
            tile += (1,)  # a partition-only tile [P] is laid out as [P, 1]
        name = f"{self.name or 'tile'}{list(idx) if idx else ''}" if self.name or idx else None
        if self.place is not None:
            v = self.place.allocate(self, idx, tile, name)
        else:
            v = self._allocate(tile, name)
            v.alloc.block = bool(idx)
        self._blocks[idx] = v
        return v

    def _allocate(self, tile, name) -> View:
        nc, decl = core(), self._scopes
        if decl is None or len(decl) >= len(nc.scopes) or nc.scopes[:len(decl)] != decl:
            return _frontend.ndarray(tile, self.dtype, self.buffer, name=name)
        inner, nc.scopes = nc.scopes, decl  # a nested loop's first write: scope it where it was declared
        try:
            v = _frontend.ndarray(tile, self.dtype, self.buffer, name=name)
        finally:
            nc.scopes = inner
        return v


# -- tiles ----------------------------------------------------------------------------------------------------
class Tile:
    """A tensor seen through an affine index map (what beta-API calls take and return)."""

    __slots__ = ("tensor", "const", "coefs", "shape", "indirect", "opmask", "pending", "__weakref__")

    def __init__(self, tensor, const, coefs, shape, indirect=None, opmask=None, pending=None):
        self.tensor, self.const, self.coefs, self.shape = tensor, tuple(const), tuple(map(tuple, coefs)), tuple(shape)
        self.indirect, self.opmask, self.pending = indirect, opmask, pending

    @classmethod
    def whole(cls, tensor: Tensor) -> Tile:
        n = len(tensor.shape)
        return cls(tensor, (0,) * n, [[int(d == a) for a in range(n)] for d in range(n)], tensor.shape)

    # -- facts ----------------------------------------------------------------------------------------
    @property
    def dtype(self):
        return numerics.float32 if self.pending is not None else self.tensor.dtype  # matmuls accumulate in FP32

    @property
    def buffer(self) -> str:
        return "psum" if self.pending is not None else self.tensor.buffer

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def name(self) -> str:
        return self.ready().tensor.name

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    def __repr__(self):
        if self.pending is not None:
            return f"<pending matmul tile {list(self.shape)}>"
        return f"<{self.tensor.buffer} tile {self.tensor.name!r} {list(self.shape)} {self.tensor.dtype.name}>"

    def ready(self) -> Tile:
        """Run a pending matmul into a fresh PSUM tile, once."""
        if self.pending is not None:
            run, self.pending = self.pending, None
            out = new_tile(self.shape, numerics.float32, "psum")
            run(out, False)
            self.tensor, self.const, self.coefs, self.indirect = out.tensor, out.const, out.coefs, None
        return self

    # -- indexing ---------------------------------------------------------------------------------------
    def __getitem__(self, key) -> Tile:
        self.ready()
        if isinstance(key, tuple) and len(key) == 2 and self.ndim == 1 and self.tensor.on_chip:
            # a partition-only tile [P] is laid out as [P, 1] (nl.load of a (n,) tensor): `t[i, 0]` indexes it so
            return Tile(self.tensor, self.const, [row + (0,) for row in self.coefs], self.shape + (1,), self.indirect,
                        self.opmask)[key]
        if isinstance(key, (Cond, Mask)):  # operand masking: t[i_f < 64]
            m = key.evaluate(self.shape)
            return Tile(self.tensor, self.const, self.coefs, self.shape, self.indirect,
                        m if self.opmask is None else (m & self.opmask))
        if self.indirect is not None:
            raise KernelError("an indirectly indexed tile cannot be indexed again")
        key = _expand(key if isinstance(key, tuple) else (key,), len(self.shape))
        grids = any(isinstance(k, Expr) for k in key)
        tiles = [i for i, k in enumerate(key) if isinstance(k, Tile)]
        if grids and any(isinstance(k, slice) for k in key):
            raise KernelError(f"err_unsupported_mixing_basic_advanced_tensor_indexing: {key!r} mixes slices with "
                              f"nl.arange grids; index every dim with a grid (or an int)")
        pax = self._partition_axis()
        indirect = None
        if tiles:
            j = tiles[0]  # integer indices on the leading dims drop them (`data[b, idx, cols]`, a gather per b)
            if (len(tiles) > 1 or not self.tensor.buffer.endswith("hbm")
                    or not all(isinstance(k, (int, np.integer)) for k in key[:j])):
                raise KernelError("err_indirect_indices_free_dim: a tile of indices may index only the first dim of an "
                                  "HBM tensor not indexed by an int (a DMA gather/scatter)")
            indirect = key[j]
            rest = [Expr.lift(k) if not isinstance(k, Expr) else k for k in key[j + 1:]]
            nd = max([e.ndim for e in rest] + [1])
            grid = _broadcast([e.shape for e in rest], nd)
            shape = (indirect.shape[0],) + grid[1:]
            lead = [(int(k) + (self.shape[a] if int(k) < 0 else 0), (0,) * nd) for a, k in enumerate(key[:j])]
            sub = lead + [(0, (1,) + (0,) * (nd - 1))] + [_expr_map(e, nd) for e in rest]
        elif grids:
            exprs = [Expr.lift(k) for k in key]
            nd = max(e.ndim for e in exprs)
            shape = _broadcast([e.shape for e in exprs], nd)
            sub = [_expr_map(e, nd) for e in exprs]
        else:
            shape, sub = [], []
            for a, k in enumerate(key):
                n = self.shape[a]
                if isinstance(k, slice):
                    start, stop, step = _slice(k, n)
                    sub.append((start, len(shape), step))
                    shape.append(max(0, -(-(stop - start) // step)))
                else:
                    i = int(k) + (n if int(k) < 0 else 0)
                    if a == pax:  # an on-chip tile keeps its partition dim
                        sub.append((i, len(shape), 1))
                        shape.append(1)
                    else:
                        sub.append((i, None, 0))
            if pax is not None and len(shape) == 1:  # an on-chip tile stays 2-d: the last int-indexed free dim
                j = max((a for a, k in enumerate(key) if a > pax and not isinstance(k, slice)), default=None)
                if j is not None:  # is kept at size 1 (`t[:, i]` of [P, F] is [P, 1])
                    sub[j] = (sub[j][0], 1, 1)
                    shape.append(1)
            if pax is None and not shape and len(key) >= 2:  # every dim of an HBM tensor indexed by an int: the
                for a in (len(key) - 2, len(key) - 1):      # element as a [1, 1] tile (`nl.load(sinks[b, h])`)
                    sub[a] = (sub[a][0], len(shape), 1)
                    shape.append(1)
            nd = len(shape)
            sub = [(c, tuple(s if ax == r else 0 for ax in range(nd))) for c, r, s in sub]
        const = [c + sum(cf * s[0] for cf, s in zip(row, sub)) for c, row in zip(self.const, self.coefs)]
        coefs = [[sum(cf * s[1][a] for cf, s in zip(row, sub)) for a in range(len(shape))] for row in self.coefs]
        return Tile(self.tensor, const, coefs, shape, indirect)

    def _partition_axis(self):
        if not self.tensor.on_chip:
            return None
        row = self.coefs[self.tensor.pdim]
        return next((a for a, c in enumerate(row) if c), None)

    def view(self, box=None) -> View:
        """The core view of this tile (or of one box of it: (lo, hi) per result axis). Given a dtype instead of
        a box, the beta `tensor.view(dtype)`: the same bytes reinterpreted, as a tile."""
        if box is not None and not isinstance(box, tuple):
            return wrap(self.view().view(box), self.tensor.buffer)
        self.ready()
        if self.tensor.zeroed is not None:
            fill, self.tensor.zeroed = self.tensor.zeroed, None
            fill(self.tensor)
        box = box or tuple((0, n) for n in self.shape)
        if len(box) > len(self.shape) and all(r == (0, 1) for r in box[len(self.shape):]):
            box = box[:len(self.shape)]  # a [P] tile asked for as [P, 1]
        if len(box) != len(self.shape) or any(not 0 <= lo <= hi <= n for (lo, hi), n in zip(box, self.shape)):
            raise ShapeError(f"tile {self.name!r} of shape {list(self.shape)} is used as "
                             f"{[f'{lo}:{hi}' for lo, hi in box]}; an operand must hold what the instruction reads")
        shape = [hi - lo for lo, hi in box]
        const = [c + sum(cf * lo for cf, (lo, _) in zip(row, box)) for c, row in zip(self.const, self.coefs)]
        t = self.tensor
        if not t.on_chip:
            base = t.block(())
            strides = [sum(base.strides[d] * self.coefs[d][a] for d in range(len(const))) for a in range(len(shape))]
            offset = base.offset + sum(base.strides[d] * c for d, c in enumerate(const))
            if self.indirect is not None:  # the gathered dim: the first one the tile's first axis runs along
                d = next(d for d, row in enumerate(self.coefs) if row[0])
                return self._gather(base, box, shape, strides, offset - base.strides[d] * self.coefs[d][0] * box[0][0],
                                    base.strides[d])
            return base._derive(shape, strides, offset, 0)
        pd = t.pdim
        for d in range(pd):
            if any(self.coefs[d][a] for a in range(len(shape)) if shape[a] > 1):
                raise KernelError(f"a block dim of {t.name!r} {list(t.shape)} is indexed by a range; index block dims "
                                  f"with an int or a loop index (one tile per instruction)")
        base = t.block(tuple(const[:pd]))
        for d in range(pd, len(const)):
            for a in range(len(shape)):
                if self.coefs[d][a] and shape[a] > 1 and (d == pd) != (a == 0):
                    raise KernelError(f"err_failed_to_infer_tile_from_local_tensor: the partition dim of {t.name!r} "
                                      f"must be indexed by the first axis of the tile (and only it)")
        strides = [base.strides[0] * self.coefs[pd][0]] + [
            sum(base.strides[d - pd] * self.coefs[d][a] for d in range(pd + 1, len(const))) for a in range(1, len(shape))]
        poff = base.poff + base.strides[0] * const[pd]
        offset = base.offset + sum(base.strides[d - pd] * const[d] for d in range(pd + 1, len(const)))
        if len(shape) == 1:  # a partition-only tile: one element per partition, as [P, 1]
            shape, strides = shape + [1], strides + [1]
        return base._derive(shape, strides, offset, poff)

    def _gather(self, base, box, shape, strides, offset, row_stride) -> View:
        """A DMA gather/scatter view: one HBM row per partition, read from the index tile."""
        idx = self.indirect.view(((box[0][0], box[0][1]),) + ((0, 1),) * (self.indirect.ndim - 1))
        # the DMA reads the rows from the index tile when it runs (View._indices)
        return View(base.alloc, base.dtype, shape, [0] + strides[1:], offset, 0, gather_rows=(idx, row_stride))

    # -- assignment and accumulation --------------------------------------------------------------------
    def __setitem__(self, key, value):
        dst = own(self)[key]
        if isinstance(value, Tile) and value.pending is None and _same(dst, value):
            return  # `t[i] += x` already accumulated in place
        assign(dst, value)

    def __iadd__(self, value):
        return accumulate(own(self), "add", value)

    def __isub__(self, value):
        return accumulate(own(self), "subtract", value)

    def __imul__(self, value):
        return accumulate(own(self), "multiply", value)

    # -- tile arithmetic ------------------------------------------------------------------------------------
    def _op(self, name, other, reverse=False):
        return elementwise(name, other, self) if reverse else elementwise(name, self, other)

    __add__ = lambda self, o: self._op("add", o)  # noqa: E731
    __radd__ = lambda self, o: self._op("add", o, True)  # noqa: E731
    __sub__ = lambda self, o: self._op("subtract", o)  # noqa: E731
    __rsub__ = lambda self, o: self._op("subtract", o, True)  # noqa: E731
    __mul__ = lambda self, o: self._op("multiply", o)  # noqa: E731
    __rmul__ = lambda self, o: self._op("multiply", o, True)  # noqa: E731
    __truediv__ = lambda self, o: self._op("divide", o)  # noqa: E731
    __rtruediv__ = lambda self, o: self._op("divide", o, True)  # noqa: E731
    __lt__ = lambda self, o: self._op("less", o)  # noqa: E731
    __le__ = lambda self, o: self._op("less_equal", o)  # noqa: E731
    __gt__ = lambda self, o: self._op("greater", o)  # noqa: E731
    __ge__ = lambda self, o: self._op("greater_equal", o)  # noqa: E731
    __eq__ = lambda self, o: self._op("equal", o)  # noqa: E731
    __ne__ = lambda self, o: self._op("not_equal", o)  # noqa: E731
    __neg__ = lambda self: self._op("multiply", -1.0)  # noqa: E731
    __hash__ = object.__hash__

    def __bool__(self):
        if self.pending is None and not self.tensor.on_chip:
            return True  # an HBM tensor is a present argument (`if bias:` on an optional kernel argument)
        raise KernelError("err_ambiguous_tensor_truth_value: a tile cannot be a Python truth value (branching on "
                          "tensor values is dynamic control flow)")

    def __iter__(self):
        """A tile's indexing is lazy (masks may reach past its end), so Python's fallback iteration through
        `t[0], t[1], ...` would never stop: iterating a tile is refused."""
        raise OperandTypeError(f"tile {self.name!r} of shape {list(self.shape)} is not iterable; index it (t[i]) in a "
                               f"loop over nl.affine_range({self.shape[0] if self.shape else 0})")

    # -- nki.tensor methods ----------------------------------------------------------------------------------
    def astype(self, dtype):
        return copied(self, dtype=dtype)

    def reshape(self, shape):
        v = self.view().reshape(tuple(shape))
        return wrap(v, self.tensor.buffer)

    def broadcast_to(self, shape):
        return broadcast_to(self, shape)

    def expand_dims(self, axis):
        return expand_dims(self, axis)

    def assert_shape(self, shape):
        if tuple(shape) != self.shape:
            raise ShapeError(f"err_annotation_shape_mismatch: tile {list(self.shape)} is not {list(shape)}")
        return self


def wrap(view: View, buffer=None) -> Tile:
    """A tile over an existing core view (kernel arguments, reshapes)."""
    return Tile.whole(Tensor(view.shape, view.dtype, buffer or view.buffer, view.name, view=view))


def new_tile(shape, dtype, buffer="sbuf", name=None) -> Tile:
    """A fresh tile (auto-allocated, never-written), or the destination an assignment re-issues into."""
    shape = tuple(shape)
    d = _direct
    if d.depth:
        d.made += 1
        if d.into is not None and d.made == d.into[0]:
            dst, d.into = d.into[1], None
            return dst
    t = Tile.whole(Tensor(shape, dtype, buffer, name))
    t.tensor.nth = d.made if d.depth else 0
    return t


# -- direct destinations -----------------------------------------------------------------------------------------
# `x[...] = nl.load(a)` or `x[...] = nisa.activation(...)`: the compiler has the instruction write x itself;
# there is no temporary and no copy. The front end runs the call first (Python evaluates the right side
# before the assignment), so the assignment takes the call's instructions back off the stream and issues
# the call again with x as the result tile. Only when nothing ran in between, and x can take the result
# as is (same memory, the same elements per partition in the same order, x not among the call's inputs);
# otherwise the copy stays. Shapes that differ only by size-1 free dims are one access pattern: a
# reduction's [P] result assigned to a [P, 1] column is written there by the reduction itself. The dtype
# may differ when the call's FP32 result is written, and not read, by Vector, Scalar or GpSimd instructions:
# those engines compute in FP32 and cast on output for free (trainium_inferentia2_arch.rst, Vector engine),
# so writing x's dtype directly is the copy's cast, bit for bit, without the copy. A call that issues
# nothing (nl.ds or nl.arange in the assignment's own subscript, evaluated after the value) leaves the
# latest call as it was.
class _Direct(threading.local):
    depth = 0  # nesting of front-end calls (only the outermost one is re-issued)
    made = 0  # new tiles the outermost call made so far
    into = None  # (nth new tile, destination Tile) while a call is re-issued into an assignment
    # (tensor, how to issue the call again) for the latest outermost call only: a later call makes it stale,
    # and holding its arguments longer would keep their tiles alive past their last use
    last = None


_direct = _Direct()
releasers.append(lambda: setattr(_direct, "last", None))  # under memory pressure: its arguments may be dead


def direct_result(fn):
    """Wrap a front-end function whose result is a fresh tile, so that an assignment can redirect it."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        d = _direct
        if d.depth:
            return fn(*args, **kwargs)
        stream = core().stream
        mark, d.depth, d.made, before, d.last = len(stream), 1, 0, d.last, None
        try:
            out = fn(*args, **kwargs)
        finally:
            d.depth, d.into = 0, None
        if isinstance(out, Tile) and out.tensor is not None and out.tensor.nth:
            d.last = (out.tensor, (call, args, kwargs, mark, len(stream), out.tensor.nth))
        elif len(stream) == mark:
            d.last = before
        return out
    return call


def _made_by(value: Tile):
    """(call, args, kwargs, stream mark, stream end, nth) of the front-end call that made `value`, if it was
    the last call (the one record kept) and `value` is its whole result; else None."""
    last = _direct.last
    if last is None or value.tensor is None or last[0] is not value.tensor or value.pending is not None:
        return None
    return last[1]


def masked_off(value: Tile) -> bool:
    """Whether `value` came from a call whose mask was False: it issued nothing, and since the compiler
    writes an instruction's result straight into the tile it is assigned to, `dst[...] = value` leaves
    dst as it was."""
    r = _made_by(value)
    if r is None:
        return False
    mask = r[2].get("mask")
    return isinstance(mask, (bool, np.bool_)) and not mask and r[3] == r[4] == len(core().stream)


def redirect(dst: Tile, value: Tile) -> bool:
    """Issue the call that made `value` again with `dst` as its result tile; False if it cannot be."""
    t, d, r = value.tensor, _direct, _made_by(value)
    if r is None or not dst.tensor.on_chip:
        return False
    call, args, kwargs, mark, end, nth = r
    stream = core().stream
    if (len(stream) != end or value.shape != t.shape or value.const != Tile.whole(t).const or value.indirect
            is not None or dst.tensor.buffer != t.buffer or dst.indirect is not None):
        return False
    cast = dst.tensor.dtype != t.dtype
    if cast and (not _casts_on_output(stream[mark:end], t.dtype, dst.tensor.dtype) or read_later(value)):
        return False  # a result read again in its own dtype is computed in it, then cast by the copy
    into = _seen_as(dst, t.shape)
    if into is None or into.opmask is not None:
        return False
    if (any(isinstance(a, Tile) and a.tensor is dst.tensor for a in (*args, *kwargs.values()))
            and not _in_place(stream[mark:end], into)):
        return False
    d.last = None
    del stream[mark:]
    d.depth, d.made, d.into = 1, 0, (nth, into)
    try:
        call.__wrapped__(*args, **kwargs)
    finally:
        d.depth, d.into = 0, None
    if not cast:
        coalesce(value, into)
    return True


# The call's own result tile, still held by the kernel (`r = nl.exp(x); d[...] = r; ... r ...`), is the
# destination's bytes from then on: the compiler coalesced the copy, so a later read of the result reads
# what the direct write wrote and waits for it. Should the kernel write those bytes again while it still
# holds the result, the two values part: the result first gets its own copy (the copy the compiler keeps
# when the two live ranges interfere), so it never reads the newer data.
def coalesce(value: Tile, into: Tile) -> None:
    """Make `value` the tile `into` for reads and dependences, watched for a later write of its bytes."""
    value.tensor, value.const, value.coefs = into.tensor, into.const, into.coefs
    launch, key = instance().launch, id(value)
    ref = weakref.ref(value, lambda _, k=key, c=launch.coalesced: c.pop(k, None))
    launch.coalesced[key] = (ref, value.view().alloc.id)


def _overlap(a, b) -> bool:
    return (a.partition < b.partition + b.partitions and b.partition < a.partition + a.partitions
            and a.byte_lo < b.byte_hi and b.byte_lo < a.byte_hi)


def _part_from_overwrite(launch: Launch, v: View) -> None:
    """Give each result tile coalesced with bytes `v` is about to write its own copy of them first."""
    for key, (ref, alloc) in list(launch.coalesced.items()):
        value = ref()
        if alloc != v.alloc.id or value is None or not _overlap(value.view().region(), v.region()):
            continue
        del launch.coalesced[key]
        _part(value)


def own(t: Tile) -> Tile:
    """`t` about to be written itself (`t[...] = v`, `t += v`): if it stands for another tile's bytes, it
    takes its own copy first, so the write leaves that tile as it was."""
    entry = instance().launch.coalesced.pop(id(t), None)
    if entry is not None and entry[0]() is t:
        _part(t)
    return t


def _part(value: Tile) -> None:
    mine = Tile.whole(Tensor(value.shape, value.dtype, value.tensor.buffer))
    each_box(mine, None, [value], lambda b: lower.copy(part(mine, b, mine.shape), part(value, b, mine.shape)))
    value.tensor, value.const, value.coefs, value.opmask = mine.tensor, mine.const, mine.coefs, None


_FP32_ENGINES = {"vector", "scalar", "gpsimd"}
_POSITIONAL = ELEMENTWISE | {Op.AFFINE_SELECT}  # element i of the result from element i of each input


def _in_place(issued, into: Tile) -> bool:
    """Whether a call that reads its destination can write it in place: one instruction, element for
    element, reading the destination exactly where it writes it (`x[s] = nisa.affine_select(.., x[s], ..)`):
    a streaming engine reads each element before it writes that position, as the current API's in-place
    instructions (`dst` = `data`) do. A transpose, a reduction or a shifted read keeps its copy."""
    if len(issued) != 1 or issued[0].op not in _POSITIONAL:
        return False
    rec, at = issued[0], into.view().placement()
    reads = [p for n, p in rec.placed.items() if n not in rec.writes and p[0] == at[0]]
    return bool(reads) and all(p[:8] == at[:8] for p in reads)


def _casts_on_output(issued, result, dtype) -> bool:
    """Whether the instructions of a call could write its result in `dtype` instead, bit for bit: those that
    touch the result only write it (the others stage operands, as the PSUM -> SBUF copy before a GpSimd
    instruction does), either an FP32 result on an engine that casts its output, or a PE transpose on a core
    without transpose mode into FP32 (a matmul with the identity, exact for every narrower float)."""
    if not issued or not numerics.dtype(dtype).is_float:
        return False
    fp32_result, pe_widens = numerics.dtype(result).name == "float32", None
    last = issued[-1]
    out = {last.placed[n][0] for n in last.writes if n in last.placed}  # an unused reduce_res is absent
    for rec in issued:
        touch = [n for n, p in rec.placed.items() if p[0] in out]
        if not touch:
            continue
        if any(n not in rec.writes for n in touch):
            return False
        if rec.engine.value in _FP32_ENGINES:
            if not fp32_result:
                return False
        else:
            if pe_widens is None:
                pe_widens = (numerics.dtype(dtype).name == "float32" and numerics.dtype(result).is_float
                             and not core().can("matmul_transpose_mode"))
            if rec.op.value != "nc_transpose" or not pe_widens:
                return False
    return True


def _seen_as(dst: Tile, shape: tuple) -> Tile | None:
    """`dst` indexed as a tile of `shape` when both hold the same elements per partition in the same order
    (the partition dim equal, the free dims equal once size-1 dims are dropped); else None."""
    if dst.shape == shape:
        return dst
    if dst.opmask is not None or not dst.shape or not shape or dst.shape[0] != shape[0]:
        return None
    free = [a for a in range(1, dst.ndim) if dst.shape[a] != 1]
    if [dst.shape[a] for a in free] != [n for n in shape[1:] if n != 1]:
        return None
    taken = iter(free)  # each result axis reads the dst axis it stands for; a size-1 one none (its index is 0)
    axes = [0] + [next(taken) if n != 1 else None for n in shape[1:]]
    coefs = [[row[a] if a is not None else 0 for a in axes] for row in dst.coefs]
    return Tile(dst.tensor, dst.const, coefs, shape)


def reissue_destination():
    """The tile an assignment is re-issuing the current call into, taken for the caller to write itself
    (a call whose result reads its destination, as nl.loop_reduce does); None outside a re-issue."""
    d = _direct
    if d.into is None or d.into[0] != d.made + 1:
        return None
    dst, d.into = d.into[1], None
    return dst


def wrap_results(namespace: dict, skip=()) -> None:
    """Make every public function of a front-end module redirectable (random draws excepted: a second
    draw would differ)."""
    for name, f in list(namespace.items()):
        if (inspect.isfunction(f) and not name.startswith("_") and f.__module__ == namespace["__name__"]
                and name not in skip and "rand" not in name):
            namespace[name] = direct_result(f)


def _same(a: Tile, b: Tile) -> bool:
    return (a.tensor is b.tensor and a.const == b.const and a.coefs == b.coefs and a.shape == b.shape
            and a.indirect is None and b.indirect is None)


def _expand(key, n):
    i = next((j for j, k in enumerate(key) if k is Ellipsis), None)  # never `==`: tiles compare elementwise
    if i is not None:
        key = key[:i] + (slice(None),) * (n - len(key) + 1) + key[i + 1:]
    if len(key) > n:
        raise OutOfBoundsError(f"{len(key)} indices for a {n}-d tile")
    return tuple(_ds(k) for k in key) + (slice(None),) * (n - len(key))


def _ds(k):
    if hasattr(k, "start") and hasattr(k, "size") and not isinstance(k, slice):
        return slice(int(k.start), int(k.start) + int(k.size))
    return k


def _slice(k: slice, n: int):
    step = 1 if k.step is None else int(k.step)
    start = 0 if k.start is None else int(k.start)
    stop = n if k.stop is None else int(k.stop)
    start, stop = (start + n if start < 0 else start), (stop + n if stop < 0 else stop)
    if step < 1:
        raise OutOfBoundsError(f"slice step {step}: steps must be >= 1")
    return start, stop, step


def _broadcast(shapes, nd) -> tuple:
    out = [1] * nd
    for s in shapes:
        s = (1,) * (nd - len(s)) + tuple(s)
        for a, n in enumerate(s):
            if n != 1:
                if out[a] not in (1, n):
                    raise ShapeError(f"index grids of shapes {shapes} do not broadcast")
                out[a] = n
    return tuple(out)


def _expr_map(e: Expr, nd):
    k = nd - e.ndim
    return e.const, tuple(e.coefs.get(a - k, 0) for a in range(nd))


# -- views of operands for one box -------------------------------------------------------------------------------
def part(t: Tile, box, shape, broadcast=True) -> View:
    """The view of operand `t` for one box of an instruction over `shape` (size-1 axes broadcast).

    Beta broadcasting aligns operands on the partition dim (axis 0), never on the right as numpy does:
    a [P] or [P, 1] operand fits [P, F] and [P, 1, 1]; missing trailing axes count as size 1, and extra
    trailing size-1 axes (a [P, 1] operand of a [P] instruction) are dropped."""
    nd = len(shape)
    if any(n != 1 for n in t.shape[nd:]):
        raise ShapeError(f"operand {t!r} of shape {list(t.shape)} does not broadcast to {list(shape)}")
    sub = []
    for a, n in enumerate(t.shape[:nd]):
        lo, hi = box[a]
        if n == shape[a]:
            sub.append((lo, hi))
        elif n == 1:
            sub.append((0, 1))
        else:
            raise ShapeError(f"operand {t!r} of shape {list(t.shape)} does not broadcast to {list(shape)}")
    v = t.view(tuple(sub) + ((0, 1),) * (t.ndim - len(sub)))
    if broadcast:
        for a in range(nd):
            size = box[a][1] - box[a][0]
            if (t.shape[a] if a < t.ndim else 1) == 1 and size > 1:
                if a == 0 and t.tensor.on_chip:
                    raise ShapeError(f"operand {t!r}: a partition dim of 1 cannot broadcast to {size} partitions here")
                while v.ndim <= a:
                    v = v.expand_dim(v.ndim)
                v = v.broadcast(a, size)
    return v


# -- issuing ---------------------------------------------------------------------------------------------------
_WRITES = ("dst", "reduce_res", "dst_idx")


def emit(fn, /, **kw):
    """Issue one current-API instruction on views; watch reads of directly allocated tiles for clobbering."""
    return _watched(fn, kw)


def _watched(fn, kw):
    """Issue `fn(**kw)`, checking the reads and recording the writes of directly allocated tiles (every
    instruction the lowering layer issues comes here too)."""
    launch = instance().launch
    if launch.coalesced:
        for name in _WRITES:
            v = kw.get(name)
            if isinstance(v, View):
                _part_from_overwrite(launch, v)
    if launch.direct:
        for name, v in kw.items():
            if isinstance(v, View) and name not in _WRITES and v.alloc.id in launch.direct:
                _check_clobber(launch, v)
    out = fn(**kw)
    if launch.direct:
        for name in _WRITES:
            v = kw.get(name)
            if isinstance(v, View) and v.alloc.id in launch.direct:
                r = v.region()
                launch.written[v.alloc.id] = (next(launch.stamp), r.partition, r.partition + r.partitions, r.byte_lo, r.byte_hi)
    return out


def register_direct(launch: Launch, view: View, label: str):
    launch.direct[view.alloc.id] = view.alloc
    launch.labels[view.alloc.id] = label


def _check_clobber(launch: Launch, v: View):
    """A read of tile A whose bytes another tile B wrote after A's last write: the data A needs is gone.
    A tile never written itself has no data to lose: its read sees what the bytes hold, as on hardware
    (a masked-off iteration that copies a fresh placed tile reads the previous iteration's values)."""
    if v.alloc.id not in launch.written:
        return
    r = v.region()
    mine = launch.written[v.alloc.id][0]
    for other, (stamp, p0, p1, b0, b1) in list(launch.written.items()):
        if other == v.alloc.id or stamp <= mine or other not in launch.direct:
            continue
        if launch.direct[other].memory is not v.alloc.memory:
            continue
        if p0 < r.partition + r.partitions and r.partition < p1 and b0 < r.byte_hi and r.byte_lo < b1:
            a, b = launch.labels[v.alloc.id], launch.labels[other]
            msg = (f"tile {a} is read after tile {b} overwrote its bytes: both are live at "
                   f"{v.space.value.upper()} partitions {max(p0, r.partition)}..{min(p1, r.partition + r.partitions) - 1}, "
                   f"bytes {max(b0, r.byte_lo)}..{min(b1, r.byte_hi) - 1}; give them disjoint addresses")
            if launch.strict:
                raise AliasingError(msg)
            warnings.warn(f"{msg} at {where()}", stacklevel=4)
            launch.written[v.alloc.id] = (stamp, r.partition, r.partition + r.partitions, r.byte_lo, r.byte_hi)


def as_tile(x) -> Tile:
    if isinstance(x, Tile):
        return x.ready()
    if isinstance(x, View):
        return wrap(x)
    raise MaskExpressionError(f"{x!r} is not a tile") if isinstance(x, Expr) else ShapeError(f"{x!r} is not a tile")


def each_box(out: Tile, mask, operands, fn):
    """Call `fn(box)` for each box of `out.shape` that the mask and the operands' own masks keep."""
    keep = evaluate(mask, out.shape)
    for t in [out, *operands]:
        if isinstance(t, Tile) and t.opmask is not None and t.shape == out.shape:
            keep = t.opmask if keep is None else keep & t.opmask
    for box in boxes(keep, out.shape):
        fn(box)


lower.watch(_watched)


def operand_part(t, box, shape):
    """An operand of an element-wise op for one box: a tile's view of the box, its size-1 axes kept for the
    lowering layer to broadcast; a scalar as is."""
    return part(t, box, shape, broadcast=False) if isinstance(t, Tile) else t


# -- the tile algebra: element-wise ops, copies, assignment, broadcasting (lowered by nki/lower.py) -------------
def binary_into(out: Tile, name, x, y, mask, engine=None) -> Tile:
    """out = x name y on the boxes the mask keeps (x, y tiles, views or scalars)."""
    tx, ty = isinstance(x, (Tile, View)), isinstance(y, (Tile, View))
    if not (tx or ty):
        raise KernelError(f"nl.{name} of two scalars: compute it in Python")
    x, y = (as_tile(v) if isinstance(v, (Tile, View)) else v for v in (x, y))
    shape = out.shape
    each_box(out, mask, [v for v in (x, y) if isinstance(v, Tile) and v.shape == shape], lambda b: lower.binary(
        part(out, b, shape), name, operand_part(x, b, shape), operand_part(y, b, shape), engine))
    return out


def _elementwise(name, x, y, dtype=None, mask=None) -> Tile:
    dt = numerics.dtype(dtype) if dtype is not None else promote(x, y)
    if name == "divide" and dtype is None and not dt.is_float:
        dt = numerics.float32  # true division, as numpy.divide (the documented model): int / int is a float
    return binary_into(new_tile(lower.broadcast_shape(x, y), dt), name, x, y, mask)


def copy(x, mask=None, dtype=None) -> Tile:
    """A copy into a new SBUF tile (tensor_copy; casts to dtype)."""
    x = as_tile(x)
    out = new_tile(x.shape, numerics.dtype(dtype) if dtype is not None else x.dtype)
    each_box(out, mask, [x], lambda b: lower.copy(part(out, b, out.shape), part(x, b, out.shape)))
    return out


def sbuf_value(value) -> Tile:
    """A tile a DMA can read: pending matmuls run, PSUM values first copied to SBUF (DMA cannot read PSUM)."""
    v = as_tile(value)
    return copy(v) if v.tensor.buffer == "psum" else v


def store(dst: Tile, value, mask=None):
    """A tile -> HBM (dma_copy on the boxes the mask keeps)."""
    v = sbuf_value(value)
    each_box(dst, mask, [v], lambda b: lower.store(part(dst, b, dst.shape), part(v, b, dst.shape)))


def assign(dst: Tile, value):
    """`dst[...] = value`: a matmul writes straight into a PSUM dst; otherwise a copy, a DMA or a memset."""
    if isinstance(value, Tile) and value.pending is not None and dst.tensor.buffer == "psum":
        run_pending(value, dst, False)
        return
    if not isinstance(value, (Tile, View)):
        each_box(dst, None, [], lambda b: lower.full(dst.view(b), value))
        return
    if isinstance(value, Tile) and (masked_off(value) or redirect(dst, value)):
        return
    v = as_tile(value)
    if not dst.tensor.on_chip:
        store(dst, v)
    elif not v.tensor.on_chip:
        each_box(dst, None, [v], lambda b: lower.load(dst.view(b), part(v, b, dst.shape)))
    else:
        each_box(dst, None, [v], lambda b: lower.copy(dst.view(b), part(v, b, dst.shape)))


def accumulate(t: Tile, op: str, value) -> Tile:
    """`t += value`: a matmul accumulates in PSUM (the PE array's read-add-write); else an in-place ALU op."""
    if isinstance(value, Tile) and value.pending is not None and op == "add":
        if t.tensor.buffer != "psum":  # an SBUF accumulator: the matmul into PSUM, then an add into the tile
            binary_into(t, "add", t, value.ready(), None)
            return t
        run_pending(value, t, True)
        return t
    binary_into(t, op, t, value, None)
    return t


def run_pending(value: Tile, dst: Tile, acc: bool):
    run, value.pending = value.pending, None
    run(dst, acc)
    value.tensor, value.const, value.coefs = dst.tensor, dst.const, dst.coefs


def _broadcast_to(x, shape, dtype=None) -> Tile:
    """Size-1 dims broadcast (nki/lower.py: broadcast_to). Axes align on the partition dim: a partition-only
    [P] tile is [P, 1, ...] here."""
    return wrap(lower.broadcast_to(as_tile(x).view(), shape, dtype))


def _expand_dims(x, axis) -> Tile:
    """A size-1 free axis inserted at `axis` (a view)."""
    x = as_tile(x)
    axis = lower.one_axis(x.ndim, axis, "nl.expand_dims")
    if axis == 0 and x.tensor.on_chip:
        raise ShapeError("expand_dims(x, 0) on an on-chip tile: axis 0 is the partition dim")
    coefs = [row[:axis] + (0,) + row[axis:] for row in x.coefs]
    return Tile(x.tensor, x.const, coefs, x.shape[:axis] + (1,) + x.shape[axis:])


# the tile operators' calls, redirectable as the language's are (an assignment writes their result in place)
elementwise, copied = direct_result(_elementwise), direct_result(copy)
broadcast_to, expand_dims = direct_result(_broadcast_to), direct_result(_expand_dims)
