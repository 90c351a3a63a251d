"""`nki.isa`: one function per instruction, each one `issue` of the core instruction of the same name."""
from __future__ import annotations

import enum

import numpy as np

from trnsim.core import Op, Register, View
from trnsim.core.memory import Space
from trnsim import numerics
from trnsim.core.errors import DTypeWarning, KernelError, OperandTypeError, locate_all, warn
from trnsim.core.tensor import Indirection as _Indirection
from trnsim.core.isa.registry import Instruction as NkiInstruction  # noqa: F401 - what an nki.isa call returns
from trnsim.core.isa.registry import NAME as _NAME
from trnsim.nki import versions as _versions
from trnsim.nki._current import core, issue, named as _instruction_name

VirtualRegister = Register  # nki/api/nki/isa: VirtualRegister, the type register_alloc returns

NkiValidationError = KernelError


class engine(enum.IntEnum):
    unknown = 0
    tensor = 1
    scalar = 2
    gpsimd = 3
    dma = 4
    vector = 5
    sync = 6


tensor_engine, scalar_engine, gpsimd_engine, vector_engine, sync_engine = (
    engine.tensor, engine.scalar, engine.gpsimd, engine.vector, engine.sync)


class reduce_cmd(enum.IntEnum):
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class dge_mode(enum.IntEnum):
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class oob_mode(enum.IntEnum):
    error = 0
    skip = 1


class matmul_perf_mode(enum.Enum):
    none = "none"
    double_row = "double_row"


class nc_version(enum.IntEnum):
    gen2 = 2
    gen3 = 3
    gen4 = 4


class dma_engine(enum.IntEnum):
    dma = 1
    gpsimd_dma = 2


class dependency(enum.Enum):
    """The kind of a `depends_on` edge: runtime, a semaphore wait; schedule, issue order alone."""
    runtime = "runtime"
    schedule = "schedule"


_OOB, _DGE, _ENGINE = oob_mode, dge_mode, engine  # the enums, where a parameter of the same name hides them


def get_nc_version() -> nc_version:
    return nc_version(core().gen)


def get_nc_sub_version() -> int:
    return 0


def _enum(cls, x):
    """An enum argument given as its int (`dge_mode=3`) is the member of that value."""
    if isinstance(x, int) and not isinstance(x, enum.Enum):
        if x not in cls._value2member_map_:
            raise OperandTypeError(f"{cls.__name__}={x}: no such member; "
                                   + ", ".join(f"{m.name} ({m.value})" for m in cls))
        return cls(x)
    return x


def _ints(what: str, x, depth: int = 1, kind: str = "__index__") -> tuple:
    """A tuple of integers (registers and scalars included; numbers with kind "__float__"; tuples of integers
    with `depth` 2: an access pattern) from a tuple or list of them."""
    if type(x) is tuple and not x:  # the usual default, at every issue
        return x
    ok = isinstance(x, (tuple, list)) and all(
        hasattr(type(v), kind) and not isinstance(v, bool) if depth == 1 else isinstance(v, (tuple, list))
        for v in x)
    if not ok:
        shown = ("a tuple of [step, size] pairs" if depth == 2 else "a tuple of ints" if kind == "__index__"
                 else "a tuple of numbers")
        raise OperandTypeError(f"{what} is {shown}; got {type(x).__name__} {str(x)[:40]!r}")
    return tuple(x) if depth == 1 else tuple(_ints(what, v) for v in x)


def _eng(e):
    e = _enum(engine, e)
    return None if e is None or e == engine.unknown else e


def _on_sbuf(x, engine=None):
    """`x` where a GpSimd or Tensor engine can read it: a PSUM tile is first copied to SBUF (the copy the
    compiler inserts, timed as one)."""
    if type(x) is not View or x.space is not Space.PSUM:
        return x
    from trnsim.nki._frontend import ndarray
    t = ndarray(x.shape, x.dtype, "sbuf")
    if engine is None:
        _lowered_copy(t, x)
    else:
        issue(Op.TENSOR_COPY, engine=engine, dst=t, src=x)
    return t


def _lowered_copy(dst, src, name=None):
    """A copy the compiler writes itself (nl.copy, an assignment out of PSUM, a cast it inserts), not a
    tensor_copy the kernel asked for: the compiler may emit it as any instruction that copies, on NeuronCore-v2
    an activation(op=copy) on the Scalar engine too (core/isa/registry.py: workload_engines). `name`: that of
    the call it lowers, whose instructions a schedule edge names together."""
    return issue(Op.TENSOR_COPY, dst=dst, src=src, lowered=True, name=name)


