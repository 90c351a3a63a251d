"""`neuronxcc.nki.language` (beta): index grids, masks, tiles returned by every call, tile operators.

Each call allocates its result tile, turns its tiles and mask into core views (one per box the mask keeps)
and has the lowering layer (nki/lower.py, shared with the current API) issue the instructions: `nl.load` ->
dma_copy, `nl.add` -> tensor_tensor (or tensor_scalar for a scalar or a [P, 1] operand), `nl.exp` ->
activation, `nl.sum` -> tensor_reduce, `nl.matmul` -> nc_matmul. Nothing here computes a value.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from trnsim import numerics
from trnsim.core import View
from trnsim.core import races as _races
from trnsim.core.errors import KernelError, ShapeError, locate_all
from trnsim.core.errors import where as _location
from trnsim.core.liveness import traced
from trnsim.nki import _frontend, isa as cur, lower, operands
from trnsim.nki import language as _cur_nl
from trnsim.nki.beta import _tile
from trnsim.nki.beta._grid import arange, boxes, evaluate, mgrid  # noqa: F401
from trnsim.nki.beta._tile import Abandoned, ParDim, Tile, as_tile, core, each_box, emit, instance, new_tile, part, promote, reissue_destination, wrap, wrap_results

# -- dtypes: numpy's own, as the beta API's are (nki/api/nki/language/__init__.py at SDK 2.26: float32 is np.float32,
# bfloat16 np.dtype('bfloat16'), tfloat32 the 4-byte void dtype), so host code uses them with numpy directly --
bool_, int8, int16, int32 = np.bool_, np.int8, np.int16, np.int32
uint8, uint16, uint32 = np.uint8, np.uint16, np.uint32
float16, float32 = np.float16, np.float32
bfloat16, float8_e4m3, float8_e5m2 = (np.dtype(t.np) for t in (numerics.bfloat16, numerics.float8_e4m3,
                                                                numerics.float8_e5m2))
tfloat32 = numerics.TFLOAT32_HOST
# -- buffers (the same objects as the current API) ------------------------------------------------------------
sbuf, psum, hbm, private_hbm, shared_hbm = (_cur_nl.sbuf, _cur_nl.psum, _cur_nl.hbm, _cur_nl.private_hbm,
                                            _cur_nl.shared_hbm)
tile_size = _cur_nl.tile_size
is_hbm, is_psum, is_sbuf, is_on_chip = _cur_nl.is_hbm, _cur_nl.is_psum, _cur_nl.is_sbuf, _cur_nl.is_on_chip


class fp32:
    """`nl.fp32.min`: the most negative finite float32 (masks for max-reductions)."""

    min = float(np.finfo(np.float32).min)
    max = float(np.finfo(np.float32).max)


class bfp16:
    min = float(numerics.bfloat16.max) * -1.0
    max = float(numerics.bfloat16.max)


def _dt(dtype, default):
    return numerics.dtype(dtype) if dtype is not None else numerics.dtype(default)


# -- creation ---------------------------------------------------------------------------------------------------
def par_dim(n) -> ParDim:
    """Mark the partition dim: `nl.ndarray((B, nl.par_dim(128), F))` holds B logical [128, F] tiles."""
    return ParDim(int(n))


def ndarray(shape, dtype, buffer=sbuf, name="", **kwargs) -> Tile:
    """Allocate a tensor, never-written; `buffer` may be an `nki.compiler` direct allocation."""
    from trnsim.nki.beta._tile import Tensor
    from trnsim.nki.beta.compiler import DirectAllocation
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if isinstance(buffer, DirectAllocation):  # one tensor per declaration, placed as the loop body's one trace placed it
        buffer = traced(core(), _location(), lambda: buffer)
        return Tile.whole(Tensor(shape, dtype, buffer.space, name or None, place=buffer))
    kind = getattr(buffer, "value", buffer) or "sbuf"
    if kind == "shared_hbm":
        return _shared(shape, dtype, name)
    return Tile.whole(Tensor(shape, dtype, buffer, name or None))


def _shared(shape, dtype, name) -> Tile:
    """The n-th shared_hbm tensor of every program of an SPMD grid is one tensor, as on hardware."""
    from trnsim.nki.beta._tile import Tensor
    inst = instance()
    inst.nshared += 1
    shared = inst.launch.shared
    if inst.nshared not in shared:
        shared[inst.nshared] = Tensor(shape, dtype, shared_hbm, name or None)
    return Tile.whole(shared[inst.nshared])


def full(shape, fill_value, dtype, buffer=sbuf, name="", mask=None, **kwargs) -> Tile:
    t = ndarray(shape, dtype, buffer, name)
    if not t.tensor.on_chip:
        raise KernelError("err_hbm_tensor_with_init_value_not_supported: nl.zeros/ones/full cannot initialise an "
                          "HBM tensor; fill an SBUF tile and nl.store it")
    if t.tensor.buffer == "psum" and fill_value == 0 and mask is None and not t.tensor.block_shape:
        t.tensor.zeroed = _memset_whole  # deferred: a first `+=` matmul covering it overwrites instead
        return t
    for b in np.ndindex(*t.tensor.block_shape):
        blk = t[b] if b else t
        each_box(blk, mask, [], lambda box, blk=blk: lower.full(blk.view(box), fill_value))
    return t


def _memset_whole(tensor):
    lower.full(Tile.whole(tensor).view(), 0)


def zeros(shape, dtype, buffer=sbuf, name="", mask=None, **kwargs) -> Tile:
    return full(shape, 0, dtype, buffer, name, mask)


def ones(shape, dtype, buffer=sbuf, name="", mask=None, **kwargs) -> Tile:
    return full(shape, 1, dtype, buffer, name, mask)


def zeros_like(a, dtype=None, buffer=None, name="", mask=None, **kwargs) -> Tile:
    return zeros(a.shape, dtype or a.dtype, buffer or sbuf, name, mask)


def empty_like(a, dtype=None, buffer=None, name="", **kwargs) -> Tile:
    return ndarray(a.shape, dtype or a.dtype, buffer or sbuf, name)


def ds(start, size) -> slice:
    """`nl.ds(start, size)`: the slice start:start+size."""
    return slice(int(start), int(start) + int(size))


# -- loops and SPMD ----------------------------------------------------------------------------------------------
def affine_range(start, stop=None, step=1, **kwargs):
    """A loop whose tiles die with the iteration that made them, as the compiler scopes them; the compiler
    picks how many iterations' buffers stay resident (core/liveness.py). Its iterations must be independent
    (associative reductions aside): a loop-carried dependency is a LoopCarriedError (core/races.py), unless
    the kernel skips the compiler's middle-end transformations, which are what reorder iterations
    (nki/compiler.py: skip_middle_end_transformations)."""
    return _indexed(core().loop(range(start, stop, step) if stop is not None else range(start),
                                affine=instance().launch.affine))


def sequential_range(start, stop=None, step=1, **kwargs):
    """A loop whose iterations may depend on each other: run in order, never reordered."""
    return _indexed(core().loop(range(start, stop, step) if stop is not None else range(start)))


class LoopIndex(int):
    """A kernel loop's index: an int that also names its loop, so nl.loop_reduce knows which loops it
    reduces over and which ones pick its accumulator."""


def _indexed(iters):
    """Yield the loop's indices as LoopIndex, keeping the running loops on the instance."""
    running, loop = instance().loops, object()
    try:
        for i in iters:
            idx = LoopIndex(i)
            idx.loop = loop
            running.append((loop, int(i)))
            try:
                yield idx
            finally:
                running.pop()
    finally:
        iters.close()


