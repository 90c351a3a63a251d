"""`nki.language`: dtypes, buffers, tensor creation, loops and the convenience ops.

Every convenience op allocates its result and lowers to `nki.isa` instructions (nl.load -> dma_copy,
nl.matmul -> nc_matmul, nl.exp -> activation, nl.sum -> tensor_reduce, nl.softmax -> four instructions);
none computes a value itself.
"""
from __future__ import annotations

import builtins
import contextlib
import enum
import math

import numpy as np

from trnsim import numerics
from trnsim.core import Op, View
from trnsim.core.errors import ShapeError
from trnsim.core.machine import Register
from trnsim.core.memory import Space
from trnsim.nki import isa as nisa
from trnsim.nki import versions as _versions
from trnsim.nki.grids import NkiBlockGrid, NkiGrid, NkiTileGrid, alloc_blocks, alloc_tiles, blocks, tiles  # noqa: F401
from trnsim.nki._frontend import core, matmul_cast, ndarray as _ndarray

# -- dtypes --------------------------------------------------------------------------------------------------
bool_, int8, int16, int32 = numerics.bool_, numerics.int8, numerics.int16, numerics.int32
int64 = numerics.int64  # NKI 0.7: 1x1 tiles for nisa.scalar_load / scalar_store
uint8, uint16, uint32 = numerics.uint8, numerics.uint16, numerics.uint32
float16, float32, bfloat16, tfloat32 = numerics.float16, numerics.float32, numerics.bfloat16, numerics.tfloat32
float8_e4m3, float8_e4m3fn, float8_e5m2 = numerics.float8_e4m3, numerics.float8_e4m3fn, numerics.float8_e5m2
float8_e8m0fnu = numerics.float8_e8m0fnu
float8_e5m2_x4, float8_e4m3fn_x4, float4_e2m1fn_x4 = numerics.float8_e5m2_x4, numerics.float8_e4m3fn_x4, numerics.float4_e2m1fn_x4


# -- buffers -------------------------------------------------------------------------------------------------
class MemoryRegion(str, enum.Enum):
    sbuf = "sbuf"
    psum = "psum"
    hbm = "hbm"
    private_hbm = "private_hbm"
    shared_hbm = "shared_hbm"


sbuf, psum, hbm, private_hbm, shared_hbm = (MemoryRegion.sbuf, MemoryRegion.psum, MemoryRegion.hbm,
                                            MemoryRegion.private_hbm, MemoryRegion.shared_hbm)


def is_hbm(b) -> bool:
    return str(getattr(b, "value", b)).endswith("hbm")


def is_psum(b) -> bool:
    return getattr(b, "value", b) == "psum"


def is_sbuf(b) -> bool:
    return getattr(b, "value", b) == "sbuf"


def is_on_chip(b) -> bool:
    return is_psum(b) or is_sbuf(b)


