"""Loop-carried dependencies in `affine_range` loops: the race a sequential emulator would hide.

An affine loop promises that its iterations are independent, so the compiler may reorder or pipeline
them; a kernel whose iteration i writes what iteration j reads or writes computes a different answer on
hardware than it does here, run in order. While an affine loop runs, every instruction's operands that
lie in tensors made before the loop began are recorded per iteration (tensors made inside an iteration
are that iteration's own); when the loop ends, a write of one iteration that overlaps a read or write of
another is reported: a LoopCarriedWarning naming both lines, a LoopCarriedError with race check `error` or in
strict mode (`how`).

The value-based check (mode `order`) asks the question from the other side: it runs the launch with every
affine loop's iterations reversed, then interleaved (the even-numbered ones first, then the odd-numbered),
then in order, and compares the outputs bit for bit (floating-point values may differ by the rounding of a
reordered accumulation, no more). It catches what the recorded sets let through, such as an in-place
recurrence (`acc = acc * 2 + x` in one instruction, which looks like an accumulation) whose value depends
on the order of the iterations. Reversal swaps every pair of iterations, so an order-dependent result that
is symmetric end to end (the recurrence over inputs that read the same both ways) survives it; the
interleaved run swaps only some pairs.

Associative reductions are not loop-carried dependencies (the matrix multiplication tutorial,
nki/guides/tutorials/matrix_multiplication.rst, affine_range note): every matmul into PSUM, a DMA that adds
into its dst, `nl.loop_reduce`, and an instruction that folds the region it read into itself with one
associative, commutative op (`acc += x`: `accumulates`) count as accumulations, and accumulations of different
iterations into the same region do not conflict. Any other instruction that reads and writes one region (the
recurrence `acc = acc * 2 + x`) is a write like any other.

Regions are boxes in the tensor's own coordinates (partition and free dims for SBUF/PSUM, every dim for
HBM), so column tiles of a row-major tensor do not overlap; a view that is no box (indirect, or strides
that cross dims) falls back to its flat element range, which can only over-report.
"""
from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np

from trnsim import flags
from trnsim.core.errors import KernelError, UninitializedError, where
from trnsim.core.isa.opcodes import MATMUL
from trnsim.core.memory import Space

MODES = ("auto", "off", "warn", "error", "order")


class LoopCarriedError(KernelError):
    """Two iterations of an affine_range loop touch the same tensor region, one of them writing it."""


class LoopCarriedWarning(UserWarning):
    """A loop-carried dependency reported as a warning (race check `warn`)."""


def mode(option=None) -> str:
    """The race-check mode from a kernel option or TRNSIM_RACE_CHECK; True means `error`, False `off`.
    `auto` (the default) checks the loops that promise independence to their compiler (NeuronCore.loop)."""
    raw = option if option is not None else flags.RACE_CHECK.raw() or "auto"
    raw = {True: "error", False: "off"}.get(raw, raw)
    raw = str(raw).lower()
    if raw in ("1", "on", "true"):
        return "error"
    if raw in ("0", "false", "none"):
        return "off"
    if raw not in MODES:
        raise KernelError(f"race_check={raw!r}: the race check is one of {', '.join(MODES)}")
    return raw


def how(race_check: str) -> str:
    """How a dependency found is reported: a LoopCarriedWarning naming both lines, or with race check `error`
    (`--race-check error`) or strict mode (TRNSIM_STRICT=1 set) a LoopCarriedError. The compiler compiles such
    loops and the hardware runs them, often as their authors intend (the iterations of a short loop in order),
    so only the asking user is refused."""
    return "error" if race_check == "error" or flags.STRICT.raw() == "1" else "warn"


