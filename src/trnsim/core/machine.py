"""A NeuronCore: its memories, its instruction stream and the executor that checks and runs instructions.

    >>> nc = NeuronCore("trn2")
    >>> a = nc.hbm_tensor(np.ones((128, 64), np.float32), name="a")
    >>> t = nc.tensor((128, 64), "float32", "sbuf", name="t")
    >>> nc.issue(Op.DMA_COPY, dst=t, src=a)

Each `issue` builds one Instruction, checks it (shapes, dtypes, memories, engine, generation), appends
its Record to `stream`, and, unless the core runs in timing-only mode (`values=False`), executes its
numpy semantics at once, as the Triton interpreter runs a kernel eagerly.
"""
from __future__ import annotations

import math
import os
import sys
import weakref

import numpy as np

from trnsim import numerics, specs
from trnsim.core import isa as _isa  # noqa: F401  (registers every instruction)
from trnsim.core.builder import REFERENCE, Builder
from trnsim.core.errors import (NkiDeprecationWarning, ShapeError, SpillWarning, UninitializedError,
                                UninitializedWarning, ValueUnknownError, inside, warn, where, where_call)
from trnsim.core.isa.opcodes import MATMUL, Engine, Op
from trnsim.core.isa.psum import accumulating as psum_accumulating, close as close_psum
from trnsim.core.isa.registry import REGISTRY, Instruction
from trnsim.core import races as _races
from trnsim.core.hoist import Invariants
from trnsim.core.liveness import iterations, next_use, note_uses
from trnsim.core.limits import Budget
from trnsim.core.lnc import Mailbox
from trnsim.core.memory import HBM, TICK, Allocation, Memory, Space
from trnsim.core.tensor import View

TARGET_ENV = "NEURON_PLATFORM_TARGET_OVERRIDE"
# Where spill DMAs come from: the timing model gives each source line a DMA queue, and the compiler's spill
# traffic has queues of its own (the profiler shows two, qSyncSpillReload0 and qVectorSpillReload0), whichever
# kernel line needed it (the instruction's `line` attribute): saves on one, reloads on the other, so a reload
# never waits in line behind the save of another tile.
SPILL_QUEUES = {"save": "spill save (compiler)", "reload": "spill reload (compiler)"}


def resolve_target(target: str | None = None) -> str:
    """The NKI target (trn1|trn2|trn3) from an argument or NEURON_PLATFORM_TARGET_OVERRIDE; default trn2.
    Names and aliases (gen3, inf2, v3) resolve through the catalog (specs.neuroncore)."""
    return specs.neuroncore(str(target or os.environ.get(TARGET_ENV) or "trn2")).target


class Register:
    """A 32-bit sequencer register; `poisoned` when its value came from never-written memory, not `known` when
    it was loaded from memory in a timing-only run (which computes no memory values)."""

    __slots__ = ("value", "poisoned", "known", "name")

    def __init__(self, value=0, poisoned=False, name="", known=True):
        self.value, self.poisoned, self.known, self.name = int(value), poisoned, known, name

    def __repr__(self):
        return f"<register {self.name} = {self.value if self.known else '?'}>"

    def __index__(self):  # a register used as an index or slice bound (dynamic access)
        if not self.known:
            raise ValueUnknownError(f"register {self.name} was loaded from memory, whose values a timing-only run "
                                    f"(values=False) does not compute; it cannot pick an address there")
        return self.value

    def __bool__(self):
        """`while reg:`, the dynamic while loop of NKI 0.6 kernels: runs, with the warning that NKI 0.7 removed it.
        trnsim's own code testing a register for None-ness (`x or default`) sees an object, true as before."""
        caller = sys._getframe(0)
        if caller.f_code.co_name == "__bool__":  # this method's own frame (the compiled build makes none)
            caller = caller.f_back
        if inside(caller.f_code.co_filename):
            return True
        warn("a bare `while reg:` on a register (a dynamic while loop) is deprecated in NKI 0.6 and removed in 0.7; "
             "use nl.while_loop(cond, body)", NkiDeprecationWarning, registry=_DEPRECATED)
        self.check_control("a while condition")
        if self.poisoned:
            raise UninitializedError(f"register {self.name or ''} holds a never-written value and decides a while "
                                     f"condition")
        return self.value != 0

    def check_control(self, what: str) -> None:
        """Refuse this value as control flow (a loop bound, a condition); a register's known value always serves."""
        if not self.known:
            raise ValueUnknownError(f"register {self.name} was loaded from memory, whose values a timing-only run "
                                    f"(values=False) does not compute, and decides {what}")


