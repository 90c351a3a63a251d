"""NeuronCore memories as byte arrays: SBUF and PSUM (partitions x bytes) and HBM (one buffer per tensor).

Every memory keeps a parallel byte mask of never-written bytes ("poison"). Fresh memory is filled with
0xFF bytes, which reads as NaN in every float format and as a marker (-1 / max) in integer formats, as
the NKI simulator does; an element is never-written while any of its bytes is. A new tensor is filled
when its bytes are first touched (Allocation.settle), so a tile whose first write covers it is never filled.

Allocation follows the hardware's rules: a tensor takes a contiguous range of partitions starting where
the start rule allows (P in (64,128] at 0; (32,64] at 0/64; (0,32] at 0/32/64/96) and the same byte
range in each; PSUM tensors never cross a 2 KiB bank unless they start on a bank and span whole banks.
`address=` placement skips the allocator: tensors placed over each other share bytes, as on hardware.
Tensors are freed when the last view of them is dropped (CPython reference counting keeps this exact),
or earlier, as the compiler frees them: when an allocation does not fit, names the kernel never reads
again let go of their tiles (core/liveness.py: drop_dead_names), and a tensor made in a loop iteration is dead once that iteration
ends (see core/liveness.py). Such an expired tensor keeps its bytes while they are not needed, so the
next iterations take other addresses (the compiler's multiple buffers); when an allocation does not fit,
expired tensors give their bytes back, oldest first, down to one buffer. Only the live data decides
whether a tensor fits.

When even that leaves no room in SBUF, the compiler spills: live tiles are saved to HBM and reloaded
before their next use (the profiler's spill save / spill reload traffic, nki_perf_guide.rst and
fused_mamba.rst). The bytes move in DMA instructions that the core issues (NeuronCore.spill_save and
NeuronCore.reload), so they are timed like any transfer. Only tiles the compiler placed are spilled;
tensors placed with `address=` are the kernel's. A request is refused only when the tiles that must be
in SBUF together (the operands of one instruction) cannot fit even with every other tile spilled.
"""
from __future__ import annotations

import bisect
import enum
import functools
import itertools
import weakref

import numpy as np

from trnsim.core.liveness import drop_dead_names
from trnsim.core.errors import CapacityError, OutOfBoundsError, PartitionLimitError, PartitionStartError, PSUMBankError, ShapeError

POISON_BYTE = 0xFF
_SERIALS = itertools.count()  # names each memory for the timing model; never reused, unlike id()
TICK = itertools.count()  # orders tile uses, for the spill policy (least recently used first)
FILL = "fill"  # what a fresh tensor owes its bytes: the never-written fill


class Space(enum.Enum):
    """Where a tensor lives. HBM tensors are one byte buffer each; SBUF and PSUM are shared arrays."""

    HBM = "hbm"
    SBUF = "sbuf"
    PSUM = "psum"

    __hash__ = object.__hash__  # members are singletons; Enum's own hash runs Python code (see isa/opcodes.py)


_HBM = Space.HBM  # read at every tile made: an Enum class's attribute goes through its metaclass's __getattr__ hook


def allowed_starts(partitions: int, pmax: int) -> tuple[int, ...]:
    """Partition starts the start rule allows for a tensor of `partitions` partitions."""
    span = 32 if partitions <= 32 else 64 if partitions <= 64 else pmax
    return tuple(range(0, pmax, span))