def static_range(start, stop=None, step=1, **kwargs):
    """Unrolled at trace time: plain Python iteration."""
    return range(start, stop, step) if stop is not None else range(start)



def program_id(axis=0) -> int:
    """This program's index along `axis` of the SPMD launch grid (`kernel[b, h](...)`)."""
    idx = instance().index
    if not idx:
        return 0
    if not 0 <= axis < len(idx):
        raise KernelError(f"nl.program_id({axis}): the launch grid has {len(idx)} dims")
    return idx[axis]


def num_programs(axes=None) -> int:
    grid = instance().launch.grid or (1,)
    if axes is None:
        return math.prod(grid)
    listed = tuple(axes) if isinstance(axes, (tuple, list)) else (axes,)
    for a in listed:
        if not isinstance(a, (int, np.integer)) or not -len(grid) <= a < len(grid):
            raise KernelError(f"nl.num_programs({axes!r}): an axis is an int in -{len(grid)}..{len(grid) - 1} (the "
                              f"launch grid {list(grid)} has {len(grid)} dims)")
    return math.prod(grid[a] for a in listed)


def program_ndim() -> int:
    return len(instance().launch.grid)


def nc(n) -> int:
    """`nl.nc(n)`: n physical cores in a grid dim; the emulator runs every program in turn."""
    return int(n)


