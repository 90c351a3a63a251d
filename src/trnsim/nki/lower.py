"""The composite `nl.*` ops of both NKI front ends, written once against destination views.

A front end turns its operands into core `View`s and allocates the result (the current API one tensor, the
beta API one view per box its mask keeps); the functions here issue the `nki.isa` instructions that compute
it, as the compiler lowers the op: dtype promotion, broadcasting (a size-1 free axis by a zero stride, one
partition over many by a ones-matmul or by DMAs), legalisation copies (out of PSUM before the PE array or a DMA
reads, the casts a mixed-dtype matmul needs), reductions over any axes, and the composites (mean, var,
softmax, rms_norm). Nothing here computes a value, and nothing here knows either front end: one that watches
instructions (the beta API's direct allocations) registers itself with `watch`.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from trnsim import numerics
from trnsim.core import Op, View
from trnsim.core.errors import DTypeError, KernelError, ShapeError
from trnsim.core.memory import Space
from trnsim.nki import isa as nisa
from trnsim.nki._frontend import core, ndarray

float32, bfloat16 = numerics.float32, numerics.bfloat16
BITVEC = ("bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "invert")


class OperandError(KernelError):
    """An `nl.*` op given a value its rule refuses: a count of 0, a scalar an integer op cannot take."""
_watcher = None  # fn(instruction, operands) -> result: a front end that sees every instruction issued here


def watch(fn) -> None:
    """Route every instruction issued here through `fn(instruction, operands)` (None: issue directly)."""
    global _watcher
    _watcher = fn


def issue(fn, /, **kw):
    w = _watcher
    return fn(**kw) if w is None else w(fn, kw)


# -- dtypes ---------------------------------------------------------------------------------------------------
def weak_dtype(x) -> numerics.DType:
    """A Python scalar's type (bool -> uint8, int -> int32, float -> float32); numpy scalars keep theirs."""
    if isinstance(x, (bool, np.bool_)):
        return numerics.uint8
    if isinstance(x, np.generic):
        return numerics.dtype(x.dtype)
    if isinstance(x, int):
        return numerics.int32
    if isinstance(x, float):
        return numerics.float32
    return numerics.dtype(x.dtype)


def promote(*xs) -> numerics.DType:
    """The beta API's result dtype of an arithmetic op on tiles and scalars (its reference, section 2.5)."""
    types = [weak_dtype(x) for x in xs if x is not None]
    out = types[0]
    for t in types[1:]:
        out = _pair(out, t)
    return out


def _pair(a, b):
    a, b = (numerics.uint8 if t.kind == "bool" else t for t in (a, b))
    if a == b:
        return a
    if a.is_float != b.is_float:
        return a if a.is_float else b
    if a.is_float:  # same width, different format: widen (fp16+bf16 -> fp32, e4m3+e5m2 -> bf16)
        return a if a.bits > b.bits else b if b.bits > a.bits else {16: numerics.float32, 8: numerics.bfloat16}.get(a.bits, numerics.float32)
    if a.is_signed == b.is_signed:
        return a if a.bits >= b.bits else b
    s, u = (a, b) if a.is_signed else (b, a)
    if s.bits > u.bits:
        return s
    return {8: numerics.int16, 16: numerics.int32}.get(u.bits, numerics.float32)  # int32+uint32 -> fp32


def widest(dtype, *xs) -> numerics.DType:
    """The current API's result dtype: `dtype` if given, else float32 if a tile operand is, else the first tile's."""
    if dtype is not None:
        return numerics.dtype(dtype)
    ts = [x.dtype for x in xs if isinstance(x, View)]
    return float32 if any(t.name == "float32" for t in ts) else ts[0]


def matmul_cast(*dtypes):
    """The dtype the operands of a language-level matmul are cast to when they mix fp32 (or tf32) with a
    narrower float, else None: the tensor engine multiplies fp32 only by fp32, and the compiler promotes the
    pair to the wider type with a copy, as mixed arithmetic promotes."""
    names = {numerics.dtype(d).name for d in dtypes}
    wide = names & {"float32", "tfloat32"}
    return float32 if wide and names - wide else None


# -- shapes and broadcasting ----------------------------------------------------------------------------------
REDUCTIONS = {"add": "sum", "maximum": "max", "minimum": "min", "multiply": "prod"}  # engine op -> nl name