class Allocation:
    """One tensor's storage: a memory, a partition range and a byte range in every partition."""

    _ids = itertools.count()

    def __init__(self, memory, p0: int, partitions: int, b0: int, nbytes: int, name: str, kind: str,
                 location: str | None):
        self.memory, self.p0, self.partitions, self.b0, self.nbytes = memory, p0, partitions, b0, nbytes
        self.name, self.kind, self.location = name, kind, location
        self.id = next(Allocation._ids)
        # Where it lies, without a reference to the memory: what an instruction record keeps (View.placement).
        # The last item names the tile for the timing model: a compiler-placed tile whose bytes another one
        # reused is a different buffer to it (-1 where the kernel placed or shared the bytes itself).
        tile = next(memory.tiles) if memory.space is not _HBM else -1  # counted per memory: reproducible
        self.place = (memory.space.value, memory.serial, p0, b0, nbytes, tile)
        self.clean = False  # known to hold no never-written byte (a cache; see View.poisoned)
        self.source = None  # the HBM bytes an on-chip tensor holds unchanged (a builder notes it: core/builder.py, Builder.loaded)
        self.pending = None  # bytes owed, written when first touched: FILL or a deferred load (see settle)
        self.shared = False  # placed over other live tensors (address=): their bytes are its bytes
        self.expired = False  # the loop iteration that made it has ended (core/liveness.py)
        self.evicted = False  # expired, and its bytes given to other tensors: any later use is an error
        # a block of a tensor of blocks, scoped to the iteration that first used it: the program may use it again
        # later, which the compiler sees and an eager trace cannot, so it is set aside, not evicted (_reclaim)
        self.block = False
        self.used = next(TICK)  # when an instruction last touched it (NeuronCore.issue), for the spill policy
        self.spilled = False  # out of SBUF, placed again before its next use (Memory.restore): saved to HBM and
        # reloaded then, or never written yet (Memory._undefined_out)
        self.scratch = None  # the HBM copy spills write (a View), made at the first save
        self.saved = True  # nothing to save: never written, or unchanged since the last save or reload
        self.consumed = False  # read since its last write (NeuronCore.submit): PSUM may set it aside (Memory._room)

    @property
    def space(self) -> Space:
        return self.memory.space

    def settle(self) -> None:
        """Write the bytes owed before they are touched: the never-written fill of a fresh tensor, the
        values [partitions, elements] of a deferred load (View.store with `defer`), or values a builder
        computes when first needed (an object with `settle(allocation)`, as a builder's owed PSUM sums)."""
        owed, self.pending = self.pending, None
        m, rows, cols = self.memory, slice(self.p0, self.p0 + self.partitions), slice(self.b0, self.b0 + self.nbytes)
        if owed is FILL:
            m.data[rows, cols] = POISON_BYTE
            m.poison[rows, cols] = 1
        elif not isinstance(owed, np.ndarray):
            owed.settle(self)
        else:
            m.data[rows, cols].view(owed.dtype)[...] = owed
            m.poison[rows, cols] = 0


class WeakTable:
    """allocation id -> allocation, held weakly (an entry leaves when its allocation is freed), in insertion
    order: what the memories need of weakref.WeakValueDictionary, with no Python-level bookkeeping per entry.
    With `spans`, the table also keeps its entries' byte ranges in order (Spans), for the allocator."""

    __slots__ = ("refs", "spans", "__weakref__")

    def __init__(self, spans: bool = False):
        self.refs: dict[int, weakref.ref] = {}
        self.spans = Spans() if spans else None

    def __setitem__(self, key: int, value) -> None:
        self.refs[key] = weakref.ref(value, functools.partial(_drop, weakref.ref(self), key))
        if self.spans is not None:
            self.spans.add(key, value)

    def __delitem__(self, key: int) -> None:
        del self.refs[key]
        if self.spans is not None:
            self.spans.discard(key)

    def __contains__(self, key: int) -> bool:
        r = self.refs.get(key)
        return r is not None and r() is not None

    def __len__(self) -> int:
        return len(self.refs)

    def pop(self, key: int, default=None):
        r = self.refs.pop(key, None)
        if r is not None and self.spans is not None:
            self.spans.discard(key)
        a = None if r is None else r()
        return default if a is None else a

    def values(self) -> list:
        """The live allocations, oldest entry first (a list: reference counting may free one meanwhile)."""
        return [a for r in self.refs.values() if (a := r()) is not None]


def _drop(table, key: int, ref) -> None:
    """A table's entry `key` leaves when its allocation (`ref`) is freed, unless the key holds another one now."""
    t = table()
    if t is not None and t.refs.get(key) is ref:
        del t[key]


