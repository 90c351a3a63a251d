"""One place per instruction: `define(op, engines, check, semantics, cost)` registers its three rules.

- `check(ins, nc)` looks only at shapes, dtypes, memories, engine and generation (no data), so a
  timing-only run can use it.
- `semantics(ins, nc)` computes values with numpy through trnsim.numerics, and the never-written mask
  with the instruction's own dependence rule.
- `cost(rec, spec)` reads only the recorded regions and attributes and returns the work the timing model
  prices (core/isa/work.py: streamed elements, PE-array work or DMA bytes, each with its performance class):
  all the clock knows of the instruction besides its operands' layouts.

`Instruction` is the live form (operand views, used while checking and executing); `Record` is what the
core's instruction stream keeps: regions, not views, so recording never keeps a tensor alive.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from trnsim import numerics, specs
from trnsim.core.errors import (DTypeError, FreeSizeError, GenerationError, KernelError, MemorySpaceError,
                                OperandTypeError, OutOfScopeError, PartitionLimitError, ShapeError)
from trnsim.core.isa.alu import op_name
from trnsim.core.isa.opcodes import Engine, Op
from trnsim.core.isa.work import Stream
from trnsim.core.memory import Space
from trnsim.core.tensor import Region, View, region_at

AFTER = "after"  # Record.attrs key: the depends_on edges, (producer's stream index, a semaphore wait?) each
NAME = "name"  # Record.attrs key: the `name=` an nki.isa call was given, which `with_schedule` edges name


def add_after(rec: Record, edges: tuple) -> None:
    """Add ordering edges ((producer's stream index, a semaphore wait?) each) to `rec`'s attrs[AFTER], in a
    dict of its own: records stamped from one loop iteration share their template's attributes."""
    rec.attrs = {**rec.attrs, AFTER: rec.attrs.get(AFTER, ()) + edges}


def give_name(records, name: str) -> None:
    """Give `records` (the instructions one named call lowered to, a collective's say) the call's `name=`."""
    for rec in records:
        rec.attrs = {**rec.attrs, NAME: name}


class Record:
    """One instruction in the core's stream, as the timing model replays it.

    index: its position in the stream; placed: operand -> View.placement(), whose regions are made when
    first asked for; attrs: the instruction's own parameters; sig: the number of its signature in its core
    when a builder numbers them (the same number, the same layouts and attributes but the name, so the same
    check verdict and cost), or None: the speed layer's memo key (core/builder.py: Builder.checked).

    The compiler's decisions about it, which the clock reads: site, the DMA statement it came from (its
    call's column on `location`'s line: the compiler gives each statement its own queue); hoisted, the stream
    index of the earlier instance that computed it once when it is loop-invariant (core/hoist.py), else None;
    accumulated, whether a matmul added into PSUM (so it read its destination too); spill, "save" or "reload"
    for a transfer the compiler inserted to spill a tile (core/memory.py), else None."""

    __slots__ = ("index", "op", "engine", "placed", "writes", "attrs", "location", "sig", "_regions", "site",
                 "hoisted", "accumulated", "spill")

    def __init__(self, index: int, op: Op, engine: Engine, placed: dict[str, tuple], writes: tuple[str, ...],
                 attrs: dict, location: str, sig: int | None = None, site=None, hoisted: int | None = None,
                 accumulated: bool = False, spill: str | None = None):
        self.index, self.op, self.engine, self.placed, self.writes = index, op, engine, placed, writes
        self.attrs, self.location, self.sig, self._regions = attrs, location, sig, None
        self.site, self.hoisted, self.accumulated, self.spill = site, hoisted, accumulated, spill

    def __repr__(self):
        return f"Record({self.index}, {self.op.value} on {self.engine.value}, {self.location})"

    @property
    def operands(self) -> dict[str, Region]:
        ops = self._regions
        if ops is None:
            ops = self._regions = {n: region_at(*p) for n, p in self.placed.items()}
        return ops

    def regions(self, shared: dict) -> dict[str, Region]:
        """`operands`, taking each Region from `shared` (placement -> Region) when an earlier record of the
        stream had the same placement: the speed layer's region cache."""
        ops = self._regions
        if ops is None:
            ops = {}
            for n, p in self.placed.items():
                r = shared.get(p)
                if r is None:
                    r = shared[p] = region_at(*p)
                ops[n] = r
            self._regions = ops
        return ops

    @property
    def reads(self) -> tuple[str, ...]:
        """Operands read: the sources, and the destination of a matmul that accumulated into PSUM."""
        return tuple(n for n in self.operands if n not in self.writes or self.accumulated)


class Instruction:
    """An instruction while it is checked and executed: operand views plus static attributes.

    Operands are also plain attributes (ins.dst), the common and quick case; attributes are reached the
    same way (ins.perf_mode) through __getattr__.
    """

    def __init__(self, op: Op, engine: Engine, operands: dict[str, View], attrs: dict, location: str,
                 writes: tuple[str, ...] = ("dst",)):
        vars(self).update(operands)
        self.op, self.engine, self.operands, self.attrs, self.location, self.writes = op, engine, operands, attrs, location, writes
        self._record = None  # its Record once the core recorded it, where depends_on adds its edges

    def __getattr__(self, name):  # the attributes (operands are in the instance's dict)
        if name != "attrs":
            attrs = self.attrs
            if attrs is not None and name in attrs:
                return attrs[name]
        raise AttributeError(name)

    def record(self, index: int, sig: int | None = None, placed: dict | None = None, site=None,
               hoisted: int | None = None) -> Record:
        """The stream's record; with a signature (whose attributes all hash, so none is an array) the
        attributes are copied as they are. `placed`: the operands' placements, when the caller has them;
        `site` and `hoisted`: the compiler's decisions the core made (Record). The live instruction's
        `accumulated` (set by the PSUM state) and `spill` (asked by the core) leave the attributes for the
        record's fields."""
        attrs = dict(self.attrs) if sig is not None else {k: v for k, v in self.attrs.items() if not isinstance(v, np.ndarray)}
        accumulated = attrs.pop("accumulated", False)
        spill = attrs.pop("spill", None)
        if placed is None:
            placed = {n: v.placement() for n, v in self.operands.items()}
        rec = Record(index, self.op, self.engine, placed, self.writes, attrs, self.location, sig, site, hoisted,
                     accumulated, spill)
        self._record = rec
        return rec

    def depends_on(self, *producers, kind=None) -> Instruction:
        """nki.isa.NkiInstruction.depends_on: this instruction runs after each producer, an edge the compiler's
        scheduler keeps (the timing model reads it from the record's attrs[AFTER]). `kind` "runtime" (the
        default, as before kinds existed) is a semaphore wait; "schedule" orders issue alone, so on another
        engine the two may overlap. Returns self, so calls chain."""
        runtime = waits_at_runtime(kind, "runtime", "depends_on", self.location)
        rec = self._record
        for p in producers:
            before = p._record if isinstance(p, Instruction) else None
            if before is None or rec is None:
                raise KernelError(f"{self.location}: depends_on takes instructions an nki.isa call returned; got "
                                  f"{type(p).__name__}")
            if before.index >= rec.index:
                raise KernelError(f"{self.location}: depends_on({p.op.value} at {p.location}) names a later "
                                  f"instruction: trnsim keeps edges that point back in program order (the producer "
                                  f"issued first)")
            add_after(rec, ((before.index, runtime),))
        return self


def waits_at_runtime(kind, default: str, what: str, location: str) -> bool:
    """Whether an edge of nki.isa.dependency `kind` (None: `default`) is a runtime one, a semaphore wait, rather
    than a schedule one, issue order alone."""
    name = str(getattr(kind, "value", kind) or default)
    if name not in ("runtime", "schedule"):
        raise KernelError(f"{location}: {what} kind must be nki.isa.dependency.runtime or .schedule; got {kind!r}")
    return name == "runtime"


class OpDef:
    """One instruction's rules, as `define` registers them.

    needs: the catalog capability the instruction needs; pick: chooses the default engine from the operands,
    when it depends on them; control: sequencer state (registers), whose semantics run in timing-only mode
    too. `check` reads only the operands' layouts (placement, dtype, shape, strides), the attributes and the
    core's catalog facts, so with `pure` its verdict can be memoised (core/builder.py); `state` is the part of
    checking that changes the core's state (PSUM accumulation groups) and runs at every issue."""

    __slots__ = ("op", "engines", "check", "semantics", "cost", "writes", "needs", "pick", "control", "pure", "state")

    def __init__(self, op: Op, engines: tuple[Engine, ...], check: Callable, semantics: Callable, cost: Callable,
                 writes: tuple[str, ...] = ("dst",), needs: str | None = None, pick: Callable | None = None,
                 control: bool = False, pure: bool = False, state: Callable | None = None):
        self.op, self.engines, self.check, self.semantics, self.cost = op, engines, check, semantics, cost
        self.writes, self.needs, self.pick, self.control, self.pure, self.state = writes, needs, pick, control, pure, state

    def __repr__(self):
        return f"OpDef({self.op.value})"


REGISTRY: dict[Op, OpDef] = {}


def define(op: Op, engines, check, semantics, cost, writes=("dst",), needs=None, pick=None, control=False,
           pure=False, state=None) -> OpDef:
    """Register an instruction's rules together; the first engine is its default."""
    engines = tuple(engines) if isinstance(engines, (tuple, list)) else (engines,)
    REGISTRY[op] = OpDef(op, engines, check, semantics, cost, tuple(writes), needs, pick, control, pure, state)
    return REGISTRY[op]


# -- shared check helpers (data-free) -----------------------------------------------------------------
# parameters that take a tile wherever an instruction has them (register instructions aside); a value of
# another kind there is refused by name before any rule reads it as a tile
TILE_PARAMS = frozenset({"dst", "src", "data", "data0", "data1", "data2", "stationary", "moving", "reduce_res",
                         "predicate", "on_true_tile", "val_dst", "idx_dst", "src_buffer", "index", "indices",
                         "segment_ids", "stationary_scale", "moving_scale", "dst_scale", "dst_idx", "vals",
                         "src_seeds", "src0", "src1", "src2", "src3", "on_true"})
OPTIONAL_TILES = frozenset({"reduce_res", "dst_idx"})  # None: not given
TILE_OR_NUMBER = frozenset({(Op.TENSOR_COPY_PREDICATED, "src")})  # a number there: every element
# parameters that take a number (or a tile, which is an operand then); None where the instruction has no such stage
SCALAR_PARAMS = frozenset({"operand0", "operand1", "imm0", "imm1", "value", "bound0", "bound1", "on_false_value",
                           "scale", "relu_param", "prob", "max_value", "reduce_init", "padding_val", "range_start", "min", "max", "initial",
                           "on_false", "imm"})
REQUIRED_SCALARS = frozenset({"operand0", "imm0", "value", "bound0", "bound1", "prob", "min", "max", "initial",
                              "on_false", "imm"})
INT_PARAMS = frozenset({"offset", "channel_multiplier", "num_elem_per_idx", "num_valid_indices"})  # 32-bit integers
OPTIONAL_INTS = frozenset({"num_valid_indices"})  # None: not given


_OP0_UNARY = frozenset({Op.TENSOR_SCALAR, Op.TENSOR_SCALAR_REDUCE})  # where square / relu as op0 are v4's


def new_operator_check(ins, nc):
    """The ALU operators NeuronCore-v4 added (NKI 0.4.0 release notes): abs_max and abs_min wherever an ALU
    operator is taken, and square and relu as the op0 of tensor_scalar and tensor_scalar_reduce."""
    for key in ("op", "op0", "op1", "reduce_op"):
        name = op_name(ins.attrs[key]) if key in ins.attrs else None
        rule = ("abs_max_ops" if name in ("abs_max", "abs_min") else
                "square_relu_op0" if name in ("square", "relu") and key == "op0" and ins.op in _OP0_UNARY else None)
        if rule and not nc.can(rule):
            raise GenerationError(f"{ins.op.value}: {key}={name} needs {specs.having(rule)} (abs_max and abs_min, and "
                                  f"square and relu as a tensor_scalar op0, are trn3 operators); this core is "
                                  f"v{nc.gen} ({nc.spec.target})")


def _number(v) -> bool:
    """A Python or numpy number, or a register or scalar holding one (what converts to a float or an index)."""
    return hasattr(type(v), "__float__") or hasattr(type(v), "__index__")


def generic_check(d: OpDef, ins: Instruction, nc) -> bool:
    """Rules every instruction obeys: generation, engine, partitions, engine-memory wiring, dtypes, free sizes.
    Returns whether an operand is in PSUM."""
    for name, v in ins.attrs.items():
        if name in TILE_PARAMS and (v is not None or name not in OPTIONAL_TILES) and not (
                (d.op, name) in TILE_OR_NUMBER and _number(v)):
            raise OperandTypeError(f"{_what(d, name)} is a tile (an nl.ndarray or a view of one); got "
                                   f"{type(v).__name__} {str(v)[:40]!r}")
        if name in SCALAR_PARAMS and not _number(v) and (v is not None or name in REQUIRED_SCALARS):
            raise OperandTypeError(f"{_what(d, name)} is a number or a tile; got {type(v).__name__} {str(v)[:40]!r}")
        if name in INT_PARAMS and not (v is None and name in OPTIONAL_INTS) and not (_number(v) and math.isfinite(float(v)) and float(v).is_integer()
                                       and abs(float(v)) < 2**31):
            raise OperandTypeError(f"{_what(d, name)} is a 32-bit integer; got {type(v).__name__} {str(v)[:40]!r}")
        if name == "reg" and not (hasattr(v, "poisoned") and hasattr(v, "known")):
            raise OperandTypeError(f"{_what(d, 'dst')} is a register (nisa.register_alloc); got {type(v).__name__} "
                                   f"{str(v)[:40]!r}")
    if d.needs and not nc.can(d.needs):
        raise GenerationError(f"{d.op.value} needs {specs.having(d.needs)}; this core is v{nc.gen} ({nc.spec.target})")
    new_operator_check(ins, nc)
    if ins.engine not in d.engines:
        raise MemorySpaceError(f"{d.op.value} runs on {'/'.join(e.value for e in d.engines)}, not on engine {ins.engine.value}")
    limits, eng = nc.spec.limits, ins.engine
    pmax = limits["pmax"]
    reads, writes, dtypes = nc.spec.wiring[eng._value_]  # the catalog's engine <-> memory wiring and dtypes
    lanes, psum = eng in _LANE_ENGINES, False
    for name, v in ins.operands.items():
        if v.alloc.evicted:
            a = v.alloc
            raise OutOfScopeError(f"{_what(d, name)}: tile {a.name!r} (made at {a.location}) is used after the loop "
                                  f"iteration that made it ended, and its {a.memory.space.value} bytes now hold other "
                                  f"tensors; a tile lives through its own iteration only: allocate it before the loop "
                                  f"and write into it")
        space = v.alloc.memory.space
        psum = psum or space is _PSUM
        if v.on_chip and v.shape[0] > pmax:
            raise PartitionLimitError(f"{_what(d, name)} ({v.name!r} {list(v.shape)}): partition dim {v.shape[0]} "
                                      f"exceeds pmax {pmax}")
        allowed = writes if name in ins.writes else reads
        if eng is _DMA and space is _PSUM:
            raise MemorySpaceError(f"{_what(d, name)}: DMA cannot {'write' if name in ins.writes else 'read'} PSUM "
                                   f"({v.name!r}); copy PSUM to SBUF with tensor_copy first")
        if space._value_ not in allowed:
            verb = "write" if name in ins.writes else "read"
            raise MemorySpaceError(f"{_what(d, name)}: the {eng.value} engine cannot {verb} {space.value} ({v.name!r}); "
                                   f"it {verb}s {'/'.join(sorted(allowed))}")
        if dtypes is not None and v.dtype.name not in dtypes:
            raise DTypeError(f"{_what(d, name)}: dtype {v.dtype.name} is not supported by the {eng.value} engine on "
                             f"v{nc.gen}; supported: {', '.join(sorted(dtypes))}")
        if lanes and v.on_chip:
            key = "vector_psum_fmax" if space is _PSUM else "vector_sbuf_fmax"
            if v.free_size > limits[key]:
                raise FreeSizeError(f"{_what(d, name)}: free size {v.free_size} exceeds {limits[key]} ({key}) for "
                                    f"{eng.value}-engine access to {space.value}")
    return psum


_LANE_ENGINES = (Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD)
# Members read at every check: an Enum class's attribute goes through its metaclass's __getattr__ hook (Python 3.11)
_DMA, _PSUM = Engine.DMA, Space.PSUM


# Instructions the compiler places by workload when the kernel names no engine (nki.isa.tensor_copy,
# nki.isa.memset: engine=unknown, "the compiler selects the best engine based on engine workload")
BY_WORKLOAD = frozenset({Op.TENSOR_COPY, Op.MEMSET})


def workload_engines(d: OpDef, ins: Instruction, nc) -> tuple[Engine, ...] | None:
    """The engines, in `d.engines` order, that a compiler free to choose may give `ins` (issued with no
    engine, checked on its default `ins.engine`): those whose catalog wiring, dtypes and limits take these
    operands (its checks pass with the engine swapped in) and that leave the same bits. ScalarE
    converts through FP32 even between equal dtypes (nki.isa.tensor_copy), so it is left out where that
    round trip is not exact (32-bit integers, packed types). A copy the compiler wrote itself (`lowered`:
    nl.copy, an assignment out of PSUM, an inserted cast) may also go to NeuronCore-v2's ScalarE, as the
    activation copy it emits there, checked as one (`activation_copy`). None when only the default can run it."""
    if d.op not in BY_WORKLOAD:
        return None
    default, found = ins.engine, []
    for eng in d.engines:
        if eng is not default:
            if eng is Engine.SCALAR and not all(_through_fp32(v.dtype) for v in ins.operands.values()):
                continue
            v2_act = activation_copy(d.op, eng, nc.spec)
            if v2_act and not ins.attrs.get("lowered"):
                continue  # a tensor_copy the kernel asked for runs on its documented engines (v2: Vector, GpSimd)
            ins.engine = eng
            try:
                if v2_act:
                    act = Instruction(Op.ACTIVATION, eng, {"dst": ins.dst, "data": ins.src}, {"op": "copy"},
                                      ins.location, REGISTRY[Op.ACTIVATION].writes)
                    generic_check(REGISTRY[Op.ACTIVATION], act, nc)
                    REGISTRY[Op.ACTIVATION].check(act, nc)
                else:
                    generic_check(d, ins, nc)
                    d.check(ins, nc)
            except KernelError:
                continue
            finally:
                ins.engine = default
        found.append(eng)
    return tuple(found) if len(found) > 1 else None


def activation_copy(op: Op, engine: Engine, spec) -> bool:
    """Whether the compiler makes a copy on `engine` an activation(op=copy): NeuronCore-v2's Scalar engine has
    no tensor_copy, and copies with an activation, through FP32 (nki.isa.tensor_copy). Only the compiler's own
    copies take that path (workload_engines); a kernel that names the Scalar engine there is refused (the
    tensor_copy check)."""
    return op is Op.TENSOR_COPY and engine is Engine.SCALAR and not spec.capabilities["scalar_tensor_copy"]


def _through_fp32(dt) -> bool:
    """A value of `dt` comes back with the same bits from FP32: floats of up to 32 bits, integers of up to 16."""
    return not dt.is_packed and (dt.is_float or (dt.is_int and dt.itemsize <= 2) or dt.name == "bool_")


def workload_engine(choices: tuple[Engine, ...], ends: list[float]) -> Engine:
    """The engine a list-scheduling compiler gives an instruction it may place on any of `choices`: the one
    on which it would end first given the work already placed (`ends`: per choice, when its queue frees plus
    the instruction's time there), ties to the earlier in `choices` (VectorE first). Deterministic, and
    values do not depend on it."""
    best, at = 0, ends[0]
    for k in range(1, len(ends)):
        if ends[k] < at:
            best, at = k, ends[k]
    return choices[best]


def _what(d: OpDef, name: str) -> str:
    return f"{d.op.value} operand {name!r}"


def same_partitions(ins: Instruction, *names):
    ps = {n: ins.operands[n].partitions for n in names if n in ins.operands}
    if len(set(ps.values())) > 1:
        raise ShapeError(f"{ins.op.value}: partition dims differ: " + ", ".join(f"{n}={p}" for n, p in ps.items()))


def same_free(ins: Instruction, *names):
    fs = {n: ins.operands[n].free_size for n in names if n in ins.operands}
    if len(set(fs.values())) > 1:
        raise ShapeError(f"{ins.op.value}: elements per partition differ: " + ", ".join(f"{n}={f}" for n, f in fs.items()))


# -- shared semantics helpers ----------------------------------------------------------------------
def f32(v: View) -> np.ndarray:
    """Elements as float32 (engines compute in FP32 with free casts on input)."""
    a = v.array()
    if v.dtype.is_packed:
        raise DTypeError(f"{v.name!r}: packed {v.dtype.name} cannot be read as numbers by this instruction")
    return a.astype(np.float32) if a.dtype != np.float32 else a


def put(v: View, values, mask=None) -> None:
    """Cast `values` to `v`'s dtype (RNE or stochastic per numerics) and write them, with their mask."""
    values = np.asarray(values)
    if values.dtype.kind in "iu" and v.dtype.is_int:
        values = values.astype(v.dtype.np)  # integer results keep their low bits (bit-pattern ops)
    elif values.dtype != v.dtype.np or v.dtype.name == "tfloat32":
        values = numerics.cast(values, v.dtype)
    v.store(np.broadcast_to(_fit(values, v.shape), v.shape),
            None if mask is None else np.broadcast_to(_fit(np.asarray(mask), v.shape), v.shape))


def _fit(a: np.ndarray, shape) -> np.ndarray:
    """`a` in `shape` when it holds as many elements (same order), else as is (to broadcast)."""
    return a.reshape(shape) if a.size == math.prod(shape) else a


def pf(v: View) -> np.ndarray:
    """Elements as float32 [partitions, free] (engines compute in FP32 with free casts on input)."""
    return f32(v).reshape(v.partitions, -1)


def masks(shape, *views) -> np.ndarray | None:
    """OR of the never-written masks of views, each as [P, F] broadcast to `shape`; None when all are clean."""
    out = None
    for v in views:
        if not isinstance(v, View) or not v.poisoned():
            continue
        m = np.broadcast_to(v.mask().reshape(v.partitions, -1), shape)
        out = m if out is None else (out | m)
    return out


# -- shared cost helpers ---------------------------------------------------------------------------
def stream_cost(rec: Record, spec, inputs=None, factor=1.0, per_memory=False, vector_mode=None) -> Stream:
    """Work of an engine instruction that streams its input through the lanes (reference 1.12).

    With `per_memory`, inputs read from different memories stream side by side: SBUF and PSUM each
    have their own read interface, so a two-input op with one input in PSUM costs ~N, not ~2N cycles
    (nki.isa tensor_tensor cost note, reference 1.12). `vector_mode`: the instruction's own class of the
    Vector engine's perf modes ("copy": one tensor streamed as a copy; "two_tensor": two tensors combined),
    where it runs on that engine. By default every tensor read streams, save a per-partition scalar (one
    element per partition against more in the first input: tensor_scalar's operand0/operand1 vectors), which
    the engine reads once and broadcasts along the free dims at no cost of its own (reference 1.12: a
    tensor_scalar is a one-input instruction; the nki.isa cost notes of tensor_scalar_reduce and
    scalar_tensor_tensor count N, resp. 2N for the two full tensors, with operand0 a [P, 1] tile)."""
    srcs = [r for n, r in rec.operands.items() if n not in rec.writes] or list(rec.operands.values())
    first = srcs[0]
    n = math.prod(first.shape[1:]) if first.space != "hbm" else math.prod(first.shape)
    if inputs is None:
        inputs = sum(1 for r in srcs if r is first or n <= 1 or r.space == "hbm" or math.prod(r.shape[1:]) > 1)
    elif per_memory and len(srcs) > 1:
        inputs = max(sum(r.space == s for r in srcs) for s in {r.space for r in srcs})
    eng = rec.engine
    perf = (vector_mode or "vector") if eng is Engine.VECTOR else "scalar" if eng is Engine.SCALAR else None
    return Stream(eng.value, first.partitions, n, inputs, factor, first.dtype, perf)