def axes_of(ndim: int, axis, op="a reduction") -> tuple:
    """The reduction axes, each in -ndim..ndim-1 (numpy's rule), taken modulo ndim, sorted and distinct."""
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    for a in axes:
        if not isinstance(a, (int, np.integer)) or not -ndim <= a < ndim:
            raise ShapeError(f"{op}: axis {a!r} is out of range for a {ndim}-d tile (axes are -{ndim}..{ndim - 1})")
    return tuple(sorted({int(a) % ndim for a in axes}))


def one_axis(ndim: int, axis, op: str) -> int:
    """The one new axis of expand_dims: an int in -(ndim+1)..ndim."""
    if not isinstance(axis, (int, np.integer)) or not -ndim - 1 <= axis <= ndim:
        raise ShapeError(f"{op}: axis {axis!r} must be one int in -{ndim + 1}..{ndim} for a {ndim}-d tile (a tuple "
                         f"of axes is not taken)")
    return int(axis) % (ndim + 1)


def check_shape(shape, what: str) -> tuple:
    """A tensor's shape: every dim a count (>= 0)."""
    dims = tuple(shape)
    for i, d in enumerate(dims):
        if int(d) < 0:
            raise ShapeError(f"{what}: shape {[int(n) for n in dims]} has dim {i} = {int(d)}; a dim is a count, >= 0")
    return dims


def two_d(x, op: str, name: str):
    """Ops whose rule swaps or contracts a partition and a free dim take [P, F] tiles only."""
    if len(x.shape) != 2:
        raise ShapeError(f"{op}: {name} must be a 2-d tile [P, F]; got shape {list(x.shape)}")


def broadcast_shape(*xs) -> tuple:
    """The shape of an element-wise op on tiles, aligned on the partition dim (axis 0) as NKI does, never on
    the right as numpy does: [P, 1] with [P, 1, 1] is [P, 1, 1], [P] with [P, F] is [P, F]."""
    shapes = [tuple(x.shape) for x in xs if hasattr(x, "shape") and not isinstance(x, np.generic)]
    nd = builtins.max(len(s) for s in shapes)
    out = [1] * nd
    for s in shapes:
        for a, n in enumerate(s + (1,) * (nd - len(s))):
            if n != 1:
                if out[a] not in (1, n):
                    raise ShapeError(f"tile shapes {[list(s) for s in shapes]} do not broadcast")
                out[a] = n
    return tuple(out)


def operand(v: View, shape) -> View:
    """`v` seen over `shape`: missing trailing axes count as size 1, extra trailing size-1 axes drop, a size-1
    free axis broadcasts by a zero stride, and a one-partition on-chip operand is spread over the partitions
    (`spread`)."""
    shape = tuple(shape)
    if v.ndim > len(shape):
        if any(n != 1 for n in v.shape[len(shape):]):
            raise ShapeError(f"operand {v!r} of shape {list(v.shape)} does not broadcast to {list(shape)}")
        v = v.reshape(v.shape[:len(shape)])
    while v.ndim < len(shape):
        v = v.expand_dim(v.ndim)
    for a, (n, m) in enumerate(zip(v.shape, shape)):
        if n not in (1, m):
            raise ShapeError(f"operand {v!r} of shape {list(v.shape)} does not broadcast to {list(shape)}")
    if v.on_chip and v.shape[0] == 1 and shape[0] > 1:
        v = spread(v, shape[0]).reshape((shape[0],) + tuple(v.shape[1:]))
    for a, (n, m) in enumerate(zip(v.shape, shape)):
        if n != m:
            v = v.broadcast(a, m)
    return v