_DEPRECATED: dict = {}  # deprecation warnings shown, once per kernel line


class NeuronCore:
    """One NeuronCore of a generation (v2 Trn1, v3 Trn2, v4 Trn3) with real SBUF, PSUM and HBM."""

    def __init__(self, target: str | None = None, *, strict: bool = True, values: bool = True, hbm: HBM | None = None,
                 program_id: int = 0, num_programs: int = 1, seed: int = 0, race_check=None,
                 budget: Budget | None = None, builder: Builder | None = None):
        self.target = resolve_target(target)
        self.spec = specs.neuroncore(self.target)
        self.gen = self.spec.version  # for messages; what the core can do is `can(name)`
        self.lnc_configs = specs.chip(self.target).lnc_configs  # logical-core sizes the chip supports
        s = self.spec
        # Timing only: no instruction writes SBUF or PSUM, so their bytes stay as created (never-written).
        self.sbuf = Memory(Space.SBUF, s.partitions, s.sbuf_partition_bytes, s.sbuf_partition_bytes - s.sbuf_reserved_bytes,
                           refill=values)
        self.psum = Memory(Space.PSUM, s.partitions, s.psum_partition_bytes, s.psum_partition_bytes,
                           bank_bytes=s.psum_partition_bytes // s.psum_banks, refill=values)
        self.hbm = hbm if hbm is not None else HBM(s.hbm_bytes)
        # The memories call back into the core (core/memory.py): SBUF tiles that cannot stay are spilled to HBM.
        self.sbuf.spiller, self.sbuf.next_use = _weak(self.spill_save), _weak(self._next_use)
        self.sbuf.keeper = self.psum.keeper = _weak(self.set_aside)
        self.spills = 0  # tiles saved to HBM so far
        self.aside: set[int] = set()  # ids of the expired blocks set aside in HBM (set_aside), not yet back
        # PSUM bytes inside an open matmul accumulation group, as disjoint rectangles (partition, partitions,
        # byte_lo, byte_hi) (isa/psum.py).
        self.psum_open: set = set()
        self.builder = builder or REFERENCE  # the hook points' behaviour (core/builder.py): no value depends on it
        self.strict, self.values = strict, values
        self.program_id, self.num_programs = program_id, num_programs
        self.stream: list = []
        self.budget = budget or Budget()  # bounds the launch (core/limits.py)
        if not values:
            self.budget.shapes_only()
        for m in (self.sbuf, self.psum, self.hbm):  # the machine's memories are bounded by their capacity
            self.budget.exempt(m)
        self.rng = np.random.Generator(np.random.Philox(seed))
        self.rng_states: dict = {}  # generator states that rand_get_state wrote out, by their words
        # Lane accumulator registers of ScalarE (activation reduce) and VectorE (exponential, *_reduce).
        self.accumulators = {e: np.zeros(s.partitions, np.float32) for e in (Engine.SCALAR, Engine.VECTOR)}
        self.accumulator_poison = {e: np.zeros(s.partitions, bool) for e in (Engine.SCALAR, Engine.VECTOR)}
        self._peer = None  # the other core of an LNC 2 pair (peer), weakly
        self.turns = self.barrier = None  # the pair's turn-taking and core barrier (core/lnc.py)
        self.mailbox = Mailbox()
        self._counts: dict[str, int] = {}
        self.scopes: list = []  # the open loop iterations, innermost last (core/liveness.py)
        self.race_check = _races.mode(race_check)  # auto | off | warn | error | order (core/races.py)
        self.races: list = []  # the open affine loops being watched for loop-carried dependencies
        self.affine_order = None  # affine loops' iterations in one of races.ORDERS (race check `order`)
        self.invariants = Invariants()  # loop-invariant instructions the compiler hoists (core/hoist.py)

    @property
    def peer(self) -> NeuronCore | None:
        """The other core of an LNC 2 pair, or None. Held weakly, so a pair is no reference cycle."""
        return self._peer() if self._peer is not None else None

    @peer.setter
    def peer(self, nc: NeuronCore | None) -> None:
        self._peer = weakref.ref(nc) if nc is not None else None

    def _next_use(self, a: Allocation):
        return next_use(self.scopes[-1], a) if self.scopes else None

    def limit(self, name: str) -> int:
        return self.spec.limits[name]

    def can(self, name: str):
        """A capability of this generation from the catalog (specs NeuronCoreSpec.capabilities)."""
        return self.spec.capabilities[name]

    @property
    def bank_bytes(self) -> int:
        return self.psum.bank_bytes

    # -- tensors -----------------------------------------------------------------------------------
    def _name(self, prefix: str) -> str:
        n = self._counts[prefix] = self._counts.get(prefix, 0) + 1
        return f"{prefix}{n}"

    def tensor(self, shape, dtype, space="sbuf", name: str | None = None, address=None, kind: str | None = None) -> View:
        """Allocate an on-chip (SBUF/PSUM) tensor, or an HBM one, filled as never-written."""
        dt, shape = numerics.dtype(dtype), tuple(map(int, shape))
        if type(space) is not Space:
            space = getattr(space, "value", space)
            space = _SPACES.get(space) or Space(space)  # Space() refuses a name that is no memory
        loc = where()
        name = name or self._name(space._value_)
        if space is _HBM:
            return self.hbm_tensor(shape, dt, name=name, kind=kind or "hbm", location=loc)
        if len(shape) < 2:
            raise ShapeError(f"on-chip tensor {name!r} {list(shape)}: needs at least 2 dims (partition dim first)")
        mem = self.sbuf if space is _SBUF else self.psum
        nbytes = math.prod(shape[1:]) * dt.itemsize
        alloc = mem.allocate(shape[0], nbytes, dt.itemsize, name, kind or space._value_, loc, address, self.spec.limits["pmax"])
        alloc.shape = shape
        if address is None and self.scopes:  # placed tensors (address=) are the program's to manage
            self.scopes[-1].add(alloc)
        v = View.whole(alloc, dt, shape)
        if mem is self.psum:
            close_psum(self, v)
        return self.builder.tensor(v)

    def hbm_tensor(self, init, dtype=None, name: str | None = None, kind="hbm", location=None) -> View:
        """An HBM tensor: from a numpy array (its values, written) or a shape (never-written)."""
        if isinstance(init, np.ndarray):
            dt = numerics.dtype(dtype or init.dtype)
            data, shape = np.ascontiguousarray(init, dtype=dt.np), init.shape
        else:
            dt, data, shape = numerics.dtype(dtype), None, tuple(int(x) for x in init)
        nbytes = max(1, math.prod(shape)) * dt.itemsize
        alloc = self.hbm.allocate(nbytes, name or self._name("hbm"), kind, location or where(), data)
        alloc.shape = shape
        return self.builder.tensor(View.whole(alloc, dt, shape))

    def loop(self, indices, affine: str | None = None):
        """Iterate `indices` as a kernel loop: tensors made in an iteration die with it (core/liveness.py).
        An `affine` loop promises independent iterations: it is watched for loop-carried dependencies
        (core/races.py). `affine="error"` (a compiler that reorders them) is watched by default, `"warn"` (one
        that keeps them in order) only when a race check is asked for; a dependency found is a warning naming
        both lines, and refused with race check `error` or in strict mode (races.how)."""
        if affine and self.affine_order:
            indices = _races.reorder(indices, self.affine_order)
        if not affine or self.race_check in ("off", "order") or (self.race_check == "auto" and affine == "warn"):
            return iterations(self, self.builder.loop(self, indices))
        return _races.watch(self, iterations(self, indices), _races.how(self.race_check))

    # -- execution -------------------------------------------------------------------------------
    def issue(self, op: Op, /, engine=None, **kw) -> Instruction:
        """Check one instruction, record it in the stream and (with values on) execute it."""
        return self.submit(op, engine, kw)

    def submit(self, op: Op, engine, kw: dict) -> Instruction:
        """`issue` with the operands and attributes in one dict (front ends pass theirs on, not repacked)."""
        d = REGISTRY[op]
        operands, attrs, spilled = {}, {}, None
        for k, v in kw.items():
            if isinstance(v, View):
                operands[k] = t = v  # (the compiled build reads a typed view's fields directly)
                if t.alloc.spilled or (t.gather_rows is not None and isinstance(t.gather_rows[0], View)
                                       and t.gather_rows[0].alloc.spilled):
                    spilled = True
            else:
                attrs[k] = v
        if spilled:
            self._reload_operands(op.value, operands)
        tick = next(TICK)
        for k, t in operands.items():  # least recently used first, when tiles must be spilled
            a = t.alloc
            a.used = tick
            if k in d.writes:
                a.saved = a.consumed = False
        if self.scopes and "spill" not in attrs:
            scope = self.scopes[-1]
            scope.step += 1
            if self.spills:  # when tiles were used, for the spill policy's next-use prediction
                note_uses(scope, [v.alloc for v in operands.values() if v.alloc.memory is self.sbuf])
        location, site = attrs.pop("_location", None), None
        if location is None:
            if d.engines[0] is _DMA:  # its queue follows its call site (core/timing/scheduler.py)
                location, site = where_call()
            else:
                location = where()
        ins, psum, sig, placed = self.builder.checked(self, d, op, engine, operands, attrs, location)
        if d.state is not None:
            d.state(ins, self)
        # not None: the compiler computes it once, at stream index `first` (core/hoist.py)
        first = self.invariants.check(ins, self.scopes, len(self.stream))
        self.invariants.wrote(ins)
        evicts = psum and op not in MATMUL  # another engine touching PSUM
        self.stream.append(ins.record(len(self.stream), sig, placed, site, first))
        if self.races and "spill" not in attrs:  # a spill moves a tile, not its values: no access of the kernel's
            boxes = {n: (v, _races.box(v)) for n, v in operands.items()}
            for w in self.races:
                w.record(ins, boxes)
        if self.values or d.control:
            if evicts:
                self.builder.flush(self)
            d.semantics(ins, self)
        if evicts:  # closes the accumulation groups of the regions it touches
            for k, t in operands.items():
                if t.space is _PSUM:
                    close_psum(self, t)
                    a = t.alloc
                    written = k in d.writes
                    for w in d.writes:  # a loop, not any(): the compiled build has no closures in this method
                        if w in operands and operands[w].alloc is a:
                            written = True
                    if not written:
                        # read out, no sum still accumulating in it: PSUM may give its bank away (Memory._room)
                        a.consumed = not psum_accumulating(self, (a.p0, a.partitions, a.b0, a.b0 + a.nbytes))
        return ins

    # -- spilling (core/memory.py) ------------------------------------------------------------------
    def spill_save(self, a: Allocation) -> None:
        """Save SBUF tile `a` to its HBM scratch copy before its bytes go to another tile: one DMA, issued as
        the compiler would (attrs spill="save"); none when the copy is current or the tile was never written."""
        self._count_spill(a)
        if a.saved:
            return
        if a.scratch is None:
            a.scratch = self.hbm_tensor((a.partitions, a.nbytes), "uint8", name=f"{a.name}.spill", kind="spill")
        self.issue(Op.DMA_COPY, dst=a.scratch, src=_bytes(a), spill="save", line=where(),
                   _location=SPILL_QUEUES["save"])
        a.saved = True

    def set_aside(self, a: Allocation) -> None:
        """Keep the bytes of expired block `a` (Memory._reclaim) in its HBM scratch copy, with no DMA: the
        compiler, seeing the later use an eager trace cannot, keeps such a block where it is (or spills it),
        so only the reload before that use (if any) stands for the traffic, and counts as a spill. Its
        never-written bytes stay never-written."""
        self.aside.add(a.id)
        if a.saved:
            return
        if a.memory is self.psum:  # matmul products owed to PSUM land first
            self.builder.flush(self)
        tile = _bytes(a)
        a.scratch = self.hbm_tensor((a.partitions, a.nbytes), "uint8", name=f"{a.name}.spill", kind="spill")
        if self.values:
            a.scratch.store(tile.array().copy(), mask=tile.mask())
        a.saved = True

    def _count_spill(self, a: Allocation) -> None:
        """One more spill; the first one warns (SpillWarning), at the kernel line that needed the room."""
        if not self.spills:
            at = where()
            warn(f"SBUF cannot hold the live tiles at {at}: tiles are spilled to HBM and reloaded before their next "
                 f"use (first: {a.name!r} from {a.location}), costing DMA time; the profile counts the spills",
                 SpillWarning, at)
        self.spills += 1

    def _reload_operands(self, what: str, operands: dict) -> None:
        """Bring spilled operands of one instruction back into SBUF, each with a reload DMA, largest first;
        the other operands stay (pinned), so the instruction is refused only if its operands cannot fit
        together. An operand spilled to place another afresh (core/memory.py: Memory.restore) comes back
        too; one brought back is kept, so each comes back once."""
        views = list(operands.values())
        views += [v.gather_rows[0] for v in views if v.gather_rows is not None and isinstance(v.gather_rows[0], View)]
        allocs = list({id(v.alloc): v.alloc for v in views}.values())
        pinned, kept = frozenset(a.id for a in allocs), set()
        what = f"{what} ({', '.join(repr(x.name) for x in views)})"
        while todo := [a for a in allocs if a.spilled]:
            a = max(todo, key=lambda t: t.nbytes)
            a.memory.restore(a, pinned, what, frozenset(kept))
            kept.add(a.id)
            if a.id in self.aside:  # an expired block set aside (set_aside), used again
                self.aside.discard(a.id)
                self._count_spill(a)
            if a.scratch is not None and a.memory is self.psum:  # no DMA reaches PSUM: through SBUF, then a copy
                # (in uint16 words where they fit, which the engines copy exactly)
                word = "uint16" if a.nbytes % 2 == 0 else "uint8"
                bounce = self.tensor(_bytes(a, word).shape, word, "sbuf", name=f"{a.name}.reload", kind="spill")
                self.issue(Op.DMA_COPY, dst=bounce, src=_bytes(a.scratch.alloc, word, a.partitions), spill="reload",
                           line=where(), _location=SPILL_QUEUES["reload"])
                self.issue(Op.TENSOR_COPY, dst=_bytes(a, word), src=bounce, spill="reload", line=where())
            elif a.scratch is not None:
                self.issue(Op.DMA_COPY, dst=_bytes(a), src=a.scratch, spill="reload", line=where(),
                           _location=SPILL_QUEUES["reload"])
            a.saved = True  # the scratch copy holds its bytes (or it was never written)

    def sync(self) -> None:
        """Finish deferred work so memories hold final values (core/builder.py)."""
        self.builder.sync(self)

    def host_read(self, view: View) -> np.ndarray:
        """The values of `view` as the host sees them now (device_print): deferred work lands first."""
        if view.space is Space.PSUM:
            self.builder.flush(self)
        if view.alloc.spilled:
            self._reload_operands("a host read", {"src": view})
        return view.array()

    def never_written(self, what: str, src: View, mask: np.ndarray, ins_loc: str | None = None):
        """Never-written values reached HBM or control flow: raise (strict) or warn."""
        idx = np.argwhere(mask)
        rows = np.unique(idx[:, 0]) if idx.ndim == 2 and idx.shape[1] else np.array([0])
        dim = "partitions" if src.on_chip else "rows"
        sample = ", ".join(str(list(map(int, i))) for i in idx[:3])
        msg = (f"never-written values of {src.name!r} {what}: {int(mask.sum())} of {mask.size} elements, "
               f"{dim} {_ranges(rows)} (e.g. {sample})")
        if self.strict:
            raise UninitializedError(msg, ins_loc)
        at = ins_loc or where()
        warn(f"{msg} at {at}", UninitializedWarning, at)

    def read_register(self, reg, what: str) -> int:
        """A register's value for control flow (loop bounds, conditions); never-written values are errors."""
        if isinstance(reg, Register):
            reg.check_control(what)
            if reg.poisoned:
                msg = f"register {reg.name or ''} holds a never-written value and decides {what}"
                if self.strict:
                    raise UninitializedError(msg)
                warn(msg, UninitializedWarning)
            return reg.value
        return int(reg)


_SPACES = {s.value: s for s in Space}  # Space(name) runs Enum's lookup in Python; tensors are made often
# Members read at every issue: an Enum class's attribute goes through its metaclass's __getattr__ hook (Python 3.11)
_DMA, _PSUM, _HBM, _SBUF = Engine.DMA, Space.PSUM, Space.HBM, Space.SBUF


def _bytes(a: Allocation, word="uint8", partitions=None) -> View:
    """A tile's bytes as [partitions, words] of uint8 (or `word`): what a spill moves, whatever the tile's
    dtype; `partitions` rows of an HBM scratch copy."""
    rows = partitions or a.partitions
    return View.whole(a, word, (rows, a.partitions * a.nbytes // rows // numerics.dtype(word).itemsize))


def _weak(method):
    """A core's `method` as a callback that does not keep the core alive: a finished launch is then freed by
    reference counting alone, with no cycle for the collector to find."""
    ref = weakref.WeakMethod(method)
    return lambda *args: ref()(*args)


def _ranges(values) -> str:
    values = [int(v) for v in values]
    out, start = [], None
    for i, v in enumerate(values):
        if start is None:
            start = v
        if i + 1 == len(values) or values[i + 1] != v + 1:
            out.append(f"{start}" if start == v else f"{start}..{v}")
            start = None
    return ", ".join(out[:8]) + (" ..." if len(out) > 8 else "")