_NC_MATMUL = Op.NC_MATMUL  # the commonest call: an Enum class's attribute goes through its metaclass's __getattr__ hook


# -- Tensor engine -----------------------------------------------------------------------------------------
def nc_matmul(dst, stationary, moving, is_stationary_onezero=False, is_moving_onezero=False, is_transpose=False,
              accumulate=None, tile_position=(), tile_size=(), perf_mode=matmul_perf_mode.none, name=None):
    # The commonest call, so refused indirect operands here rather than in a wrapper, and issued with its operands
    # and attributes in one dict: each layer of call costs as much as some of the checks.
    for v in (dst, stationary, moving, is_stationary_onezero, is_moving_onezero, is_transpose, accumulate, tile_position,
              tile_size, perf_mode, name):
        if type(v) is _Indirection:
            _refuse_indirection("nc_matmul")
    kw = {"dst": dst, "stationary": stationary, "moving": moving, "is_transpose": is_transpose, "accumulate": accumulate,
          "tile_position": _ints("nc_matmul tile_position", tile_position or ()),
          "tile_size": _ints("nc_matmul tile_size", tile_size or ()),
          "perf_mode": getattr(perf_mode, "_value_", perf_mode) or "none",
          "is_stationary_onezero": is_stationary_onezero, "is_moving_onezero": is_moving_onezero}
    if name is not None:
        kw[_NAME] = _instruction_name(name)
    return core().submit(_NC_MATMUL, None, kw)


def nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, tile_position=None, tile_size=None,
                 accumulate=None, name=None):
    return issue(Op.NC_MATMUL_MX, dst=dst, stationary=stationary, moving=moving, stationary_scale=stationary_scale,
                 moving_scale=moving_scale, accumulate=accumulate, tile_position=_ints("nc_matmul_mx tile_position", tile_position or ()),
                 tile_size=_ints("nc_matmul_mx tile_size", tile_size or ()), name=name)


def nc_transpose(dst, data, engine=engine.unknown, name=None):
    return issue(Op.NC_TRANSPOSE, engine=_eng(engine), dst=dst, data=data, name=name)


# -- Scalar engine ------------------------------------------------------------------------------------------
def activation(dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None, reduce_cmd=reduce_cmd.idle,
               engine=engine.scalar, name=None, relu_param=0.0):
    return issue(Op.ACTIVATION, engine=_eng(engine), dst=dst, op=op, data=data, bias=bias, scale=scale,
                 reduce_op=reduce_op, reduce_res=reduce_res, reduce_cmd=reduce_cmd, relu_param=relu_param, name=name)


def activation_reduce(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, name=None):
    return activation(dst, op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
                      reduce_cmd=reduce_cmd.reset_reduce, name=name)


def activate2(dst, op, data, imm0=0.0, imm1=0.0, op0=None, op1=None, relu_param=0.0, reverse0=False, reverse1=False,
              reduce_op=None, reduce_res=None, reduce_cmd=reduce_cmd.idle, engine=engine.scalar, name=None):
    return issue(Op.ACTIVATE2, engine=_eng(engine), dst=dst, op=op, data=data, imm0=imm0, imm1=imm1, op0=op0, op1=op1, relu_param=relu_param,
                 reverse0=reverse0, reverse1=reverse1, reduce_op=reduce_op, reduce_res=reduce_res, reduce_cmd=reduce_cmd,
                 name=name)


# -- Vector / GpSimd -------------------------------------------------------------------------------------------
def tensor_tensor(dst, data1, data2, op, engine=engine.unknown, name=None):
    return issue(Op.TENSOR_TENSOR, engine=_eng(engine), dst=dst, data1=data1, data2=data2, op=op, name=name)


def tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False,
                  engine=engine.unknown, name=None):
    return issue(Op.TENSOR_SCALAR, engine=_eng(engine), dst=dst, data=data, op0=op0, operand0=operand0,
                 reverse0=reverse0, op1=op1, operand1=operand1, reverse1=reverse1, name=name)


def scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, name=None):
    return issue(Op.SCALAR_TENSOR_TENSOR, dst=dst, data=data, op0=op0, operand0=operand0, op1=op1, operand1=operand1,
                 reverse0=reverse0, reverse1=reverse1, name=name)