def spread(row: View, p: int, dtype=None) -> View:
    """A [1, ...] tile over p partitions, as [p, F]: ones[1, p].T @ row on the tensor engine, the compiler's
    lowering of a partition broadcast. Up to one PSUM bank of fp32 (and no `dtype` asked), the result stays in
    PSUM; else it is built bank by bank in an SBUF tile of `dtype` (fp32 by default), each bank's matmul
    copied out before the next, so it never holds more than one bank. Integer tiles, which the tensor engine
    does not take (and could not carry exactly past 2**24 through fp32), are spread by SBUF-to-SBUF DMAs."""
    f = row.free_size
    flat = row.reshape((1, f))
    if not numerics.dtype(row.dtype).is_float:
        out = ndarray((p, f), row.dtype, "sbuf")
        spread_dma(out, flat)
        return out if dtype is None or out.dtype == numerics.dtype(dtype) else copy_to(out, dtype)
    ones_ = ones_row(p, row.dtype)
    step = core().limit("psum_bank_fmax")
    if dtype is None and f <= step:
        out = ndarray((p, f), float32, "psum")
        issue(nisa.nc_matmul, dst=out, stationary=ones_, moving=flat, accumulate=False)
        return out
    out = ndarray((p, f), float32 if dtype is None else dtype, "sbuf")
    for lo in range(0, f, step):
        hi = builtins.min(f, lo + step)
        ps = ndarray((p, hi - lo), float32, "psum")
        issue(nisa.nc_matmul, dst=ps, stationary=ones_, moving=flat[:, lo:hi], accumulate=False)
        issue(nisa._lowered_copy, dst=out[:, lo:hi], src=ps)
    return out


def ones_row(p: int, dtype) -> View:
    """The [1, p] ones operand of a partition broadcast's matmul, filled on GpSimd.

    It is a constant of the compiler's own, built ahead of the loop that uses it, never between the
    Vector instructions that read the broadcast: a memset on the Vector stream would put the fill and the
    fp32 matmul (4x a bf16 one) in series in front of every consumer."""
    t = ndarray((1, p), float32 if numerics.dtype(dtype).name in ("float32", "tfloat32") else bfloat16, "sbuf")
    issue(nisa.memset, dst=t, value=1.0, engine=nisa.engine.gpsimd)
    return t


def spread_dma(dst: View, row: View):
    """Copy the one-partition `row` into every partition of `dst` with DMAs that double the filled
    partitions each time (partition 0 -> 1, 0..1 -> 2..3, ...): log2(P) exact byte copies."""
    issue(nisa.dma_copy, dst=dst[0:1], src=row)
    done, p = 1, dst.shape[0]
    while done < p:
        n = builtins.min(done, p - done)
        issue(nisa.dma_copy, dst=dst[done:done + n], src=dst[0:n])
        done += n


