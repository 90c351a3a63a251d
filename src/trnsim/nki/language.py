"""`nki.language`: dtypes, buffers, tensor creation, loops and the convenience ops.

Every convenience op allocates its result and has the lowering layer (nki/lower.py, shared with the beta
API) issue its `nki.isa` instructions (nl.load -> dma_copy, nl.matmul -> nc_matmul, nl.exp -> activation,
nl.sum -> tensor_reduce, nl.softmax -> four instructions); none computes a value itself.
"""
from __future__ import annotations

import enum

import numpy as np

from trnsim import numerics
from trnsim.core import View
from trnsim.core.errors import ShapeError, locate_all
from trnsim.core.machine import Register
from trnsim.nki import _frontend, isa as nisa, lower, operands
from trnsim.nki import versions as _versions
from trnsim.nki.grids import NkiBlockGrid, NkiGrid, NkiTileGrid, alloc_blocks, alloc_tiles, blocks, tiles  # noqa: F401
from trnsim.nki._frontend import core, ndarray as _ndarray, no_reorder

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
    lower.check_shape((shape,) if isinstance(shape, (int, np.integer)) else shape, "nl.ndarray")
    return _ndarray(shape, dtype, buffer, name or None, address)


def full(shape, fill_value, dtype, buffer=sbuf, name="") -> View:
    t = ndarray(shape, dtype, buffer, name)
    lower.full(t, fill_value)
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
    lower.load(t, src)
    return t


def store(dst, value):
    """An SBUF tile -> HBM (one dma_copy; a PSUM tile by way of SBUF)."""
    lower.store(dst, value)


def load_transpose2d(src, dtype=None) -> View:
    lower.two_d(src, "nl.load_transpose2d", "src")
    t = ndarray((src.shape[1], src.shape[0]), dtype or src.dtype, sbuf)
    lower.load_transpose2d(t, src)
    return t


def copy(x, dtype=None) -> View:
    return lower.copy_to(x, dtype or x.dtype)


def transpose(x, dtype=None) -> View:
    """2-D partition <-> free transpose on the tensor engine; the result lives in PSUM."""
    return lower.transpose(x, dtype)


def matmul(x, y, transpose_x=False) -> View:
    """x @ y (or x.T @ y with transpose_x=True) into a new PSUM tile of float32."""
    x, y = lower.matmul_operands(x, y, transpose_x)
    out = ndarray((x.free_size, y.free_size), float32, psum)
    lower.matmul(out, x, y)
    return out


# -- element-wise ---------------------------------------------------------------------------------------------
_out_dtype = lower.widest


def _binary(name):
    def fn(x, y, dtype=None):
        dt = _out_dtype(dtype, x, y)
        # true division, as numpy.divide (nki/api/nki/language/__init__.py: divide): int / int is a float
        t = ndarray(lower.broadcast_shape(x, y), float32 if name == "divide" and dtype is None and not dt.is_float
                    else dt)
        lower.binary(t, name, x, y)
        return t
    fn.__name__ = fn.op_name = name
    return fn


def _unary(name):
    def fn(x, dtype=None):
        t = ndarray(x.shape, _out_dtype(dtype, x))
        lower.unary(t, name, x)
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
invert, negative = _unary("invert"), _unary("negative")
exp, log, sqrt, rsqrt, tanh = _unary("exp"), _unary("log"), _unary("sqrt"), _unary("rsqrt"), _unary("tanh")
sin, cos, tan, arctan, sign, abs = _unary("sin"), _unary("cos"), _unary("tan"), _unary("arctan"), _unary("sign"), _unary("abs")  # noqa: A001
square, relu, sigmoid, silu, silu_dx = _unary("square"), _unary("relu"), _unary("sigmoid"), _unary("silu"), _unary("silu_dx")
gelu, gelu_dx, gelu_apprx_tanh = _unary("gelu"), _unary("gelu_dx"), _unary("gelu_apprx_tanh")
gelu_apprx_sigmoid, gelu_apprx_sigmoid_dx = _unary("gelu_apprx_sigmoid"), _unary("gelu_apprx_sigmoid_dx")
mish, softplus, erf, erf_dx = _unary("mish"), _unary("softplus"), _unary("erf"), _unary("erf_dx")
identity = _unary("copy")


def reciprocal(x, dtype=None) -> View:
    t = ndarray(x.shape, _out_dtype(dtype, x))
    lower.reciprocal(t, x)
    return t


reciprocal.op_name = "reciprocal"
prelu, bypass, average = "prelu", "bypass", "average"


# -- reductions ----------------------------------------------------------------------------------------------
def _reduced(x, axes, dtype, keepdims) -> View:
    """The result tile of a reduction: reduced axes kept as 1 with keepdims, or where fewer than 2 dims remain."""
    shape = [1 if d in axes else n for d, n in enumerate(x.shape)]
    if not keepdims and len(shape) - len(axes) >= 2:
        shape = [n for d, n in enumerate(x.shape) if d not in axes]
    return ndarray(shape, dtype)


def _reduce(name, negate=False):
    def fn(x, axis, dtype=None, keepdims=False):
        axes = lower.axes_of(x.ndim, axis, f"nl.{lower.REDUCTIONS.get(name, name)}")
        t = _reduced(x, axes, _out_dtype(dtype, x), keepdims)
        lower.reduce(t, name, x, axes, negate=negate, keepdims=keepdims)
        return t
    fn.__name__ = fn.op_name = name
    return fn


sum = _reduce("add")  # noqa: A001
max = _reduce("maximum")  # noqa: A001
min = _reduce("minimum")  # noqa: A001
prod = _reduce("multiply")
max.op_name, min.op_name = "maximum", "minimum"