def spmd_dim(*dims) -> int:
    """`nl.spmd_dim(nl.nc(2), 4)`: a launch-grid dim of the product size."""
    return math.prod(int(d) for d in dims)


# -- data movement ---------------------------------------------------------------------------------------------
_sbuf_value = _tile.sbuf_value


def load(src, mask=None, dtype=None, **kwargs) -> Tile:
    """HBM -> a new SBUF tile (dma_copy on the boxes the mask keeps)."""
    src = as_tile(src)
    if src.tensor.on_chip:
        raise KernelError(f"err_unsupported_memory: Expected operand 'src' of 'load' to be in address space 'hbm'; "
                          f"{src.name!r} is in {src.tensor.buffer}")
    out = new_tile(src.shape, _dt(dtype, src.dtype))
    each_box(out, mask, [src], lambda b: lower.load(part(out, b, out.shape), part(src, b, out.shape)))
    return out


def store(dst, value, mask=None, **kwargs):
    """An SBUF tile -> HBM (dma_copy on the boxes the mask keeps)."""
    dst = as_tile(dst)
    if dst.tensor.on_chip:
        raise KernelError(f"err_unsupported_memory: Expected operand 'dst' of 'store' to be in address space 'hbm'; "
                          f"{dst.name!r} is in {dst.tensor.buffer}")
    if not isinstance(value, (Tile, View)):  # a scalar: memset an SBUF tile, DMA it out per block of pmax rows
        pmax = tile_size.pmax
        fill = full((builtins.min(dst.shape[0], pmax),) + dst.shape[1:], value, dst.dtype)
        for lo in range(0, dst.shape[0], pmax):
            n = builtins.min(pmax, dst.shape[0] - lo)
            store(dst[lo:lo + n], fill if n == fill.shape[0] else fill[0:n], mask=mask)
        return
    _tile.store(dst, value, mask)


def load_transpose2d(src, mask=None, dtype=None, **kwargs) -> Tile:
    """HBM [P, F] -> SBUF [F, P] through the DMA transpose."""
    src = as_tile(src)
    if src.indirect is not None:
        raise KernelError("err_indirect_indices_are_not_supported_with_nki_api: load_transpose2d takes no indirect index")
    lower.two_d(src, "nl.load_transpose2d", "src")
    out = new_tile((src.shape[1], src.shape[0]), _dt(dtype, src.dtype))
    lower.load_transpose2d(out.view(), src.view())
    return out


def copy(x, mask=None, dtype=None, **kwargs) -> Tile:
    """A copy into a new SBUF tile (tensor_copy; casts to dtype)."""
    return _tile.copy(x, mask, dtype)


# -- matmul ------------------------------------------------------------------------------------------------------
def _rect(t: Tile):
    """The one box an operand mask keeps (matmul operand masks must be rectangles)."""
    if t.opmask is None:
        return tuple((0, n) for n in t.shape)
    bs = boxes(t.opmask, t.shape)
    if len(bs) != 1:
        raise KernelError(f"a matmul operand mask must keep a rectangle of {list(t.shape)}; it keeps {len(bs)} pieces")
    return bs[0]


