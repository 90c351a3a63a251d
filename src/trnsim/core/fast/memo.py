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

A signature names each operand's memory not by its serial (new in every launch) but by the order in which the
core's instructions first used it (`relative`): two memories of one core never share a name, and what a check
reads of a memory beyond that (its space, and for HBM its size) is in the layout. So a process's launches of
one kernel name their instructions alike, and the cores of a launch keep their verdicts and numbers in tables
shared with the earlier launches (same catalog entry, `_STORE`): a second launch finds its verdicts kept and
loop stamping finds its moved signatures numbered (fast/stamp.py: _number). A core's numbers still mean one
signature each in its own stream, which is all the scheduler reads them by.
"""
from __future__ import annotations

import threading

from trnsim.core.builder import check
from trnsim.core.fast import stamp  # (its table at call time: the compiled stamp imports this module)
from trnsim.core.fast.views import _LAYOUTS_MAX, keyed, layout_number
from trnsim.core.isa.registry import NAME, Instruction, generic_check


_STORE: list = [None, None, None, None, None]  # catalog entry, kept, loose, signatures, entries: the launches' tables
STORE_MAX = 1 << 13  # signatures the shared tables hold before a launch starts new ones (the scheduler's dense range)


class Verdicts:
    """One core's verdicts by signature."""

    __slots__ = ("kept", "spec", "signatures", "loose", "entries", "shared", "serials", "rels")

    def __init__(self, shared: bool = False):
        self.kept: dict = {}
        self.loose: dict = {}  # loose_signature -> (engine, touches PSUM, attributes the check set)
        self.spec = None  # the catalog entry they were reached under (a what-if chip changes it)
        self.signatures: list = []  # each number's signature (loop stamping shifts them: fast/stamp.py); numbers
        # (Record.sig) count from 0 and are never reused within the core's stream
        self.entries: list = []  # each number's entry in `kept` (no signature hashed again to find a verdict)
        # a launch's core: its tables are those of the process's earlier launches (`_adopt`); the main thread's
        # alone, so that no two threads number in one table
        self.shared = shared and threading.current_thread() is threading.main_thread()
        self.serials: dict = {}  # memory serial -> its name in signatures here: -1, -2, ... by first use (`relative`)
        self.rels: dict = {}  # layout number (views.keyed) -> the number of that layout with its memory so named

    def _adopt(self, spec) -> None:
        """The tables for catalog entry `spec`: a launch's core that numbered nothing yet takes the shared ones
        (started anew when full or for another entry); else new verdicts, the numbering going on."""
        s = _STORE
        if self.signatures:
            self.kept, self.loose = {}, {}
        elif self.shared:
            if s[0] is not spec or len(s[3]) >= STORE_MAX:
                s[0], s[1], s[2], s[3], s[4] = spec, {}, {}, [], []
            self.kept, self.loose, self.signatures, self.entries = s[1], s[2], s[3], s[4]
        else:
            self.kept, self.loose = {}, {}
        self.spec = spec

    def number(self, sig: tuple, like: int) -> int:
        """The number of signature `sig`, numbered now if new, with the verdict of signature number `like`: an
        instruction whose check reads no operand's place (fast/stamp.py: a stamped loop iteration)."""
        n = len(self.signatures)
        e = self.entries[like]
        entry = (e[0], e[1], e[2], n)
        hit = self.kept.setdefault(sig, entry)  # (the signature hashed once, whether kept or new)
        if hit is entry:
            self.signatures.append(sig)
            self.entries.append(entry)
        return hit[3]

    def _keep(self, sig: tuple, verdict: tuple) -> tuple:
        """Keep `verdict` (engine, touches PSUM, attributes the check set) for new signature `sig`, numbered now:
        the entry kept."""
        n = len(self.signatures)
        kept = self.kept[sig] = verdict + (n,)
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
        sig, placed = signature(op, engine, operands, attrs, self.rels, self.serials)
        hit = ins = None
        if sig is not None:
            if self.spec is not nc.spec:
                self._adopt(nc.spec)
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


def signature(op, engine, operands: dict, attrs: dict, rels: dict, serials: dict) -> tuple:
    """(signature, placements) of an instruction. The signature is what a pure check's verdict and an
    instruction's cost depend on: the opcode, the engine asked for, each operand's layout (its allocation's
    place but not which tile it is, dtype, shape, strides, offsets, its memory named by `serials`: `relative`
    numbers it, from its number by keyed through `rels`) and the attributes with their types (1 and 1.0 compare
    equal but may check differently), as one flat tuple: (name, layout number) per operand, then (name, type,
    value) per attribute (a layout number is an int, never a name or a type, so the tuple cannot be read two
    ways). (None, None) for an indirect operand; an unhashable attribute shows when it is looked up."""
    key, placed = [op, engine], {}
    for n, v in operands.items():
        if v.gather_rows is not None:
            return None, None
        k = v._keyed
        if k is None or k[0] is not v.alloc.place:
            k = keyed(v)
        r = rels.get(k[1])
        if r is None:
            r = relative(v, rels, serials, k[1])
        key.append(n)
        key.append(r)
        placed[n] = k[2]
    for n, x in attrs.items():  # name, type, value
        if n == NAME:
            continue  # an instruction's name= (with_schedule's) reaches neither its check nor its cost
        key.append(n)
        key.append(type(x))
        key.append(x)
    return tuple(key), placed


def relative(v, rels: dict, serials: dict, n: int) -> int:
    """The layout number of view `v` (whose views.keyed number is `n`, kept so in `rels`) with its memory's
    serial replaced by the memory's name in `serials` (a negative number, never a serial: numbered now if new):
    the layout views.keyed numbers, launch-independent."""
    a = v.alloc
    place = a.place
    m = serials.get(place[1])
    if m is None:
        m = serials[place[1]] = -1 - len(serials)
    r = layout_number(((place[0], m, place[2], place[3], place[4]), a.partitions, a.kind, v.dtype, v.shape, v.strides,
                       v.offset, v.poff))
    if len(rels) >= _LAYOUTS_MAX:
        rels.clear()  # (each made again the same while its layout keeps its number)
    rels[n] = r
    return r


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