_WARNED: dict = {}  # warnings already shown, once per kernel line (errors.warn)


def tensor_copy(dst, src, engine=engine.unknown, name=None, dtype=None):
    """The copy lands in dst's dtype (nki/api/nki/isa/__init__.py: tensor_copy has no dtype). Published kernels
    pass `dtype=` anyway (the nki-samples matmul tutorial: the output's dtype, in one kernel with an fp32 dst)
    and run on hardware; a dtype other than dst's cannot be honoured, so it is ignored with a DTypeWarning."""
    if dtype is not None and type(dst) is View and numerics.dtype(dtype) != dst.dtype:
        warn(f"tensor_copy dtype={numerics.dtype(dtype).name} differs from dst dtype {numerics.dtype(dst.dtype).name}; "
             f"the copy is written in dst's dtype", DTypeWarning, registry=_WARNED)
    return issue(Op.TENSOR_COPY, engine=_eng(engine), dst=dst, src=src, name=name)


def tensor_copy_predicated(dst, src, predicate, reverse_pred=False, name=None):
    return issue(Op.TENSOR_COPY_PREDICATED, dst=dst, src=src, predicate=predicate, reverse_pred=reverse_pred, name=name)


def memset(dst, value, engine=engine.unknown, name=None):
    return issue(Op.MEMSET, engine=_eng(engine), dst=dst, value=value, name=name)


def reciprocal(dst, data, name=None):
    return issue(Op.RECIPROCAL, dst=dst, data=data, name=name)


def tensor_reduce(dst, op, data, axis, negate=False, keepdims=False, name=None):
    return issue(Op.TENSOR_REDUCE, dst=dst, op=op, data=data, axis=axis, negate=negate, keepdims=keepdims, name=name)


# -- DMA -------------------------------------------------------------------------------------------------------
def dma_copy(dst, src, priority=None, oob_mode=oob_mode.error, dge_mode=dge_mode.unknown, engine=engine.unknown,
             name=None, dst_rmw_op=None, unique_indices=True):
    """A DMA; `dst_rmw_op=nl.add` (NKI 0.x releases) adds src into dst instead of overwriting it."""
    return issue(Op.DMA_COPY, dst=dst, src=src, priority=priority, oob_mode=_name(_OOB, oob_mode),
                 dge_mode=_name(_DGE, dge_mode), queue_engine=_name(_ENGINE, engine), dst_rmw_op=dst_rmw_op, name=name)


def dma_transpose(dst, src, axes=None, priority=None, dge_mode=dge_mode.unknown, oob_mode=oob_mode.error, name=None):
    """A DMA transpose; into a dst of another dtype it transposes in the src dtype, then casts with a
    tensor_copy (the cast the compiler inserts)."""
    mode = _name(_DGE, dge_mode)
    if type(dst) is View and type(src) is View and dst.dtype != src.dtype:
        from trnsim.nki._frontend import ndarray
        t = ndarray(dst.shape, src.dtype, "sbuf")
        issue(Op.DMA_TRANSPOSE, dst=t, src=src, axes=None if axes is None else _ints("dma_transpose axes", axes),
              dge_mode=mode, name=name)
        return _lowered_copy(dst, t, name=name)
    return issue(Op.DMA_TRANSPOSE, dst=dst, src=src, axes=None if axes is None else _ints("dma_transpose axes", axes),
                 dge_mode=mode, name=name)


def _name(cls, x):
    return getattr(_enum(cls, x), "name", x)


def sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine=dma_engine.dma, name=None):
    eng = "gpsimd" if dma_engine == 2 else None
    return issue(Op.SENDRECV, engine=eng, src=src, dst=dst, send_to_rank=send_to_rank, recv_from_rank=recv_from_rank,
                 pipe_id=pipe_id, name=name)


def dma_compute(dst, srcs, reduce_op, scales=None, unique_indices=True, oob_mode=oob_mode.error, name=None):
    srcs = srcs if isinstance(srcs, (tuple, list)) else (srcs,)  # one tile given alone
    return issue(Op.DMA_COMPUTE, dst=dst, **{f"src{i}": s for i, s in enumerate(srcs)}, reduce_op=reduce_op,
                 scales=None if scales is None else _ints("dma_compute scales", scales, kind="__float__"),
                 unique_indices=unique_indices,
                 oob_mode=_name(_OOB, oob_mode), name=name)