def pending_matmul(stationary, moving, mask=None, **attrs) -> Tile:
    """stationary[K, M].T @ moving[K, N], run when the result is used: into a fresh PSUM tile, or straight
    into the PSUM tile it is assigned or `+=`-accumulated to. With perf_mode double_row the operands are
    [K, 2, M] and [K, 2, N] (both rows of a partition contract) and the result is still [M, N]."""
    st, mv = as_tile(stationary), as_tile(moving)
    mid = ((0, 2),) if attrs.get("perf_mode") == "double_row" else ()
    for name, t in (("stationary", st), ("moving", mv)):
        if t.ndim != 2 + len(mid):
            raise ShapeError(f"matmul: {name} must be a {2 + len(mid)}-d tile ({'[K, 2, M]' if mid else '[K, M]'}); "
                             f"got shape {list(t.shape)}")
    m, n = st.shape[-1] if mid else st.shape[1], mv.shape[-1] if mid else mv.shape[1]
    (k0, k1), (m0, m1) = _rect(st)[0], _rect(st)[-1 if mid else 1]
    (j0, j1), (n0, n1) = _rect(mv)[0], _rect(mv)[-1 if mid else 1]
    k0, k1 = builtins.max(k0, j0), builtins.min(k1, j1)
    # the PE array reads SBUF only (nki/api/nki/isa/__init__.py: nc_matmul); an operand in PSUM (an
    # nc_transpose result) is copied out first, as the compiler legalises it
    st, mv = (copy(v) if v.tensor.buffer == "psum" else v for v in (st, mv))

    def run(dst: Tile, acc: bool):
        if dst.shape != (m, n):
            raise ShapeError(f"matmul result [{m}, {n}] assigned to a tile of shape {list(dst.shape)}")
        if attrs.get("is_transpose") and dst.dtype != st.dtype and core().can("matmul_transpose_mode"):
            # the transpose mode writes its input's dtype (nc_matmul): into a PSUM tile of it, then a casting copy
            tmp = new_tile((m, n), st.dtype, "psum")
            matmuls(tmp, False)
            each_box(dst, mask, [], lambda b: emit(cur._lowered_copy, dst=part(dst, b, dst.shape),
                                                   src=part(tmp, b, dst.shape)))
        else:
            matmuls(dst, acc)

    def matmuls(dst: Tile, acc: bool):  # not `run` itself: a closure calling itself would hold its tiles in a cycle
        keep = evaluate(mask, (m, n))  # None: every cell (no mask, or a mask that is simply True)
        if acc and dst.tensor.zeroed is not None and keep is None and _whole(dst) and (k0, m0, n0, m1, n1) == (
                0, 0, 0, m, n):
            dst.tensor.zeroed, acc = None, False  # nl.zeros + `+=`: the first matmul of the group overwrites
        for box in boxes(keep, (m, n)):
            (a0, a1), (b0, b1) = _clip(box[0], (m0, m1)), _clip(box[1], (n0, n1))
            if a0 < a1 and b0 < b1 and k0 < k1:
                out = dst.view(((a0, a1), (b0, b1)))
                lower.matmul(out, st.view(((k0, k1),) + mid + ((a0, a1),)), mv.view(((k0, k1),) + mid + ((b0, b1),)),
                             accumulate=None if acc and _fresh(out) else acc, **attrs)

    return Tile(None, (), (), (m, n), pending=run)


def _fresh(v: View) -> bool:
    """Whether this PSUM tile was never written as itself: `psum[...] += matmul` into it then starts an
    accumulation group, as the compiler emits it (accumulate=None: the first matmul of the group overwrites,
    the next ones of the open group add). Published kernels sum into a fresh `nl.ndarray` PSUM tile so,
    also one directly placed over the bytes of a previous iteration's tile. A tile written before (a memset,
    a copy, an earlier group) is added onto."""
    launch = instance().launch
    if v.alloc.id in launch.direct:
        return v.alloc.id not in launch.written
    return v.poisoned() and bool(v.mask().all())


def _clip(r, lim):
    return builtins.max(r[0], lim[0]), builtins.min(r[1], lim[1])


def _whole(t: Tile) -> bool:
    w = Tile.whole(t.tensor)
    return t.indirect is None and (t.const, t.coefs, t.shape) == (w.const, w.coefs, w.shape)


def matmul(x, y, transpose_x=False, mask=None, **kwargs) -> Tile:
    """x @ y (x.T @ y with transpose_x=True) on the tensor engine; the result is a PSUM tile."""
    x, y = as_tile(x), as_tile(y)
    lower.two_d(x, "nl.matmul", "x")
    lower.two_d(y, "nl.matmul", "y")
    xv, yv = x.view(), y.view()
    st, mv = lower.matmul_operands(xv, yv, transpose_x)
    # an operand passed through as it was keeps its tile (and its operand mask)
    return pending_matmul(x if st is xv else wrap(st), y if mv is yv else wrap(mv), mask)


def transpose(x, mask=None, dtype=None, **kwargs) -> Tile:
    """2-d partition <-> free transpose on the tensor engine, into PSUM."""
    return wrap(lower.transpose(as_tile(x).view(), dtype))


# -- element-wise ------------------------------------------------------------------------------------------------
_binary_into, _shape_of = _tile.binary_into, lower.broadcast_shape