class _TileSize:
    """`nl.tile_size`: the target's limits, read from the catalog."""

    def _lim(self, k):
        return core().limit(k)

    pmax = property(lambda self: self._lim("pmax"))
    psum_bank_fmax = psum_fmax = property(lambda self: self._lim("psum_bank_fmax"))
    gemm_stationary_fmax = property(lambda self: self._lim("gemm_stationary_fmax"))
    gemm_moving_fmax = property(lambda self: self._lim("gemm_moving_fmax"))
    bn_stats_fmax = property(lambda self: self._lim("bn_stats_fmax"))
    psum_num_banks = property(lambda self: core().spec.psum_banks)
    psum_bank_fmax_bytes = property(lambda self: core().bank_bytes)
    sbuf_fmax_bytes = total_available_sbuf_size = property(lambda self: core().sbuf.usable_bytes)
    sbuf_fmax = property(lambda self: core().sbuf.usable_bytes // 4)


tile_size = _TileSize()


# -- creation ------------------------------------------------------------------------------------------------
def ndarray(shape, dtype, buffer=sbuf, name="", address=None) -> View:
    return _ndarray(shape, dtype, buffer, name or None, address)


def full(shape, fill_value, dtype, buffer=sbuf, name="") -> View:
    t = ndarray(shape, dtype, buffer, name)
    nisa.memset(t, fill_value)
    return t


def zeros(shape, dtype, buffer=sbuf, name="") -> View:
    return full(shape, 0, dtype, buffer, name)


def ones(shape, dtype, buffer=sbuf, name="") -> View:
    return full(shape, 1, dtype, buffer, name)


def zeros_like(x, dtype=None, buffer=None, name="") -> View:
    return zeros(x.shape, dtype or x.dtype, buffer or x.buffer, name)


def empty_like(x, dtype=None, buffer=None, name="") -> View:
    return ndarray(x.shape, dtype or x.dtype, buffer or x.buffer, name)


def ds(start, size) -> slice:
    """`nl.ds(start, size)`: the slice start:start+size."""
    start = start.__index__() if isinstance(start, Register) else int(start)
    return slice(start, start + int(size))


# -- data movement and matmul ---------------------------------------------------------------------------------
def load(src, dtype=None) -> View:
    """HBM -> a new SBUF tile (one dma_copy)."""
    shape = src.shape if len(src.shape) >= 2 else (1,) + tuple(src.shape)
    t = ndarray(shape, dtype or src.dtype, sbuf)
    nisa.dma_copy(t, src)
    return t


def store(dst, value):
    """An SBUF tile -> HBM (one dma_copy)."""
    nisa.dma_copy(dst, value)


def load_transpose2d(src, dtype=None) -> View:
    t = ndarray((src.shape[1], src.shape[0]), dtype or src.dtype, sbuf)
    nisa.dma_transpose(t, src)
    return t


def copy(x, dtype=None) -> View:
    t = ndarray(x.shape, dtype or x.dtype, sbuf)
    nisa.tensor_copy(t, x)
    return t


def transpose(x, dtype=None) -> View:
    """2-D partition <-> free transpose on the tensor engine; the result lives in PSUM."""
    t = ndarray((x.free_size, x.partitions), dtype or x.dtype, psum)
    nisa.nc_transpose(t, x, engine=nisa.engine.tensor)
    return t


def matmul(x, y, transpose_x=False) -> View:
    """x @ y (or x.T @ y with transpose_x=True) into a new PSUM tile of float32."""
    if not transpose_x:
        xt = transpose(x)
        x = copy(xt, x.dtype)
    x, y = (copy(v) if v.space is Space.PSUM else v for v in (x, y))  # PE reads SBUF: the compiler's copy out of PSUM
    wide = matmul_cast(x.dtype, y.dtype)
    if wide is not None:
        x, y = (v if v.dtype == wide else copy(v, wide) for v in (x, y))
    out = ndarray((x.free_size, y.free_size), float32, psum)
    nisa.nc_matmul(out, x, y)
    return out


# -- element-wise ---------------------------------------------------------------------------------------------
def _out_dtype(dtype, *xs):
    if dtype is not None:
        return numerics.dtype(dtype)
    ts = [x.dtype for x in xs if isinstance(x, View)]
    return float32 if any(t.name == "float32" for t in ts) else ts[0]


def _binary(name):
    def out_dtype(dtype, *xs):
        dt = _out_dtype(dtype, *xs)
        # true division, as numpy.divide (nki/api/nki/language/__init__.py: divide): int / int is a float
        return float32 if name == "divide" and dtype is None and not dt.is_float else dt

    def fn(x, y, dtype=None):
        if isinstance(x, View) and isinstance(y, View):
            if x.shape != y.shape:
                raise ShapeError(f"nl.{name}: shapes {list(x.shape)} and {list(y.shape)} differ (no broadcasting)")
            t = ndarray(x.shape, out_dtype(dtype, x, y))
            nisa.tensor_tensor(t, x, y, name)
            return t
        data, scalar, rev = (x, y, False) if isinstance(x, View) else (y, x, True)
        t = ndarray(data.shape, out_dtype(dtype, data))
        nisa.tensor_scalar(t, data, name, scalar, reverse0=rev)
        return t
    fn.__name__ = fn.op_name = name
    return fn


def _unary(name, via="activation"):
    def fn(x, dtype=None):
        t = ndarray(x.shape, _out_dtype(dtype, x))
        if via == "activation":
            nisa.activation(t, name, x)
        else:
            nisa.tensor_scalar(t, x, name, 0.0)
        return t
    fn.__name__ = fn.op_name = name
    return fn


add, subtract, multiply, divide = _binary("add"), _binary("subtract"), _binary("multiply"), _binary("divide")
maximum, minimum, power, fmod, mod = _binary("maximum"), _binary("minimum"), _binary("power"), _binary("fmod"), _binary("mod")
abs_max, abs_min = _binary("abs_max"), _binary("abs_min")
equal, not_equal, less, less_equal = _binary("equal"), _binary("not_equal"), _binary("less"), _binary("less_equal")
greater, greater_equal = _binary("greater"), _binary("greater_equal")
logical_and, logical_or, logical_xor = _binary("logical_and"), _binary("logical_or"), _binary("logical_xor")
bitwise_and, bitwise_or, bitwise_xor = _binary("bitwise_and"), _binary("bitwise_or"), _binary("bitwise_xor")
left_shift, right_shift = _binary("left_shift"), _binary("right_shift")
invert = _unary("invert", via="alu")
negative = _unary("negative", via="alu")
exp, log, sqrt, rsqrt, tanh = _unary("exp"), _unary("log"), _unary("sqrt"), _unary("rsqrt"), _unary("tanh")
sin, cos, tan, arctan, sign, abs = _unary("sin"), _unary("cos"), _unary("tan"), _unary("arctan"), _unary("sign"), _unary("abs")  # noqa: A001
square, relu, sigmoid, silu, silu_dx = _unary("square"), _unary("relu"), _unary("sigmoid"), _unary("silu"), _unary("silu_dx")
gelu, gelu_dx, gelu_apprx_tanh = _unary("gelu"), _unary("gelu_dx"), _unary("gelu_apprx_tanh")
gelu_apprx_sigmoid, gelu_apprx_sigmoid_dx = _unary("gelu_apprx_sigmoid"), _unary("gelu_apprx_sigmoid_dx")
mish, softplus, erf, erf_dx = _unary("mish"), _unary("softplus"), _unary("erf"), _unary("erf_dx")
identity = _unary("copy")


def reciprocal(x, dtype=None) -> View:
    t = ndarray(x.shape, _out_dtype(dtype, x))
    nisa.reciprocal(t, x)
    return t


reciprocal.op_name = "reciprocal"
prelu, bypass, average = "prelu", "bypass", "average"


# -- reductions ----------------------------------------------------------------------------------------------
def _axes(x, axis):
    return tuple(a % x.ndim for a in (axis if isinstance(axis, (tuple, list)) else (axis,)))


def _reduce(name, negate=False):
    def fn(x, axis, dtype=None, keepdims=False):
        axes = _axes(x, axis)
        shape = [1 if d in axes else n for d, n in enumerate(x.shape)]
        if not keepdims and len(shape) - len(axes) >= 2:
            shape = [n for d, n in enumerate(x.shape) if d not in axes]
        t = ndarray(shape, _out_dtype(dtype, x))
        keep = [d for d in range(x.ndim) if d not in axes]
        if axes != tuple(range(len(keep), x.ndim)):  # the engine reduces trailing axes: move them last (a view)
            x, axes = x.permute(keep + sorted(axes)), tuple(range(len(keep), x.ndim))
        nisa.tensor_reduce(t, name, x, axes, negate=negate, keepdims=keepdims)
        return t
    fn.__name__ = fn.op_name = name
    return fn


sum = _reduce("add")  # noqa: A001
max = _reduce("maximum")  # noqa: A001
min = _reduce("minimum")  # noqa: A001
prod = _reduce("multiply")
max.op_name, min.op_name = "maximum", "minimum"


def mean(x, axis, dtype=None, keepdims=False) -> View:
    s = sum(x, axis, float32, keepdims)
    n = math.prod(x.shape[a] for a in _axes(x, axis))
    t = ndarray(s.shape, _out_dtype(dtype, x))
    nisa.tensor_scalar(t, s, "multiply", 1.0 / n)
    return t


def softmax(x, axis=-1, dtype=None) -> View:
    """exp(x - max) / sum(exp(x - max)) along the free axis: 4 instructions."""
    p = x.partitions
    neg_max = ndarray((p, 1), float32)
    nisa.tensor_reduce(neg_max, "maximum", x, _axes(x, axis), negate=True, keepdims=True)
    e = ndarray(x.shape, float32)
    total = ndarray((p, 1), float32)
    nisa.activation(e, "exp", x, bias=neg_max, reduce_op="add", reduce_res=total)
    inv = ndarray((p, 1), float32)
    nisa.reciprocal(inv, total)
    out = ndarray(x.shape, _out_dtype(dtype, x))
    nisa.tensor_scalar(out, e, "multiply", inv)
    return out


def rms_norm(x, w, axis=-1, n=None, epsilon=1e-6, dtype=None, compute_dtype=None) -> View:
    """x / sqrt(mean(x^2) + eps) * w."""
    p = x.partitions
    n = n or x.free_size
    sq = ndarray(x.shape, float32)
    ss = ndarray((p, 1), float32)
    nisa.activation(sq, "square", x, reduce_op="add", reduce_res=ss)
    r = ndarray((p, 1), float32)
    nisa.tensor_scalar(r, ss, "multiply", 1.0 / n, op1="add", operand1=epsilon)
    nisa.activation(r, "rsqrt", r)
    out = ndarray(x.shape, _out_dtype(dtype, x))
    nisa.scalar_tensor_tensor(out, x, "multiply", r, "multiply", w)
    return out


def var(x, axis, dtype=None) -> View:
    """Population variance along the free axes (keeps dims): mean of squares of x - mean."""
    p, n = x.partitions, math.prod(x.shape[a] for a in _axes(x, axis))
    m = mean(x, axis, float32, keepdims=True)
    d = ndarray(x.shape, float32)
    nisa.tensor_scalar(d, x, "subtract", m.reshape((p, 1)))
    ss = ndarray((p, 1), float32)
    nisa.activation(d, "square", d, reduce_op="add", reduce_res=ss)
    out = ndarray(m.shape, _out_dtype(dtype, x))
    nisa.tensor_scalar(out, ss.reshape(m.shape), "multiply", 1.0 / n)
    return out


def all(x, axis, dtype=None) -> View:  # noqa: A001
    """1 where every element along the axes is non-zero."""
    nz = ndarray(x.shape, float32)
    nisa.tensor_scalar(nz, x, "not_equal", 0.0)
    return _reduce("minimum")(nz, axis, dtype or uint8)


def where(condition, x, y, dtype=None) -> View:
    """x where condition (1.0/0.0) else y; y may be a scalar."""
    out = ndarray(x.shape, _out_dtype(dtype, x))
    nisa.select_reduce(out, condition, x, y)
    return out


def dropout(x, rate, dtype=None) -> View:
    out = ndarray(x.shape, x.dtype)
    nisa.dropout(out, x, rate)
    return out if dtype is None else copy(out, dtype)


def rand(shape, dtype, buffer=sbuf, name="") -> View:
    """Uniform values in [0, 1) from the core's seeded generator."""
    t = ndarray(shape, dtype, buffer, name)
    rand_into(t)
    return t


def random_seed(seed):
    nisa.set_rng_seed(seed)


def shared_identity_matrix(n, dtype=uint8, dst=None) -> View:
    """An n x n identity in SBUF: ones where partition == column (GpSimd affine_select)."""
    ones_ = ones((n, n), dtype)
    out = dst if dst is not None else ndarray((n, n), dtype)
    nisa.affine_select(out, [[-1, n]], 1, ones_, 0.0, cmp_op="equal")
    return out


def shared_constant(constant) -> View:
    """A numpy array (or .npy path) placed in shared HBM."""
    arr = np.load(constant) if isinstance(constant, str) else np.asarray(constant)
    return core().hbm_tensor(np.ascontiguousarray(arr), name="shared_constant", kind="shared_hbm")


def broadcast_to(x, shape, dtype=None) -> View:
    """Size-1 dims broadcast: free dims by a zero stride; an on-chip partition dim of 1 by ones-matmuls (the
    compiler's lowering), into an SBUF tile of `dtype` (default x's)."""
    v, shape = x, tuple(shape)
    want = numerics.dtype(dtype) if dtype is not None else x.dtype
    if x.on_chip and x.shape[0] == 1 and shape[0] > 1:
        v = _spread(x, shape[0], want).reshape((shape[0],) + tuple(x.shape[1:]))
    for d, (a, b) in enumerate(zip(v.shape, shape)):
        if a != b:
            v = v.broadcast(d, b)
    return v if v.dtype == want else copy(v, want)


def _spread(x: View, p: int, dtype) -> View:
    """A [1, ...] tile over p partitions: ones[1, p].T @ x on the tensor engine, one PSUM bank at a time,
    each copied out to SBUF so only one bank is held. Integer tiles, which the tensor engine does not take
    (and could not carry exactly past 2**24 through FP32), are spread by SBUF-to-SBUF DMAs instead."""
    f = x.free_size
    if not numerics.dtype(x.dtype).is_float:
        out = ndarray((p, f), x.dtype, sbuf)
        spread_dma(out, x.reshape((1, f)))
        return out if out.dtype == numerics.dtype(dtype) else copy(out, dtype)
    ones_ = ones_row(p, x.dtype)
    out = ndarray((p, f), dtype, sbuf)
    flat = x.reshape((1, f))
    step = tile_size.psum_bank_fmax
    for lo in range(0, f, step):
        hi = builtins.min(f, lo + step)
        ps = ndarray((p, hi - lo), float32, psum)
        nisa.nc_matmul(ps, ones_, flat[:, lo:hi])
        nisa.tensor_copy(out[:, lo:hi], ps)
    return out


def ones_row(p: int, dtype) -> View:
    """The [1, p] ones operand of a partition broadcast's matmul, filled on GpSimd.

    It is a constant of the compiler's own, built ahead of the loop that uses it, never between the
    Vector instructions that read the broadcast: a memset on the Vector stream would put the fill and the
    fp32 matmul (4x a bf16 one) in series in front of every consumer."""
    t = ndarray((1, p), float32 if numerics.dtype(dtype).name in ("float32", "tfloat32") else bfloat16, sbuf)
    nisa.memset(t, 1.0, engine=nisa.engine.gpsimd)
    return t


def spread_dma(dst: View, row: View):
    """Copy the one-partition `row` into every partition of `dst` with DMAs that double the filled
    partitions each time (partition 0 -> 1, 0..1 -> 2..3, ...): log2(P) exact byte copies."""
    nisa.dma_copy(dst[0:1], row)
    done, p = 1, dst.shape[0]
    while done < p:
        n = builtins.min(done, p - done)
        nisa.dma_copy(dst[done:done + n], dst[0:n])
        done += n


def expand_dims(x, axis) -> View:
    return x.expand_dim(axis)


# -- rounding, logical not, gather (nki/api/nki/language/__init__.py: floor, ceil, trunc, logical_not,
# gather_flattened); the *_into helpers take views, so the beta front end issues the same instructions -------------
def round_into(dst, x, mode: str):
    """floor / trunc as one Vector instruction, x - (x mod 1) (mod: Python's sign rule; fmod: C's), and ceil
    as x + ((-x) mod 1) in two. Exact in FP32: an integer part is always representable."""
    if mode == "ceil":
        t = ndarray(x.shape, float32)
        nisa.tensor_scalar(t, x, "multiply", -1.0, op1="mod", operand1=1.0)
        nisa.tensor_tensor(dst, x, t, "add")
    else:
        nisa.scalar_tensor_tensor(dst, x, "mod" if mode == "floor" else "fmod", 1.0, "subtract", x, reverse1=True)


def _rounding(mode):
    def fn(x, dtype=None):
        t = ndarray(x.shape, _out_dtype(dtype, x))
        round_into(t, x, mode)
        return t
    fn.__name__ = mode
    return fn


floor, ceil, trunc = _rounding("floor"), _rounding("ceil"), _rounding("trunc")


def logical_not_into(dst, x):
    """XOR with 1, as the documentation describes it."""
    nisa.tensor_scalar(dst, x, "logical_xor", 1.0)


def logical_not(x, dtype=None) -> View:
    t = ndarray(x.shape, _out_dtype(dtype, x))
    logical_not_into(t, x)
    return t


def gather_into(dst, data, indices):
    core().issue(Op.GATHER_FLATTENED, dst=dst, indices=indices, data=data)


def gather_flattened(data, indices, axis=0, dtype=None) -> View:
    """For each index, the element of its partition's flattened free dims (one GpSimd instruction). The
    gather always runs over the flattened free dims; `axis` is the documented signature's."""
    t = ndarray(indices.shape, _out_dtype(dtype, data))
    gather_into(t, data, indices)
    return t


def rand_into(dst):
    core().issue(Op.RAND, dst=dst, kind="uniform", min=0.0, max=1.0)


# -- loops and SPMD -------------------------------------------------------------------------------------------
def static_range(start, stop=None, step=1):
    """Unrolled at trace time: plain Python iteration, tiles live as long as Python holds them."""
    return range(start, stop, step) if stop is not None else range(start)


def affine_range(start, stop=None, step=1, **kwargs):
    """A loop whose tiles die with the iteration that made them, as the compiler scopes them (core/liveness.py).

    NKI 0.6 compiles it as `range` (nki/api/nki/language/__init__.py: affine_range, deprecated), so a
    loop-carried dependency is honoured there but breaks under the beta compiler, which reorders affine
    iterations: with the race check asked for (`race_check=`, TRNSIM_RACE_CHECK), it is reported as a
    LoopCarriedWarning (core/races.py)."""
    return core().loop(static_range(start, stop, step), affine="warn")


def sequential_range(start, stop=None, step=1, **kwargs):
    """A loop whose iterations may depend on each other (compiled as `range`)."""
    return core().loop(static_range(start, stop, step))


def dynamic_range(start, stop=None, step=1):
    """A loop with runtime bounds: start and stop may be registers (nki/api/nki/language: dynamic_range); the
    step is a compile-time positive int. NKI 0.7 removed it (nki/versions.py)."""
    _versions.removed("nl.dynamic_range", "nl.fori_loop(lower, upper, body)")
    if not isinstance(step, (int, np.integer)) or step < 1:
        raise ShapeError(f"nl.dynamic_range: step must be a compile-time positive int; got {step!r}")
    nc = core()
    lo, hi = (0, start) if stop is None else (start, stop)
    lo, hi = nc.read_register(lo, "a loop bound"), nc.read_register(hi, "a loop bound")
    return range(lo, hi, int(step))


# -- kernel config classes ----------------------------------------------------------------------------------
class NKIObject:
    """Base of kernel dataclasses and config objects (nki/api/nki/language: NKIObject): a subclass declaring
    fields as class attributes (or as a dataclass) is built with keywords, `Cfg(tile=128)`."""

    def __init_subclass__(cls, **kwargs):
        """Plain class attributes are fields too, so a `@dataclass` subclass that declares them without a type
        (`idx = None`, as the NKI library's kernels do) takes them as keywords."""
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("__annotations__", {})
        plain = {k: object for k, v in cls.__dict__.items() if not k.startswith("_") and k not in own
                 and not callable(v) and not isinstance(v, (staticmethod, classmethod, property, list, dict, set))}
        if plain:
            cls.__annotations__ = {**own, **plain}

    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            if not hasattr(type(self), k) and k not in getattr(type(self), "__annotations__", {}):
                raise TypeError(f"{type(self).__name__}() has no field {k!r}")
            setattr(self, k, v)

    def __repr__(self):
        fields = {k: v for k, v in vars(self).items() if not k.startswith("_")}
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in fields.items())})"