# -- reductions, scans, selections, statistics -------------------------------------------------------------------
def tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res=None, reverse0=False,
                         reduce_cmd=reduce_cmd.reset_reduce, reduce_init=None, reduce_res_negate=False, name=None):
    return issue(Op.TENSOR_SCALAR_REDUCE, dst=dst, data=data, op0=op0, operand0=operand0, reduce_op=reduce_op,
                 reduce_res=reduce_res, reverse0=reverse0, reduce_cmd=reduce_cmd, reduce_init=reduce_init,
                 reduce_res_negate=reduce_res_negate, name=name)


def tensor_tensor_scan(dst, data0, data1, initial, op0, op1, reverse0=False, reverse1=False, name=None):
    return issue(Op.TENSOR_TENSOR_SCAN, dst=dst, data0=data0, data1=data1, initial=initial, op0=op0, op1=op1,
                 reverse0=reverse0, reverse1=reverse1, name=name)


def tensor_scalar_cumulative(dst, src, op0, op1, imm0, imm1=None, reduce_cmd=reduce_cmd.reset_reduce, name=None):
    return issue(Op.TENSOR_SCALAR_CUMULATIVE, dst=dst, src=src, op0=op0, op1=op1, imm0=imm0, imm1=imm1,
                 reduce_cmd=reduce_cmd, name=name)


def tensor_partition_reduce(dst, op, data, name=None):
    return issue(Op.TENSOR_PARTITION_REDUCE, dst=dst, op=op, data=data, name=name)


def select_reduce(dst, predicate, on_true, on_false, reduce_res=None, reduce_cmd=reduce_cmd.idle,
                  reduce_op=None, reverse_pred=False, name=None):
    return issue(Op.SELECT_REDUCE, dst=dst, predicate=predicate, on_true=on_true, on_false=on_false,
                 reduce_res=reduce_res, reduce_cmd=reduce_cmd, reduce_op=reduce_op, reverse_pred=reverse_pred,
                 name=name)


def range_select(dst, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=reduce_cmd.reset_reduce,
                 reduce_res=None, reduce_op=None, range_start=0, on_false_value=None, name=None):
    return issue(Op.RANGE_SELECT, dst=dst, on_true_tile=on_true_tile, comp_op0=comp_op0, comp_op1=comp_op1,
                 bound0=bound0, bound1=bound1, reduce_cmd=reduce_cmd, reduce_res=reduce_res, reduce_op=reduce_op,
                 range_start=range_start, on_false_value=on_false_value, name=name)


def exponential(dst, src, max_value=0.0, reduce_res=None, reduce_cmd=reduce_cmd.idle, reduce_init=0.0, name=None):
    return issue(Op.EXPONENTIAL, dst=dst, src=src, max_value=max_value, reduce_res=reduce_res, reduce_cmd=reduce_cmd,
                 reduce_init=reduce_init, name=name)


def bn_stats(dst, data, name=None):
    return issue(Op.BN_STATS, dst=dst, data=data, name=name)


def bn_aggr(dst, data, name=None):
    return issue(Op.BN_AGGR, dst=dst, data=data, name=name)


def max8(dst, src, name=None):
    return issue(Op.MAX8, dst=dst, src=src, name=name)


def nc_find_index8(dst, data, vals, name=None):
    return issue(Op.NC_FIND_INDEX8, dst=dst, data=data, vals=vals, name=name)


def nc_match_replace8(dst, data, vals, imm, dst_idx=None, name=None):
    return issue(Op.NC_MATCH_REPLACE8, dst=dst, data=data, vals=vals, imm=imm, dst_idx=dst_idx, name=name)


def nc_stream_shuffle(dst, src, shuffle_mask, name=None):
    return issue(Op.NC_STREAM_SHUFFLE, dst=dst, src=src, shuffle_mask=_ints("nc_stream_shuffle shuffle_mask", shuffle_mask),
                 name=name)


def topk(val_dst, idx_dst, src, n, name=None):
    return issue(Op.TOPK, val_dst=val_dst, idx_dst=idx_dst, src=src, n=n, name=name)


def quantize_mx(dst, src, dst_scale, name=None):
    return issue(Op.QUANTIZE_MX, dst=dst, src=src, dst_scale=dst_scale, name=name)