def _binary(name):
    def fn(x, y, dtype=None, mask=None, **kwargs):
        return _tile._elementwise(name, x, y, dtype, mask)
    fn.__name__ = fn.op_name = name
    return fn


add, subtract, multiply, divide = _binary("add"), _binary("subtract"), _binary("multiply"), _binary("divide")
maximum, minimum, power = _binary("maximum"), _binary("minimum"), _binary("power")
abs_max, abs_min, fmod, mod = _binary("abs_max"), _binary("abs_min"), _binary("fmod"), _binary("mod")
equal, not_equal, less, less_equal = _binary("equal"), _binary("not_equal"), _binary("less"), _binary("less_equal")
greater, greater_equal = _binary("greater"), _binary("greater_equal")
logical_and, logical_or, logical_xor = _binary("logical_and"), _binary("logical_or"), _binary("logical_xor")
bitwise_and, bitwise_or, bitwise_xor = _binary("bitwise_and"), _binary("bitwise_or"), _binary("bitwise_xor")
left_shift, right_shift = _binary("left_shift"), _binary("right_shift")


def _each(name, lowered):
    """A one-operand op: `lowered(dst view, x view)` on the boxes the mask keeps."""
    def fn(x, dtype=None, mask=None, **kwargs):
        x = as_tile(x)
        out = new_tile(x.shape, _dt(dtype, x.dtype))
        each_box(out, mask, [x], lambda b: lowered(out.view(b), x.view(b)))
        return out
    fn.__name__ = fn.op_name = name
    return fn


def _unary(name):
    return _each(name, lambda dst, x: lower.unary(dst, name, x))


exp, log, sqrt, rsqrt, tanh = _unary("exp"), _unary("log"), _unary("sqrt"), _unary("rsqrt"), _unary("tanh")
sin, cos, arctan, sign, abs = _unary("sin"), _unary("cos"), _unary("arctan"), _unary("sign"), _unary("abs")  # noqa: A001
square, relu, sigmoid, silu, silu_dx = _unary("square"), _unary("relu"), _unary("sigmoid"), _unary("silu"), _unary("silu_dx")
gelu, gelu_dx, gelu_apprx_tanh = _unary("gelu"), _unary("gelu_dx"), _unary("gelu_apprx_tanh")
softplus, mish, erf, erf_dx = _unary("softplus"), _unary("mish"), _unary("erf"), _unary("erf_dx")
negative, invert = _unary("negative"), _unary("invert")
reciprocal = _each("reciprocal", lower.reciprocal)




def where(condition, x, y, dtype=None, mask=None, **kwargs) -> Tile:
    """condition ? x : y per element (condition holds 1/0): one select on the vector engine."""
    c, t = as_tile(condition), as_tile(x)
    out = new_tile(c.shape, _dt(dtype, promote(x, y)))
    f = as_tile(y) if isinstance(y, (Tile, View)) else y
    each_box(out, mask, [c, t], lambda b: lower.select(
        out.view(b), part(c, b, out.shape), part(t, b, out.shape), part(f, b, out.shape) if isinstance(f, Tile) else f))
    return out


def dropout(x, rate, dtype=None, mask=None, **kwargs) -> Tile:
    x = as_tile(x)
    out = new_tile(x.shape, x.dtype)
    r = as_tile(rate) if isinstance(rate, (Tile, View)) else rate
    each_box(out, mask, [x], lambda b: lower.dropout(out.view(b), x.view(b),
                                                     part(r, b, out.shape, False) if isinstance(r, Tile) else r))
    return out if dtype is None or numerics.dtype(dtype) == x.dtype else copy(out, dtype=dtype)


def random_seed(seed, mask=None, **kwargs):
    """Seed the random number generator from a [1, 1] 32-bit tile."""
    emit(cur.set_rng_seed, src_seeds=as_tile(seed).view())


def static_cast(x, dtype):
    """Cast host values (numpy arrays and scalars, RNE as the hardware would) or a tile (a tensor_copy)."""
    if isinstance(x, (Tile, View)):
        return copy(x, dtype=dtype)
    return numerics.cast(np.asarray(x), numerics.dtype(dtype))


# -- reductions --------------------------------------------------------------------------------------------------
def _reduced(x: Tile, axes, dtype, keepdims) -> Tile:
    keep = [d for d in range(x.ndim) if d not in axes]
    return new_tile([1 if d in axes else n for d, n in enumerate(x.shape)] if keepdims else [x.shape[d] for d in keep],
                    dtype)