class Spans:
    """The byte ranges of a memory's live tensors, kept sorted as tensors come and go, so that finding a free
    range walks them in order instead of sorting every live tensor at each allocation (Memory._first_fit).
    Each entry is (first byte, end byte, first partition, end partition, allocation id): plain values, read
    without reaching the allocation; an allocation's place does not change while it is live."""

    __slots__ = ("order", "entries")

    def __init__(self):
        self.order: list[tuple] = []
        self.entries: dict[int, tuple] = {}

    def add(self, key: int, a) -> None:
        self.discard(key)
        entry = (a.b0, a.b0 + a.nbytes, a.p0, a.p0 + a.partitions, key)
        self.entries[key] = entry
        bisect.insort(self.order, entry)

    def discard(self, key: int) -> None:
        entry = self.entries.pop(key, None)
        if entry is not None:
            del self.order[bisect.bisect_left(self.order, entry)]


class Memory:
    """An on-chip memory (SBUF or PSUM): `data` and `poison` are uint8[partitions, row_bytes]."""

    def __init__(self, space: Space, partitions: int, row_bytes: int, usable_bytes: int, bank_bytes: int | None = None,
                 refill: bool = True):
        self.space, self.partitions, self.row_bytes = space, partitions, row_bytes
        self.usable_bytes, self.bank_bytes = usable_bytes, bank_bytes
        self.cursor = 0  # PSUM: where the last placed tile ended, where the next placement starts looking
        self.refill = refill
        self.tiles = itertools.count()  # numbers the tensors placed here (Allocation.place)
        self.serial = next(_SERIALS)
        shape = (partitions, row_bytes)
        if refill:  # each tensor's bytes are filled as never-written when first touched (Allocation.settle)
            self.data, self.poison = np.empty(shape, np.uint8), np.empty(shape, np.uint8)
        # else nothing will ever write (timing only): every byte is never-written from the start, made when
        # first asked for (__getattr__); a timing-only run mostly never asks
        self.version = 0  # counts writes, so cached conversions of its bytes know when they are stale
        self.live = WeakTable(spans=True)
        self.sourced = WeakTable()  # with a source
        # Expired tensors still holding their bytes, oldest first; `held` keeps the tensors of each loop's
        # current and last iteration resident where the program drops them (core/liveness.py).
        self.expired = WeakTable()
        self.held: dict[int, Allocation] = {}
        self.spiller = None  # SBUF: the core's spill_save(alloc), which saves a tile to HBM before it is spilled
        self.next_use = None  # SBUF: the core's prediction of a tile's next use (liveness.next_use), or None
        self.keeper = None  # the core's set_aside(alloc), which keeps an expired block's bytes in HBM (_reclaim)

    def __getattr__(self, name):
        """`data` and `poison` of a memory made never-written (timing only): filled when first read, as they would
        have been at creation."""
        if name not in ("data", "poison"):
            raise AttributeError(name)
        return _never_written(self, (self.partitions, self.row_bytes), name)

    def tensors(self) -> list:
        """The live tensors (a list: reference counting may free one while the caller walks them)."""
        return self.live.values()

    def host_bytes(self) -> int:
        """Host memory this memory's bytes take (fixed by its size; the launch budget leaves it out)."""
        return sum(a.nbytes for a in (vars(self).get("data"), vars(self).get("poison")) if a is not None)

    # -- placement -------------------------------------------------------------------------------
    def _overlaps(self, p0, partitions, b0, nbytes, among=None):
        return [a for a in (self.tensors() if among is None else list(among.values()))
                if a.p0 < p0 + partitions and p0 < a.p0 + a.partitions and a.b0 < b0 + nbytes and b0 < a.b0 + a.nbytes]

    def _first_fit(self, p0, partitions, nbytes, align, without=None, wrap=True):
        """The lowest free offset that fits; in PSUM the first one from where the last tile ended (then,
        with `wrap`, from 0): the compiler rotates PSUM tiles over the banks, so a tile made right after
        another one was freed takes the next bank, not the bank the other one still drains from."""
        p1, skip, usable = p0 + partitions, -1 if without is None else without.id, self.usable_bytes
        for b in ((self.cursor, 0) if self.cursor and wrap else (self.cursor,)):
            for lo, hi, q0, q1, key in self.live.spans.order:  # busy ranges, lowest first
                if hi <= b or q0 >= p1 or p0 >= q1 or key == skip:
                    continue  # busy below the start, or in other partitions: nothing to skip past
                b = self._fix(b, nbytes, align)
                if b + nbytes <= lo:
                    return b
                b = max(b, hi)
            b = self._fix(b, nbytes, align)
            if b + nbytes <= usable:
                return b
        return None

    def _fix(self, b, nbytes, align):
        b = -(-b // align) * align
        bank = self.bank_bytes
        if bank and nbytes <= bank and b // bank != (b + nbytes - 1) // bank:
            b = -(-b // bank) * bank  # a PSUM tensor never crosses a bank: move to the next one
        if bank and nbytes > bank:
            b = -(-b // bank) * bank
        return b

    def allocate(self, partitions: int, nbytes: int, align: int, name: str, kind: str, location: str | None,
                 address: tuple[int, int] | None = None, pmax: int = 128) -> Allocation:
        if partitions > pmax:
            raise PartitionLimitError(f"{self.space.value} tensor {name!r}: partition dim {partitions} exceeds pmax {pmax}")
        if partitions < 1:
            raise ShapeError(f"{self.space.value} tensor {name!r}: partition dim {partitions}; a tile has 1..{pmax}")
        if address is not None:
            return self._place(partitions, nbytes, name, kind, location, address, pmax)
        best = self._room(partitions, nbytes, align, pmax)
        if best is None:
            raise CapacityError(
                f"{self.space.value.upper()} overflow: tensor {name!r} needs {nbytes} B in each of {partitions} partitions "
                f"but no free range of {self.usable_bytes} usable B per partition fits it; {self.live_summary()}")
        alloc = Allocation(self, best[0], partitions, best[1], nbytes, name, kind, location)
        alloc.fit = (align, pmax)
        if self.bank_bytes:
            self.cursor = (best[1] + nbytes) % self.usable_bytes
        self._fresh(alloc)
        self.live[alloc.id] = alloc
        return alloc

    def _room(self, partitions, nbytes, align, pmax, pinned=frozenset()):
        """Where a request fits, making room as the compiler does: names past their last use let go, then
        loop tensors held or expired give their bytes back, then live tiles are spilled (`_spill`)."""
        best = None
        if self.cursor:  # PSUM: the banks after the last tile first, loop tiles held or expired taken back
            # (blocks of a tensor of blocks only once no free bank is left: they may be read again)
            best = self._fit(partitions, nbytes, align, pmax, wrap=False)
            while best is None and self._reclaim(blocks=False):
                best = self._fit(partitions, nbytes, align, pmax, wrap=False)
        if best is None:
            best = self._fit(partitions, nbytes, align, pmax)
        if best is None and drop_dead_names():  # tiles past their last use are dead to the compiler
            best = self._fit(partitions, nbytes, align, pmax)
        while best is None and self._reclaim():
            best = self._fit(partitions, nbytes, align, pmax)
        if best is None and self._undefined_out(pinned):
            best = self._fit(partitions, nbytes, align, pmax)
        while best is None and self._consumed_out(pinned):
            best = self._fit(partitions, nbytes, align, pmax)
        while best is None and self._spill(partitions, nbytes, align, pmax, pinned):
            best = self._fit(partitions, nbytes, align, pmax)
        return best

    def _undefined_out(self, pinned) -> bool:
        """Take their bytes from the tiles declared but not written yet; False when there are none.

        A compiler's buffer lives from the instruction that first writes it to its last read, not from
        its declaration: a tile declared ahead of the instruction that fills it (`nl.ndarray` then
        `dst=`) holds no bytes before that. Such a tile leaves SBUF as a spilled one does, with nothing to
        save or reload, and is placed again when an instruction first touches it (Memory.restore)."""
        if self.spiller is None and not self.bank_bytes:
            return False
        out = [a for a in self.tensors()
               if a.place[5] >= 0 and not a.shared and a.id not in pinned and a.saved and a.scratch is None]
        for a in out:
            self._leave(a)
        return bool(out)

    def _consumed_out(self, pinned) -> bool:
        """PSUM: set aside the least recently used tile read since its last write; False when there is none.

        The compiler frees a PSUM buffer after its last read; an eager trace cannot tell a tile's last read
        from one more to come (a list of accumulators the program reads one at a time and keeps), so a read
        tile leaves as an expired block does (Memory._reclaim): no traffic, and brought back through SBUF,
        counted as a spill, only if it is used again. PSUM has no DMA of its own to spill otherwise."""
        if not self.bank_bytes or self.keeper is None:
            return False
        done = [a for a in self.tensors() if a.consumed and a.place[5] >= 0 and not a.shared and a.id not in pinned]
        if not done:
            return False
        a = min(done, key=lambda t: t.used)
        self.keeper(a)
        self._leave(a)
        return True

    def _spill(self, partitions, nbytes, align, pmax, pinned) -> bool:
        """Spill one live tile to HBM to make room; False when no tile can go.

        The victim is the tile whose next use is farthest (Belady's optimal policy, which a compiler can
        follow since it sees the whole loop body): an eager trace predicts it from the previous iteration
        of the innermost loop (liveness.next_use), preferring, at equal distance, a tile that needs no
        save. Without that history (straight-line code, a loop's first iteration) it is the least recently
        used tile. In that order, the first tile whose bytes alone make the request fit goes, else the
        first (and the caller asks again): small tiles that would not help stay."""
        if self.spiller is None:
            return False
        tiles = [a for a in self.tensors() if a.place[5] >= 0 and not a.shared and a.id not in pinned]
        if not tiles:
            return False
        far = [self.next_use(a) for a in tiles] if self.next_use is not None else [None]
        if None in far:
            tiles.sort(key=lambda a: a.used)
        else:
            order = sorted(range(len(tiles)), key=lambda i: (-far[i], not tiles[i].saved, tiles[i].used))
            tiles = [tiles[i] for i in order]
        victim = next((a for a in tiles if self._fit(partitions, nbytes, align, pmax, without=a) is not None), tiles[0])
        self.spiller(victim)  # the save DMA reads its bytes where they are
        self._leave(victim)
        return True

    def _leave(self, a: Allocation, *tables) -> None:
        """Tile `a` leaves the memory as a spilled one does (placed again before its next use, Memory.restore);
        also dropped from `tables`."""
        a.spilled, a.pending, a.source = True, None, None
        for table in (self.live, self.sourced, *tables):
            table.pop(a.id, None)

    def restore(self, a: Allocation, pinned, what: str, keep=frozenset()) -> None:
        """Place spilled tile `a` in SBUF again (the caller reloads its bytes), spilling others except
        `pinned` (ids of the tiles `what`, one instruction, needs together). When they would fit together
        but not around where the others sit, those not in `keep` are spilled too, to be placed afresh.
        Refused when they cannot fit."""
        best = self._room(a.partitions, a.nbytes, *a.fit, pinned)
        need = sum(t.nbytes for t in self.tensors() if t.id in pinned) + a.nbytes
        if best is None and need <= self.usable_bytes:
            best = self._room(a.partitions, a.nbytes, *a.fit, keep)
        if best is None:
            raise CapacityError(
                f"{self.space.value.upper()} overflow: the operands of {what} need {need} B per partition together "
                f"(tile {a.name!r}: {a.nbytes} B in each of {a.partitions} partitions, "
                f"{'reloaded after a spill' if a.scratch is not None else 'placed at its first write'}), more than fits "
                f"in {self.usable_bytes} usable B per partition with every other tile that could make room moved out; "
                f"{self.live_summary()}")
        a.p0, a.b0 = best
        a.place = (self.space.value, self.serial, a.p0, a.b0, a.nbytes, next(self.tiles))
        a.spilled, a.clean = False, False
        self._fresh(a)
        self.live[a.id] = a
        if a.expired:  # a block set aside and used again: its bytes may be taken back again
            self.expired[a.id] = a

    def _fit(self, partitions, nbytes, align, pmax, without=None, wrap=True):
        best = None
        for p0 in allowed_starts(partitions, pmax):
            b = self._first_fit(p0, partitions, nbytes, align, without, wrap)
            if b is not None and (best is None or b < best[1]):
                best = (p0, b)
        return best

    def _reclaim(self, blocks=True) -> bool:
        """Take bytes back, oldest first: first release a tensor held for its loop (freed by reference
        counting if the program dropped it), then evict an expired one (or set an expired block aside: it
        leaves as a spilled tile does, and a later use brings it back); not a block unless `blocks`. False:
        nothing left to take."""
        if self.held:
            del self.held[next(iter(self.held))]
            return True
        for a in self.expired.values():
            if a.block and not blocks:
                continue
            if a.block and self.keeper is not None:
                self.keeper(a)
                self._leave(a, self.expired)
            else:
                self.evict(a)
            return True
        return False

    def evict(self, a: Allocation) -> None:
        """Take an expired tensor's bytes back: it is dead for the compiler, though Python still holds it."""
        a.evicted, a.pending, a.source = True, None, None
        for table in (self.live, self.expired, self.sourced):
            table.pop(a.id, None)

    def live_summary(self, limit: int = 6) -> str:
        """The live tensors, grouped by name and source line: 'live tensors (N B per partition at most): ...'."""
        groups: dict = {}
        for a in sorted(self.live.values(), key=lambda a: a.id):
            key = (a.name.split("[")[0].rstrip("0123456789") or a.name, a.location)
            g = groups.setdefault(key, [[], 0, set()])
            g[0].append(a.name)
            g[1] += a.nbytes
            g[2].add((a.partitions, a.nbytes))
        if not groups:
            return "live tensors: none"
        rows = sorted(groups.items(), key=lambda kv: -kv[1][1])
        parts = []
        for (_, loc), (names, total, sizes) in rows[:limit]:
            label = ", ".join(map(repr, names)) if len(names) <= 3 else f"{names[0]!r} .. {names[-1]!r}"
            size = "{} partitions x {} B".format(*next(iter(sizes))) if len(sizes) == 1 else "mixed sizes"
            parts.append(f"{len(names)} x {label} ({size}; {total} B per partition) from {loc or '?'}")
        more = f"; and {len(rows) - limit} more groups" if len(rows) > limit else ""
        used = np.zeros(self.partitions, np.int64)
        for a in self.live.values():
            used[a.p0:a.p0 + a.partitions] += a.nbytes
        return f"live tensors ({int(used.max())} B in the fullest partition): " + "; ".join(parts) + more

    def _place(self, partitions, nbytes, name, kind, location, address, pmax):
        p0, b0 = (int(x) for x in address)
        if p0 not in allowed_starts(partitions, pmax):
            raise PartitionStartError(
                f"tensor {name!r} of {partitions} partitions cannot start at partition {p0}: allowed starts "
                f"{list(allowed_starts(partitions, pmax))} (P in (64,128] at 0; (32,64] at 0/64; (0,32] at 0/32/64/96)")
        if p0 + partitions > self.partitions or b0 < 0 or b0 + nbytes > self.usable_bytes:
            raise OutOfBoundsError(
                f"address=({p0}, {b0}) for {name!r} ({partitions} partitions x {nbytes} B) exceeds "
                f"{self.space.value.upper()} of {self.partitions} partitions x {self.usable_bytes} usable B")
        if self.bank_bytes and b0 % self.bank_bytes:
            raise PSUMBankError(f"PSUM address {b0} of {name!r} is not on a bank boundary (multiple of {self.bank_bytes} B)")
        alloc = Allocation(self, p0, partitions, b0, nbytes, name, kind, location)
        alloc.place = alloc.place[:5] + (-1,)  # the kernel chose these bytes: their reuse is the kernel's order
        shared = self._overlaps(p0, partitions, b0, nbytes)
        self._fresh(alloc)
        if shared:  # the bytes of live tensors under it are shared; only the rest is fresh
            alloc.pending, alloc.shared = None, True
            for a in shared:
                a.shared = True
                a.place = a.place[:5] + (-1,)
                if a.pending is not None:
                    a.settle()
            if self.refill:
                fresh = np.ones((partitions, nbytes), bool)
                for a in shared:
                    fresh[max(a.p0 - p0, 0):a.p0 + a.partitions - p0, max(a.b0 - b0, 0):a.b0 + a.nbytes - b0] = False
                self.data[p0:p0 + partitions, b0:b0 + nbytes][fresh] = POISON_BYTE
                self.poison[p0:p0 + partitions, b0:b0 + nbytes][fresh] = 1
        self.live[alloc.id] = alloc
        return alloc

    def _fresh(self, a: Allocation):
        self.version += 1
        a.pending = FILL if self.refill else None  # filled on first access, unless the first write covers it

    def dirty(self, p0: int, partitions: int, lo: int, hi: int) -> None:
        """Never-written bytes were set in this range: forget that the tensors over it were clean."""
        for a in self._overlaps(p0, partitions, lo, hi - lo):
            a.clean = False

    def written(self, p0: int, partitions: int, lo: int, hi: int) -> None:
        """Bytes in this range were written: the tensors over them no longer hold their HBM source's bytes."""
        for a in self._overlaps(p0, partitions, lo, hi - lo, self.sourced):
            a.source = None
            del self.sourced[a.id]

    def used_bytes(self) -> int:
        return sum(a.partitions * a.nbytes for a in self.tensors())


class HBM:
    """A core's (or an LNC pair's) HBM: one byte buffer per tensor, capacity counted over live tensors."""

    space = Space.HBM

    tensors = Memory.tensors

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.live = WeakTable()
        self.shared: dict[int, object] = {}  # n-th shared_hbm allocation of an LNC pair -> tensor

    def allocate(self, nbytes: int, name: str, kind: str, location: str | None, init: np.ndarray | None = None) -> Allocation:
        used = sum(a.nbytes for a in self.tensors())
        if used + nbytes > self.capacity:
            raise CapacityError(f"HBM overflow: tensor {name!r} needs {nbytes} B, {self.capacity - used} of "
                                f"{self.capacity} B free")
        mem = _HBMBuffer(nbytes, init)
        alloc = Allocation(mem, 0, 1, 0, nbytes, name, kind, location)
        alloc.clean = init is not None  # every byte written from `init`
        self.live[alloc.id] = alloc
        return alloc

    def host_bytes(self) -> int:
        """Host memory the live tensors' bytes take: the data and poison arrays they own (a borrowed input,
        read in place, takes none); the launch budget leaves these out (core/limits.py)."""
        bufs = {id(a.memory): a.memory for a in self.tensors()}
        return sum(arr.nbytes for m in bufs.values() for arr in (vars(m).get("data"), vars(m).get("poison"))
                   if arr is not None and arr.base is None)


class _HBMBuffer:
    """One HBM tensor's bytes, addressed as a single row.

    Made from a read-only array (a kernel launch's inputs), it reads that array's bytes in place until
    its first write copies them (View.store): the caller's array is never written.
    """

    space = Space.HBM
    partitions = 1

    def __init__(self, nbytes: int, init: np.ndarray | None = None):
        self.row_bytes, self.serial = nbytes, next(_SERIALS)
        if init is not None:  # every byte written from `init` (poison all 0, made when asked for); a read-only
            # `init` is borrowed until the tensor is written. Else never-written: made when asked for (__getattr__)
            self.data = init.reshape(1, -1).view(np.uint8)
            if init.flags.writeable or not init.flags.c_contiguous:
                self.data = self.data.copy()
        self.version = 0
        self.readers: weakref.WeakValueDictionary[int, Allocation] = weakref.WeakValueDictionary()  # deferred loads

    def __getattr__(self, name):
        """`data` and `poison` of a never-written tensor: filled when first asked for
        (a timing-only run never writes its outputs); the all-0 `poison` of one made from `init`, likewise."""
        if name not in ("data", "poison"):
            raise AttributeError(name)
        if name == "poison" and "data" in vars(self):  # made from `init`: every byte written
            self.poison = np.zeros((1, self.row_bytes), np.uint8)
            return self.poison
        return _never_written(self, (1, self.row_bytes), name)

    def settle_readers(self) -> None:
        """The tensor is about to be written: tiles whose load from it is deferred take their bytes now."""
        for a in list(self.readers.values()):
            if a.pending is not None and a.pending is not FILL:
                a.settle()
        self.readers.clear()

    def dirty(self, *region) -> None:
        """One tensor per buffer: its own `clean` flag is the only one to reset (the caller does)."""


def _never_written(mem, shape, name: str) -> np.ndarray:
    """Give `mem` its never-written bytes (0xFF data, poison 1) now; return the one asked for."""
    mem.data, mem.poison = np.full(shape, POISON_BYTE, np.uint8), np.ones(shape, np.uint8)
    return getattr(mem, name)