# -- GpSimd ------------------------------------------------------------------------------------------------------
def iota(dst, pattern, offset=0, channel_multiplier=0, name=None):
    return issue(Op.IOTA, dst=dst, pattern=_ints("iota pattern", pattern, 2), offset=offset,
                 channel_multiplier=channel_multiplier, name=name)


def affine_select(dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op="equal", offset=0, name=None):
    return issue(Op.AFFINE_SELECT, dst=dst, pattern=_ints("affine_select pattern", pattern, 2), channel_multiplier=channel_multiplier,
                 on_true_tile=_on_sbuf(on_true_tile), on_false_value=on_false_value, cmp_op=cmp_op, offset=offset,
                 name=name)


def local_gather(dst, src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, name=None):
    return issue(Op.LOCAL_GATHER, dst=dst, src_buffer=src_buffer, index=index, num_elem_per_idx=num_elem_per_idx,
                 num_valid_indices=num_valid_indices, name=name)


def nc_n_gather(dst, data, indices, name=None):
    return issue(Op.NC_N_GATHER, dst=dst, data=data, indices=indices, name=name)


def sequence_bounds(dst, segment_ids, name=None):
    return issue(Op.SEQUENCE_BOUNDS, dst=dst, segment_ids=segment_ids, name=name)


def nonzero_with_count(dst, src, index_offset=0, padding_val=-1, name=None):
    return issue(Op.NONZERO_WITH_COUNT, dst=dst, src=src, index_offset=index_offset, padding_val=padding_val, name=name)


# -- random numbers -----------------------------------------------------------------------------------------------
def rng(dst, engine=engine.vector, name=None):
    return issue(Op.RAND, engine=_eng(engine), dst=dst, kind="bits", name=name)


def rand2(dst, min, max, name=None):  # noqa: A002 - the NKI parameter names
    return issue(Op.RAND, dst=dst, kind="uniform", min=min, max=max, name=name)


def set_rng_seed(src_seeds, name=None):
    return issue(Op.SET_RNG_SEED, src_seeds=src_seeds, name=name)


def rand_set_state(src_seeds, engine=engine.gpsimd, name=None):
    return issue(Op.RAND_SET_STATE, engine=_eng(engine), src_seeds=src_seeds, name=name)


def rand_get_state(dst, engine=engine.gpsimd, name=None):
    return issue(Op.RAND_GET_STATE, engine=_eng(engine), dst=dst, name=name)


def dropout(dst, data, prob, name=None):
    return issue(Op.DROPOUT, dst=dst, data=data, prob=prob, name=name)