def _box(x: Tile, mask, what):
    """The one box of x a reduction's mask keeps (a reduction's mask must keep a rectangle); None: none."""
    bs = boxes(evaluate(mask, x.shape), x.shape)
    if len(bs) > 1:
        raise KernelError(f"nl.{what} with a mask that keeps {len(bs)} pieces: a reduction's mask must keep a rectangle")
    return bs[0] if bs else None


def _kept(b, axes, keepdims):
    return tuple((0, 1) if d in axes else r for d, r in enumerate(b)) if keepdims else tuple(
        r for d, r in enumerate(b) if d not in axes)


def _reduce(name):
    def fn(x, axis, dtype=None, mask=None, keepdims=False, negate=False, **kwargs):
        x = as_tile(x)
        axes = lower.axes_of(x.ndim, axis, f"nl.{lower.REDUCTIONS.get(name, name)}")
        out = _reduced(x, axes, _dt(dtype, x.dtype), keepdims)
        b = _box(x, mask, name)
        if b is not None:
            lower.reduce(out.view(_kept(b, axes, keepdims)), name, x.view(b), axes, negate=negate, keepdims=keepdims)
        return out
    fn.__name__ = fn.op_name = name
    return fn


sum = _reduce("add")  # noqa: A001
max = _reduce("maximum")  # noqa: A001
min = _reduce("minimum")  # noqa: A001
prod = _reduce("multiply")


def _composite(name, lowered, keepdims=False, default=None):
    """A reduction composite of nki/lower.py on the box the mask keeps: `lowered(dst, x, axes)`."""
    def fn(x, axis, dtype=None, mask=None, **kwargs):
        x = as_tile(x)
        axes = lower.axes_of(x.ndim, axis, f"nl.{name}")
        keep = kwargs.get("keepdims", keepdims)
        out = _reduced(x, axes, _dt(dtype, default or x.dtype), keep)
        b = _box(x, mask, name)
        if b is not None:
            lowered(out.view(_kept(b, axes, keep)), x.view(b), axes, keep)
        return out
    fn.__name__ = name
    return fn


mean = _composite("mean", lower.mean)
# var keeps dims (nki.language.var, both API generations)
var = _composite("var", lambda dst, x, axes, keep: lower.var(dst, x, axes), keepdims=True)
all = _composite("all", lower.all_, default=bool_)  # noqa: A001


def softmax(x, axis=-1, dtype=None, mask=None, **kwargs) -> Tile:
    """exp(x - max) / sum(exp(x - max)) along the free axis: reduce, exp with a running sum, reciprocal, scale."""
    x = as_tile(x)
    out = new_tile(x.shape, _dt(dtype, x.dtype))
    lower.softmax(out.view(), x.view(), lower.axes_of(x.ndim, axis, "nl.softmax"))
    return out


def rms_norm(x, w, axis, n, epsilon=1e-06, dtype=None, compute_dtype=None, mask=None, **kwargs) -> Tile:
    """x / sqrt(sum(x^2 along axis) / n + epsilon) * w."""
    x = as_tile(x)
    out = new_tile(x.shape, _dt(dtype, x.dtype))
    lower.rms_norm(out.view(), x.view(), as_tile(w).view(), n, float(epsilon))
    return out


def broadcast_to(x, shape, dtype=None, **kwargs) -> Tile:
    """Size-1 dims broadcast: free dims by a zero stride, the partition dim by a ones-matmul (nki/lower.py)."""
    return _tile._broadcast_to(x, shape, dtype)


def expand_dims(x, axis) -> Tile:
    """A size-1 free axis inserted at `axis` (a view)."""
    return _tile._expand_dims(x, axis)