def broadcast_to(x: View, shape, dtype=None) -> View:
    """Size-1 dims broadcast: free dims by a zero stride, an on-chip partition dim of 1 by `spread` (an fp32
    result up to a PSUM bank stays in PSUM, read there by the Vector engine, as the compiler lowers it; else an
    SBUF tile); cast to `dtype` (default x's) by a copy."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    want = numerics.dtype(dtype) if dtype is not None else x.dtype
    padded = tuple(x.shape) + (1,) * (len(shape) - x.ndim)
    if len(padded) != len(shape) or any(n not in (1, m) for n, m in zip(padded, shape)):
        raise ShapeError(f"nl.broadcast_to: a tile of shape {list(x.shape)} cannot broadcast to {list(shape)}: a dim "
                         f"broadcasts only from size 1 (axes align on the partition dim)")
    v = x
    while v.ndim < len(shape):
        v = v.expand_dim(v.ndim)
    if v.on_chip and v.shape[0] == 1 and shape[0] > 1:
        v = spread(v, shape[0], None if want == float32 else want).reshape((shape[0],) + tuple(v.shape[1:]))
    for d, (a, b) in enumerate(zip(v.shape, shape)):
        if a != b:
            v = v.broadcast(d, b)
    return v if v.dtype == want else copy_to(v, want)


# -- data movement -------------------------------------------------------------------------------------------
def copy(dst: View, src: View):
    issue(nisa._lowered_copy, dst=dst, src=src)


def copy_to(src: View, dtype=None, buffer="sbuf") -> View:
    """A copy of `src` in a new tile (SBUF by default), cast to `dtype`."""
    t = ndarray(src.shape, src.dtype if dtype is None else dtype, buffer)
    copy(t, src)
    return t


def readable(v: View) -> View:
    """`v` where a DMA or the PE array can read it: a PSUM tile is copied out to SBUF first, as the compiler
    legalises it (nki.isa nc_matmul and dma_copy read no PSUM)."""
    return copy_to(v) if v.space is Space.PSUM else v


def load(dst: View, src: View):
    issue(nisa.dma_copy, dst=dst, src=src)


def store(dst: View, value):
    """A tile, or a PSUM tile by way of SBUF, written to HBM with one DMA; a scalar is a memset then a DMA."""
    issue(nisa.dma_copy, dst=dst, src=readable(value))


def load_transpose2d(dst: View, src: View):
    issue(nisa.dma_transpose, dst=dst, src=src)


def full(dst: View, value):
    issue(nisa.memset, dst=dst, value=value)


def transpose(x: View, dtype=None) -> View:
    """x[P, F] -> [F, P], keeping x's dtype (nki.isa nc_transpose); a different `dtype` is a casting copy into
    SBUF. Floats go through the PE array into PSUM. The PE array takes no integers, so the compiler moves
    them another way, exactly: a tile of at most 32 x 32 in one Vector transpose, a wider one of 2- or 4-byte
    elements by a DMA transpose, any other in 32 x 32 Vector blocks; these results are in SBUF."""
    two_d(x, "nl.transpose", "x")
    p, f = x.partitions, x.free_size
    if numerics.dtype(x.dtype).is_float:
        t = ndarray((f, p), x.dtype, "psum")
        issue(nisa.nc_transpose, dst=t, data=x, engine=nisa.engine.tensor)
    else:
        t = ndarray((f, p), x.dtype, "sbuf")
        block = core().limit("vector_transpose_max")
        if builtins.max(p, f) > block and x.dtype.itemsize in (2, 4):
            issue(nisa.dma_transpose, dst=t, src=x)
        else:
            for i in range(0, p, block):
                for j in range(0, f, block):
                    i1, j1 = builtins.min(p, i + block), builtins.min(f, j + block)
                    issue(nisa.nc_transpose, dst=t[j:j1, i:i1], data=x[i:i1, j:j1], engine=nisa.engine.vector)
    return t if dtype is None or numerics.dtype(dtype) == x.dtype else copy_to(t, dtype)


def matmul_operands(x: View, y: View, transpose_x=False) -> tuple[View, View]:
    """The stationary and moving operands of x @ y (x.T @ y with transpose_x) as the PE array takes them: x
    transposed on the PE array and evicted to SBUF, a mixed fp32 pair cast to fp32, both out of PSUM."""
    two_d(x, "nl.matmul", "x")
    two_d(y, "nl.matmul", "y")
    if not transpose_x:
        x = copy_to(transpose(x))
    wide = matmul_cast(x.dtype, y.dtype)
    if wide is not None:
        x, y = (v if v.dtype == wide else copy_to(v, wide) for v in (x, y))
    return readable(x), readable(y)


def matmul(dst: View, stationary: View, moving: View, accumulate=None, **attrs):
    issue(nisa.nc_matmul, dst=dst, stationary=stationary, moving=moving, accumulate=accumulate, **attrs)


# -- element-wise --------------------------------------------------------------------------------------------
ALU_UNARY = ("negative", "invert")  # Vector ALU ops with no activation function: op(x, 0)


def binary(dst: View, op: str, x, y, engine=None):
    """dst = x op y. Tiles broadcast to dst's shape (`operand`); a [P, 1] tile against a wider one, or a
    scalar, is the per-partition operand of one tensor_scalar; two tiles otherwise one tensor_tensor."""
    eng = engine if engine is not None else nisa.engine.unknown
    tx, ty = isinstance(x, View), isinstance(y, View)
    if not (tx or ty):
        raise KernelError(f"nl.{op} of two scalars: compute it in Python")
    shape = tuple(dst.shape)
    _check_operands(op, dst, x, y)
    if not (tx and ty):
        data, scalar = (x, y) if tx else (y, x)
        issue(nisa.tensor_scalar, dst=dst, data=operand(data, shape), op0=op, operand0=scalar, reverse0=not tx,
              engine=eng)
        return
    if shape[0] > 1:
        x, y = (spread(v, shape[0]).reshape((shape[0],) + tuple(v.shape[1:])) if v.on_chip and v.shape[0] == 1
                else v for v in (x, y))
    free = math.prod(shape[1:])
    small = y if _free(y) == 1 < free else x if _free(x) == 1 < free else None
    if small is None:
        issue(nisa.tensor_tensor, dst=dst, data1=operand(x, shape), data2=operand(y, shape), op=op, engine=eng)
        return
    big = x if small is y else y
    per_partition = small.reshape((small.shape[0], 1)) if small.ndim != 2 else small
    issue(nisa.tensor_scalar, dst=dst, data=operand(big, shape), op0=op, operand0=per_partition,
          reverse0=small is x, engine=eng)


def _check_operands(op: str, dst: View, *xs):
    """What the engines cannot do, named before they are asked: a bit-vector op on float tiles, a scalar an
    integer op cannot hold (NaN, a fraction, a value past the tile's dtype, a shift past its width), an
    integer tile raised to a negative power."""
    tiles = [v for v in xs if isinstance(v, View)]
    if op in BITVEC:
        for v in tiles:
            if numerics.dtype(v.dtype).is_float:
                raise DTypeError(f"nl.{op} is a bit-vector op: it takes integer tiles; got {numerics.dtype(v.dtype).name}")
        t = numerics.dtype(tiles[0].dtype)
        lo, hi = (0, t.bits - 1) if "shift" in op else (int(np.iinfo(t.np).min), int(np.iinfo(t.np).max))
        for v in xs:
            if not isinstance(v, View):
                f = float(v)
                if not math.isfinite(f) or f != int(f) or not lo <= int(f) <= hi:
                    raise OperandError(f"nl.{op} on {t.name} tiles takes an integer scalar in {lo}..{hi}; got {v!r}")
        if numerics.dtype(dst.dtype).is_float:
            raise DTypeError(f"nl.{op} is a bit-vector op: its result is an integer tile; asked "
                             f"{numerics.dtype(dst.dtype).name}")
    if op == "power" and tiles and not numerics.dtype(dst.dtype).is_float and all(
            not numerics.dtype(v.dtype).is_float for v in tiles):
        exps = [v for i, v in enumerate(xs) if i == 1 and not isinstance(v, View)]
        if exps and float(exps[0]) < 0:
            raise OperandError(f"nl.power of an integer tile into an integer result takes an exponent >= 0; got "
                               f"{exps[0]!r} (ask dtype=nl.float32 for a fractional result)")


def _free(v: View) -> int:
    return math.prod(v.shape[1:])


def unary(dst: View, op: str, x: View):
    """An activation function on the Scalar engine, or (negative, invert) a Vector ALU op."""
    if op in ALU_UNARY:
        _check_operands(op, dst, x)
        issue(nisa.tensor_scalar, dst=dst, data=x, op0=op, operand0=0.0)
    else:
        issue(nisa.activation, dst=dst, op=op, data=x)


def reciprocal(dst: View, x: View):
    issue(nisa.reciprocal, dst=dst, data=x)


def select(dst: View, condition: View, x: View, y):
    """condition ? x : y per element (condition holds 1/0; y a tile or a scalar): one select."""
    issue(nisa.select_reduce, dst=dst, predicate=condition, on_true=x, on_false=y)


def dropout(dst: View, x: View, rate):
    issue(nisa.dropout, dst=dst, data=x, prob=rate)


def rounding(dst: View, x: View, mode: str):
    """floor / trunc as one Vector instruction, x - (x mod 1) (mod: Python's sign rule; fmod: C's), and ceil
    as x + ((-x) mod 1) in two. Exact in FP32: an integer part is always representable."""
    if mode == "ceil":
        t = ndarray(x.shape, float32)
        issue(nisa.tensor_scalar, dst=t, data=x, op0="multiply", operand0=-1.0, op1="mod", operand1=1.0)
        issue(nisa.tensor_tensor, dst=dst, data1=x, data2=t, op="add")
    else:
        issue(nisa.scalar_tensor_tensor, dst=dst, data=x, op0="mod" if mode == "floor" else "fmod", operand0=1.0,
              op1="subtract", operand1=x, reverse1=True)


def logical_not(dst: View, x: View):
    """XOR with 1, as the documentation describes it."""
    issue(nisa.tensor_scalar, dst=dst, data=x, op0="logical_xor", operand0=1.0)


def gather(dst: View, data: View, indices: View):
    """For each index, the element of its partition's flattened free dims (one GpSimd instruction)."""
    issue(_instruction(Op.GATHER_FLATTENED), dst=dst, indices=indices, data=data)


def rand(dst: View):
    """Uniform values in [0, 1) from the core's seeded generator."""
    issue(_instruction(Op.RAND), dst=dst, kind="uniform", min=0.0, max=1.0)


def _instruction(opcode):
    """A core instruction with no `nki.isa` function of its own, called as one."""
    return lambda **kw: core().issue(opcode, **kw)


# -- reductions ----------------------------------------------------------------------------------------------
def reduce(dst: View, op: str, x: View, axes: tuple, negate=False, keepdims=False):
    """op over `axes` of x. The engine reduces trailing free axes; other axes are moved last by the access
    pattern (a strided view, no data moves), as the compiler lowers them."""
    keep = [d for d in range(x.ndim) if d not in axes]
    trailing = tuple(range(len(keep), x.ndim))
    if tuple(axes) != trailing:
        x = x.permute(keep + sorted(axes))
    issue(nisa.tensor_reduce, dst=dst, op=op, data=x, axis=trailing, negate=negate, keepdims=keepdims)


def mean(dst: View, x: View, axes: tuple, keepdims=False):
    """The sum in fp32, then one multiply by 1/n."""
    s = ndarray(dst.shape, float32)
    reduce(s, "add", x, axes, keepdims=keepdims)
    issue(nisa.tensor_scalar, dst=dst, data=s, op0="multiply", operand0=1.0 / math.prod(x.shape[a] for a in axes))


def var(dst: View, x: View, axes: tuple):
    """Population variance along the free axes, dims kept (dst is [P, 1, ...]): the mean of squared
    deviations from the mean, in fp32, in four instructions."""
    p, n = x.partitions, math.prod(x.shape[a] for a in axes)
    m = ndarray(dst.shape, float32)
    mean(m, x, axes, keepdims=True)
    d = ndarray(x.shape, float32)
    issue(nisa.tensor_scalar, dst=d, data=x, op0="subtract", operand0=m.reshape((p, 1)))
    ss = ndarray((p, 1), float32)
    issue(nisa.activation, dst=d, op="square", data=d, reduce_op="add", reduce_res=ss)
    issue(nisa.tensor_scalar, dst=dst, data=ss.reshape(dst.shape), op0="multiply", operand0=1.0 / n)


def all_(dst: View, x: View, axes: tuple, keepdims=False):
    """1 where every element along the axes is non-zero: the minimum of (x != 0)."""
    nz = ndarray(x.shape, float32)
    issue(nisa.tensor_scalar, dst=nz, data=x, op0="not_equal", operand0=0.0)
    reduce(dst, "minimum", nz, axes, keepdims=keepdims)


def softmax(dst: View, x: View, axes: tuple):
    """exp(x - max) / sum(exp(x - max)) along the free axis: reduce, exp with a running sum, reciprocal,
    scale (4 instructions)."""
    p = x.partitions
    neg_max = ndarray((p, 1), float32)
    reduce(neg_max, "maximum", x, axes, negate=True, keepdims=True)
    e = ndarray(x.shape, float32)
    total = ndarray((p, 1), float32)
    issue(nisa.activation, dst=e, op="exp", data=x, bias=neg_max, reduce_op="add", reduce_res=total)
    inv = ndarray((p, 1), float32)
    issue(nisa.reciprocal, dst=inv, data=total)
    issue(nisa.tensor_scalar, dst=dst, data=e, op0="multiply", operand0=inv)


def rms_norm(dst: View, x: View, w: View, n: int, epsilon: float):
    """x / sqrt(sum(x^2) / n + epsilon) * w in fp32 (nki.language.rms_norm): the squares summed as the
    Scalar engine squares them, one tensor_scalar for / n + epsilon, an rsqrt, and one scalar_tensor_tensor
    for the two products (w broadcast to x's shape as any operand is): 4 instructions."""
    if not n > 0:
        raise OperandError(f"nl.rms_norm: n, the count of values the mean of squares divides by, must be > 0; got {n!r}")
    p = x.partitions
    sq = ndarray(x.shape, float32)
    ss = ndarray((p, 1), float32)
    issue(nisa.activation, dst=sq, op="square", data=x, reduce_op="add", reduce_res=ss)
    r = ndarray((p, 1), float32)
    issue(nisa.tensor_scalar, dst=r, data=ss, op0="multiply", operand0=1.0 / n, op1="add", operand1=epsilon)
    issue(nisa.activation, dst=r, op="rsqrt", data=r)
    issue(nisa.scalar_tensor_tensor, dst=dst, data=x, op0="multiply", operand0=r, op1="multiply",
          operand1=operand(w, x.shape))
