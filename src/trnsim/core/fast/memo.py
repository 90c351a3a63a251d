"""Check verdicts kept by instruction signature: the speed layer's verdict memo.

An instruction whose check is pure (OpDef.pure: it depends on the operands' layouts, the attributes and the
core's catalog facts), issued again on operands laid out the same way, passes the same checks: its verdict
(engine, whether it touches PSUM, what the check set in the attributes) is kept by signature and the checks
are skipped, but not their stateful part (OpDef.state), nor the one fact of the generic check that changes
over a run (an evicted tile). Each signature gets a number (Record.sig) by which the scheduler asks each
cost rule once. A new signature of an instruction whose check reads no operand's place (fast/stamp.py:
CHECKS_FREE_OF_PLACE) takes the verdict of an earlier one that differs from it only in places (`loose`): a
loop's first iterations slice their tiles at other offsets, and allocate them at other addresses, than the
iterations before.
"""
from __future__ import annotations

from trnsim.core.builder import check
from trnsim.core.fast import stamp  # (its table at call time: the compiled stamp imports this module)
from trnsim.core.fast.views import keyed
from trnsim.core.isa.registry import NAME, Instruction, generic_check


class Verdicts:
    """One core's verdicts by signature."""

    __slots__ = ("kept", "spec", "numbered", "signatures", "loose", "entries")

    def __init__(self):
        self.kept: dict = {}
        self.loose: dict = {}  # loose_signature -> (engine, touches PSUM, attributes the check set)
        self.spec = None  # the catalog entry they were reached under (a what-if chip changes it)
        self.numbered = 0  # signatures numbered so far (Record.sig), never reused within the core's stream
        self.signatures: list = []  # each number's signature (loop stamping shifts them: fast/stamp.py)
        self.entries: list = []  # each number's entry in `kept` (no signature hashed again to find a verdict)

    def number(self, sig: tuple, like: int) -> int:
        """The number of signature `sig`, numbered now if new, with the verdict of signature number `like`: an
        instruction whose check reads no operand's place (fast/stamp.py: a stamped loop iteration)."""
        n = self.numbered
        entry = self.entries[like][:3] + (n,)
        hit = self.kept.setdefault(sig, entry)  # (the signature hashed once, whether kept or new)
        if hit is entry:
            self.numbered = n + 1
            self.signatures.append(sig)
            self.entries.append(entry)
        return hit[3]

    def _keep(self, sig: tuple, verdict: tuple) -> tuple:
        """Keep `verdict` (engine, touches PSUM, attributes the check set) for new signature `sig`, numbered now:
        the entry kept."""
        n = self.numbered
        kept = self.kept[sig] = verdict + (n,)
        self.numbered = n + 1
        self.signatures.append(sig)
        self.entries.append(kept)
        return kept

    def __len__(self):
        return len(self.kept)

    def checked(self, nc, d, op, engine, operands: dict, attrs: dict, location):
        """core/builder.py: Builder.checked, the checks skipped on a kept verdict."""
        if not d.pure:
            ins, psum = check(nc, d, op, engine, operands, attrs, location)
            return ins, psum, None, None
        sig, placed = signature(op, engine, operands, attrs)
        hit = ins = None
        if sig is not None:
            if self.spec is not nc.spec:
                self.kept, self.loose, self.spec = {}, {}, nc.spec
            try:
                hit = self.kept.get(sig)
            except TypeError:  # an unhashable attribute
                sig = None
        if hit is None:
            loose = loose_signature(sig, operands) if sig is not None else None
            verdict = None if loose is None else self.loose.get(loose)
            if verdict is None:
                before = dict(attrs) if sig is not None else None
                ins, psum = check(nc, d, op, engine, operands, attrs, location)
                if sig is None:
                    return ins, psum, None, placed
                verdict = (ins.engine, psum, {k: v for k, v in attrs.items() if before.get(k, before) is not v})
                if loose is not None:
                    self.loose[loose] = verdict
            hit = self._keep(sig, verdict)
            if ins is not None:
                return ins, psum, hit[3], placed
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


def loose_signature(sig: tuple, operands: dict) -> tuple | None:
    """`sig` with each operand's layout number replaced by the layout it has wherever it lies (its memory,
    tile size and kind, dtype, shape, strides), where the instruction's check reads no operand's place (the
    operand named in stamp.CHECKS_FREE_OF_PLACE keeps its number); None for other instructions."""
    op, free = sig[0], stamp.CHECKS_FREE_OF_PLACE
    if op not in free:
        return None
    placed, key, i = free[op], [op, sig[1]], 2
    for n, v in operands.items():
        key.append(n)
        if n == placed:
            key.append(sig[i + 1])
        else:
            a = v.alloc
            key.append((a.place[0], a.partitions, a.nbytes, a.kind, v.dtype, v.shape, v.strides))
        i += 2
    return tuple(key) + sig[i:]