def loop_reduce(x, op, loop_indices, mask=None, dtype=None, **kwargs) -> Tile:
    """Reduce `x` across the iterations of the loops `loop_indices`. The tile the result is assigned to is
    also op's other input (nki.language.loop_reduce, 2.2x API pages): `dst[...] = nl.loop_reduce(x, op, ...)`
    is `dst = op(dst, x)` in place, in every iteration, whichever iterations a kernel skips. A result bound
    to a name (`b = nl.loop_reduce(...)`) has no destination the front end can see, so the call site keeps
    its own accumulator: the first iteration starts it, later ones combine into it. Each iteration of the
    other loops running around the call has its own (a reduction over k inside a loop over q tiles keeps
    one per q tile)."""
    x = as_tile(x)
    name = getattr(op, "op_name", None) or getattr(op, "__name__", op)
    idx = loop_indices if isinstance(loop_indices, (tuple, list)) else (loop_indices,)
    inst = instance()
    key = _location()
    if builtins.all(isinstance(i, LoopIndex) for i in idx):  # else (plain ints) one accumulator per call site
        reduced = {id(i.loop) for i in idx}
        key = (key, tuple(i for loop, i in inst.loops if id(loop) not in reduced))
    reducers = inst.reducers
    _races.reduction(core(), _location())
    dst = reissue_destination()
    if dst is not None:  # `dst[...] = nl.loop_reduce(...)`, issued again with dst as its result
        reducers[key] = _binary_into(dst, name, dst, x, mask)
        return dst
    acc = reducers.get(key)
    if acc is None or builtins.all(int(i) == 0 for i in idx):
        acc = reducers[key] = copy(x, mask=mask, dtype=dtype)
        return acc
    out = new_tile(acc.shape, acc.dtype)  # a fresh result, so that an assignment can re-issue the call
    reducers[key] = _binary_into(out, name, acc, x, mask)
    return out


def device_print(prefix, x, **kwargs):
    """Print a tile's values now (the simulator's device_print)."""
    nc, v = core(), as_tile(x).view()
    print(prefix, np.array(nc.host_read(v)) if nc.values else f"{v!r} (timing only: no values)")


def all_reduce(x, op, program_axes, dtype=None, mask=None, parallel_reduce=True, asynchronous=False, **kwargs):
    """op over the x of the programs of the launch grid whose indices differ only along `program_axes`
    (nki.language.all_reduce, 2.2x API pages); each of them gets the result, combined in program order, so
    all hold the same bits. The programs run in turn on one core: each waits here until the others of its
    group have arrived, then combines their tiles (tensor_copy, then one tensor_tensor per other program),
    and waits again until all have read them. The result is complete on return (`asynchronous` only lets
    the compiler overlap it)."""
    x = as_tile(x)
    inst = instance()
    grid, index = inst.launch.grid or (1,), inst.index or (0,)  # a launch without a grid is one program
    axes = {int(a) for a in (program_axes if isinstance(program_axes, (tuple, list)) else (program_axes,))}
    if not axes or builtins.any(not 0 <= a < len(grid) for a in axes):
        raise KernelError(f"nl.all_reduce(program_axes={program_axes}): the launch grid {list(grid)} has axes "
                          f"0..{len(grid) - 1}")
    group = [i for i in np.ndindex(*grid) if builtins.all(i[d] == index[d] for d in range(len(grid)) if d not in axes)]
    if len(group) == 1:
        return copy(x, mask=mask, dtype=dtype)
    site = _location()
    nth = inst.calls[site] = inst.calls.get(site, 0) + 1
    key = (site, nth, tuple(group))
    meeting = inst.launch.meetings.setdefault(key, {"tiles": {}, "done": 0})
    meeting["tiles"][index] = x
    _wait_for_programs(inst, lambda: len(meeting["tiles"]) == len(group),
                       f"programs {group} of the launch grid to reach nl.all_reduce at {site}")
    tiles = [meeting["tiles"][i] for i in group]
    out = copy(tiles[0], mask=mask, dtype=dtype)
    name = getattr(op, "op_name", None) or getattr(op, "__name__", op)
    for t in tiles[1:]:
        _binary_into(out, name, out, t, mask)
    meeting["done"] += 1
    _wait_for_programs(inst, lambda: meeting["done"] == len(group),
                       f"programs {group} of the launch grid to read each other's tiles in nl.all_reduce at {site}")
    inst.launch.meetings.pop(key, None)
    return out


def _wait_for_programs(inst, ready, what):
    """Let the launch's other programs run until `ready()`. The core's open loops (their tile scopes and race
    watches) belong to the program that runs, so this program's are set aside while it waits."""
    nc, launch = core(), inst.launch
    saved = nc.scopes, nc.races
    nc.scopes, nc.races = [], []
    if not ready():
        launch.spawn()
    try:
        launch.turns.wait(inst.turn, lambda: ready() or launch.failed, what)
    finally:
        nc.scopes, nc.races = saved
    if launch.failed:
        raise Abandoned()