def mean(x, axis, dtype=None, keepdims=False) -> View:
    axes = lower.axes_of(x.ndim, axis, "nl.mean")
    t = _reduced(x, axes, _out_dtype(dtype, x), keepdims)
    lower.mean(t, x, axes, keepdims)
    return t


def softmax(x, axis=-1, dtype=None) -> View:
    """exp(x - max) / sum(exp(x - max)) along the free axis: 4 instructions."""
    out = ndarray(x.shape, _out_dtype(dtype, x))
    lower.softmax(out, x, lower.axes_of(x.ndim, axis, "nl.softmax"))
    return out


def rms_norm(x, w, axis=-1, n=None, epsilon=1e-6, dtype=None, compute_dtype=None) -> View:
    """x / sqrt(mean(x^2) + eps) * w."""
    out = ndarray(x.shape, _out_dtype(dtype, x))
    lower.rms_norm(out, x, w, x.free_size if n is None else n, epsilon)
    return out


def var(x, axis, dtype=None, keepdims=False) -> View:
    """Population variance along the free axes: mean of squares of x - mean. The result keeps the reduced dims
    whatever `keepdims` says (nki/api/nki/language/__init__.py: var, keepdims "currently ignored")."""
    axes = lower.axes_of(x.ndim, axis, "nl.var")
    out = _reduced(x, axes, _out_dtype(dtype, x), True)
    lower.var(out, x, axes)
    return out


def all(x, axis, dtype=None) -> View:  # noqa: A001
    """1 where every element along the axes is non-zero, in the input's dtype unless `dtype` says otherwise (the
    current reference; the beta API's nl.all defaults to bool instead)."""
    axes = lower.axes_of(x.ndim, axis, "nl.all")
    out = _reduced(x, axes, _out_dtype(dtype, x), False)
    lower.all_(out, x, axes)
    return out


def where(condition, x, y, dtype=None) -> View:
    """x where condition (1.0/0.0) else y; y may be a scalar."""
    out = ndarray(x.shape, _out_dtype(dtype, x))
    lower.select(out, condition, x, y)
    return out


def dropout(x, rate, dtype=None) -> View:
    out = ndarray(x.shape, x.dtype)
    lower.dropout(out, x, rate)
    return out if dtype is None else copy(out, dtype)


def rand(shape, dtype, buffer=sbuf, name="") -> View:
    """Uniform values in [0, 1) from the core's seeded generator."""
    t = ndarray(shape, dtype, buffer, name)
    lower.rand(t)
    return t


def random_seed(seed):
    nisa.set_rng_seed(seed)


def shared_identity_matrix(n, dtype=uint8, dst=None) -> View:
    """An n x n identity in SBUF: ones where partition == column (GpSimd affine_select)."""
    if n < 1:
        raise ShapeError(f"nl.shared_identity_matrix({n}): n is 1 or more")
    ones_ = ones((n, n), dtype)
    out = dst if dst is not None else ndarray((n, n), dtype)
    nisa.affine_select(out, [[-1, n]], 1, ones_, 0.0, cmp_op="equal")
    return out


def shared_constant(constant) -> View:
    """A numpy array (or .npy path) placed in shared HBM."""
    arr = _frontend.host_constant(constant)
    return core().hbm_tensor(np.ascontiguousarray(arr), name="shared_constant", kind="shared_hbm")


def broadcast_to(x, shape, dtype=None) -> View:
    """Size-1 dims broadcast: free dims by a zero stride; an on-chip partition dim of 1 by ones-matmuls (the
    compiler's lowering), into an SBUF tile of `dtype` (default x's)."""
    return lower.broadcast_to(x, shape, dtype)


def expand_dims(x, axis) -> View:
    return x.expand_dim(lower.one_axis(x.ndim, axis, "nl.expand_dims"))


# -- rounding, logical not, gather (nki/api/nki/language/__init__.py: floor, ceil, trunc, logical_not,
# gather_flattened) -------------------------------------------------------------------------------------------
def _rounding(mode):
    def fn(x, dtype=None):
        t = ndarray(x.shape, _out_dtype(dtype, x))
        lower.rounding(t, x, mode)
        return t
    fn.__name__ = mode
    return fn


floor, ceil, trunc = _rounding("floor"), _rounding("ceil"), _rounding("trunc")


def logical_not(x, dtype=None) -> View:
    t = ndarray(x.shape, _out_dtype(dtype, x))
    lower.logical_not(t, x)
    return t


def gather_flattened(data, indices, axis=0, dtype=None) -> View:
    """For each index, the element of its partition's flattened free dims (one GpSimd instruction). The
    gather always runs over the flattened free dims; `axis` is the documented signature's."""
    t = ndarray(indices.shape, _out_dtype(dtype, data))
    lower.gather(t, data, indices)
    return t


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


def device_print(print_prefix, tensor):
    """Print a tile's values as the host reads them now; a timing-only run has none to print."""
    nc = core()
    print(print_prefix, np.array(nc.host_read(tensor)) if nc.values else f"{tensor!r} (timing only: no values)")


__all__ = [n for n in dir() if not n.startswith("_") and not n.endswith("_into") and n not in (
    "annotations", "contextlib", "enum", "np", "numerics", "View", "Register", "ShapeError", "core", "nisa", "lower",
    "operands", "locate_all")]
# a value of the wrong kind is refused by name (rms_norm's n defaults to the free size)
operands.Kinds((View,), optional={"nl.rms_norm n"}).check_all(globals(), __all__)
locate_all(globals())  # after every definition: a name an op looks up (a dtype) is refused at the kernel line
