# cython: boundscheck=False, wraparound=False
"""Replay a core's instruction stream on its engines: when each instruction starts and ends, and why.

Every compute engine (Tensor, Vector, Scalar, GpSimd, Sync) runs the stream the compiler's scheduler made of
its instructions: an instruction takes the first idle stretch of its engine, from when its producers have
finished plus a semaphore latency, long enough to hold it, so a later independent instruction runs in a gap
before an earlier blocked one (the compiler reorders independent instructions: docs/timing.md). Each DMA queue
runs its transfers in order, and each of the 16 DMA engines fills its free stretches with their pieces.
Producers come from read/write sets: the last writer of every byte it reads (RAW), and the last writer and
readers since of every byte it writes (WAW, WAR) while those bytes still hold the same tile, on any engine,
its own included, tracked per memory and partition quadrant in interval maps. Dependencies point back in
program order, so one pass in program order, each instruction placed around those placed before it, is a list
schedule with program order as its priority: deterministic, and O(n log n) plus the gaps an instruction passes.

The compiled build (trnsim/compiled.py) indexes lists and tuples without negative-index or bounds checks (the
directives above): every index in this module is a valid, non-negative one, so keep it that way.
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass, field

import numpy as np

from trnsim.core.collector import collector_off
from trnsim.core.isa.opcodes import Engine
from trnsim.core.isa.registry import AFTER, NAME, REGISTRY, workload_engine
from trnsim.core.timing.intervals import (Ends, IntervalMap, Latest, Pending, Waits, add, ended, forget, note,
                                          noted, producers, reach, right as _right, room, touch)
from trnsim.core.timing.rules import TRACKS, Rules

QUADRANT = 32  # partitions per dependence-tracking group (the partition start rule's finest step)
# Engine tracks are numbered: compute engine COMPUTE[t] is track t, DMA queue q is track DMA_TRACK + q.
COMPUTE = tuple(TRACKS)
DMA_TRACK = len(COMPUTE)
_TRACK = {e: COMPUTE.index(e.value) for e in Engine if e.value in TRACKS}  # a compute engine's track
_TRACK_NAME = tuple(TRACKS[e] for e in COMPUTE)  # a compute track's Event.track
_TENSOR = COMPUTE.index("tensor")
ORDERED = "no_reorder"  # Record.attrs key of an instruction issued in an `nl.no_reorder()` block (keep_order)
_FOREVER = float("inf")
_SLACK = 1e-9  # ns: rounding allowance when an instruction fills a gap exactly
_DMA = Engine.DMA  # read at every step: an Enum class's attribute goes through its metaclass's __getattr__ hook


class Event:
    """One instruction as scheduled: [start, end) on `track` ("TensorE", ... or "DMA q<j>" of its last piece),
    `deps` the events it waited on, `blocker` the event whose end set its start (-1: none), the FLOPs of its
    PE work (`model_flops`: those that count as the model's) and, for a DMA, `pieces` (engine, start, end)
    per DMA engine. `parts` holds the pieces: as a tuple, or, for a transfer whose pieces all span its own
    [start, end) (one engine class moved it: _dma), as the list of their engines, the tuples made when asked
    for (most runs never read them, and a transfer moves on 16 engines). `deps` likewise: up to three as
    `nd` integers d0, d1, d2 (C integers in the compiled build: no tuple per event), more as a tuple (`more`)."""

    __slots__ = ("index", "rec", "track", "start", "end", "nd", "d0", "d1", "d2", "more", "blocker", "flops", "parts",
                 "model_flops")

    def __init__(self, index: int, rec, track: str, start: float, end: float, deps: tuple[int, ...] = (),
                 blocker: int = -1, flops: float = 0.0, pieces: tuple[tuple[int, float, float], ...] = (),
                 model_flops: float = 0.0):
        self.index, self.rec, self.track, self.start, self.end = index, rec, track, start, end
        self.deps, self.blocker, self.flops, self.model_flops = deps, blocker, flops, model_flops
        self.parts = tuple(pieces)

    @property
    def pieces(self) -> tuple:
        parts = self.parts
        if type(parts) is tuple:
            return parts
        start, end, out = self.start, self.end, []
        for e in parts:
            out.append((e, start, end))
        return tuple(out)

    @pieces.setter
    def pieces(self, pieces) -> None:
        self.parts = tuple(pieces)

    @property
    def deps(self) -> tuple:
        return self.more if self.nd > 3 else (self.d0, self.d1, self.d2)[:self.nd]

    @deps.setter
    def deps(self, deps) -> None:
        deps = tuple(deps)
        self.nd, self.more = len(deps), deps if len(deps) > 3 else None
        self.d0, self.d1, self.d2 = (deps + (0, 0, 0))[:3] if len(deps) <= 3 else (0, 0, 0)

    def __repr__(self):
        return f"Event({self.index}, {self.track}, {self.start:.1f}..{self.end:.1f} ns)"


class Access:
    """One operand's entry in a plan (Scheduler._plan): its maps (see _cells), memory, bytes [lo, hi), whether
    it is written, its PSUM buffer (memory, partition, byte_lo) when written into PSUM else None, and its
    high-water key, None for HBM. Fields rather than a tuple: the compiled build reads them as C values, with no
    unpacking per operand and step. Made by _access. `seg`, not part of its value: the segment of its memory's
    whole map its bytes were found in last (_deps), where intervals.seek looks first next time (any value is
    safe: a guess that misses costs a search, never a different answer)."""

    __slots__ = ("cells", "memory", "lo", "hi", "w", "buffer", "key", "seg")

    def __eq__(self, other) -> bool:
        return (type(other) is Access and self.lo == other.lo and self.hi == other.hi and self.w == other.w
                and self.memory == other.memory and self.buffer == other.buffer and self.key == other.key
                and self.cells == other.cells)

    def __repr__(self):
        return f"Access({self.memory}, {self.lo}..{self.hi}, w={self.w})"


@dataclass
class Timeline:
    """All events of one core's stream, with the DMA pieces as flat arrays for utilisation figures (made when
    the stream is all placed: Scheduler.finish)."""

    target: str
    events: list[Event] = field(default_factory=list)
    piece_engine: array = field(default_factory=lambda: array("i"))
    piece_start: array = field(default_factory=lambda: array("d"))
    piece_end: array = field(default_factory=lambda: array("d"))
    memory_peak: dict[str, int] = field(default_factory=dict)


class Scheduler:
    """Places instructions one at a time, in stream order."""

    def __init__(self, spec, tspec):
        self.spec, self.t, self.rules = spec, tspec, Rules(spec, tspec)
        self.sem, self.warmup_start = tspec.semaphore_latency, tspec.tensor_warmup_start
        self.warmup = tspec.tensor_warmup_latency  # read per TensorE instruction, by _throttle
        self.free = [0.0] * DMA_TRACK  # per compute track: when its last work ends, and the event that ends it
        self.last = [-1] * DMA_TRACK
        # Per compute track, its busy stretches (sorted, disjoint): starts, ends and the event ending each, and
        # [end, event] of its last instruction that writes no memory (_compute: nothing moves past it) and of its
        # last one in a no_reorder block.
        self.busy = [([], [], [], [0.0, -1, 0.0, -1]) for _ in range(DMA_TRACK)]
        # TensorE's instructions in time order, where its dI/dt ramp applies (_warm_up): starts, events, unthrottled
        # ns and when the ramp in effect at each began.
        self.pe: tuple[list, list, list, list] = ([], [], [], [])
        # What _deps leaves for the rest of the step of the instruction being placed (emptied, not made anew, at
        # each step): the writers on its own engine whose tile it reads, the segments it read (map, segment, ...),
        # to note once its end is known, and the positions of the operands still to record.
        self.fed: list[int] = []
        self.pending = Pending()
        self.rest = Waits()
        # Per operand of the instruction being placed, the tile it belongs to (Region.tile): an array (a Waits used
        # as a plain one: C integers in the compiled build), its items rewritten at each step
        self.tiles = Waits()
        self.dma_names = [f"DMA q{q}" for q in range(spec.dma_engines)]  # a DMA queue's Event.track
        # Per DMA engine, its busy stretches (sorted, disjoint): starts, ends and the transfer of each. The engines
        # every transfer so far gave equal pieces (or none) hold equal stretches and queue ends: such a class of
        # engines shares one booking, placed once per transfer (_dma). `dma_lead`: per engine, the first engine of
        # its class; `dma_version` counts the times the classes split.
        self.dma_busy = [([], [], [])] * spec.dma_engines
        self.dma_lead, self.dma_version = [0] * spec.dma_engines, 0
        # Every event's pieces, in order (finish): per transfer, its pieces' engines (its signature's list), and per
        # run of its pieces with equal times (all of them when one engine class moved it), start, end and length.
        self.piece_engine, self.piece_start, self.piece_end, self.piece_run = [], [], [], []
        self.queue_of: dict[tuple, int] = {}  # kernel call site -> the DMA queue the compiler gave its transfers
        # Per DMA queue, per DMA engine: when the queue's last work there ended (its piece of a transfer, or the
        # completion write of one that moved nothing there), and that transfer (-1: none yet).
        self.queue_end: list[list[float]] = [[0.0] * spec.dma_engines for _ in range(spec.dma_engines)]
        self.queue_last: list[list[int]] = [[-1] * spec.dma_engines for _ in range(spec.dma_engines)]
        self.maps: dict[tuple, IntervalMap] = {}
        self.cells: dict = {}
        self.narrow: set = set()  # memories with a narrow (partition-quadrant) access recorded
        self.ends = Ends()  # per event: its track and its end
        self.waits = Waits()  # the events the instruction being placed waits for, in the order found (_deps)
        self.tl = Timeline(spec.target)
        self.events = self.tl.events  # appended to at every step
        self.high: dict[tuple, int] = {}  # (space, memory, partition, partitions) -> highest byte touched
        # The speed layer's caches, for the records it numbered (Record.sig, core/builder.py: Builder.checked;
        # a stream recorded without it has none): placement -> Region (Record.regions), and signature -> its
        # operands' plan (_plan), the positions of its PSUM operands, its cost, _apart, and its durations by
        # kind (the same layouts and attributes give the same work, so each cost rule is asked once per signature;
        # _cost's `memo`)
        self.regions: dict = {}
        self.plans: dict = {}
        # Per signature number, (its plans' entry, how many attributes its records were issued with) once a record
        # of it has been placed, else None (step: its records take their entry without a lookup by signature)
        self.known: list = []
        self.psum_tiles: dict[tuple, list[int]] = {}  # PSUM (memory, partition, byte) -> tiles placed there, in order
        self.tile_last = Latest()  # per PSUM tile: the event of its last access so far, and its end
        self.psum_high = 0  # highest PSUM byte per partition touched: the footprint the compiler rotates
        self.psum_bank, self.psum_banks = spec.psum_bank_bytes, spec.psum_banks  # read per new PSUM tile
        self.alone: dict[tuple, float] = {}  # (signature, engine) -> ns, for placing by workload (_ends)
        self.transfers: dict[tuple, tuple] = {}  # _transfer_key -> a transfer's cost and durations (_cost)
        self.like: dict[tuple, tuple] = {}  # _like's key -> a transfer's plan (_fresh) and its operands' byte lows
        # id(attrs) -> (attrs, a record holding them, its `like` entry, its operands' names and placements, its op and
        # engine): a loop's stamped records share their template's attributes, so a new signature is first compared
        # with that record alone (_fresh, _alike)
        self.near: dict[int, tuple] = {}
        self.numbers = _NUMBERS  # the events' indices (step)

    def _cells(self, r) -> tuple:
        """(maps to look up, maps to record in, maps a write clears, the lookup while the memory has seen no
        narrow access, the memory if this access is narrow else None) for a region.

        Each memory has a map for accesses that span all its partitions (and HBM tensors) plus one
        per partition quadrant for narrower ones, so whole-tile accesses, the common case, touch one
        map, while tiles on disjoint partitions stay independent. The quadrant maps of a memory stay
        empty until a narrow access is recorded (`self.narrow`), so until then only its whole map is read.
        """
        whole = r.space == "hbm" or (r.partition == 0 and r.partitions == self.spec.partitions)
        key = r.memory if whole else (r.memory, r.partition, r.partitions)
        cells = self.cells.get(key)
        if cells is None:
            top = self.maps.setdefault((r.memory, -1), IntervalMap())
            if r.space == "hbm":
                cells = ([top], [top], [], [top], None)
            else:
                n = self.spec.partitions // QUADRANT
                qs = range(n) if whole else range(r.partition // QUADRANT, (r.partition + r.partitions - 1) // QUADRANT + 1)
                quads = [self.maps.setdefault((r.memory, q), IntervalMap()) for q in qs]
                cells = (([top] + quads, [top], quads, [top], None) if whole
                         else ([top] + quads, quads, [], [top] + quads, r.memory))
            self.cells[key] = cells
        return cells

    def _plan(self, rec) -> tuple:
        """Per operand, what dependence tracking needs of its region (an Access). Records of one signature
        (Record.sig) share it, and need no Region of their own."""
        ops = rec.regions(self.regions) if rec.sig is not None else rec.operands
        plan, cells_of, writes, whole = [], self.cells, rec.writes, self.spec.partitions
        for name, r in ops.items():
            hbm, w = r.space == "hbm", name in writes
            cells = cells_of.get(r.memory if hbm or (r.partition == 0 and r.partitions == whole)
                                 else (r.memory, r.partition, r.partitions)) or self._cells(r)
            plan.append(_access(cells, r.memory, r.byte_lo, r.byte_hi, w,
                                (r.memory, r.partition, r.byte_lo) if w and r.space == "psum" else None,
                                None if hbm else (r.space, r.memory, r.partition, r.partitions)))
        return tuple(plan)

    def _deps(self, eng: int, plan, tiles, fresh: bool, index: int, accumulated) -> Waits:
        """The positions of the operands still to record (`self.rest`, a Waits array); the events this instruction must wait
        for are left in `self.waits`, each once, in the order found (ties for the latest go to the first).

        What an access waits for, segment by segment, is intervals._wait's: its producers, on its own engine too
        for a compute instruction (the compiler's scheduler may move it past them otherwise; the same-engine
        writers it reads are left in `fed`), none in a dead tile's reused bytes. The high-water marks move only on
        a `fresh` plan: a plan seen before reached the same bytes already.

        With `index` >= 0 (the operands touch disjoint bytes, so recording one changes no other's lookup), an
        access of a whole memory's map that covers exactly one segment is recorded here, in the same lookup
        (intervals.touch; a read of bytes used before once the instruction's end is known: `pending`)."""
        waits, fed, pending, rest = self.waits, self.fed, self.pending, self.rest
        waits.n = pending.n = rest.n = 0
        if fed:  # seldom used: skip the call
            fed.clear()
        high, narrow, last = self.high, self.narrow, self.tile_last
        dma = eng >= DMA_TRACK
        for at in range(len(plan)):
            a = plan[at]
            cells, memory, lo, hi, w, key = a.cells, a.memory, a.lo, a.hi, a.w, a.key
            tile = tiles.at[at]
            if a.buffer is not None and tile >= 0 and (tile >= last.cap or last.event[tile] < 0):  # a new tile
                self._psum_buffer(a.buffer, hi, tile, waits)
            # With no narrow access yet, the memory's whole map is looked up and recorded in, in one go (touch),
            # its search started where this operand's bytes were found last (a plan serves every record of its
            # signature, and a kernel reusing its buffers keeps their segments)
            found = False
            if index >= 0 and cells[4] is None and (not narrow or memory not in narrow):
                m = cells[1][0]
                m.hint = a.seg
                found = touch(m, lo, hi, w, tile, eng, dma, index, accumulated, waits, fed, pending)
                a.seg = m.hint
            if not found:
                k = rest.n  # add(rest, at), written out but for growing (positions are distinct)
                if k < rest.cap:
                    rest.at[k] = at
                    rest.n = k + 1
                else:
                    add(rest, at)
                for m in (cells[0] if narrow and memory in narrow else cells[3]):
                    producers(m, lo, hi, w, tile, eng, dma, waits, fed)
            if fresh and key is not None and high.get(key, 0) < hi:
                high[key] = hi
                if key[0] == "psum" and hi > self.psum_high:
                    self.psum_high = hi
        return rest

    def _psum_buffer(self, at, byte_hi, tile, waits) -> None:
        """A new PSUM tile of a loop gets one of the buffers its banks hold, not a free one every time: the
        compiler rotates the loop's PSUM footprint (rounded up to whole 2 KiB banks) over the 8 banks, so
        with `depth` copies of it the tile placed at an address waits for the last access of the tile
        placed there `depth` tiles before (reference 1.4: up to 8 accumulation groups outstanding)."""
        placed = self.psum_tiles.get(at)  # at: (memory, partition, byte_lo)
        if placed is None:
            placed = self.psum_tiles[at] = []
        footprint = self.psum_high if self.psum_high > byte_hi else byte_hi
        depth = self.psum_banks // -(-footprint // self.psum_bank)
        if depth < 1:
            depth = 1
        if len(placed) >= depth:
            was = placed[len(placed) - depth]
            last = self.tile_last
            if was < last.cap and last.event[was] >= 0:
                add(waits, last.event[was])
        placed.append(tile)

    def _record(self, accesses, plan, tiles, eng: int, index: int, accumulated, end: float) -> None:
        """Note this instruction, which ends at `end`, as the writer or a reader of the bytes it touched
        (`accesses`: positions in its `plan`), and of those `_deps` left pending (intervals.note, noted)."""
        narrow, ends = self.narrow, self.ends
        if self.pending.n:
            noted(self.pending, index, end, eng, ends)
        for k in range(accesses.n):
            at = accesses.at[k]
            a = plan[at]
            cells, memory, lo, hi, w = a.cells, a.memory, a.lo, a.hi, a.w
            tile = tiles.at[at]
            _, record, clear, _, mem = cells
            if mem is not None:
                narrow.add(mem)
            if w and memory in narrow:
                for m in clear:
                    forget(m, lo, hi)
            for m in record:
                note(m, lo, hi, w, index, tile, eng, accumulated, end, ends)

    def step(self, rec) -> Event:
        numbers, at = self.numbers, self.ends.n
        index = numbers[at] if at < len(numbers) else _number(numbers, at)
        sig, attrs, known, got = rec.sig, rec.attrs, self.known, None
        if type(sig) is int:
            at = sig
            if 0 <= at < len(known):
                seen = known[at]
                if seen is not None:
                    issued = seen[1]  # (a C integer in the compiled build: len(attrs) is compared unboxed)
                    if len(attrs) == issued:
                        got = seen[0]
        if got is not None:  # a seen signature's record with none of the attributes added after issue (_entry)
            fresh, after, ordered = False, None, False
        else:
            got, fresh = self._entry(rec, attrs)
            after, ordered = attrs.get(AFTER), attrs.get(ORDERED, False)
        plan, psum, w, solo, memo, eng = got
        placed, tiles, k = rec.placed, self.tiles, 0  # the tile each operand belongs to (Region.tile)
        if len(placed) > tiles.cap:
            room(tiles, len(placed))
        of = tiles.at
        for p in placed.values():
            place = p[0]
            of[k] = place[5]
            k += 1
        tiles.n = k
        q = -1
        if eng < 0:  # a transfer: its statement's queue
            q = self.queue_of.setdefault(_queue_site(rec), len(self.queue_of) % self.spec.dma_engines)
            eng = DMA_TRACK + q
        accumulated = rec.accumulated
        rest = self._deps(eng, plan, tiles, fresh, index if solo else -1, accumulated)
        waits, ends = self.waits, self.ends
        if after is not None:  # depends_on edges: a runtime one waits as for a producer, a schedule one on its engine
            for idx, runtime in after:
                if runtime or ends.track[idx] == eng:
                    add(waits, idx)
        ready, blocker = 0.0, -1
        if waits.n:
            # A transfer's fixed latency already holds the wait for its producers' semaphore (DMA-BW: descriptor
            # setup, synchronisation and semaphore-to-start, ~1300 ns cross-engine): no semaphore latency on top,
            # nor for a producer on the instruction's own engine.
            sem = self.sem if q < 0 else 0.0
            latest = -1  # the position in `waits` of the event that ends last (its index is taken as it is)
            end_of, track_of = ends.end, ends.track
            for k in range(waits.n):
                idx = waits.at[k]
                end, track = end_of[idx], track_of[idx]
                if track != eng:
                    end += sem
                if end > ready:
                    ready, latest = end, k
            if latest >= 0:  # the event's own index object (_in_order)
                ev = self.events[waits.at[latest]]
                blocker = ev.index
        if q >= 0:
            ev = self._dma(rec, w, index, ready, blocker, q, memo)
        else:
            ev = self._compute(rec, w, eng, index, ready, blocker, memo, ordered)
        if waits.n:
            _in_order(waits, ev)
        self.events.append(ev)
        done, me = ev.end, ends.n  # its end, and its index as a C integer in the compiled build
        if me < ends.cap:  # ended(ends, eng, done), written out but for growing
            ends.track[me] = eng
            ends.end[me] = done
            ends.n = me + 1
        else:
            ended(ends, eng, done)
        if rest.n or self.pending.n:
            self._record(rest, plan, tiles, eng, index, accumulated, done)
        if psum:
            last = self.tile_last
            for k in psum:
                tile = tiles.at[k]
                if tile >= 0:
                    if tile >= last.cap:
                        reach(last, tile)
                    if last.event[tile] < 0 or done >= last.end[tile]:
                        last.end[tile] = done
                        last.event[tile] = me
        return ev

    def _entry(self, rec, attrs) -> tuple:
        """(its signature's entry in `plans`, whether it was made now) of a record, its engine picked where the
        compiler picks it. Where the record has a signature number and no engine to pick, the entry is also kept by
        that number in `known`, with the count of the attributes it was issued with: a signature fixes those (the
        speed layer numbers an instruction by them, core/fast/memo.py), and later ones (depends_on edges, a
        no_reorder block's mark, a name) only add to them, so a record of that signature with as many attributes
        has none of the later ones, and step takes its entry from `known` without looking any up."""
        sig, plans = rec.sig, self.plans
        choices = attrs.get("choices")
        if choices is not None:  # issued with no engine: placed as the compiler would, by workload
            rec.engine = workload_engine(choices, [self._ends(rec, e) for e in choices])
            if sig is not None:
                sig = (sig, rec.engine)
        got = plans.get(sig) if sig is not None and plans is not None else None
        fresh = got is None
        if fresh:  # the operands' plan, which of them are PSUM tiles, the cost, its durations so far
            got = self._fresh(rec, sig is not None and plans is not None)
            if sig is not None and plans is not None:
                plans[sig] = got
        if choices is None and type(sig) is int and plans is not None:
            known, at = self.known, sig
            if 0 <= at < 2 * len(known) + 4096:  # numbers are dense, from 0
                if at >= len(known):
                    known.extend([None] * (at + 1 - len(known)))
                issued = len(attrs) - (AFTER in attrs) - (ORDERED in attrs) - (NAME in attrs)
                known[at] = (got, issued)
        return got, fresh

    def _fresh(self, rec, numbered: bool) -> tuple:
        """(plan, its PSUM positions, cost, _apart, durations by kind, compute track or -1 for a transfer) of a
        record whose signature is new (the signature holds its engine). A loop's instructions are new signatures
        that differ only in where their views start; one like an earlier one but for that (`numbered`: the speed
        layer numbered it; _like) takes the earlier one's plan, moved, and its cost and durations, which read no
        addresses (_like)."""
        like = None
        if numbered:
            attrs = rec.attrs
            near = self.near.get(id(attrs))
            if near is not None and near[0] is attrs:  # held there, so its id is its own
                lows = _alike(near, rec)
                if lows is not None:
                    seen = near[2]
                    return _moved(seen[0], seen[1], lows, seen[2])
            like = _like(rec)
            seen = self.like.get(like[0])
            if seen is not None:
                if near is None:
                    self.near[id(attrs)] = _nearby(rec, seen)
                return _moved(seen[0], seen[1], like[1], seen[2])
        plan = self._plan(rec)
        cost, memo = self._cost(rec)
        got = (plan, _psum_positions(plan), cost, _apart(plan), memo, -1 if rec.engine is _DMA else _TRACK[rec.engine])
        if like is not None:
            seen = self.like[like[0]] = (got, like[1], [p[1].itemsize for p in rec.placed.values()])
            if id(rec.attrs) not in self.near:
                self.near[id(rec.attrs)] = _nearby(rec, seen)
        return got

    def _cost(self, rec) -> tuple:
        """(cost, its durations by kind, filled as they are asked for: [PE work (Rules.matmul), stream alone and
        after a producer (Rules.stream, dependent False and True), pieces (_dma)]) of a record whose signature is
        new. The transfers of a loop are new signatures that differ only in which HBM bytes they reach, which
        neither a transfer's cost (isa/dma.py: _dma_cost) nor its pieces (Rules.dma_pieces) read (no alignment is
        modelled), so transfers share both by their key without them (_transfer_key)."""
        if rec.engine is not _DMA or rec.sig is None:
            return REGISTRY[rec.op].cost(rec, self.spec), [None, None, None, None]
        key = _transfer_key(rec, self.regions)
        got = self.transfers.get(key)
        if got is None:
            got = self.transfers[key] = (REGISTRY[rec.op].cost(rec, self.spec), [None, None, None, None])
        return got

    def _ends(self, rec, eng) -> float:
        """When record `rec` would end on compute engine `eng` after the work already placed there: its queue's
        end plus its own time on that engine, as a compiler balancing the engines' workloads estimates it
        (registry.workload_engine; its producers are not looked at). Its time is kept per signature."""
        key = (rec.sig, eng)
        dur = self.alone.get(key) if rec.sig is not None else None
        if dur is None:
            placed, rec.engine = rec.engine, eng
            dur = self.rules.stream(rec, REGISTRY[rec.op].cost(rec, self.spec), False)
            rec.engine = placed
            if rec.sig is not None:
                self.alone[key] = dur
        return self.free[_TRACK[eng]] + dur

    def _compute(self, rec, w, eng, index, ready, blocker, memo, ordered) -> Event:
        """An instruction on a compute engine, in the first idle stretch of the engine from `ready` on that holds
        it: the compiler's scheduler lets a later independent instruction run before an earlier blocked one
        (docs/timing.md, The model). An instruction that writes no memory (a barrier, an RNG seed, a register)
        acts on state the dependences do not see, so it keeps its place on its engine: it starts after all work
        placed there, and nothing after it starts before it ends. An instruction of a `no_reorder` block starts
        after the block's instructions before it on its engine (`ordered`). `memo`: the durations its signature's
        records were given so far, by kind."""
        if rec.hoisted is not None:  # computed once, by an earlier instance (core/hoist.py)
            return _event(index, rec, _TRACK_NAME[eng], ready, ready, blocker, 0.0, 0.0, ())
        starts, ends, owner, fence = self.busy[eng]
        n = len(starts)
        fenced = not rec.writes
        if fenced:  # the earliest start its engine's order allows, and the event that sets it
            at, held = self.free[eng], self.last[eng]
        else:
            at, held = fence[0], fence[1]
        if ordered and fence[2] > at:
            at, held = fence[2], fence[3]
        if ready > at:
            at = ready
        i = _right(ends, at)  # the first busy stretch ending after `at`: the gap before it comes first
        tensor, fed = eng == _TENSOR, self.fed
        ramped = tensor and self.warmup_start < 1.0
        flops = model = base = warm = 0.0
        if tensor:
            got = memo[0]
            if got is None:
                got = memo[0] = self.rules.matmul(w)
            base, flops, model = got
        while True:
            if i > 0:  # the gap after stretch i - 1
                gap, prev = ends[i - 1], owner[i - 1]
            else:
                gap, prev = 0.0, -1
            start = at if at > gap else gap
            gap_end = starts[i] if i < n else _FOREVER
            if start < gap_end:
                if tensor:
                    dur = base
                    if ramped:  # the ramp of the instruction before it in time, if TensorE has not idled since
                        if i == 0 or start - gap > 0.5 * self.warmup:
                            warm = start
                        else:  # after the last stretch, the last instruction in time
                            warms = self.pe[3]
                            warm = warms[len(warms) - 1] if i == n else warms[_right(self.pe[0], start) - 1]
                        dur /= self._throttle(start, gap, warm)
                else:
                    # The static overhead: the instruction waited for a producer, or follows the instruction on
                    # its engine whose output tile it reads (trainium_inferentia2_arch.rst, Vector engine:
                    # back-to-back instructions each depending on the output tile of the previous one add ~100
                    # cycles).
                    dependent = ready > gap or (prev >= 0 and prev in fed)
                    got = memo[1 + dependent]
                    if got is None:
                        got = memo[1 + dependent] = self.rules.stream(rec, w, dependent)
                    dur = got
                if start + dur <= gap_end + _SLACK:
                    break
            i += 1
        if start == gap or blocker < 0:
            blocker = prev
        if start > ready and start != gap:
            blocker = held  # held by the engine's order
        end = start + dur
        done = end  # as the lists hold it (the compiled build boxes it once; the event holds C doubles, and the
        # start is boxed only when _occupy begins a new busy stretch with it)
        if fenced:
            fence[0], fence[1] = done, index
        if ordered:
            fence[2], fence[3] = done, index
        _occupy(starts, ends, owner, i, start, done, index)
        free = self.free[eng]  # compared as a C double in the compiled build (as in _occupy)
        if end >= free:
            self.free[eng], self.last[eng] = done, index
        if ramped:
            self._warm_up(start, end, index, base, warm)
        return _event(index, rec, _TRACK_NAME[eng], start, end, blocker, flops, model, ())

    def _warm_up(self, start: float, end: float, index: int, base: float, warm: float) -> None:
        """Enter TensorE instruction `index`, [start, end) with ramp start `warm`, in TensorE's time order, and let
        the ramp follow that order: an instruction placed in a gap, before instructions placed already, may join
        them to its ramp (TensorE then idles less than half the window before them), so they run warmer, from
        their own start (kept: those waiting for them are placed already), to a sooner end. Each instruction
        is only ever made warmer: the walk stops at the first that is not."""
        starts, events, bases, warms = self.pe
        k = len(starts)
        if k == 0 or start >= starts[k - 1]:  # after every other: none to warm (the common case)
            starts.append(start)
            events.append(index)
            bases.append(base)
            warms.append(warm)
            return
        k = _right(starts, start)
        starts.insert(k, start)
        events.insert(k, index)
        bases.insert(k, base)
        warms.insert(k, warm)
        half, ends = 0.5 * self.warmup, self.ends
        for j in range(k + 1, len(starts)):
            s = starts[j]
            if s - end > half:
                break  # idle long enough to re-engage the throttle: its ramp starts afresh, as before
            if warm >= warms[j]:
                break
            warms[j] = warm
            e = events[j]
            end = s + bases[j] / self._throttle(s, s, warm)
            if end < ends.end[e]:
                self._shorten(e, s, end)
            else:
                end = ends.end[e]

    def _shorten(self, e: int, start: float, end: float) -> None:
        """End TensorE event `e`, which starts at `start`, sooner, at `end`: its engine is free from then."""
        starts, ends, owner, fence = self.busy[_TENSOR]
        was = self.ends.end[e]
        i = _right(starts, start) - 1  # the busy stretch that holds it
        if owner[i] != e:  # others follow it in that stretch: they keep theirs, from its old end
            starts.insert(i + 1, was)
            ends.insert(i + 1, ends[i])
            owner.insert(i + 1, owner[i])
            owner[i] = e
        ends[i] = end
        self.ends.end[e] = self.tl.events[e].end = end
        if self.last[_TENSOR] == e:
            self.free[_TENSOR] = end
        if fence[1] == e:
            fence[0] = end
        if fence[3] == e:
            fence[2] = end

    def _throttle(self, start: float, idle_since: float, warm_since: float) -> float:
        """TensorE rate under the dI/dt limit: from `tensor_warmup_start` up to 1 over the warm-up time, from
        `warm_since`, the start of the ramp in effect when TensorE went idle at `idle_since`."""
        # Below 50% use over a window re-engages the throttle: an idle stretch of half the window.
        if start - idle_since > 0.5 * self.warmup:
            warm_since = start
        ramp = min(1.0, (start - warm_since) / self.warmup)
        return self.warmup_start + (1.0 - self.warmup_start) * ramp

    def _dma(self, rec, w, index, ready, blocker, q, memo) -> Event:
        """A transfer on DMA queue `q`: on each DMA engine, its piece follows the queue's previous work on that
        engine (a queue runs in order per engine, nki-dma-overview.rst) and takes the engine's first free
        stretch (engines serve all queues, so a transfer waiting for its data does not hold back another
        queue's). Every engine writes each transfer's completion, also where it moved nothing; the queue's next
        work on that engine starts a turnaround after it.

        The engines of one class (dma_lead) start the transfer equal and take equal pieces: the piece of the
        class's first engine is placed, and the others' are copies of it."""
        go = ready + self.spec.dma_fixed_latency  # descriptor setup and semaphore to start
        turn = self.t.dma_turnaround_latency
        ends, lasts = self.queue_end[q], self.queue_last[q]
        got = memo[3]
        if got is None:
            got = memo[3] = _by_engine(self.rules.dma_pieces(rec, w), len(ends))
        if got[3] != self.dma_version:  # the classes as they are now: split them where this transfer must
            self._regroup(got)
        busy, split, heads, of = self.dma_busy, got[0], got[4], got[5]
        placed = []  # per piece placed: (ready, its blocker, start, end, the transfer before)
        for e, dur in heads:
            at, by = go, blocker
            if lasts[e] >= 0 and ends[e] + turn > at:
                at, by = ends[e] + turn, lasts[e]
            s, f, before = _place(busy[e], at, dur, index)
            placed.append((at, by, s, f, before))
            ends[e], lasts[e] = f, index
        starts, finishes, runs = self.piece_start, self.piece_end, self.piece_run
        moved = got[6]
        self.piece_engine.append(moved)
        if len(placed) == 1:  # one class moved it all: every piece is its piece (the loop below, in short)
            x = placed[0]
            first, last = x[2], x[3]
            pieces = moved  # every piece [first, last): Event.pieces makes their tuples when asked
            for e in moved:
                ends[e], lasts[e] = last, index
            starts.append(first)
            finishes.append(last)
            runs.append(len(moved))
            start, end = first, last
            at = x[0]
            bound = x[1] if start == at else x[4]
        else:
            pieces = []
            end, start, bound = -1.0, -1.0, blocker
            for k in range(len(split)):
                e = split[k][0]
                x = placed[of[k]]
                first, last = x[2], x[3]  # its class's piece: shared by the pieces' tuples and the flat lists
                pieces.append((e, first, last))
                starts.append(first)
                finishes.append(last)
                runs.append(1)
                ends[e], lasts[e] = last, index
                s, f = first, last
                if start < 0.0 or s < start:
                    start = s
                if f > end:
                    end = f
                    at = x[0]
                    bound = x[1] if s == at else x[4]
        for e in got[2]:  # the engines it moves nothing on: their completion write, in queue order
            at = go if lasts[e] < 0 or ends[e] + turn <= go else ends[e] + turn
            ends[e], lasts[e] = at, index
        return _event(index, rec, self.dma_names[q], start, end, bound, 0.0, 0.0,
                      pieces if len(placed) == 1 else tuple(pieces))

    def _regroup(self, got) -> None:
        """Split the DMA engine classes so that each holds only engines given equal pieces by a transfer (`got`:
        _by_engine's; an engine that leaves its class takes a copy of the class's booking), and note in `got` the
        pieces to place under the classes now: those on a class's first engine (every piece, when an engine has
        two), and for each piece, which of those it copies."""
        lead, busy, durs = self.dma_lead, self.dma_busy, got[1]
        n = len(lead)
        first: dict = {}
        new = [first.setdefault((lead[e], durs[e] if durs is not None else e), e) for e in range(n)]
        if new != lead:
            for e in range(n):
                if new[e] != lead[e]:
                    if new[e] == e:  # the first engine of a new class: its own booking
                        starts, ends, owner = busy[lead[e]]
                        busy[e] = (list(starts), list(ends), list(owner))
                    else:
                        busy[e] = busy[new[e]]
            self.dma_lead, self.dma_version = new, self.dma_version + 1
        split, heads, of, at = got[0], [], [], {}
        for k in range(len(split)):
            e = split[k][0]
            if new[e] == e:
                at[e] = len(heads)
                heads.append(split[k])
            of.append(at.get(e, -1))
        for k in range(len(split)):
            if of[k] < 0:
                of[k] = at[new[split[k][0]]]
        got[3], got[4], got[5] = self.dma_version, heads, of

    def finish(self) -> Timeline:
        """The timeline, with its DMA pieces as flat arrays and the SBUF/PSUM high-water mark: per partition,
        the highest byte touched."""
        tl = self.tl  # filled by numpy, from one array of engines per signature and the pieces' runs
        tl.piece_engine, tl.piece_start, tl.piece_end = array("i"), array("d"), array("d")
        if self.piece_run:
            of: dict = {}  # a signature's list of engines (alive meanwhile, so its id is its own) -> its number
            lists, codes = [], []
            for m in self.piece_engine:
                c = of.get(id(m))
                if c is None:
                    c = of[id(m)] = len(lists)
                    lists.append(m)
                codes.append(c)
            if len({len(m) for m in lists}) == 1:  # one table row per list, taken in order (no concatenation of
                engines = np.array(lists, np.int32)[np.array(codes, np.intp)].ravel()  # thousands of arrays)
            else:
                rows = [np.array(m, np.int32) for m in lists]
                engines = np.concatenate([rows[c] for c in codes])
            runs = np.array(self.piece_run, np.intp)
            tl.piece_engine.frombytes(memoryview(np.ascontiguousarray(engines)).cast("B"))
            tl.piece_start.frombytes(memoryview(np.repeat(np.array(self.piece_start, np.float64), runs)).cast("B"))
            tl.piece_end.frombytes(memoryview(np.repeat(np.array(self.piece_end, np.float64), runs)).cast("B"))
        marks: dict[str, list[int]] = {}
        for (space, _, p0, n), hi in self.high.items():
            row = marks.setdefault(space, [0] * self.spec.partitions)
            for p in range(p0, p0 + n):
                row[p] = max(row[p], hi)
        self.tl.memory_peak = {space: sum(row) for space, row in marks.items()}
        return self.tl


# 0, 1, 2, ...: the int objects every timeline's events take as their indices (and their deps, blockers and the
# busy stretches' owners as theirs), made once per process rather than once per event and run; up to _NUMBERS_CAP
# (a few MB), later indices are made per event.
_NUMBERS: list[int] = []
_NUMBERS_CAP = 1 << 18


def _number(numbers: list, n: int) -> int:
    """Index `n` as an int object: `numbers` (_NUMBERS) grown to hold it while under its cap."""
    if n < _NUMBERS_CAP:
        numbers.extend(range(len(numbers), min(max(2 * len(numbers), n + 1, 4096), _NUMBERS_CAP)))
        return numbers[n]
    return n


def keep_order(stream, lo: int) -> None:
    """Mark the records of `stream` from position `lo` on as issued in an `nl.no_reorder()` block: the compiler's
    scheduler keeps them in program order (nki.language.no_reorder), so each waits, on its engine, for the
    block's instructions before it."""
    for rec in stream[lo:]:
        rec.attrs[ORDERED] = True


def _event(index: int, rec, track: str, start: float, end: float, blocker: int, flops, model, pieces) -> Event:
    """Event(index, rec, track, start, end, (), blocker, flops, pieces, model), made without calling its
    constructor (whose keyword arguments the compiled build parses at every call)."""
    ev = Event.__new__(Event)
    ev.index, ev.rec, ev.track, ev.start, ev.end = index, rec, track, start, end
    ev.nd, ev.d0, ev.d1, ev.d2, ev.more = 0, 0, 0, 0, None
    ev.blocker, ev.flops, ev.parts, ev.model_flops = blocker, flops, pieces, model
    return ev


def _access(cells, memory, lo: int, hi: int, w: bool, buffer, key) -> Access:
    """Access(...), made without a constructor call (as _event)."""
    a = Access.__new__(Access)
    a.cells, a.memory, a.lo, a.hi, a.w, a.buffer, a.key, a.seg = cells, memory, lo, hi, w, buffer, key, 0
    return a


def _in_order(waits, ev) -> None:
    """Give event `ev` the events it waited for (distinct positions in `waits`, which are their indices) as its
    deps, in index order: the two or three of most instructions by comparisons, more by a sort. (Written out,
    without a call per event: the Python build pays for calls.)"""
    at, n = waits.at, waits.n
    ev.nd = n
    if n == 1:
        ev.d0 = at[0]
    elif n == 2:
        a, b = at[0], at[1]
        if a > b:
            a, b = b, a
        ev.d0, ev.d1 = a, b
    elif n == 3:
        a, b, c = at[0], at[1], at[2]
        if a > b:
            a, b = b, a
        if b > c:
            b, c = c, b
            if a > b:
                a, b = b, a
        ev.d0, ev.d1, ev.d2 = a, b, c
    else:
        got = []
        for k in range(n):
            got.append(at[k])
        got.sort()
        ev.more = tuple(got)


def _occupy(starts, ends, owner, i: int, s: float, f: float, index: int) -> None:
    """Mark [s, f) of a compute engine busy by event `index`, in the gap before stretch `i`, merging with the
    stretches it touches; a stretch's owner is the event that ends it. (Times are read into locals before they
    are compared: the compiled build then compares C doubles, here and in _place/_book_at, and stores `s` and
    `f` as given.)"""
    start, finish = s, f
    last = ends[i - 1] if i > 0 else -_FOREVER
    if last >= start:
        ends[i - 1], owner[i - 1] = f, index
        i -= 1
    else:
        starts.insert(i, s)
        ends.insert(i, f)
        owner.insert(i, index)
    if i + 1 < len(starts):
        after = starts[i + 1]
        if after <= finish + _SLACK:
            ends[i], owner[i] = ends[i + 1], owner[i + 1]
            del starts[i + 1], ends[i + 1], owner[i + 1]


def _place(busy, at: float, dur: float, index: int) -> tuple[float, float, int]:
    """Book `dur` ns of a DMA engine (`busy`: its stretches' starts, ends and owners) from `at` on, in its free
    stretches: an engine interleaves the descriptors of its queues, so a transfer fills the gaps other queues'
    transfers leave. Returns (start, end, the transfer that last held the engine before the end; -1 if none)."""
    starts, ends, owner = busy
    i = _right(ends, at)  # the first busy stretch ending after `at`
    t, before, n = at, -1, len(starts)
    while i < n:  # no gap before stretch i: wait for its end (as the loop below does)
        s = starts[i]
        if s > t:
            break
        f = ends[i]
        if f > t:
            t = f
        before = owner[i]
        i += 1
    take = dur
    if i < n:
        s = starts[i]
        if s - t < dur:
            take = s - t
    if dur - take <= 1e-9:  # it fits the first gap, which is before stretch i (_book's place for t)
        _book_at(starts, ends, owner, i, t, t + take, index)
        return t, t + take, before
    left, segs = dur, []  # from the first gap on
    while left > 1e-9:
        gap_end = starts[i] if i < len(starts) else _FOREVER
        if gap_end > t:
            take = min(left, gap_end - t)
            segs.append((t, t + take))
            t, left = t + take, left - take
        if left > 1e-9:
            f = ends[i]
            if f > t:
                t = f
            before = owner[i]
            i += 1
    for s, f in segs:
        _book(starts, ends, owner, s, f, index)
    return segs[0][0], segs[len(segs) - 1][1], before


def _book(starts, ends, owner, s: float, f: float, index: int) -> None:
    """Mark [s, f) busy, merging with the stretches it touches."""
    _book_at(starts, ends, owner, _right(starts, s), s, f, index)


def _book_at(starts, ends, owner, i: int, s: float, f: float, index: int) -> None:
    """_book, given `i` = _right(starts, s)."""
    last = ends[i - 1] if i > 0 else -_FOREVER
    if last >= s:
        if f > last:
            ends[i - 1] = f
        else:
            f = last
        owner[i - 1] = index
        i -= 1
    else:
        starts.insert(i, s)
        ends.insert(i, f)
        owner.insert(i, index)
    if i + 1 < len(starts):  # f: the end of stretch i now
        after = starts[i + 1]
        if after <= f:
            last = ends[i + 1]
            if last > f:
                ends[i] = ends[i + 1]
            del starts[i + 1], ends[i + 1], owner[i + 1]


def _queue_site(rec) -> tuple:
    """What gives a transfer its DMA queue: its DMA statement (two calls on one line are two), or, when the kernel
    hands it to one trigger engine's hardware DGE (dge_mode=hwdge, engine=scalar or sync), that DGE's queue,
    shared by every statement doing so: a queue goes with its trigger engine and its descriptor generation
    (nki-dma-overview.rst; the profiler's qSyncDynamicHW, a hardware_dynamic queue)."""
    a = rec.attrs
    if a.get("dge_mode") == "hwdge":
        eng = a.get("queue_engine")
        if eng == "scalar" or eng == "sync":
            return ("hwdge", eng)
    return (rec.location, rec.site)


def _transfer_key(rec, shared: dict) -> tuple:
    """What a transfer's cost and pieces are computed from: its op, destination operands and attributes (with
    their types, as in a signature) and each operand's Region but for which memory and bytes it reaches (its
    partitions, shape, dtype and contiguous run stay)."""
    key = [rec.op._value_, rec.writes]  # (the op by its value, as in _like)
    for n, r in rec.regions(shared).items():
        key.append((n, r.space, r.partition, r.partitions, r.shape, r.dtype, r.contiguous))
    for n, x in rec.attrs.items():
        key.append((n, type(x), x))
    return tuple(key)


def _like(rec) -> tuple:
    """(key, each operand's base byte and lowest element, flat; None for a gather/scatter's) of a record, for _fresh
    (the item sizes, which the key fixes, are asked of the first record of a key alone). A Region's bytes
    are its buffer's base plus its span times the item size (tensor.region_at), the span being the view's offset
    plus what its shape and strides reach (or the span the view was given), and nothing else in it depends on the
    base or the offset. So the key holds each operand's placement but for its base, tile, offset and span (the
    span's length and contiguous run stay): two records of one key have plans that differ only by each operand's
    byte shift, and one cost and durations. For these read no addresses: an instruction's cost (core/isa, each
    `define`'s cost) reads its op, engine, written operands and attributes and its operands' space, partitions,
    shape, dtype and contiguous run; Rules reads the cost and the operands' placements but for where they lie
    (strides, on chip, gathered), and a transfer's pieces the first partition, which the key keeps. (A cost rule
    that read a Region's bytes, memory or tile would break this.) A gather/scatter operand keeps its whole
    placement. (The op and engine enter by their values: an Enum member's hash is a Python call, and the key is
    hashed once per new signature.)"""
    key, lows = [rec.op._value_, rec.engine._value_, rec.writes, rec.accumulated], []
    for n, p in rec.placed.items():
        place, span = p[0], p[8]
        if p[7]:
            key.append((n, p))
            lows.extend((None, None))
        elif span is None:
            key.append((n, place[0], place[1], place[2], place[4], p[1], p[2], p[3], p[5], p[6]))
            lows.extend((place[3], p[4]))
        else:
            key.append((n, place[0], place[1], place[2], place[4], p[1], p[2], p[3], p[5], p[6], span[1] - span[0],
                        span[2]))
            lows.extend((place[3], span[0]))
    for n, x in rec.attrs.items():
        key.append((n, type(x), x))
    return tuple(key), lows


def _nearby(rec, seen) -> tuple:
    """Scheduler.near's entry for record `rec`, whose `like` entry is `seen`."""
    return rec.attrs, rec, seen, tuple(rec.placed), tuple(rec.placed.values()), (rec.op, rec.engine)


def _alike(near, b):
    """The operands' base bytes and lowest elements (_like's) of record `b` if its _like key is that of the record
    in `near` (_nearby's), which holds the same attributes, else None. Compared field by field, with no key made
    or hashed (an operand whose placement is that record's own object compares equal at once: a loop's stamped
    records keep the placements that do not move)."""
    a, names, placed, head = near[1], near[3], near[4], near[5]
    op, engine = b.op, b.engine  # the same members, as _like's key has their values
    if (head[0] is not op or head[1] is not engine or a.accumulated != b.accumulated
            or not (a.writes is b.writes or a.writes == b.writes)):
        return None
    pb = b.placed
    if len(pb) != len(names):
        return None
    lows, k = [], 0
    for n, q in pb.items():
        if names[k] != n:  # the names in one order: _like's key lists them so
            return None
        p = placed[k]
        k += 1
        place = q[0]
        if p is not q:
            if q[7] or p[7]:  # a gather/scatter's: its whole placement
                if not (p[7] and q[7] and p == q):
                    return None
            else:
                # (compared as a dict compares keys, identity first, written out: the Python build pays for calls)
                was, span, other = p[0], q[8], p[8]
                if not ((p[1] is q[1] or p[1] == q[1]) and (p[2] is q[2] or p[2] == q[2])
                        and (p[3] is q[3] or p[3] == q[3]) and p[5] == q[5] and p[6] == q[6] and was[0] == place[0]
                        and was[1] == place[1] and was[2] == place[2] and was[4] == place[4]):
                    return None
                if span is None or other is None:
                    if span is not other:
                        return None
                elif not (other[1] - other[0] == span[1] - span[0] and other[2] == span[2]):
                    return None
        if q[7]:
            lows.append(None)
            lows.append(None)
        elif q[8] is None:
            lows.append(place[3])
            lows.append(q[4])
        else:
            lows.append(place[3])
            lows.append(q[8][0])
    return lows


def _moved(got, was, lows, sizes) -> tuple:
    """_fresh's tuple `got` of a record whose operands' base bytes and lowest elements were `was`, for one like it
    whose are `lows` (_like; `sizes`: the operands' item sizes): each plan entry's bytes (and PSUM buffer) moved
    by the difference."""
    entries = list(got[0])
    for k in range(len(sizes)):
        base, first = lows[2 * k], lows[2 * k + 1]
        if base is not None and (base != was[2 * k] or first != was[2 * k + 1]):
            a = entries[k]
            shift = base - was[2 * k] + (first - was[2 * k + 1]) * sizes[k]
            buffer = a.buffer
            if buffer is not None:
                buffer = (buffer[0], buffer[1], buffer[2] + shift)
            entries[k] = _access(a.cells, a.memory, a.lo + shift, a.hi + shift, a.w, buffer, a.key)
    plan = tuple(entries)
    return plan, got[1], got[2], _apart(plan), got[4], got[5]


def _by_engine(split, n: int) -> list:
    """What _dma keeps of a transfer's pieces (Rules.dma_pieces) over `n` DMA engines: [the pieces, per engine
    its piece's ns (-1.0: none; None when an engine has two), the engines it moves nothing on, (_regroup) the
    classes' version and the pieces to place under them, and the pieces' engines]."""
    durs = [-1.0] * n
    for e, dur in split:
        if durs[e] >= 0.0:
            durs = None
            break
        durs[e] = dur
    moved = [e for e, _ in split]
    return [split, durs, [e for e in range(n) if e not in moved], -1, None, None, moved]


def _psum_positions(plan) -> tuple[int, ...]:
    """The positions of a plan's PSUM operands."""
    return tuple(k for k, p in enumerate(plan) if p.key is not None and p.key[0] == "psum")


def _apart(plan) -> bool:
    """Whether no two operands of a plan touch the same bytes of one memory (loops, not a generator: the compiled
    build asks this of every new signature)."""
    n = len(plan)
    for k in range(n):
        a = plan[k]
        for j in range(k + 1, n):
            b = plan[j]
            if a.memory == b.memory and a.lo < b.hi and b.lo < a.hi:
                return False
    return True


CHUNK = 4096  # instructions between two calls of replay's `on_chunk`


def replay(stream, spec, tspec, on_chunk=None) -> Timeline:
    """Schedule a whole instruction stream; the Timeline holds every event.

    `on_chunk(timeline, lo, hi)`, if given, is called after events lo..hi-1 are placed, every CHUNK
    instructions and at the end (progress bars and the live state `trnsim top` reads). The cyclic garbage
    collector is off meanwhile, as in a kernel launch (core/collector.py): scheduling makes an event and a few
    cells per instruction and frees no cycles, so its passes over the growing timeline would find nothing."""
    s = Scheduler(spec, tspec)
    i = lo = 0
    chunk = CHUNK if on_chunk is not None else -1
    with collector_off():
        for rec in stream:
            s.step(rec)
            i += 1
            if i - lo == chunk:
                on_chunk(s.tl, lo, i)
                lo = i
    if on_chunk is not None and len(s.tl.events) > lo:
        on_chunk(s.tl, lo, len(s.tl.events))
    return s.finish()