# -- creation of constants and random tiles, rounding, logical not, gather, finfo (nki/api/nki/language/__init__.py
# of SDK 2.26: rand, shared_constant, shared_identity_matrix, floor, ceil, trunc, logical_not, gather_flattened) ----
def rand(shape, dtype=np.float32, **kwargs) -> Tile:
    """Uniform values in [0, 1) from the core's seeded generator, in a new SBUF tile."""
    out = new_tile((shape,) if isinstance(shape, (int, np.integer)) else tuple(shape), numerics.dtype(dtype))
    lower.rand(out.view())
    return out


def shared_constant(constant, dtype=None, **kwargs) -> Tile:
    """A tensor in shared HBM holding `constant` (an array or a .npy path), as the compiler embeds it in the
    binary; kernels load it like any HBM tensor."""
    arr = _frontend.host_constant(constant)
    if dtype is not None:
        arr = numerics.cast(arr, numerics.dtype(dtype))
    return wrap(core().hbm_tensor(np.ascontiguousarray(arr), name="shared_constant", kind="shared_hbm"))


def shared_identity_matrix(n, dtype=np.uint8, **kwargs) -> Tile:
    """An n x n identity in shared HBM (the beta API's constant, loaded with nl.load)."""
    nc, n = core(), int(n)
    if n < 1 or n * n * numerics.dtype(dtype).itemsize > nc.hbm.capacity:
        raise ShapeError(f"nl.shared_identity_matrix({n}): n is 1 or more, and n x n {numerics.dtype(dtype).name} "
                         f"fits the core's HBM of {nc.hbm.capacity} B")
    return shared_constant(np.eye(n, dtype=np.float32), dtype=dtype)


def _rounding(mode):
    return _each(mode, lambda dst, x: lower.rounding(dst, x, mode))


floor, ceil, trunc = _rounding("floor"), _rounding("ceil"), _rounding("trunc")
tan, gelu_apprx_sigmoid = _unary("tan"), _unary("gelu_apprx_sigmoid")


def logical_not(x, dtype=bool_, mask=None, **kwargs) -> Tile:
    return _each("logical_not", lower.logical_not)(x, dtype, mask)


logical_not.op_name = "logical_not"


def gather_flattened(data, indices, mask=None, dtype=None, **kwargs) -> Tile:
    """For each index, the element of its partition's flattened free dims (one GpSimd instruction)."""
    d, i = as_tile(data), as_tile(indices)
    out = new_tile(i.shape, _dt(dtype, d.dtype))
    lower.gather(out.view(), d.view(), i.view())
    return out


def finfo(dtype):
    """Machine limits of a float dtype, bf16 and fp8 included (ml_dtypes.finfo)."""
    import ml_dtypes
    t = numerics.dtype(dtype)
    return ml_dtypes.finfo(numerics.float32.np if t.name == "tfloat32" else t.np)


def atomic_rmw(dst, value, op, *, mask=None, **kwargs):
    """dst = op(dst, value) on HBM (op np.add), as one read-modify-write DMA; rows of an indirectly indexed
    dst named more than once receive every contribution (nki.language.atomic_rmw, 2.2x API pages)."""
    d, v = as_tile(dst), _sbuf_value(value)
    each_box(d, mask, [v], lambda b: emit(cur.dma_copy, dst=d.view(b), src=part(v, b, d.shape), dst_rmw_op=op))


_INTERNAL = {"annotations", "builtins", "math", "np", "numerics", "View", "KernelError", "ShapeError", "cur", "ParDim",
             "Tile", "as_tile", "core", "each_box", "emit", "instance", "new_tile", "part", "promote", "lower", "wrap",
             "boxes", "evaluate", "pending_matmul", "wrap_results", "Abandoned", "reissue_destination",
             "operands", "locate_all"}
__all__ = [n for n in dir() if not n.startswith("_") and n not in _INTERNAL]
# assign writes its own dst and redirects the call that made its value: it must see that call as the latest
wrap_results(globals(), skip={"all_reduce", "assign", "ndarray", "zeros", "zeros_like", "empty_like", "ones", "full", "dropout", "store"})
# a value of the wrong kind is refused by name (static_cast runs on the host, on numpy arrays); nl.store and
# atomic_rmw store a number too
operands.Kinds((Tile, View), either={"value"}).check_all(globals(), [n for n in __all__ if n != "static_cast"])
locate_all(globals())  # a name an op looks up (a dtype) is refused at the kernel line