# -- registers and cross-core sync -----------------------------------------------------------------------------------
class NkiScalar(Register):
    """One integer computed on device (nki.isa.NkiScalar; nki/deep-dives/nki-scalar): nl.int32 or nl.int64, a
    width fixed by scalar_load. Arithmetic (+, -, *) with a Python int or a scalar of the same width gives a new
    scalar and wraps at that width; comparisons of int32 scalars are traced but their result cannot be used, and
    of int64 ones are refused. A scalar serves as an index, a `scalar_offset` (int64 ones past the 4 GiB reach
    of 32-bit offsets, on HBM only) and, at 32 bits, a fori_loop bound. The sequencer computes the arithmetic;
    it is not timed."""

    __slots__ = ("dtype", "is_comparison")
    __hash__ = Register.__hash__

    def __init__(self, state, dtype=None, is_comparison=False):
        reg = state if isinstance(state, Register) else Register(int(state))
        dt = numerics.dtype(dtype if dtype is not None else "int32").name
        if dt not in ("int32", "int64"):
            raise NkiValidationError(f"NkiScalar dtype {dt}: a scalar is nl.int32 or nl.int64")
        super().__init__(_wrap(reg.value, dt), reg.poisoned, reg.name or "scalar", reg.known)
        self.dtype, self.is_comparison = dt, is_comparison

    @property
    def bits(self) -> int:
        return 64 if self.dtype == "int64" else 32

    def __repr__(self):
        return f"<NkiScalar {self.dtype} = {self.value if self.known else '?'}>"

    def _operand(self, x, sym):
        if isinstance(x, NkiScalar):
            if x.dtype != self.dtype:
                raise NkiValidationError(f"NkiScalar {sym}: an {self.dtype} and an {x.dtype} scalar do not mix; a "
                                         f"scalar's width is fixed when it is loaded")
            return x
        if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
            return NkiScalar(int(x), self.dtype)
        raise NkiValidationError(f"NkiScalar {sym} {x!r}: the other operand is a Python int or an NkiScalar")

    def _arith(self, x, fn, sym, reverse=False):
        o = self._operand(x, sym)
        for v in (self, o):
            v._usable(f"the operand of {sym}")
        a, b = (o, self) if reverse else (self, o)
        return _derived(fn(a.value, b.value), self.dtype, a, b)

    __add__ = lambda self, x: self._arith(x, int.__add__, "+")  # noqa: E731
    __radd__ = lambda self, x: self._arith(x, int.__add__, "+", True)  # noqa: E731
    __sub__ = lambda self, x: self._arith(x, int.__sub__, "-")  # noqa: E731
    __rsub__ = lambda self, x: self._arith(x, int.__sub__, "-", True)  # noqa: E731
    __mul__ = lambda self, x: self._arith(x, int.__mul__, "*")  # noqa: E731
    __rmul__ = lambda self, x: self._arith(x, int.__mul__, "*", True)  # noqa: E731

    def __neg__(self):
        return self._arith(0, int.__sub__, "-", True)

    def _compare(self, x, fn, sym):
        if self.bits == 64:
            raise NkiValidationError(f"NkiScalar {sym}: nl.int64 scalars have no comparison (only +, - and *); "
                                     f"compare 32-bit scalars")
        o = self._operand(x, sym)
        r = _derived(int(fn(self.value, o.value)), self.dtype, self, o)
        r.is_comparison = True
        return r

    __lt__ = lambda self, x: self._compare(x, int.__lt__, "<")  # noqa: E731
    __le__ = lambda self, x: self._compare(x, int.__le__, "<=")  # noqa: E731
    __gt__ = lambda self, x: self._compare(x, int.__gt__, ">")  # noqa: E731
    __ge__ = lambda self, x: self._compare(x, int.__ge__, ">=")  # noqa: E731
    __eq__ = lambda self, x: self._compare(x, int.__eq__, "==")  # noqa: E731
    __ne__ = lambda self, x: self._compare(x, int.__ne__, "!=")  # noqa: E731

    def _usable(self, what):
        if self.is_comparison:
            raise NkiValidationError(f"a comparison of NkiScalars is traced, but its result cannot be used as {what}")

    def __bool__(self):
        raise NkiValidationError("an NkiScalar is computed on device: a Python if or while cannot branch on it; use "
                                 "nl.while_loop or nl.fori_loop")

    def __index__(self):
        self._usable("an index or offset")
        return super().__index__()

    def check_control(self, what):
        self._usable(what)
        if self.bits == 64:
            raise NkiValidationError(f"an nl.int64 scalar cannot be {what}: the loop's compare-and-branch has no "
                                     f"64-bit form; load the bound from an nl.int32 tile")
        super().check_control(what)


def _wrap(value: int, dtype: str) -> int:
    """`value` at a scalar's width: two's complement, wrapping (a 32-bit scalar is never widened)."""
    bits = 64 if dtype == "int64" else 32
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _derived(value, dtype, a, b) -> NkiScalar:
    r = NkiScalar(value, dtype)
    r.poisoned, r.known = a.poisoned or b.poisoned, a.known and b.known
    return r


def scalar_load(src) -> NkiScalar:
    """A scalar from a 1x1 nl.int32 or nl.int64 tensor in SBUF or HBM (NKI 0.7), not truncated."""
    _versions.added("nisa.scalar_load")
    reg = Register(name=f"s{len(core().stream)}")
    issue(Op.REGISTER_LOAD, reg=reg, src=src, wide=True)
    return NkiScalar(reg, src.dtype)


def scalar_store(dst, value) -> None:
    """A scalar into a 1x1 tensor of its own width (NKI 0.7); a Python int is refused (nisa.memset writes one)."""
    _versions.added("nisa.scalar_store")
    if not isinstance(value, NkiScalar):
        raise NkiValidationError(f"scalar_store value {value!r}: an NkiScalar (nisa.scalar_load); a compile-time "
                                 f"constant goes into a tile with nisa.memset")
    value._usable("a stored value")
    if numerics.dtype(dst.dtype).name != value.dtype:
        raise NkiValidationError(f"scalar_store: an {value.dtype} scalar into {dst.name!r} of "
                                 f"{numerics.dtype(dst.dtype).name}; store at the scalar's own width")
    issue(Op.REGISTER_STORE, dst=dst, value=value, wide=True)


