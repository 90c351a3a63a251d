"""Loop-invariant code motion: an instruction a loop repeats unchanged runs once.

The compiler unrolls kernel loops (nki/api/nki/language/__init__.py: affine_range, sequential_range and
static_range are all "a fully unrolled loop", aliases of `range`) and then hoists what does not change
between iterations: the fused Mamba tutorial's v2 loads delta and u outside the state loop, so its
`delta * u` is the same in every state and the compiler computes it once (nki/guides/tutorials/fused_mamba.rst,
its VectorE time per step is one such instruction shorter than v1's, which reloads them inside the loop).
Since every loop is unrolled, sequential ranges qualify as affine ones do: a loop-carried dependency
changes some input between iterations, and a changed input is exactly what stops a match here.

An instruction is hoisted when an earlier iteration of a loop that encloses it issued, from the same
source line, the same op with the same parameters on the same input regions, none of which has been
written since, and it writes a fresh result (its destination is none of its inputs). Its values are
still computed here (semantics unchanged); the record carries `hoisted` (the stream index of the
instance that pays) and the timing model charges it no engine time.

A hoisted instruction's result is the first instance's: an instruction reading it reads what the first
instance's readers read, so a chain of invariant work (a transpose of a loop-invariant tile on the PE array,
then its copy out of PSUM) is hoisted whole, as a compiler's loop-invariant code motion moves it. The PE array's
transposes are pure as the elementwise instructions are (a result tile from an input tile, no accumulation
group) and qualify likewise.
"""
from __future__ import annotations

import numpy as np

from trnsim.core.isa.opcodes import ELEMENTWISE, Engine, Op

# Pure instructions of the compute engines: a result tile from input tiles, no accumulator registers,
# no random state.
PURE = (ELEMENTWISE - {Op.DROPOUT}) | {Op.TENSOR_REDUCE, Op.TENSOR_TENSOR_SCAN, Op.NC_TRANSPOSE}
ENGINES = (Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD, Engine.TENSOR)


class Invariants:
    """The instructions issued inside loops, by what they compute, with where in the loops they ran."""

    __slots__ = ("first", "readers", "same", "aliased", "pending")

    def __init__(self):
        self.first: dict = {}  # key -> (stream index, loop position, its result's identity)
        self.readers: dict = {}  # allocation id -> keys that read it
        self.same: dict = {}  # a hoisted instance's result (allocation id, placement) -> the first instance's
        self.aliased: dict = {}  # allocation id -> the entries of `same` it is either side of
        self.pending = None  # the alias the instruction just checked makes, once its own write is noted

    def wrote(self, ins) -> None:
        """Forget the instructions that read what `ins` writes, and the results standing for it: their inputs
        changed. Then a hoisted `ins`'s result stands for its first instance's."""
        for name in ins.writes:
            v = ins.operands.get(name)
            if v is not None:
                for key in self.readers.pop(v.alloc.id, ()):
                    self.first.pop(key, None)
                for ident in self.aliased.pop(v.alloc.id, ()):
                    self.same.pop(ident, None)
        if self.pending is not None:
            ident, target = self.pending
            self.pending = None
            self.same[ident] = target
            for a in (ident[0], target[0]):
                self.aliased.setdefault(a, []).append(ident)

    def check(self, ins, scopes, index: int) -> int | None:
        """The stream index of the earlier instance that `ins` repeats in a later loop iteration, or None;
        a first instance is remembered."""
        if not scopes or ins.op not in PURE or ins.engine not in ENGINES or tuple(ins.writes) != ("dst",):
            return None  # most instructions: asked here, where the compiled build calls directly
        return self._repeats(ins, scopes, index)

    def _repeats(self, ins, scopes, index: int) -> int | None:
        """`check` for a pure instruction of a compute engine writing one fresh result."""
        dst = ins.operands.get("dst")
        inputs = [(n, v) for n, v in ins.operands.items() if n != "dst"]
        if dst is None or not inputs or any(v.alloc.id == dst.alloc.id for _, v in inputs):
            return None
        if any(k.startswith("reduce_") and k != "reduce_op" and str(getattr(a, "value", a)) not in ("None", "idle", "0")
               for k, a in ins.attrs.items()):
            return None  # uses the accumulator registers
        attrs = tuple(sorted((k, a.tobytes() if isinstance(a, np.ndarray) else repr(a)) for k, a in ins.attrs.items()))
        same = self.same
        ids = [same.get(i, i) for i in ((v.alloc.id, v.placement()) for _, v in inputs)]
        key = (ins.location, ins.op, ins.engine, attrs, dst.dtype, dst.shape,
               tuple((n, i, p) for (n, _), (i, p) in zip(inputs, ids)))
        here = tuple((s.loop, s) for s in scopes)
        seen = self.first.get(key)
        if seen is not None and _later_iteration(seen[1], here):
            self.pending = ((dst.alloc.id, dst.placement()), seen[2])
            return seen[0]
        self.first[key] = (index, here, (dst.alloc.id, dst.placement()))
        for i, _ in ids:
            self.readers.setdefault(i, []).append(key)
        return None


def _later_iteration(before, now) -> bool:
    """Whether `now` is another iteration of a loop that also ran `before` (the same run of that loop)."""
    for (loop_a, it_a), (loop_b, it_b) in zip(before, now):
        if it_a is not it_b:
            return loop_a is loop_b
    return False
