"""Check verdicts kept by instruction signature: the speed layer's verdict memo.

An instruction whose check is pure (OpDef.pure: it depends on the operands' layouts, the attributes and the
core's catalog facts), issued again on operands laid out the same way, passes the same checks: its verdict
(engine, whether it touches PSUM, what the check set in the attributes) is kept by signature and the checks
are skipped, but not their stateful part (OpDef.state), nor the one fact of the generic check that changes
over a run (an evicted tile). Each signature gets a number (Record.sig) by which the scheduler asks each
cost rule once.
"""
from __future__ import annotations

from trnsim.core.builder import check
from trnsim.core.fast.views import keyed
from trnsim.core.isa.registry import NAME, Instruction, generic_check


class Verdicts:
    """One core's verdicts by signature."""

    __slots__ = ("kept", "spec", "numbered", "signatures")

    def __init__(self):
        self.kept: dict = {}
        self.spec = None  # the catalog entry they were reached under (a what-if chip changes it)
        self.numbered = 0  # signatures numbered so far (Record.sig), never reused within the core's stream
        self.signatures: list = []  # each number's signature (loop stamping shifts them: fast/stamp.py)

    def number(self, sig: tuple, like: int) -> int:
        """The number of signature `sig`, numbered now if new, with the verdict of signature number `like`: an
        instruction whose check reads no operand's place (fast/stamp.py: a stamped loop iteration)."""
        hit = self.kept.get(sig)
        if hit is not None:
            return hit[3]
        eng, psum, changed, _ = self.kept[self.signatures[like]]
        n = self.numbered
        self.kept[sig] = (eng, psum, changed, n)
        self.numbered = n + 1
        self.signatures.append(sig)
        return n

    def __len__(self):
        return len(self.kept)

    def checked(self, nc, d, op, engine, operands: dict, attrs: dict, location):
        """core/builder.py: Builder.checked, the checks skipped on a kept verdict."""
        if not d.pure:
            ins, psum = check(nc, d, op, engine, operands, attrs, location)
            return ins, psum, None, None
        sig, placed = signature(op, engine, operands, attrs)
        hit = None
        if sig is not None:
            if self.spec is not nc.spec:
                self.kept, self.spec = {}, nc.spec
            try:
                hit = self.kept.get(sig)
            except TypeError:  # an unhashable attribute
                sig = None
        if hit is None:
            before = dict(attrs) if sig is not None else None
            ins, psum = check(nc, d, op, engine, operands, attrs, location)
            if sig is None:
                return ins, psum, None, placed
            changed = {k: v for k, v in attrs.items() if before.get(k, before) is not v}
            n = self.numbered
            self.kept[sig] = (ins.engine, psum, changed, n)
            self.numbered = n + 1
            self.signatures.append(sig)
            return ins, psum, n, placed
        eng, psum, changed, n = hit
        if changed:
            attrs.update(changed)
        ins = Instruction(op, eng, operands, attrs, location, d.writes)
        nc.budget.charge(ins.location)
        for t in operands.values():
            if t.alloc.evicted:  # the one fact of the generic check that changes over a run
                generic_check(d, ins, nc)
        return ins, psum, n, placed


def signature(op, engine, operands: dict, attrs: dict) -> tuple:
    """(signature, placements) of an instruction. The signature is what a pure check's verdict and an
    instruction's cost depend on: the opcode, the engine asked for, each operand's layout (its allocation's
    place but not which tile it is, dtype, shape, strides, offsets: keyed numbers it) and the attributes
    with their types (1 and 1.0 compare equal but may check differently), as one flat tuple: (name, layout
    number) per operand, then (name, type, value) per attribute (a layout number is an int, never a name or a
    type, so the tuple cannot be read two ways). (None, None) for an indirect operand;
    an unhashable attribute shows when it is looked up."""
    key, placed = [op, engine], {}
    for n, v in operands.items():
        if v.gather_rows is not None:
            return None, None
        k = v._keyed
        if k is None or k[0] is not v.alloc.place:
            k = keyed(v)
        key.append(n)
        key.append(k[1])
        placed[n] = k[2]
    for n, x in attrs.items():  # name, type, value
        if n == NAME:
            continue  # an instruction's name= (with_schedule's) reaches neither its check nor its cost
        key.append(n)
        key.append(type(x))
        key.append(x)
    return tuple(key), placed