def loop_value(i: int, lower, upper) -> Register:
    """What a fori_loop body receives: an NkiScalar (int32) in NKI 0.7 unless a bound is a VirtualRegister, which
    makes it a VirtualRegister (nki.language.fori_loop, 0.7); a VirtualRegister in 0.6."""
    if _versions.target() == "0.6" or any(type(b) is Register for b in (lower, upper)):
        return Register(i, name="i")
    return NkiScalar(i, "int32")


def register_alloc(x=None):
    """A new 32-bit sequencer register, optionally initialised."""
    reg = Register(name=f"r{len(core().stream)}")
    issue(Op.REGISTER_ALLOC, reg=reg, value=0 if x is None else x)
    return reg


def register_move(dst, src):
    issue(Op.REGISTER_MOVE, reg=dst, value=src)


def register_load(dst, src):
    issue(Op.REGISTER_LOAD, reg=dst, src=src)


def register_store(dst, src):
    issue(Op.REGISTER_STORE, dst=dst, value=src)


def core_barrier(data, cores=(0, 1), engine=engine.gpsimd, name=None):
    return issue(Op.CORE_BARRIER, data=data, cores=_ints("core_barrier cores", cores), on_engine=_name(_ENGINE, engine),
                 name=name)


# -- Tensor Indirection: `t.indirect(index)` operands (v4+) -----------------------------------------------------
# The instructions whose operands take an indirect view (each nki.isa page's "Tensor indirection" section), with
# the engine they run on by default.
_INDIRECT = {"tensor_tensor": engine.vector, "tensor_scalar": engine.vector, "tensor_reduce": engine.vector,
             "tensor_copy": engine.vector, "tensor_copy_predicated": engine.vector,
             "tensor_scalar_reduce": engine.vector, "tensor_scalar_cumulative": engine.vector,
             "exponential": engine.vector, "activation": engine.scalar, "activate2": engine.scalar}


def _with_indirection(fn, default):
    """`fn` taking indirect views: each one it reads is gathered into a tile on its engine first, each one it
    writes (dst) is scattered from a tile after; the instruction itself sees plain tiles."""
    import functools
    import inspect

    from trnsim.nki._frontend import ndarray

    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def run(*args, **kwargs):
        if not _indirect(args, kwargs):
            return fn(*args, **kwargs)
        bound = signature.bind_partial(*args, **kwargs)
        found = {k: v for k, v in bound.arguments.items() if isinstance(v, _Indirection)}
        eng = _eng(bound.arguments.get("engine")) or default
        name = bound.arguments.get("name")  # the gathers and scatters are the named call's instructions too
        scatters = []
        for k, ind in found.items():
            tile = ndarray(ind.shape, ind.dtype, ind.base.space.value)
            if k == "dst":
                scatters.append((tile, ind))
            else:
                issue(Op.TI_GATHER, engine=eng, dst=tile, base=ind.base, index=ind.index, num_elem=ind.num_elem,
                      name=name)
            bound.arguments[k] = tile
        out = fn(*bound.args, **bound.kwargs)
        for tile, ind in scatters:
            issue(Op.TI_SCATTER, engine=eng, src=tile, base=ind.base, index=ind.index, num_elem=ind.num_elem,
                  name=name)
        return out
    return run


def _indirect(args, kwargs) -> bool:
    """Whether any argument is an indirect view: loops, not any() over a generator, which the compiled build
    makes an object of at every call."""
    for v in args:
        if type(v) is _Indirection:
            return True
    for v in kwargs.values():
        if type(v) is _Indirection:
            return True
    return False


def _no_indirection(fn):
    """The Tensor engine reads indirect operands in groups of 32 partitions; that is not emulated."""
    import functools

    @functools.wraps(fn)
    def run(*args, **kwargs):
        if _indirect(args, kwargs):
            _refuse_indirection(fn.__name__)
        return fn(*args, **kwargs)
    return run


def _refuse_indirection(name: str):
    raise KernelError(f"{name}: Tensor Indirection (.indirect) on Tensor engine operands is not emulated; the Vector, "
                      f"Scalar and GpSimd instructions take it")


for _fn_name, _fn_engine in _INDIRECT.items():
    globals()[_fn_name] = _with_indirection(globals()[_fn_name], _eng(_fn_engine))
nc_matmul_mx = _no_indirection(nc_matmul_mx)  # nc_matmul refuses indirect operands itself

locate_all(globals())  # after every definition: the names a kernel calls