NkiTensor = View
DType = numerics.DType


def fori_loop(lower, upper, body_fun, step=1):
    """A runtime counted loop; the body gets the induction value: an NkiScalar in NKI 0.7 unless a bound is a
    register (nki.isa.loop_value)."""
    nc = core()
    lo, hi = nc.read_register(lower, "a loop bound"), nc.read_register(upper, "a loop bound")
    for i in range(lo, hi, int(step)):
        body_fun(nisa.loop_value(i, lower, upper))


def while_loop(init, body_fun):
    """A runtime while loop on a register, checked before the first iteration."""
    nc = core()
    cond = init
    while nc.read_register(cond, "a while_loop condition"):
        cond = body_fun(cond) if body_fun.__code__.co_argcount else body_fun()


def program_id(axis=0) -> int:
    return core().program_id


def num_programs(axes=0) -> int:
    return core().num_programs


def program_ndim() -> int:
    return 1 if core().num_programs > 1 else 0


@contextlib.contextmanager
def no_reorder():
    """Instructions already run in program order here; the block only marks intent."""
    yield


def device_print(print_prefix, tensor):
    """Print a tile's values as the host reads them now; a timing-only run has none to print."""
    nc = core()
    print(print_prefix, np.array(nc.host_read(tensor)) if nc.values else f"{tensor!r} (timing only: no values)")


__all__ = [n for n in dir() if not n.startswith("_") and not n.endswith("_into") and n not in (
    "annotations", "contextlib", "enum", "math", "np", "numerics", "Op", "View", "Register", "ShapeError", "core", "nisa")]