def box(view):
    """(lo, hi) inclusive element coordinates of a view in its tensor's shape; flat ranges otherwise."""
    alloc = view.alloc
    shape = tuple(getattr(alloc, "shape", None) or ())
    free = shape[1:] if view.on_chip else shape
    lead = ((view.poff, view.poff + max(view.shape[0], 1) - 1),) if view.on_chip else ()
    dims = list(zip(view.shape[1:] if view.on_chip else view.shape, view.strides[1:] if view.on_chip else view.strides))
    natural = [1] * len(free)
    for k in range(len(free) - 2, -1, -1):
        natural[k] = natural[k + 1] * free[k + 1]
    size = natural[0] * free[0] if free else 1
    lo_flat = hi_flat = view.offset
    for n, s in dims:
        if n > 1:
            lo_flat += min(0, (n - 1) * s)
            hi_flat += max(0, (n - 1) * s)
    flat = lead + ((lo_flat, hi_flat),)
    if view.gather_rows is not None or not free or hi_flat >= size or lo_flat < 0:
        return flat if view.gather_rows is None else lead + ((0, size - 1),), True
    lo = [(view.offset // natural[k]) % free[k] for k in range(len(free))]
    hi = list(lo)
    for n, s in dims:
        if n <= 1 or s == 0:
            continue
        k = next((k for k in range(len(free)) if natural[k] <= abs(s) and abs(s) % natural[k] == 0), None)
        if k is None:
            return flat, True
        step = (n - 1) * (s // natural[k])
        lo[k], hi[k] = min(lo[k], lo[k] + step), max(hi[k], hi[k] + step)
        if lo[k] < 0 or hi[k] >= free[k]:
            return flat, True
    return lead + tuple(zip(lo, hi)), False


def _flatten(b, view_shape_free):
    """A box's flat element range (for comparing with a flat fallback)."""
    (coords, is_flat), free, lead = b, view_shape_free, None
    if is_flat:
        return coords
    n = len(free)
    lead, rest = coords[: len(coords) - n], coords[len(coords) - n:]
    natural = [1] * n
    for k in range(n - 2, -1, -1):
        natural[k] = natural[k + 1] * free[k + 1]
    return lead + ((sum(lo * m for (lo, _), m in zip(rest, natural)), sum(hi * m for (_, hi), m in zip(rest, natural))),)


def _overlap(a, b) -> bool:
    return all(alo <= bhi and blo <= ahi for (alo, ahi), (blo, bhi) in zip(a, b))


# ALU operators whose repeated application gives the same result in any order: `acc = acc op x` over the
# iterations is a reduction the compiler may reorder (subtract too, with the accumulator on the left).
ORDER_FREE = frozenset({"add", "multiply", "maximum", "minimum", "max", "min", "bitwise_and", "bitwise_or",
                        "bitwise_xor", "logical_and", "logical_or", "logical_xor"})


def _alu(ins, key):
    from trnsim.core.isa.alu import op_name
    v = ins.attrs.get(key)
    return None if v is None else op_name(v)


def accumulates(ins, reads) -> bool:
    """Whether instruction `ins`, reading the region it writes through its operands `reads`, computes
    `region = region op x` with one order-free op: `acc += t` (tensor_tensor), `acc += 1.0` (tensor_scalar
    without a second op), `(acc op c) op t` with the same op twice, or `(t op0 c) op1 acc`. A recurrence such
    as `acc = acc * 2 + t` is none: its value depends on the order of the iterations."""
    from trnsim.core.isa.opcodes import Op
    if ins.op is Op.TENSOR_TENSOR:
        op = _alu(ins, "op")
        return op in ORDER_FREE or (op == "subtract" and reads == {"data1"})
    if ins.op is Op.TENSOR_SCALAR:
        op = _alu(ins, "op0")
        return (reads == {"data"} and ins.attrs.get("op1") is None and not ins.attrs.get("reverse0")
                and (op in ORDER_FREE or op == "subtract"))
    if ins.op is Op.SCALAR_TENSOR_TENSOR:
        op0, op1 = _alu(ins, "op0"), _alu(ins, "op1")
        if reads == {"data"}:
            return op0 == op1 and op1 in ORDER_FREE and not ins.attrs.get("reverse0")
        return reads == {"operand1"} and op1 in ORDER_FREE
    return False


class Access:
    __slots__ = ("iteration", "kind", "box", "location", "alloc", "what", "combines")

    def __init__(self, iteration, kind, box, location, alloc, what, combines=False):
        self.iteration, self.kind, self.box, self.location, self.alloc, self.what = iteration, kind, box, location, alloc, what
        self.combines = combines  # a read by an instruction that folds the region with an order-free op


class Watch:
    """One running affine loop: the accesses of each iteration to tensors made before it began."""

    def __init__(self, location: str, first_alloc: int):
        self.location, self.first_alloc = location, first_alloc
        self.iteration = 0
        self.accesses: dict[int, list[Access]] = {}  # allocation id -> accesses
        self.written: set[int] = set()
        self.reads: dict = {}  # (allocation id, box) -> this iteration's read of it
        self.reducing: set[str] = set()  # source lines of loop reductions (nl.loop_reduce): their writes accumulate

    def next(self) -> None:
        self.iteration += 1
        self.reads.clear()

    def record(self, ins, boxes) -> None:
        """Record one instruction's operands that lie outside the loop (`boxes`: name -> (view, box))."""
        for name, (view, b) in boxes.items():
            alloc = view.alloc
            if alloc.id >= self.first_alloc:
                continue
            combines = False
            if name in ins.writes:
                # An accumulation: a matmul into PSUM, a DMA that adds into dst, a loop reduction, or a write of
                # the very region this iteration read, folded with an order-free op (`accumulates`), in this
                # instruction or an earlier one (`acc[...] = nl.add(acc, t)` goes through a copy).
                reads = {n for n, (v, bb) in boxes.items() if n not in ins.writes and v.alloc is alloc and bb == b}
                earlier = self.reads.pop((alloc.id, b), None)
                folds = earlier is not None and earlier.combines
                if folds:
                    earlier.kind = "accumulates into"
                acc = ((reads and accumulates(ins, reads)) or folds or ins.location in self.reducing
                       or (ins.op in MATMUL and view.space is Space.PSUM) or ins.attrs.get("dst_rmw_op") is not None)
                kind = "accumulates into" if acc else "writes"
                self.written.add(alloc.id)
            else:
                if any(n in ins.writes and v.alloc is alloc and bb == b for n, (v, bb) in boxes.items()):
                    continue  # the read half of an instruction that writes the region it reads
                kind, combines = "reads", accumulates(ins, {name})
            a = Access(self.iteration, kind, b, ins.location, alloc, f"{ins.op.value} operand {name!r}", combines)
            self.accesses.setdefault(alloc.id, []).append(a)
            if kind == "reads":
                self.reads[(alloc.id, b)] = a

    def conflict(self):
        """The first pair (earlier, later) of accesses of different iterations that race, or None."""
        for aid in sorted(self.written):
            acc = self.accesses[aid]
            for i, a in enumerate(acc):
                if a.kind == "reads":
                    continue
                for b in acc:
                    if b.iteration == a.iteration or (a.kind == b.kind == "accumulates into"):
                        continue
                    if _overlaps(a, b):
                        return (a, b) if a.iteration < b.iteration else (b, a)
        return None


def _overlaps(a: Access, b: Access) -> bool:
    if a.box[1] == b.box[1]:
        return _overlap(a.box[0], b.box[0])
    free = tuple(a.alloc.shape[1:] if a.alloc.memory.space is not Space.HBM else a.alloc.shape)
    return _overlap(_flatten(a.box, free), _flatten(b.box, free))


def describe(a: Access) -> str:
    coords = ", ".join(f"{lo}:{hi + 1}" for lo, hi in a.box[0])
    flat = " (flat elements)" if a.box[1] else ""
    return f"{a.alloc.name}[{coords}]{flat}"


def report(watch: Watch, how: str) -> None:
    found = watch.conflict()
    if found is None:
        return
    first, second = found
    msg = (f"affine_range loop at {watch.location} carries a dependency between iterations: iteration "
           f"{first.iteration} {first.kind} {describe(first)} at {first.location} and iteration {second.iteration} "
           f"{second.kind} {describe(second)} at {second.location}; affine_range iterations must be independent "
           f"(the compiler may reorder them): use sequential_range, or give each iteration its own region")
    if how == "warn":
        warnings.warn(msg, LoopCarriedWarning, stacklevel=4)
        return
    raise LoopCarriedError(msg, watch.location)


def reduction(nc, location: str) -> None:
    """Every write from `location` in the open affine loops is part of a loop reduction (nl.loop_reduce: each
    iteration combines into the accumulator), an accumulation, not a race."""
    for w in nc.races:
        w.reducing.add(location)


def watch(nc, loop, how: str):
    """Run `loop` (an iterations() generator) as an affine loop of core `nc` under race check `how`."""
    from trnsim.core.memory import Allocation

    w = Watch(where(), next(Allocation._ids))
    nc.races.append(w)
    ok = False
    try:
        for i in loop:
            yield i
            w.next()
        ok = True
    finally:
        nc.races.remove(w)
    if ok:
        report(w, how)


# The orders of race check `order`, each with how its messages say it.
ORDERS = {"reversed": "last to first", "interleaved": "even-numbered first, then odd-numbered"}


def reorder(indices, order: str) -> list:
    """An affine loop's iterations in one of the ORDERS."""
    indices = list(indices)
    return indices[::-1] if order == "reversed" else indices[::2] + indices[1::2]


def _leaves(name, a, b):
    """(name, in-order value, reordered value) for each array in two results of the same structure."""
    if isinstance(a, (tuple, list)):
        return [x for i, (p, q) in enumerate(zip(a, b)) for x in _leaves(f"{name}[{i}]", p, q)]
    if isinstance(a, dict):
        return [x for k in a for x in _leaves(f"{name}[{k!r}]", a[k], b[k])]
    return [(name, a, b)]


ROUNDING_ULPS = 16  # of the tensor's largest magnitude: what summing the same terms in another order moves


def _rounding(a, b):
    """Elements whose two values differ only as much as reassociated floating-point sums do (an accumulation
    the compiler may reorder, into PSUM or SBUF, rounds differently but is no race)."""
    x, y = a.astype(np.float64), b.astype(np.float64)
    eps = float(ml_dtypes.finfo(a.dtype).eps)
    finite = np.isfinite(x) & np.isfinite(y)
    scale = max(float(np.abs(x[finite]).max(initial=0)), float(np.abs(y[finite]).max(initial=0)))
    return finite & (np.abs(x - y) <= ROUNDING_ULPS * eps * scale)


def in_every_order(launch, args, kwargs, names, as_array, copy, location: str):
    """Race check `order`: `launch(args, kwargs, order)` with affine loops in each of the ORDERS (on copies
    of the arguments, `copy`), then in order (order None); every output (the returned arrays and the
    arguments the kernel wrote, made numpy by `as_array`) must match the in-order one bit for bit, else
    LoopCarriedError. Floating-point differences no larger than reordered sums give (`_rounding`) are let
    through. Returns the in-order result."""
    runs = []
    for order, how in ORDERS.items():
        r_args, r_kwargs = [copy(a) for a in args], {k: copy(v) for k, v in kwargs.items()}
        try:
            runs.append((order, how, launch(r_args, r_kwargs, order), r_args, r_kwargs))
        except UninitializedError as e:  # reordered, an iteration reads what a later one writes
            raise LoopCarriedError(f"race check order: with every affine_range loop run {how}, {e.rule}; an "
                                   f"iteration reads what another iteration writes", e.location) from None
    result = launch(args, kwargs, None)
    for order, how, other, r_args, r_kwargs in runs:
        pairs = _leaves("the returned tensor", result, other)
        pairs += [(f"argument {n!r}", a, b) for n, a, b in zip(names, args, r_args)]
        pairs += [(f"argument {k!r}", kwargs[k], r_kwargs[k]) for k in kwargs]
        for what, a, b in pairs:
            a, b = as_array(a), as_array(b)
            if a is None or b is None:
                continue
            uint = np.dtype(f"u{a.dtype.itemsize}") if a.dtype.itemsize in (1, 2, 4, 8) else None
            differ = (a.view(uint) != b.view(uint)) if uint is not None else (a != b)
            if differ.any() and (a.dtype.kind == "f" or a.dtype.name.startswith(("bfloat", "float"))):
                differ &= ~_rounding(a, b)
            if differ.any():
                first = tuple(int(i) for i in np.argwhere(differ)[0]) if differ.ndim else ()
                raise LoopCarriedError(
                    f"race check order: {what} differs in {int(differ.sum())} of {differ.size} elements when "
                    f"every affine_range loop runs its iterations {how} (at {list(first)}: {a[first]} in order, "
                    f"{b[first]} {order}); the iterations are not independent, so the compiler may reorder "
                    f"them and the hardware compute either", location)
    return result
