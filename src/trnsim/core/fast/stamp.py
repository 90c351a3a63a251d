"""Loop stamping for timing-only runs: a loop's middle iterations recorded without running their Python.

A timing-only run spends most of its time in the kernel's Python: loop bodies, the front end's checks and
lowering, views sliced afresh, one tensor made per tile. The compiler traces a loop body once; where trnsim
can prove that every iteration of a loop records what the one before it recorded, shifted by fixed steps, it
runs its first iterations (a period of the core's state, and one more where that stamps no fewer) and
stamps the records of the others from them: each record is its template's with the index, the tile numbers, the offsets of the parts
the loop index moves and their signature numbers moved on. A loop whose body holds loops is stamped whole, so
a kernel's outer loop costs what its first iterations and its last one cost.

What proves it (anything else runs the body as before):
- the body's bytecode (`_analyse`; CPython 3.11's, or 3.12's and 3.13's said in its words by `_as_311`): the
  loops it holds (over `nl.affine_range`, `nl.sequential_range`, `nl.static_range` or `range`, bounds not
  reached by the loop index), and forward branches on a value fixed
  for the whole loop (`_Val.fixed`: made of constants, globals, names set before the loop, inner loops' indices
  and the layouts of tiles and parts; not of the index or a tile's place), each way walked alone; no
  return, yield, raise or `with`; stored locals never read before they are stored in the same iteration (no
  value is carried from one iteration to the next); calls only of the current NKI API's functions (nki.isa,
  nki.language, by module; no method of another object), of `range` and `slice`, and of plain functions of the
  kernel's own whose code qualifies the same way (`_own`: their arguments carry the index's reach, up to
  OWN_DEPTH calls deep; no closure, no default but a plain number or string, no global stored, what their ways
  return merged); the loop index reaching only sums, differences and products with numbers set outside the
  body's own loops (so every key moves by the same step at each of its instances), and only keys of the
  tensors the kernel names or makes, or `nl.ds`; of a part at such a key only its layout is read (shape,
  dtype, ndim), and then `_steady` proves that every part keeps its shape up to the last iteration;
- the core's state (`_state`): the allocators of SBUF and PSUM (each live tile's place, flags and rank of
  last use, the held and expired tiles in order, PSUM's cursor), the open PSUM accumulation groups, spills,
  scopes, HBM tensors: the same before and after each of the two iterations stamped from, so each later one
  starts from that state too (an iteration's records follow from the state it starts in and its keys); or
  the iteration a period on from the first stamped from only starts in that state: it then records what that
  one recorded a period on (`_foretold`: each part's step taken from the iteration after it, or, for a period
  of one iteration, from the one before it), where no record of the period is hoisted, and each the hoisting
  memo could take is forgotten by a write before its line reads the same parts again (`_unhoisted`: the memo
  is not part of the state);
- the records (`_template`): pairwise the same but for the stream index, the tile numbers of tiles made in
  the iteration, offsets of parts and signature numbers; none spilled; one hoisted (core/hoist.py) only onto
  the same earlier instance in every iteration, which the stamps are hoisted onto too; an
  instruction whose operands' layouts move is one whose check reads no place (CHECKS_FREE_OF_PLACE), so its
  kept verdict holds at every step (fast/memo.py: Verdicts.number); a loop-invariant instruction the
  compiler could hoist leaves in the hoisting memo only what the iteration stamped from left there
  (`_hoisting`), and one whose input moves the entry each stamped iteration would leave at the part it reads
  there (`_replicas`: a later run of an enclosing loop may hoist onto it); none reading a hoisted record's
  result where a later run of an enclosing loop may repeat that record (`_outlives`: its entry, named by the
  first instance's result, would be hoisted onto, and stamps leave none);
- the keys (`_straight`): each part that moves was sliced at a key whose numbers move by a fixed step
  (fast/views.py: WATCH notes every part sliced while iterations are watched, and a stamped iteration notes
  its parts' keys for the loops outside), and the indexing code slicing it at the key of the loop's last
  iteration gives the part the steps give there; a key that turns negative and wraps round or leaves its
  tensor is refused (every iteration runs).

Where the locals the body stores are dead after the loop, stamping goes on to the loop's end (up to the
iteration that starts as the template's did). Else, or where a key was not seen (a part sliced by a numpy
integer), the last iteration runs, and its records must be the stamps' next step (`_check_last`), else
StampError names the loop.

A later run of such a loop runs nothing (`_replayed`) where an earlier run of it in the launch (`_keep`) started
in the state it starts in, ended in that state too, left the hoisting memo alone and released no tile of its
last iteration at its end, and the body reads the same values: the same numbers, modules and functions, and
tensors laid out the same on tiles in the same place and state (their numbers may differ; no memo entry reads
them). Then running it records what the earlier run recorded, each tile renumbered (a tensor's for the one it
stands for, a tile the run made by the numbers made since), notes the same parts, and leaves the state as it
found it; the tiles it used are used again in that run's order (the spill policy's).

Each stamp is charged to the launch budget, takes its signature number as the verdict memo would give it, and
the counters that name tiles and tensors move on as running the iterations would have moved them, so what
runs after the loop records what it would have. TRNSIM_FAST=0 and values runs stamp nothing;
tests/core/test_loop_stamp.py compares every record and every scheduled event with and without stamping.
"""
from __future__ import annotations

import builtins
import dis
import enum
import itertools
import operator
import sys
import types
import weakref

from trnsim.core.errors import TrnsimError, inside
from trnsim.core.fast import views
from trnsim.core.fast.views import _LAYOUT_OF, _LAYOUTS_MAX, layout_number
from trnsim.core.hoist import ENGINES as HOIST_ENGINES, PURE as HOIST_PURE
from trnsim.core.isa.opcodes import Op
from trnsim.core.isa.registry import Record
from trnsim.core.memory import _SERIALS, TICK, Allocation
from trnsim.core.tensor import View
from trnsim.core.timing.scheduler import ORDERED
from trnsim.numerics.dtypes import DType

ALLOWED = ("trnsim.nki.isa", "trnsim.nki.language")  # the modules whose functions a stamped body may call
RANGES = frozenset({"affine_range", "sequential_range", "static_range"})  # inner loops a body may hold
MAKERS = frozenset({"ndarray", "zeros", "ones", "full", "zeros_like", "empty_like", "ones_like", "full_like"})
HOST = frozenset({"device_print", "dynamic_range", "sync_program", "program_id", "num_programs", "program_ndim",
                  "no_reorder", "while_loop", "fori_loop", "register_alloc"})  # act outside the stream
# Instructions whose check reads no operand's place, offset or partition start (only layouts' shapes, dtypes,
# memories and the attributes): a verdict kept for one step of a moving part holds for every step. The matmul
# checks its PSUM destination's bank (isa/tensor_engine.py), so only its inputs may move.
CHECKS_FREE_OF_PLACE = {Op.DMA_COPY: None, Op.TENSOR_TENSOR: None, Op.TENSOR_COPY: None,
                        Op.TENSOR_SCALAR: None, Op.NC_MATMUL: "dst", Op.ACTIVATION: None, Op.TENSOR_TENSOR_SCAN: None,
                        Op.MEMSET: None, Op.TENSOR_REDUCE: None}
MIN_STAMPED = 24  # records a loop must be able to stamp for its first iterations to be watched
_SAFE = frozenset({"NOP", "CACHE", "EXTENDED_ARG", "PRECALL", "KW_NAMES", "RESUME"})
_ADD, _MUL = frozenset({0, 10, 13, 23}), frozenset({5, 18})  # BINARY_OP: + - += -=, * *=
_analysed: dict = {}  # (id of a code, offset of its FOR_ITER) -> (the code, its analysis: False, never stamped)
FRUITLESS = 4  # runs of a loop in a row that found nothing to stamp, after which it is no longer watched
_fruitless: dict = {}  # (id of a code, offset of its FOR_ITER, iterations) -> such runs so far
_watchers = 0  # loops whose iterations are being watched (the parts they slice: fast/views.py WATCH)
_PURE_IDS = frozenset(id(op) for op in HOIST_PURE)  # the hoisting memo's ops, by identity (an Op hashes in Python)


class StampError(TrnsimError):
    """A loop's last iteration recorded other than its stamped iterations foretold (a key that does not move
    in a straight line): the run is not trusted."""


def loop(nc, indices):
    """`indices` as the core's loop runs them: a range long enough to gain is watched for stamping."""
    if type(indices) is not range or len(indices) < 4 or nc.values or not _READ:
        return indices
    return _stamped(nc, indices)


def _stamped(nc, indices):
    frame = sys._getframe(0)  # (a compiled build has no frame of its own here: the walk starts at the kernel's)
    while frame is not None and inside(frame.f_code.co_filename):
        frame = frame.f_back
    key = (id(frame.f_code), _offset(frame), len(indices)) if frame is not None else None
    plan = _plan(frame) if frame is not None and _fruitless.get(key, 0) < FRUITLESS else None
    inputs = _inputs(nc, frame) if plan is not None and plan[0] and REPLAYS else None
    frame = None
    if plan is None or nc.peer is not None or nc.races:
        yield from indices
        return
    global _watchers
    n = len(indices)
    first = _Snap(nc)
    if inputs is not None and _replayed(nc, key, first, inputs, indices):
        return  # every iteration recorded as an earlier run recorded it
    outside, tick, mark = views.WATCH, _peek(TICK), 0  # (a loop outside watching keeps this run's notes)
    if views.WATCH is None:
        views.WATCH = []
    _watchers += 1
    t = None
    try:
        snaps = [first]
        for j in range(min(n - 1, PERIODS + 2)):  # a period from the first or the second iteration
            mark = _peek(Allocation._ids)
            yield indices[j]
            snaps.append(_Snap(nc))
            if j == 0 and (n - 3) * (snaps[1].length - snaps[0].length) < MIN_STAMPED:
                _fruitless[key] = FRUITLESS - 1  # too short to gain: its next runs are not watched
                break
            t = _find(nc, snaps, n, plan)
            if t is not None:
                break
    finally:
        _watchers -= 1
        if not _watchers:
            views.WATCH = None
    if t is None or t is False:
        _fruitless[key] = FRUITLESS if t is False else _fruitless.get(key, 0) + 1
        for i in indices[len(snaps) - 1:]:
            yield i
        return
    _fruitless.pop(key, None)
    base = len(nc.stream)
    _stamp(nc, t)
    if t.replicas:
        _replicate(nc, t, base)
    for i in indices[t.end:]:
        mark = _peek(Allocation._ids)
        yield i
    if t.end < n:
        _check_last(nc, t, n - 1)
    if inputs is not None:
        _keep(nc, key, first, inputs, indices, outside, tick, mark)


PERIODS = 4  # the longest period (in iterations) of the core's state a loop is stamped over


def _find(nc, snaps, n, plan):
    """The template once the iterations run so far show a period: iterations a and a + p started in the same
    state (the latest a), and stamping it gains at least one iteration; else None, or False when none will be
    found. Stamping starts with the next iteration and ends where an iteration starts as that one does: before
    the last one, or (`through`: the body's locals are dead after the loop, and the keys that move are proven to
    stay on their line up to the last) at the loop's end. `plan`: (through, whether the body reads a part's
    layout: `_steady`).

    Two ways, the second taken only where it stamps more: iterations a .. a + p run and iteration a + 1 started
    as a + p + 1 did (the template's every phase is paired with the next iteration, run); or iterations
    a .. a + p - 1 run (and a - 1, for a period of one iteration) and iteration a + p starts as a did, so it
    records what a recorded a period on (`_foretold`), which the template pairs its last phase with, and it is
    the first stamped."""
    through = plan[0]
    j = len(snaps) - 2  # the iteration just run
    for p in range(1, PERIODS + 1):
        a = j - p
        if a < 0:
            break
        if snaps[a].state != snaps[a + p].state or snaps[a + 1].state != snaps[a + p + 1].state:
            continue
        return _proven(nc, snaps, n, plan, a, p, j + 1)
    for p in range(1, PERIODS + 1):
        a = j + 1 - p
        if a < 0:
            break
        if a < 1 and p == 1 or snaps[a].state != snaps[j + 1].state:
            continue
        if _runs(n, a + p, p, through) >= _runs(n, a + p + 1, p, through):
            return None  # running one more iteration stamps as many: the template is then paired with it
        ahead = _foretold(nc, snaps, a, p)
        if ahead is None:
            return None
        try:
            t = _proven(nc, snaps + [ahead], n, plan, a, p, j + 1)
        finally:
            del nc.stream[snaps[j + 1].length:]
            if views.WATCH is not None:
                del views.WATCH[snaps[j + 1].watched:]
        return t or None  # what refuses the foretold iteration may not refuse one run
    return None


def _runs(n, start, p, through) -> int:
    """How many of a loop's `n` iterations run when stamping starts at iteration `start` with period `p`: those
    before it, and those after the last whole period (none when `through` lets stamping go on to the end)."""
    if through and (n - start) % p == 0:
        return start
    return start + 1 + (n - 1 - start) % p


def _proven(nc, snaps, n, plan, a, p, start):
    """The template of iterations a .. a + p - 1 (paired with the iteration after each: snaps[a + p + 1] ends
    the last one), stamping from iteration `start`; None or False as `_find` says."""
    through, shaped = plan
    end = n - 1 - (n - 1 - start) % p
    last = n - (n - start) % p
    if end - start < p and not (through and last - start >= p):
        return None
    t = _template(nc, snaps, a, p, end)
    if t is None or t is False:
        return t
    t.start = start
    straight = _straight(t, snaps, n)
    if straight is False:
        return False  # a key leaves its line or its tensor: every iteration runs
    if shaped:
        steady = _steady(t, snaps, n)
        if not steady:
            return steady
    if through and straight and last - start >= p:
        t.end = last
    elif end - start < p:
        return None
    t.replicas = _replicas(nc, t, snaps)
    if t.replicas is None:
        return False  # the hoisting memo would keep what stamping cannot
    return t


def _foretold(nc, snaps, a, p):
    """The snapshot after iteration a + p, its records appended to the stream and the parts they slice at moving
    keys to views.WATCH, where iteration a + p starts in the state iteration a started in (the caller checked):
    it then records what iteration a recorded with each moving part a period on (a tile made in the iteration
    the one made a period later, at the same place; offsets and keys moved p steps). A step is what a part moved
    from iteration b to b + 1, the same instruction's: b = a, or a - 1 where the period is one iteration
    (iteration a - 1 started elsewhere, but its keys are the same lines', the index one less; then no record is
    made: the snapshot's `given` says how its records would pair with a's). None, nothing
    appended, where iterations b and b + 1 do not pair up or the hoisting memo could take a record of the period
    otherwise than it took iteration a's (`_unhoisted`)."""
    stream, watched = nc.stream, views.WATCH
    b = a if p > 1 else a - 1
    lo, mid, base = snaps[b].length, snaps[b + 1].length, snaps[a + p].length
    length = mid - lo
    if b < 0 or not length or snaps[b + 2].length - mid != length or base != len(stream) \
            or nc.invariants.pending is not None or not _unhoisted(stream, snaps, a, p):
        return None
    fresh, now = snaps[a].tiles, snaps[a + p].tiles
    dtiles = (now[0] - fresh[0], now[1] - fresh[1])  # tiles made in a period
    got = _period_on(stream, lo, mid, snaps[a].length, base, length, snaps[b].tiles, snaps[b + 1].tiles, dtiles, p)
    if got is None:
        return None
    out, moving, given = got
    parts = []
    if watched is not None and moving:
        wanted = set()
        for pu, pv, px, pz in moving:
            wanted.add(pu[:6])  # (the layout views.WATCH names a part by: `_layout`)
            wanted.add(pv[:6])
        here = _picked(watched, snaps[b].watched, snaps[b + 1].watched, wanted)
        ahead = _picked(watched, snaps[b + 1].watched, snaps[b + 2].watched, wanted)
        mine = here if b == a else ahead
        for pu, pv, px, pz in moving:
            wu, wv, wx = here.get(pu[:6]), ahead.get(pv[:6]), mine.get(px[:6])
            if wu is None or wv is None or wx is None or wu[1:7] != wv[1:7] or wu[8:10] != wv[8:10]:
                continue  # not sliced where watched: `_straight` then does not prove the key
            step = _key_step(wu[7], wv[7])
            if step is not None:
                parts.append((pz[:6], (pz[0],) + wx[1:7] + (_key_at(wx[7], step, p), wx[8], wx[9], pz[4], pz[5])))
    stream += out
    if watched is not None:
        watched += parts
    snap = _Snap.__new__(_Snap)
    snap.length, snap.state = base + length, snaps[a + 1].state  # (the length as if all its records were appended)
    snap.watched = len(watched) if watched is not None else 0
    snap.tiles = (now[0] + snaps[a + 1].tiles[0] - fresh[0], now[1] + snaps[a + 1].tiles[1] - fresh[1])
    snap.counts = {k: v + snaps[a + 1].counts.get(k, 0) - snaps[a].counts.get(k, 0) for k, v in snaps[a + p].counts.items()}
    snap.foretold, snap.given = True, given
    return snap


def _period_on(stream, lo, mid, at, base, length, fresh, later, dtiles, p):
    """(the records of the iteration starting at stream index `base`: those of the iteration at `at` with each
    part moved p times the step it took from the iteration at `lo` to the one at `mid`, whose first tile numbers
    are `fresh` and `later`; (the two placements, the one moved and where to) of each part that moves by
    offset; for a period of one iteration (`at` is `mid`), how `_template` pairs the two iterations from `at`:
    (per record its moves, the placements they move, per record the placements its moves move to) as its
    `_paired` would give them, and then no record is made, else None), or None where the two iterations do not
    pair up (`_foretold`)."""
    out, moved, pairs, moving = [], {}, {}, []
    given = slots = nexts = None
    if p == 1 and at == mid:
        given, slots, nexts = [], [], []
    for j in range(length):
        u, v, x = stream[lo + j], stream[mid + j], stream[at + j]
        if u.op is not v.op or u.spill is not None or v.spill is not None \
                or u.location is not v.location and u.location != v.location \
                or u.writes is not v.writes and u.writes != v.writes or u.site is not v.site and u.site != v.site:
            return None
        up, vp, xp = u.placed, v.placed, x.placed
        if len(up) != len(vp):
            return None
        placed, still = None, True  # x's placements, each moving part's moved; x's own dict where none moves
        moves = pzs = None  # (p == 1: the record's moves, and where each moves its part, in place of `placed`)
        if given is None:
            placed = {}
        else:
            moves, pzs = [], []
        k = -1
        for name, px in xp.items():
            k += 1
            pu = px if x is u else up.get(name)  # (x is iteration b's record, or b + 1's: `_foretold`)
            pv = px if x is v else vp.get(name)
            if pv is None or pu is None:
                return None
            if pu is pv:
                if pzs is None:
                    placed[name] = px
                continue
            still = False
            # records share placements: each pair moved once, found by the first's identity where the second is
            # the one seen with it before (else by both); with it, (pv, pz, its move as the template's slots
            # hold it, and as operand k of a record's moves: p == 1, and it moves)
            key = id(pu)
            got = moved.get(key)
            if got is None or got[0] is not pv:
                pair = None if got is None else (key, id(pv))  # (a first pairing of pu is in `moved` alone)
                hit = None if got is None else pairs.get(pair)
                if hit is None:
                    dtile = _made_in(pu[0], pv[0], fresh, later, dtiles)
                    if dtile is None or pu[1] is not pv[1] and pu[1] != pv[1] or pu[2] is not pv[2] and pu[2] != pv[2] \
                            or pu[3] is not pv[3] and pu[3] != pv[3] or pu[6] != pv[6] or pu[7] or pv[7]:
                        return None
                    ou, ov, qu, qv = pu[4], pv[4], pu[5], pv[5]  # (C numbers in the compiled build)
                    entry = None
                    if not dtile and ou == ov and qu == qv:
                        pz = px  # nothing moves (a part of a tile made before, sliced afresh): x's own
                    else:
                        pz = _moved(px, 1, dtile, p * (ov - ou), p * (qv - qu))
                        if pz[4] != px[4] or pz[5] != px[5]:
                            moving.append((pu, pv, px, pz))
                        if slots is not None:  # (x is v: px is pv)
                            entry = (k, name, px, dtile, ov - ou, qv - qu, len(slots))
                            slots.append((px, dtile, ov - ou, qv - qu))
                    hit = (pv, pz, entry)
                    if got is None:
                        moved[key] = hit
                    else:
                        pairs[pair] = hit
                got = hit
            entry = got[2]
            if pzs is None:
                placed[name] = got[1]
            elif entry is not None:
                if entry[0] != k or entry[1] is not name:
                    entry = (k, name) + entry[2:]
                moves.append(entry)
                pzs.append(got[1])
        if given is not None:
            given.append(moves)
            nexts.append(pzs)
            continue
        if still:
            placed = xp  # (records share them, as stamps do)
        z = Record.__new__(Record)  # its signature number is iteration a's: the template reads it only where no
        z.index, z.op, z.engine, z.placed, z.writes = base + j, x.op, x.engine, placed, x.writes  # layout moves
        z.attrs, z.location, z.sig, z._regions, z.site = x.attrs, x.location, x.sig, None, x.site
        z.hoisted, z.accumulated, z.spill = None, x.accumulated, None
        out.append(z)
    return out, moving, None if given is None else (given, slots, nexts)


def _picked(watched, lo, hi, wanted):
    """The parts views.WATCH noted between positions lo and hi whose layouts are in `wanted`, by layout (its
    offset, a number, asked first)."""
    offsets, out = set(), {}
    for k in wanted:
        offsets.add(k[4])
    for i in range(lo, hi):
        e = watched[i]
        k = e[0]
        if k[4] in offsets and k in wanted:
            out[k] = e[1]
    return out


def _unhoisted(stream, snaps, a, p) -> bool:
    """Whether the hoisting memo (core/hoist.py), which is not part of the state, takes no record of iterations
    a .. a + p - 1 and none of a later period: none is hoisted, and each record it may take as an instance of
    another iteration's (`_hoistable`) has, after it and before the next record of its line reading the same
    parts (cyclically: the period repeats), a record writing one of the tiles it reads, which forgets every
    instance it could repeat."""
    lo = snaps[a].length
    ends, fresh = [], []  # where each iteration of the period ends in it, and its first tile numbers
    for i in range(a, a + p):
        ends.append(snaps[i + 1].length - lo)
        fresh.append(snaps[i].tiles)
    return _forgotten(stream[lo:snaps[a + p].length], ends, fresh)


def _forgotten(window, ends, fresh):
    """`_unhoisted` for the records `window` of a period, its iterations ending at positions `ends`."""
    lines = {}  # (a line, the parts read) the memo may take -> (position in the window, tiles read) of each
    reads_any = set()  # every tile such a record reads
    i, end = 0, ends[0]
    last, pure = None, False  # the op of the record before, and whether the memo takes its op at all
    for k in range(len(window)):
        while k >= end:
            i += 1
            end = ends[i]
        rec = window[k]
        if rec.hoisted is not None or rec.spill is not None:
            return False
        if rec.op is not last:  # (records of one op come in runs: `_hoistable` asks this first)
            last = rec.op
            pure = id(last) in _PURE_IDS
        if pure and _hoistable(rec, fresh[i]):
            reads, same = [], []
            for name, q in rec.placed.items():
                if name != "dst":
                    same.append((name, q[:8]))
                    if q[0][5] >= 0:
                        reads.append(q[0])
                        reads_any.add(q[0])
            lines.setdefault((rec.location, tuple(same)), []).append((k, reads))
    if not lines:
        return True
    numbers = set()  # their tile numbers (asked first: a number hashes faster than a place)
    for q in reads_any:
        numbers.add(q[5])
    writes = {}  # position -> the tiles it writes that such a record reads
    for k in range(len(window)):
        rec = window[k]
        placed = rec.placed
        for name in rec.writes:
            q = placed.get(name)
            if q is not None and q[0][5] in numbers and q[0] in reads_any:
                writes.setdefault(k, []).append(q[0])
    n = len(window)
    for seen in lines.values():
        for m in range(len(seen)):
            k, reads = seen[m]
            w = seen[m - 1][0] + 1  # after the line's record before this one (the period's last before its first)
            found = False
            while not found and w % n != k:
                for q in writes.get(w % n, ()):
                    if q in reads:
                        found = True
                w += 1
            if not found:
                return False
    return True


def _made_in(qa, qb, fresh, later, dtiles):
    """How far the tile number moves in a period between places `qa` and `qb` of iterations a and a + 1 (whose
    first tile numbers are `fresh` and `later`): 0 where both are the same tile made before iteration a, the
    tiles made in a period where each was made in its iteration, of one size in one memory; else None."""
    ta, tb = qa[5], qb[5]  # (tile numbers, asked first: places of two tiles differ there)
    if qa is qb or ta == tb and qa == qb:
        return 0 if _made_before(qa, fresh) else None
    if qa[0] != qb[0] or qa[4] != qb[4] or _made_before(qa, fresh) or _made_before(qb, later):
        return None
    return dtiles[0] if qa[0] == "sbuf" else dtiles[1]


def _hoistable(rec, fresh) -> bool:
    """Whether the hoisting memo (core/hoist.py) may take `rec`, of an iteration whose first tile numbers are
    `fresh`, as an instance of, or for, another iteration's: a pure instruction of a compute engine writing one
    result, none of whose inputs is the result's tile, all of them made before the iteration (an input made in
    it is a tile no other iteration reads)."""
    if id(rec.op) not in _PURE_IDS or rec.engine not in HOIST_ENGINES or rec.writes != ("dst",):
        return False  # (most records are of an impure op: asked first)
    dst = rec.placed.get("dst")
    if dst is None:
        return True
    for name, q in rec.placed.items():
        if name != "dst" and (q[0] == dst[0] and dst[0][5] >= 0 or not _made_before(q[0], fresh)):
            return False
    return True


def _straight(t, snaps, n):
    """True when every part the template moves by offset was sliced from a tensor at a key whose numbers move by
    a fixed step (views.WATCH), and the indexing code slicing it at the key of the loop's last iteration gives
    the part the template's steps give there: then no key turns negative or leaves its tensor on the way. False
    when one does not; None when a part was not sliced in the iterations run (a loop inside stamped it)."""
    watched = views.WATCH
    if watched is None:
        return None
    a, unknown, p = t.first, False, t.period
    # where the parts that move by offset lie in the template's iterations and a step on (a dict: offsets are often
    # multiples of a power of two, which a set's probing finds slower)
    offsets = {}
    for slots in t.slots:
        for slot in slots:
            if slot[2] or slot[3]:
                px = slot[0]
                offsets[px[4]] = None
                offsets[px[4] + slot[2] // p] = None
    sliced = [_parts(watched, snaps[a + i], snaps[a + i + 1], offsets) for i in range(p + 1)]
    proven = {}  # (i, ids of the two placements) -> the keys' entry proven for them (records share placements)
    keys, length = t.keys, t.length
    for i in range(p):
        here, ahead, steps, nexts = sliced[i], sliced[i + 1], t.steps[i], t.next[i]
        for j in range(length):
            moves, sig = steps[j]
            if sig is None:
                continue
            nxt, m = nexts[j], -1  # (a record, or where each move moves its part: `_template`'s `given`)
            for k, name, px, dtile, doff, dpoff, slot in moves:
                m += 1
                if not (doff or dpoff):
                    continue
                if type(nxt) is list:
                    pys = nxt
                    py = pys[m]
                else:
                    rec = nxt
                    py = rec.placed[name]
                pair = (i, id(px), id(py))
                entry = proven.get(pair)
                if entry is not None:
                    keys[(i, j, name)] = entry
                    continue
                wa, wb = here.get(_layout(px)), ahead.get(_layout(py))
                if wa is None or wb is None:
                    unknown = True
                    continue
                if wa[1:7] != wb[1:7]:
                    return False
                step = _key_step(wa[7], wb[7])
                if step is None:
                    unknown = True
                    continue
                entry = keys[(i, j, name)] = (wb, step, a + i + 1)
                left = n - 1 - (a + i + 1)
                key = _key_at(wb[7], step, left)
                if _even(step) and _inside(wa[7], wa[2]) and _inside(wb[7], wb[2]) and _inside(key, wb[2]):
                    proven[pair] = entry
                    continue  # no number wraps or leaves: offsets move in a line, the shape stays (no view made)
                tensor = View.__new__(View)
                tensor.alloc, tensor.dtype, tensor.shape, tensor.strides = None, wb[1], wb[2], wb[3]
                tensor.offset, tensor.poff, tensor.on_chip, tensor.gather_rows = wb[4], wb[5], wb[6], None
                tensor._scanned = tensor._region = tensor._parts = tensor._keyed = None
                if not _fits(key, wb[2]):
                    return False  # out of bounds at the last iteration: let it run and raise there
                last = tensor._index(key)
                if last.shape != py[2] or last.strides != py[3] or last.offset != py[4] + left * (py[4] - px[4]) \
                        or last.poff != py[5] + left * (py[5] - px[5]):
                    return False
                proven[pair] = entry
    return None if unknown else True


def _steady(t, snaps, n):
    """Whether every part the template's iterations sliced (views.WATCH) has the same shape in every iteration
    up to the loop's last: its key the same, or moving by a fixed step and inside its tensor (no negative
    number, no slice past the end: so no wrapping and no clipping) at the template's iteration and at the last,
    hence at every one between. A body that reads a part's layout (its shape in a branch, a range, a new tile)
    then does the same in every iteration. None when the iterations' parts do not pair up (a loop inside
    stamped some); False when a key leaves its tensor."""
    watched = views.WATCH
    if watched is None:
        return None
    a = t.first
    for i in range(t.period):
        here = watched[snaps[a + i].watched:snaps[a + i + 1].watched]
        ahead = watched[snaps[a + i + 1].watched:snaps[a + i + 2].watched]
        if len(here) != len(ahead):
            return None
        left = n - 1 - (a + i + 1)
        for (_, wa), (_, wb) in zip(here, ahead):
            if wa[1:4] != wb[1:4] or wa[6] != wb[6] or wa[8] != wb[8]:
                return None  # not the same part of the same tensor's layout
            ka, kb = wa[7], wb[7]
            if type(ka) is type(kb) and ka == kb:
                continue
            step = _key_step(ka, kb)
            if step is None:
                return None
            if not _inside(kb, wb[2]) or not _inside(_key_at(kb, step, left), wb[2]):
                return False
    return True


def _even(step) -> bool:
    """Whether a key's step moves each slice's start and stop alike (its length stays)."""
    for s in step:
        if type(s) is tuple and s[0] != s[1]:
            return False
    return True


def _fits(key, shape) -> bool:
    """Whether View._index takes index `key` (ints and step-less slices of ints) of a tensor of `shape` without
    raising (negative numbers count from the end, as there); asked before indexing a view made without its
    tensor, whose error message could not name it."""
    ks = key if type(key) is tuple else (key,)
    if len(ks) > len(shape):
        return False
    for k, d in zip(ks, shape):
        if type(k) is int:
            if not -d <= k < d:
                return False
        elif type(k) is slice and k.step is None:
            for b in (k.start, k.stop):
                if b is not None and (type(b) is not int or not 0 <= (b + d if b < 0 else b) <= d):
                    return False
        else:
            return False
    return True


def _inside(key, shape) -> bool:
    """Whether index `key` of a tensor of `shape` takes no number below 0 or past its dim (no step)."""
    ks = key if type(key) is tuple else (key,)
    if len(ks) > len(shape):
        return False
    for i in range(len(ks)):
        k, d = ks[i], shape[i]
        if type(k) is int:
            if not 0 <= k < d:
                return False
        elif type(k) is slice:
            sl = k  # a slice (the compiled build reads its bounds directly)
            if sl.step is not None:
                return False
            lo, hi = (0 if sl.start is None else sl.start), (d if sl.stop is None else sl.stop)
            if type(lo) is not int or type(hi) is not int or not 0 <= lo <= hi <= d:
                return False
        else:
            return False
    return True


def _layout(p) -> tuple:
    """A placement's part as views.WATCH names it: its tile's place, dtype, shape, strides, offsets."""
    return p[0], p[1], p[2], p[3], p[4], p[5]


def _parts(watched, lo, hi, offsets) -> dict:
    """The parts sliced between two boundaries at one of `offsets` (a dict's keys), by their layout: (tensor, key)
    (the offset, a number, asked first: few parts move)."""
    out = {}
    for i in range(lo.watched, hi.watched):
        e = watched[i]
        k = e[0]
        if k[4] in offsets:
            out[k] = e[1]
    return out


def _key_step(ka, kb):
    """The step by which each number of an index key changes between two iterations (kb - ka), or None when
    the keys differ otherwise."""
    if type(ka) is not type(kb):
        return None
    ta, tb = (ka, kb) if type(ka) is tuple else ((ka,), (kb,))
    if len(ta) != len(tb):
        return None
    out = []
    for i in range(len(ta)):
        x, y = ta[i], tb[i]
        if type(x) is int and type(y) is int:
            out.append(y - x)
        elif type(x) is slice and type(y) is slice:
            sx, sy = x, y  # slices (the compiled build reads their bounds directly)
            if sx.step is not None or sy.step is not None:
                return None
            d0 = _bound_step(sx.start, sy.start)
            d1 = _bound_step(sx.stop, sy.stop)
            if d0 is False or d1 is False:
                return None
            out.append((d0, d1))
        else:
            return None
    return tuple(out)


def _bound_step(u, w):
    """The step between two bounds of a slice (None when both are None), or False when they do not pair."""
    if u is None and w is None:
        return None
    if type(u) is int and type(w) is int:
        return w - u
    return False


def _key_at(key, step, t: int):
    """Index key `key` moved `t` steps."""
    single = type(key) is not tuple
    ks = (key,) if single else key
    out = []
    for i in range(min(len(ks), len(step))):
        x, s = ks[i], step[i]
        if type(x) is int:
            out.append(x + s * t)
        else:
            sl = x  # a slice (the compiled build reads its bounds directly)
            out.append(slice(None if sl.start is None else sl.start + s[0] * t,
                             None if sl.stop is None else sl.stop + s[1] * t))
    return out[0] if single else tuple(out)


class _Snap:
    """The core at an iteration boundary: the stream's length, the state an iteration's records follow from,
    and the counters that number tiles and tensors."""

    __slots__ = ("length", "state", "tiles", "counts", "watched", "foretold", "given")

    def __init__(self, nc):
        self.foretold = False  # True: after an iteration `_foretold`, not run
        self.given = None  # after one foretold from the one before: how the template pairs the two (`_period_on`)
        self.watched = len(views.WATCH) if views.WATCH is not None else 0
        self.length = len(nc.stream)
        self.state = _state(nc)
        self.tiles = (_peek(nc.sbuf.tiles), _peek(nc.psum.tiles))
        self.counts = dict(nc._counts)


def _peek(counter) -> int:
    """The next number an itertools.count gives, without taking it."""
    return counter.__reduce__()[1][0]


def _state(nc) -> tuple:
    """What an iteration's records follow from besides its keys: the placement state of SBUF and PSUM (tiles by
    place, not identity; PSUM's by when they were used, which picks one to set aside when PSUM is full, SBUF's
    only for spilling, which the spill count shows), the open PSUM groups, spills, scopes, HBM tensors and the
    memory serials."""
    out = [nc.spills, len(nc.aside), len(nc.scopes), tuple(sorted(nc.psum_open)), len(nc.hbm.live.refs),
           _peek(_SERIALS), nc.invariants.pending is None]
    for m in (nc.sbuf, nc.psum):
        live = m.live.values()
        rank, pos, tiles, held, expired = {}, {}, [], [], []
        if m is nc.psum:
            for r, a in enumerate(sorted(live, key=_USED)):
                rank[a.id] = r
        for i, a in enumerate(live):
            pos[a.id] = i
            tiles.append((a.p0, a.partitions, a.b0, a.nbytes, a.kind, a.place[5] >= 0, a.expired, a.block,
                          a.consumed, a.saved, a.spilled, a.shared, a.scratch is None, rank.get(a.id, 0)))
        for k in m.held:
            held.append(pos.get(k, -1))
        for k in m.expired.refs:
            expired.append(pos.get(k, -1))
        out += [m.cursor, tuple(tiles), tuple(held), tuple(expired)]
    return tuple(out)


_USED = operator.attrgetter("used")  # (a key the sort calls without a Python frame)


class _Template:
    """Iterations [first, first + period) of the stream, each with what moves at each step, and what stamping
    iterations [start, end) moves on: tiles, tensor names, the hoisting memo."""

    __slots__ = ("recs", "steps", "first", "period", "length", "start", "end", "tiles", "counts", "hoisted",
                 "at", "location", "next", "keys", "slots", "onto", "replicas")

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)


def _template(nc, snaps, a, p, end):
    """The template of iterations a .. a + p - 1 when iterations a .. a + p recorded the same but for fixed steps
    (see the module's doc); else None, or False when no later iteration could make one (an instruction whose
    check reads a moving place or is not kept by signature, the hoisting memo)."""
    builder = nc.builder
    verdicts = getattr(builder, "verdicts", None)
    if verdicts is None or verdicts.spec is not nc.spec or len(views._LAYOUTS) > views._LAYOUTS_MAX // 2:
        return None
    # iteration a + 1 foretold from a (`_foretold`, a period of one iteration): its records would be a's with the
    # moves `_period_on` made for them (the same op, attributes and layouts; each part's tile and offsets moved by
    # the steps it gives), which pairing them here would give again: none is made, and the iteration's "records"
    # are, per record, where its moves move its parts
    given = snaps[a + 2].given if p == 1 else None
    runs = []
    for i in range(a, a + p + 1):
        runs.append(nc.stream[snaps[i].length:snaps[i + 1].length] if given is None or i == a else given[2])
    length = len(runs[0])
    for i in range(p + 1):
        if not length or len(runs[i]) != length:
            return None
    period = (snaps[a + p].tiles[0] - snaps[a].tiles[0], snaps[a + p].tiles[1] - snaps[a].tiles[1])  # made in a period
    recs, steps, watch, moving, moving_parts, onto, hoisted_onto = [], [], set(), set(), [], set(), []
    starts = [snaps[i].length for i in range(a, a + p + 1)]  # where iterations a .. a + p start
    stand_in = {}  # the place of a hoisted record's result -> whether its first instance may be repeated later
    local = None  # (`_outlives`; `_local`)
    for i in range(p):
        fresh = snaps[a + i].tiles  # tiles numbered from these on were made in iteration a + i
        sbuf_fresh, psum_fresh = fresh[0], fresh[1]
        ahead, slots, hoists = [], [], []
        paired = {}  # by id: a placement's pairing proven below, and the steps it last moved by (`_paired`)
        if given is not None:
            moves_of, slots = given[0], given[1]
        xs, ys, zs = runs[i], runs[i + 1], runs[p]
        for j in range(length):
            x = xs[j]
            if x.sig is None:
                return False  # an instruction whose check is not kept by signature
            if given is not None:
                if x.hoisted is not None:
                    return None  # (a foretold record is hoisted onto none)
                moves, layouts, onto_x = moves_of[j], False, None
                for move in moves:
                    if move[4] or move[5]:
                        layouts = True
                        free = CHECKS_FREE_OF_PLACE.get(x.op, False)
                        if free is False or free == move[1]:
                            return False  # its check may read where the moving part lies
            else:
                y, z = ys[j], zs[j]  # z: the same instruction a period on
                if y.sig is None:
                    return False
                if x.op is not y.op or x.engine is not y.engine or x.writes is not y.writes and x.writes != y.writes \
                        or x.location is not y.location and x.location != y.location \
                        or x.site is not y.site and x.site != y.site or x.spill is not None or y.spill is not None \
                        or len(x.placed) != len(y.placed):
                    return None
                xa, ya = x.attrs, y.attrs
                if xa is not ya and xa != ya:  # (stamped and foretold records share their template's)
                    return None
                onto_x = None  # (most records are hoisted onto none)
                if x.hoisted is not None or y.hoisted is not None:
                    onto_x = _onto(x, starts[i])
                    if onto_x != _onto(y, starts[i + 1]):
                        return None
                    if onto_x is not None and onto_x >= 0:
                        onto.add(onto_x)  # computed once, by an instance before these iterations
                    if onto_x is not None and "dst" in x.placed and nc.scopes:
                        if local is None:
                            local = _local(nc, snaps[0].tiles)
                        stand_in[x.placed["dst"][0]] = _outlives(x, stand_in, local)
                if i == 0:
                    if z.accumulated is not x.accumulated and z.accumulated != x.accumulated \
                            or (z.hoisted is not None or onto_x is not None) and _onto(z, starts[p]) != onto_x:
                        return None
                moves, layouts = [], False
                xp, yp, zp = x.placed, y.placed, z.placed
                k = -1
                for name, px in xp.items():
                    k += 1
                    py = yp.get(name)
                    if py is None:
                        return None
                    pz = None
                    if i == 0:
                        pz = py if zp is yp else zp.get(name)  # (a period of one iteration: z is y)
                        if px is py and pz is px:
                            continue  # the same view of a tile made before: nothing moves
                        if pz is None:
                            return None
                    elif px is py:
                        continue
                    # records share placements: a pairing of the same placements holds as proven for the first
                    at = id(px)
                    known = paired.get(at)
                    if known is None or known[0] is not py or known[1] is not pz:
                        known = _paired(known, k, name, px, py, pz, p, sbuf_fresh, psum_fresh, period, slots)
                        if known is None:
                            return None
                        paired[at] = known
                    if known[2]:
                        layouts = True
                        free = CHECKS_FREE_OF_PLACE.get(x.op, False)
                        if free is False or free == name:
                            return False  # its check may read where the moving part lies
                    move = known[4]  # (made by `_paired` for the operand it first paired for: most parts are one's)
                    if move is not None:
                        if move[1] is not name or move[0] != k:
                            move = (k, name, px) + known[3]
                        moves.append(move)
            sig = None
            if layouts:
                sig = _moving_signature(verdicts, x, moves)
                if sig is None:
                    return None
            elif i == 0 and given is None and z.sig != x.sig:  # (a foretold record's is x's)
                return None
            ahead.append((tuple(moves), sig) if moves else _STILL)
            hoists.append(onto_x)
            if x.op in HOIST_PURE and x.engine in HOIST_ENGINES and x.writes == ("dst",):
                outer = True
                for name, px in x.placed.items():
                    if name != "dst" and not _made_before(px[0], fresh):
                        outer = False
                if outer:
                    watch.add(x.location)
                    for move in moves:
                        if move[1] != "dst" and (move[4] or move[5]):
                            moving.add(x.location)
                elif onto_x is None and stand_in:
                    for name, px in x.placed.items():
                        if name != "dst" and stand_in.get(px[0]):
                            # its memo entry names the result of an instance a later run of the loop may be
                            # hoisted onto, and so onto this entry too: one stamps do not leave
                            return False
        recs.append(xs)  # (every record of the iteration, in order: each one paired above)
        hoisted_onto.append(hoists)
        steps.append(ahead)
        moving_parts.append(slots)
    last, after = snaps[a + p], snaps[a + p + 1]  # the last iteration run, a + p, starts at `last`
    if after.foretold:  # iteration a + p foretold: a + p - 1 ran last
        last, after = snaps[a + p - 1], last
    hoisted = _hoisting(nc, watch, moving, last.length, after.length, snaps[a].length, onto)
    if hoisted is None:
        return False  # the hoisting memo would keep what stamping cannot
    counts = {}
    for prefix, v in snaps[a + p].counts.items():
        if v != snaps[a].counts.get(prefix, 0):
            counts[prefix] = v - snaps[a].counts.get(prefix, 0)
    return _Template(recs=recs, steps=steps, first=a, period=p, length=length, start=a + p + 1, end=end,
                     tiles=period, counts=counts, hoisted=hoisted, at=last.length, location=recs[0][0].location,
                     next=runs[1:], keys={}, slots=moving_parts, onto=hoisted_onto)


def _local(nc, fresh) -> tuple:
    """(the places of the tiles the innermost enclosing iteration made, `fresh`: the first tile numbers of this
    run of the loop): a tile either made is made again by a later iteration of an enclosing loop (`_outlives`)."""
    made = set()
    for ref in nc.scopes[-1].allocs:
        a = ref()
        if a is not None:
            made.add(a.place)
    return made, fresh


def _outlives(rec, stand_in, local) -> bool:
    """Whether hoisted record `rec`'s first instance may be repeated by a later iteration of an enclosing loop:
    some input of it is a tile made before the innermost enclosing iteration, or stands for such an instance's
    result (the hoisting memo keys a hoisted result by the first instance's)."""
    made, fresh = local
    for name, p in rec.placed.items():
        if name != "dst":
            known = stand_in.get(p[0])
            if known if known is not None else p[0] not in made and _made_before(p[0], fresh):
                return True
    return False


def _paired(known, k, name, px, py, pz, p, sbuf_fresh, psum_fresh, period, slots):
    """(py, pz, whether the part moves by offset, (tile step per period, offset and partition offset steps per
    period, its slot) or None when nothing moves, that move as operand `k` (`name`) of a record's moves or None,
    the move it last moved by) for placement `px` of an iteration of the template, `py` the same operand's a step
    on and `pz` a period on (None past the first iteration of the period); None when they do not differ only by
    fixed steps. `known`: what this gave for `px` before, or None; `slots`: the moving placements of the iteration
    so far (records share placements: each moved once a step)."""
    if px[1] is not py[1] or px[2] is not py[2] and px[2] != py[2] \
            or px[3] is not py[3] and px[3] != py[3] or px[6] is not py[6] and px[6] != py[6] \
            or px[7] or py[7]:
        return None
    ox, pox, oy, poy = px[4], px[5], py[4], py[5]  # (offsets: C integers in the compiled build)
    doff, dpoff = oy - ox, poy - pox  # per iteration
    qx = px[0]
    tile = qx[5]
    sbuf = qx[0] == "sbuf"
    made = tile >= 0 and tile >= (sbuf_fresh if sbuf else psum_fresh)
    dtile = (period[0] if sbuf else period[1]) if made else 0  # per period
    if pz is not None:  # the first iteration: a period on, the same place, each step moved p times
        qz = pz[0]
        if qz[0] != qx[0] or qz[1] != qx[1] or qz[2] != qx[2] or qz[3] != qx[3] or qz[4] != qx[4]:
            return None
        tz, oz, poz = qz[5], pz[4], pz[5]
        if tz != tile + dtile or oz != ox + p * doff or poz != pox + p * dpoff:
            return None
    elif not made and py[0] != px[0]:
        return None
    last = None if known is None else known[5]  # the move it last moved by (its steps per period: p > 0)
    move = entry = None
    if dtile or doff or dpoff:
        if last is not None and last[0] == dtile and last[1] == p * doff and last[2] == p * dpoff:
            move = last  # (one tuple for all its pairings: fewer objects)
        else:
            move = last = (dtile, p * doff, p * dpoff, len(slots))
            slots.append((px, move[0], move[1], move[2]))
        entry = (k, name, px, move[0], move[1], move[2], move[3])
    return py, pz, bool(doff or dpoff), move, entry, last


_STILL = ((), None)  # a record of the template none of whose parts moves: no moves, no moving signature


def _onto(rec, start):
    """Where record `rec` of an iteration starting at stream index `start` is hoisted onto (core/hoist.py): the
    stream index of an instance before the iteration, or minus one minus how many records back an instance of
    the same iteration lies (a stamp is hoisted onto its own iteration's); None: not hoisted."""
    h = rec.hoisted
    if h is None:
        return None
    return h if h < start else h - rec.index - 1


def _made_before(place, fresh) -> bool:
    """Whether the tile at `place` was made before the iteration whose first tile numbers are `fresh` (a
    tile the kernel placed itself counts as made before: conservative)."""
    tile = place[5]
    if tile < 0:
        return True
    return tile < (fresh[0] if place[0] == "sbuf" else fresh[1])


def _moving_signature(verdicts, rec, moves):
    """(the signature of `rec`, the positions of the layout numbers that move with their layouts there and
    steps, a number naming those positions and steps alone: with `rec`'s signature number it names the moved
    signatures, `_number`), or None when a layout is not known by number."""
    sig = verdicts.signatures[rec.sig] if rec.sig < len(verdicts.signatures) else None
    if sig is None or len(sig) < 2 + 2 * len(rec.placed):
        return None
    out, numbered, serials = [], _LAYOUT_OF, verdicts.serials  # (a table cleared in place, never rebound: the
    # compiled build calls it as a dict)
    for k, name, pb, dtile, doff, dpoff, slot in moves:
        if not (doff or dpoff):
            continue
        pos = 3 + 2 * k
        if sig[pos - 1] != name:
            return None
        layout = numbered.get(sig[pos])  # (its memory named as the verdict memo names it: memo.relative)
        place = pb[0]
        if layout is None or layout[0] != (place[0], serials.get(place[1]), place[2], place[3], place[4]) \
                or layout[3] is not pb[1] or layout[4] != pb[2] or layout[5] != pb[3] or layout[6] != pb[4] \
                or layout[7] != pb[5]:
            return None
        out.append((pos, layout, doff, dpoff))
    steps = tuple([(m[0], m[2], m[3]) for m in out])
    names = _STEPS
    named = names.get(steps)
    if named is None:
        if len(names) >= _LAYOUTS_MAX:
            names.clear()
        named = names[steps] = next(_STEP_NUMBERS)
    return sig, tuple(out), named


_STEPS: dict = {}  # moving positions and steps -> the number naming them in `_number`'s memo keys (never reused)
_STEP_NUMBERS = itertools.count()


def _hoisting(nc, watch, moving, lo, hi, before, onto):
    """The entries of the hoisting memo (core/hoist.py) that iteration [lo, hi) of the stream left at the lines
    of loop-invariant candidates reading only tiles made before it, when stamping keeps the memo as running
    would: those at a line whose inputs move are `_replicas`'s; older ones only from before the iterations stamped from
    (`before`: they outlived iterations that write what every later one writes, and a later instance would
    have been hoisted onto them as the template's were, `onto`). None when that fails."""
    if not watch:
        return ()
    out, skipped = [], False
    for key, seen in nc.invariants.first.items():
        if key[0] in watch:
            if key[0] in moving:
                skipped = True  # an entry each iteration, at the parts it reads there (`_replicas`)
                continue
            if lo <= seen[0] < hi:
                out.append(key)
            elif not (seen[0] < before or seen[0] in onto):
                return None
    return _Replicated(out) if skipped else tuple(out)


class _Replicated(tuple):
    """`_hoisting`'s entries where the memo also holds some at a line whose inputs move (`_replicas` asked)."""


def _replicas(nc, t, snaps):
    """What the iterations stamped leave in the hoisting memo (core/hoist.py) at the lines of pure instructions
    whose inputs, all made before the loop, move by offset: an entry each, at the parts read there, which a
    later run of an enclosing loop may hoist onto. Per such record of the template: (its phase, its position,
    the entry's key but its inputs, the inputs, the entry, each moving operand's (tile, offset, partition
    offset) steps). () when the memo holds no entry at such a line (`_hoisting`); None where stamping cannot
    keep the memo as running would: an entry not found for such a record (or taken away by a later write, or
    made elsewhere than directly in the loop's body), another record of the loop writing what such a record
    reads, or an entry already at the key of an iteration stamped (which running would have hoisted onto)."""
    if type(t.hoisted) is not _Replicated:
        return ()  # no entry at such a line: none left by an iteration run, so none by one stamped
    memo, a, p = nc.invariants, t.first, t.period
    lines, reads, moving = [], set(), set()
    for i in range(p):
        fresh, recs, steps = snaps[a + i].tiles, t.recs[i], t.steps[i]
        for j in range(len(recs)):
            x = recs[j]
            if id(x.op) not in _PURE_IDS or x.engine not in HOIST_ENGINES or x.writes != ("dst",):
                continue  # (most records are of an impure op: asked first)
            shifted = False
            for move in steps[j][0]:
                if move[1] != "dst" and (move[4] or move[5]):
                    shifted = True
            if not shifted:
                continue
            outer = True
            for name, q in x.placed.items():
                if name != "dst" and not _made_before(q[0], fresh):
                    outer = False
            if outer:  # (a line `_hoisting` leaves to this, as `_template` picks them)
                moving.add(x.location)
                if _hoistable(x, fresh):  # (else the memo keeps no entry for it)
                    lines.append((i, j))
                    for name, q in x.placed.items():
                        if name != "dst":
                            reads.add(q[0])
    if not moving:
        return ()
    lo, hi = snaps[a].length, snaps[a + p].length
    found = {}
    for key, seen in memo.first.items():
        if key[0] in moving and lo <= seen[0] < hi:
            found[seen[0]] = key
    if len(found) != len(lines) or memo.same or memo.pending is not None:
        return None
    for recs in t.recs:
        for rec in recs:
            for name in rec.writes:
                q = rec.placed.get(name)
                if q is not None and q[0] in reads:
                    return None  # it forgets entries as it goes
    enclosing = tuple([(s.loop, s) for s in nc.scopes])  # (the loop's own iteration is over: not among them)
    out = []
    for i, j in lines:
        x = t.recs[i][j]
        key = found.get(x.index)
        if key is None or key[0] != x.location:
            return None
        seen = memo.first[key]
        here = seen[1]
        if len(here) != len(enclosing) + 1 or here[:-1] != enclosing or seen[2][1] != x.placed["dst"]:
            return None
        for name, ident, q in key[6]:
            if x.placed.get(name) != q:
                return None
        steps = {}
        for move in t.steps[i][j][0]:
            steps[move[1]] = (move[3], move[4], move[5])
        out.append((i, j, key[:6], key[6], seen, steps))
    for it in range(t.start, t.end):
        phase, step = (it - a) % p, (it - a) // p
        for i, j, head, inputs, seen, steps in out:
            if i == phase and _replica_key(head, inputs, steps, step) in memo.first:
                return None
    return tuple(out)


def _replica_key(head, inputs, steps, step) -> tuple:
    """The hoisting memo's key of a replicated record moved `step` steps (`_replicas`)."""
    moved = []
    for name, ident, q in inputs:
        d = steps.get(name)
        moved.append((name, ident, q if d is None else _moved(q, step, d[0], d[1], d[2])))
    return head + (tuple(moved),)


class _Stamped:
    """An iteration recorded without running, as the hoisting memo's entries name it: by identity alone."""

    __slots__ = ()


def _replicate(nc, t, base) -> None:
    """Leave in the hoisting memo the entries the iterations stamped from stream index `base` on would have left
    at the lines `_replicas` found, in their order; a result tile made in a stamped iteration, which has no
    allocation, named by an object of its own."""
    memo, a, p, length = nc.invariants, t.first, t.period, t.length
    first, readers = memo.first, memo.readers
    for it in range(t.start, t.end):
        phase, step = (it - a) % p, (it - a) // p
        at = base + (it - t.start) * length
        scope, made = _Stamped(), {}
        for i, j, head, inputs, seen, steps in t.replicas:
            if i != phase:
                continue
            key = _replica_key(head, inputs, steps, step)
            ident, q = seen[2]
            d = steps.get("dst")
            if d is not None:
                q = _moved(q, step, d[0], d[1], d[2])
                if d[0]:  # a tile made in the iteration
                    ident = made.setdefault(q[0], _Stamped())
            here = seen[1]
            first[key] = (at + j, here[:-1] + ((here[-1][0], scope),), (ident, q))
            for name, i_, q_ in key[6]:
                readers.setdefault(i_, []).append(key)


def _stamp(nc, t: _Template) -> None:
    """Record iterations [t.start, t.end), each as the template's iteration of its phase, moved on."""
    stream, budget, verdicts = nc.stream, nc.budget, nc.builder.verdicts
    length, p = t.length, t.period
    notes = None  # the parts to note in views.WATCH, per phase and record (`_watched`)
    movers = []  # per phase: its moving placements and their tiles' places, as `_moved_slots` moves them
    for slots in t.slots:
        movers.append(_movers(slots))
    for it in range(t.start, t.end):
        phase, step = (it - t.first) % p, (it - t.first) // p
        recs, steps, onto = t.recs[phase], t.steps[phase], t.onto[phase]
        base = len(stream)
        counted = budget.at_once(length)  # records charged at once; the next one alone, at its line
        watch = views.WATCH
        watching = watch is not None  # a loop outside watches the parts its iterations slice
        if watching and notes is None:
            notes = _watched(t)
        now = _moved_slots(movers[phase], step)  # the template's moving placements moved to this iteration
        for j in range(length):
            rec = recs[j]
            moves, sig = steps[j]
            placed, number = rec.placed, rec.sig
            if moves:
                # where every operand moves, a new dict (the moves follow the template's operands in order)
                placed = {} if len(moves) == len(placed) else dict(placed)
                for move in moves:
                    s = move[6]
                    placed[move[1]] = now[s]
                if sig is not None:
                    number = _number(verdicts, sig, step, number)
                    if watching and notes[phase][j]:
                        _watch(watch, notes[phase][j], it, placed)
            if j >= counted:
                budget.charge(rec.location)
                counted = j + 1 + budget.at_once(length - j - 1)
            # made without its constructor (whose arguments the compiled build would parse for each record); the
            # attributes are shared with the template, as no record's attributes change once a loop ends (the
            # scheduler's `keep_order` marks whole loops: a `with` block inside a stamped body is refused)
            out = Record.__new__(Record)
            out.index, out.op, out.engine, out.placed, out.writes = base + j, rec.op, rec.engine, placed, rec.writes
            out.attrs, out.location, out.sig, out._regions, out.site = rec.attrs, rec.location, number, None, rec.site
            h = onto[j]
            out.hoisted = None if h is None else h if h >= 0 else base + j + h + 1
            out.accumulated, out.spill = rec.accumulated, None
            stream.append(out)
    nc.builder.stamped += t.end - t.start
    # the counters move on as running the iterations would have moved them
    periods = (t.end - t.start) // p
    for m, d in zip((nc.sbuf, nc.psum), t.tiles):
        if d:
            m.tiles = itertools.count(_peek(m.tiles) + d * periods)
    for k, d in t.counts.items():
        nc._counts[k] = nc._counts.get(k, 0) + d * periods
    if t.hoisted:  # the memo's entries from the last iteration run stand for those of the last one stamped
        first, shift = nc.invariants.first, (t.end - t.start) * length
        for key in t.hoisted:
            seen = first.get(key)
            if seen is not None and t.at <= seen[0] < t.at + length:
                first[key] = (seen[0] + shift,) + seen[1:]


def _watched(t) -> list:
    """Per phase and record of template `t`, the parts `_watch` notes: (operand, the tensor's dtype, its layout
    but its place, whether the key is a single number or slice, the key at iteration `at` with its step as
    `_key_parts` gives them, `at`) for each key `_straight` proved."""
    out = []
    for phase in range(t.period):
        out.append([()] * t.length)
    keys = t.keys  # filled by `_straight` in the order of each record's moves
    for (phase, j, name), (w, step, at) in keys.items():
        notes = out[phase]
        notes[j] = notes[j] + ((name, w[1], w[1:7], type(w[7]) is not tuple, _key_parts(w[7], step), at),)
    return out


def _key_parts(key, step) -> tuple:
    """Index key `key` (ints and step-less slices) with its step (`_key_step`) as `_key_from` moves it: per number,
    (kind, start, its step, stop, its step), kind 0 for an int (its value the start) and else 1, plus 2 where the
    slice has no start and 4 where it has no stop."""
    ks = key if type(key) is tuple else (key,)
    out = []
    for i in range(min(len(ks), len(step))):
        x, s = ks[i], step[i]
        if type(x) is int:
            out.append((0, x, s, 0, 0))
        else:
            sl = x  # a slice (the compiled build reads its bounds directly)
            lo, hi = sl.start, sl.stop
            out.append((1 | (2 if lo is None else 0) | (4 if hi is None else 0), 0 if lo is None else lo,
                        0 if lo is None else s[0], 0 if hi is None else hi, 0 if hi is None else s[1]))
    return tuple(out)


def _key_from(parts, single, t: int):
    """The key `_key_parts` describes moved `t` steps: `_key_at`'s, in C numbers in the compiled build."""
    out = []
    for part in parts:
        kind, a, da, b, db = part
        if kind == 0:
            out.append(a + da * t)
        else:
            out.append(slice(None if kind & 2 else a + da * t, None if kind & 4 else b + db * t))
    return out[0] if single else tuple(out)


def _watch(watched, notes, it, placed) -> None:
    """Note in views.WATCH (`watched`) the parts that moved by offset in stamped iteration `it`, with the keys that
    slice them there (those a template's keys were proven for: `_straight`), as running the iteration would have."""
    for name, dtype, layout, single, parts, at in notes:
        q = placed[name]
        watched.append(((q[0], dtype, q[2], q[3], q[4], q[5]),
                        (q[0], layout[0], layout[1], layout[2], layout[3], layout[4], layout[5],
                         _key_from(parts, single, it - at), q[2], q[3], q[4], q[5])))


def _movers(slots) -> tuple:
    """A phase's moving placements (`_Template.slots`: the placement, its tile, offset and partition offset steps)
    as `_moved_slots` moves them: (the slots; per slot, the position of its tile's place among the places that
    move, -1 where it stays; those places with their tile steps). Parts of one tile share its moved place, made
    once an iteration: fewer objects to make, and to free with the stream."""
    places, at, ks = [], {}, []
    for slot in slots:
        px, dtile = slot[0], slot[1]
        k = -1
        if dtile:  # a tile made in the iteration: its number names its place in its memory
            place = px[0]
            tile = place[5]
            key = 2 * tile + (1 if place[0] == "sbuf" else 0)
            got = at.get(key)
            if got is not None:
                k = got
                pair = places[k]
                if pair[1] != dtile or pair[0] is not place and pair[0] != place:
                    got = None
            if got is None:
                k = len(places)
                at[key] = k
                places.append((place, dtile))
        ks.append(k)
    return slots, ks, places


def _moved_slots(movers, step) -> list:
    """The placements `_movers` describes moved `step` steps, each as `_moved` moves it."""
    slots, ks, places = movers
    moved = []
    for pair in places:
        place, dtile = pair
        tile = place[5]
        moved.append((place[0], place[1], place[2], place[3], place[4], tile + dtile * step))
    out = []
    for i in range(len(slots)):
        slot = slots[i]
        px = slot[0]
        k = ks[i]
        doff, dpoff = slot[2], slot[3]
        if doff or dpoff or k < 0:
            out.append(_at(px, px[0] if k < 0 else moved[k], doff * step, dpoff * step))
        else:  # only its tile's place moves (`_at` with no offset steps, written out)
            out.append((moved[k], px[1], px[2], px[3], px[4], px[5], px[6], px[7], px[8]))
    return out


def _moved(p, step, dtile, doff, dpoff):
    """Placement `p` moved `step` steps."""
    place = p[0]
    if dtile:
        tile = place[5]
        place = (place[0], place[1], place[2], place[3], place[4], tile + dtile * step)
    return _at(p, place, doff * step, dpoff * step)


def _at(p, place, d, dp):
    """Placement `p` with its tile at `place`, its offset (and span) moved by `d` and its partition offset by `dp`."""
    off, poff, span = p[4], p[5], p[8]
    if d:
        o = off  # (C numbers in the compiled build)
        off = o + d
        if span is not None:
            lo, hi = span[0], span[1]
            span = (lo + d, hi + d, span[2])
    if dp:
        o = poff
        poff = o + dp
    return (place, p[1], p[2], p[3], off, poff, p[6], p[7], span)


def _number(verdicts, sig, step, like):
    """The signature number of a record whose operands' layouts moved `step` steps. Kept by (`like`, `step`,
    the moving positions and steps): numbers only, cheap to hash, where the signature holds the attributes and
    every operand's layout; the same in each run of a loop whose tiles lie where an earlier run's lay. Valid
    while the verdict memo keeps its table and each moved layout keeps its number (views.py clears the layout
    table when full: then the entry is made again)."""
    global _numbered_for
    base, moving, steps = sig
    if _numbered_for is not verdicts.kept:
        _numbered.clear()
        _numbered_for = verdicts.kept
    memo, layouts = _numbered, _LAYOUT_OF  # (cleared in place, never rebound)
    memo_key = (like, step, steps)
    hit = memo.get(memo_key)
    if hit is not None:
        for n in hit[1]:
            if n not in layouts:
                hit = None
                break
        if hit is not None:
            return hit[0]
    key = list(base)
    made = []
    for pos, layout, doff, dpoff in moving:
        n = layout_number((layout[0], layout[1], layout[2], layout[3], layout[4], layout[5], layout[6] + doff * step,
                           layout[7] + dpoff * step))  # (one tuple made)
        key[pos] = n
        made.append(n)
    number = verdicts.number(tuple(key), like)
    if len(memo) >= _LAYOUTS_MAX:
        memo.clear()
    memo[memo_key] = (number, tuple(made))
    return number


_numbered: dict = {}  # _number's memo: (like, step, the moves' number) -> (number, the moved layouts' numbers)
_numbered_for = None  # the verdict memo's table the entries were numbered in


def _check_last(nc, t: _Template, it: int) -> None:
    """The last iteration `it`, which ran, recorded the template moved on to it; else StampError."""
    phase, step = (it - t.first) % t.period, (it - t.first) // t.period
    recs = nc.stream[len(nc.stream) - t.length:] if len(nc.stream) >= t.length else []
    verdicts = nc.builder.verdicts
    ok = len(recs) == t.length
    for j in range(t.length if ok else 0):
        rec, got = t.recs[phase][j], recs[j]
        moves, sig = t.steps[phase][j]
        if sig is None:  # no part moves by offset: tile numbers move by count, which nothing bends
            continue
        want = dict(rec.placed)
        for k, name, pb, dtile, doff, dpoff, slot in moves:
            want[name] = _moved(pb, step, dtile, doff, dpoff)
        number = _number(verdicts, sig, step, rec.sig) if sig is not None else rec.sig
        if got.op is not rec.op or got.sig != number or got.accumulated != rec.accumulated \
                or _onto(got, len(nc.stream) - t.length) != t.onto[phase][j] \
                or list(got.placed) != list(want) or any(got.placed[n][:8] != w[:8] for n, w in want.items()):
            ok = False
            break
    if not ok:
        raise StampError(f"the loop whose body starts at {t.location} recorded in its last iteration other than its stamped "
                         f"iterations foretold (an index that does not move by a fixed step, such as a negative one "
                         f"wrapping round); run it with TRNSIM_FAST=0")


# -- a later run of a loop, recorded as an earlier one ----------------------------------------------------------
REPLAYS = 8  # runs of a loop kept per core to be replayed (by the state they started in); 0: none
_MISSING = object()


class _Replay:
    """A run of a loop that a later one may record again (`_replayed`): its records and the parts it noted in
    views.WATCH, what its body read (`_inputs`), the counters it moved on, the live tiles it touched last (in
    that order), the tables its signature numbers are valid in and what a replay renames (`_plan_of`, found at the
    first)."""

    __slots__ = ("records", "watched", "inputs", "span", "fresh", "tiles", "counts", "touched", "verdicts", "kept",
                 "mark", "plan")

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)


def _runs_of(nc) -> dict:
    """The runs kept on core `nc`, which they die with (as its stream does): (id of a code, offset of its
    FOR_ITER, iterations) -> {state at the run's start: _Replay}."""
    runs = getattr(nc, "kept_runs", None)
    if runs is None:
        runs = nc.kept_runs = {}
    return runs


def _inputs(nc, frame):
    """What the body of the loop about to run in `frame` reads from outside it: the names, then per name it
    reads from before the loop and per global it or a function of the kernel's reads, the value as `_input`
    gives it; None where one is not such a value."""
    got = _analysed.get((id(frame.f_code), _offset(frame)))
    if got is None or got[1] is False:
        return None
    analysis, glob, memo = got[1], frame.f_globals, nc.invariants
    out = [(analysis[5], tuple([name for _, name in analysis[6]]))]
    names = frame.f_locals  # (a snapshot, emptied at once: it keeps no tile alive)
    try:
        for name in analysis[5]:
            v = _input(names.get(name, _MISSING), memo)
            if v is None:
                return None
            out.append(v)
    finally:
        if type(names) is dict:  # (3.13: a proxy, which holds nothing)
            names.clear()
    for where, name in analysis[6]:
        v = (glob if where is None else where).get(name, _MISSING)
        if v is _MISSING:
            v = builtins.__dict__.get(name, _MISSING)
        v = _input(v, memo)
        if v is None:
            return None
        out.append(v)
    return tuple(out)


def _input(v, memo):
    """A value a loop body reads, as two runs compare it: a number, string, None or tuple of those, a dtype or
    an enum member by value; a module, function or class by identity (weakly: a kept run holds no module, whose
    globals may hold the core); a tensor by its layout and its tile's place and state, which must be the same
    but for the tile's number (then its place is the last item); None for anything else, and for a tensor whose
    tile an entry of the hoisting memo reads (a write would forget it)."""
    c = type(v)
    if c in _SCALARS:
        return (c, v)
    if c is tuple:
        for x in v:
            if type(x) not in _SCALARS:
                return None
        return (c, v)
    if isinstance(v, View):
        a = v.alloc
        if a is None or v.gather_rows is not None or memo.readers.get(a.id) or memo.aliased.get(a.id):
            return None
        return (View, (a.place[:5], a.partitions, a.kind, a.expired, a.evicted, a.consumed, a.saved, a.spilled,
                       a.shared, a.block, a.scratch is None, v.dtype, v.shape, v.strides, v.offset, v.poff, v.on_chip),
                a.place)
    if c is types.ModuleType or c is types.FunctionType or c is type:
        return (c, weakref.ref(v))
    if c is DType or isinstance(v, enum.Enum):
        return (c, v)
    return None


def _inert(rec) -> bool:
    """Whether the hoisting memo (core/hoist.py) neither hoists record `rec` nor keeps it as an instance: not
    hoisted, and not a pure instruction of a compute engine writing one result, or one whose result is one of
    its inputs' tiles."""
    if rec.hoisted is not None:
        return False
    if id(rec.op) not in _PURE_IDS or rec.engine not in HOIST_ENGINES or rec.writes != ("dst",):
        return True
    dst = rec.placed.get("dst")
    if dst is None:
        return True
    for name, q in rec.placed.items():
        if name != "dst" and q[0] == dst[0] and dst[0][5] >= 0:
            return True
    return False


def _keep(nc, key, first, inputs, indices, outside, tick, mark) -> None:
    """Keep the run of a loop that just ended (from snapshot `first`) to be replayed, where a later run that
    starts in the state this one started in and reads the same values (`_inputs`) records what this one did,
    moved to its tiles: none of its records touches the hoisting memo, and it ends in the state it started in.
    `outside`: views.WATCH as the run found it; `tick`: the use tick then; `mark`: the allocation number when its
    last iteration run started (the loop releases that iteration's tiles at its end, core/liveness.py:
    iterations, after this: a run whose last iteration holds one is not kept)."""
    verdicts = getattr(nc.builder, "verdicts", None)
    if len(nc.stream) == first.length or verdicts is None or nc.invariants.pending is not None or not _LAYOUT_OF:
        return
    for m in (nc.sbuf, nc.psum):
        live = m.live
        for a in m.held.values():
            if a.id >= mark and not a.evicted and a.id in live:
                return  # the loop's end releases a tile the last iteration made: the state then is not this one
    if _state(nc) != first.state:
        return
    records = nc.stream[first.length:]
    for rec in records:
        if not _inert(rec):
            return
    watched = None
    if outside is not None:
        if views.WATCH is not outside:
            return
        watched = outside[first.watched:]
    touched = []  # the live tiles the run used, in the order it last used them
    for mi in range(2):
        pos = 0
        for a in (nc.sbuf if mi == 0 else nc.psum).live.values():
            if a.used >= tick:
                touched.append((a.used, mi, pos))
            pos += 1
    touched.sort()
    counts = {}
    for k, v in nc._counts.items():
        if v != first.counts.get(k, 0):
            counts[k] = v - first.counts.get(k, 0)
    runs = _runs_of(nc)
    entries = runs.get(key)
    if entries is None or len(entries) >= REPLAYS:
        entries = runs[key] = {}
    entries[first.state] = _Replay(
        records=records, watched=watched, inputs=inputs, span=(indices.start, indices.step), fresh=first.tiles,
        tiles=(_peek(nc.sbuf.tiles) - first.tiles[0], _peek(nc.psum.tiles) - first.tiles[1]), counts=counts,
        touched=[(mi, pos) for _, mi, pos in touched], verdicts=verdicts, kept=verdicts.kept,
        mark=_peek(views._LAYOUT_NUMBERS) - 1, plan=None)


def _replayed(nc, key, snap, inputs, indices) -> bool:
    """Record a run of a loop, starting at snapshot `snap`, as the kept run that started in the same state
    recorded itself (`_keep`), when its body reads the same values (`inputs`) but for the tiles of the tensors
    (each then the same place and state as the one it stands for): each record and note with those tiles, and
    the tiles the run made, renumbered. Running it would record the same: an iteration's records follow from the
    state it starts in, its index and what the body reads. False, nothing recorded, where that is not shown."""
    entries = _runs_of(nc).get(key)
    r = entries.get(snap.state) if entries is not None else None
    if r is None or r.inputs[0] != inputs[0] or r.span != (indices.start, indices.step) \
            or len(r.inputs) != len(inputs) or nc.invariants.pending is not None:
        return False
    verdicts = getattr(nc.builder, "verdicts", None)
    if verdicts is not r.verdicts or verdicts.kept is not r.kept or verdicts.spec is not nc.spec \
            or r.mark not in _LAYOUT_OF or views.WATCH is not None and r.watched is None:
        return False
    rho = {}  # the place of each tensor's tile in the kept run -> in this one
    for i in range(1, len(inputs)):
        x, y = r.inputs[i], inputs[i]
        if x[0] is View:
            if y[0] is not View or x[1] != y[1] or rho.setdefault(x[2], y[2]) != y[2]:
                return False
        elif x != y:
            return False
    if len(set(rho.values())) != len(rho):
        return False
    plan = r.plan
    if plan is None:
        plan = r.plan = _plan_of(r.records, r.watched)
    places, ours, qs, dicts, attrs, rows, marks = plan
    fresh = r.fresh
    shift = (snap.tiles[0] - fresh[0], snap.tiles[1] - fresh[1])
    watching = views.WATCH is not None
    renamed = []  # each place as this run has it (those only notes name: where notes are kept)
    for i in range(len(places) if watching else ours):
        place = _renamed(places[i], rho, fresh, shift)
        if place is None:
            return False
        renamed.append(place)
    moved = []  # each placement with its tile's place renamed (the same object where that stays)
    for i in range(len(qs)):
        q, k = qs[i]
        place = renamed[k]
        moved.append(q if place is q[0] else _with_place(q, place))
    placements = []  # each placements dict renamed (the same dict where none moved)
    for i in range(len(dicts)):
        placed, names = dicts[i]
        new = None
        for name, k in names:
            if moved[k] is not qs[k][0]:
                new = {}
                break
        if new is None:
            placements.append(placed)
            continue
        for name, k in names:
            new[name] = moved[k]
        placements.append(new)
    own = []  # (each record's attributes its own: an `nl.no_reorder()` block marks the records it holds, ORDERED)
    for i in range(len(attrs)):
        a = attrs[i]
        a = a.copy()
        a.pop(ORDERED, None)
        own.append(a)
    out, records, stream = [], r.records, nc.stream
    base, lo = len(stream), records[0].index
    for i in range(len(records)):
        rec, row = records[i], rows[i]
        z = Record.__new__(Record)
        z.index, z.op, z.engine, z.placed, z.writes = base + rec.index - lo, rec.op, rec.engine, placements[row[0]], \
            rec.writes
        z.attrs, z.location, z.sig, z._regions, z.site = own[row[1]], rec.location, rec.sig, None, rec.site
        z.hoisted, z.accumulated, z.spill = None, rec.accumulated, rec.spill
        out.append(z)
    notes = None
    if watching:
        notes = []
        watched = r.watched
        for i in range(len(watched)):
            e, mark = watched[i], marks[i]
            u, w = e
            pu, pw = renamed[mark[0]], renamed[mark[1]]
            notes.append(e if pu is u[0] and pw is w[0] else (_with_place(u, pu), _with_place(w, pw)))
    budget, total = nc.budget, len(out)
    counted = budget.at_once(total)
    for j in range(total):
        if j >= counted:
            budget.charge(out[j].location)
            counted = j + 1 + budget.at_once(total - j - 1)
        stream.append(out[j])
    for m, d in zip((nc.sbuf, nc.psum), r.tiles):
        if d:
            m.tiles = itertools.count(_peek(m.tiles) + d)
    for c, d in r.counts.items():
        nc._counts[c] = nc._counts.get(c, 0) + d
    if notes:
        views.WATCH += notes
    if r.touched:  # used again in the order the kept run last used them (the spill policy's order)
        lives = (list(nc.sbuf.live.values()), list(nc.psum.live.values()))
        for mi, pos in r.touched:
            lives[mi][pos].used = next(TICK)
    nc.builder.stamped += len(indices)
    _fruitless.pop(key, None)
    return True


def _renamed(place, rho, fresh, shift):
    """A tile's place in a kept run (`_replayed`) as this run has it: a tensor's tile's by `rho`, a tile the run
    made numbered on by `shift` (`fresh`: the first numbers it made); None for another tile."""
    got = rho.get(place)
    if got is None:
        space, tile = place[0], place[5]
        k = 0 if space == "sbuf" else 1 if space == "psum" else -1
        if k < 0 or tile < fresh[k]:
            return None
        got = place if not shift[k] else (space, place[1], place[2], place[3], place[4], tile + shift[k])
    return got


def _with_place(q, place) -> tuple:
    """Tuple `q` (a placement, or either half of a part views.WATCH noted) with its first item `place`: made in one
    tuple at the lengths those have."""
    n = len(q)
    if n == 9:  # a placement (View.placement)
        return (place, q[1], q[2], q[3], q[4], q[5], q[6], q[7], q[8])
    if n == 6:  # a part's layout
        return (place, q[1], q[2], q[3], q[4], q[5])
    if n == 12:  # the view it was sliced from, its key and the part
        return (place, q[1], q[2], q[3], q[4], q[5], q[6], q[7], q[8], q[9], q[10], q[11])
    return (place,) + q[1:]


def _plan_of(records, watched) -> tuple:
    """What a replay of a kept run renames (`_replayed`), each found by identity once: (the tile places its
    records' placements name, then those only its notes name; how many the records name; each placement with
    its place's position; each placements dict with its (name, placement position) pairs; each attributes
    dict; per record, its placements dict's and attributes dict's positions; per note in views.WATCH, its two
    places' positions)."""
    places, qs, dicts, attrs, rows, marks = [], [], [], [], [], []
    place_at, q_at, dict_at, attrs_at = {}, {}, {}, {}
    for rec in records:
        key = id(rec.placed)
        d = dict_at.get(key)
        if d is None:
            names = []
            for name, q in rec.placed.items():
                k = q_at.get(id(q))
                if k is None:
                    k = q_at[id(q)] = len(qs)
                    qs.append((q, _position(place_at, places, q[0])))
                names.append((name, k))
            d = dict_at[key] = len(dicts)
            dicts.append((rec.placed, tuple(names)))
        rows.append((d, _position(attrs_at, attrs, rec.attrs)))
    ours = len(places)
    for u, w in watched or ():  # a note's two halves mostly name one place (views.WATCH)
        k = _position(place_at, places, u[0])
        marks.append((k, k if w[0] is u[0] else _position(place_at, places, w[0])))
    return places, ours, qs, dicts, attrs, rows, marks


def _position(at, items, x) -> int:
    """Where `x` is in `items`, found by identity in `at` (id -> position); appended the first time."""
    k = at.get(id(x))
    if k is None:
        k = at[id(x)] = len(items)
        items.append(x)
    return k


# -- the body's bytecode -------------------------------------------------------------------------------------
_READ = (3, 11) <= sys.version_info[:2] <= (3, 13)  # the CPython versions whose bytecode the analysis reads
_IN_CACHE = sys.version_info[:2] == (3, 12)  # whether f_lasti may point into an instruction's inline cache


def _offset(frame) -> int:
    """The offset of the instruction `frame` runs: its FOR_ITER's while a loop's iterator runs (CPython 3.12's
    f_lasti points into the FOR_ITER's inline cache once it is specialised for a generator)."""
    at = frame.f_lasti
    if _IN_CACHE:
        code, cache = frame.f_code.co_code, dis.opmap["CACHE"]
        while at > 0 and code[at] == cache:
            at -= 2
    return at


def _plan(frame):
    """None when the loop body does not qualify: its bytecode (see the module's doc), and the functions it calls
    are the NKI API's (read from the kernel's globals) or the kernel's own whose code qualifies; else (whether the
    locals it stores are dead after it, whether it reads the layout of a part at a key the index reaches)."""
    code, at = frame.f_code, _offset(frame)
    key = (id(code), at)  # a code object hashes by its contents: slow for a long kernel
    glob = frame.f_globals
    got = _analysed.get(key)
    if got is None or got[0] is not code or got[1] is not False and not _holds(got[1][3]):
        got = _analysed[key] = (code, _analyse(code, at, glob))
    if got[1] is False:
        return None
    calls, tensors, dead, _, shaped = got[1][:5]
    if tensors:  # a tainted key indexes only tensors: the names it indexes hold views (seen by views.WATCH
        names = frame.f_locals  # where a part's layout is read); a snapshot: emptied at once, so that it keeps
        try:  # no tile alive
            for kind, name in tensors:
                v = (glob if kind == "global" else names).get(name)
                if not isinstance(v, View) or shaped and v._parts is None:
                    return None
        finally:
            if type(names) is dict:  # (3.13: a proxy, which holds nothing)
                names.clear()
    for name, attr in calls:
        if name is None:  # the builtin range
            if glob.get(attr, getattr(builtins, attr, None)) is not getattr(builtins, attr):
                return None
            continue
        mod = glob.get(name)
        if getattr(mod, "__name__", None) not in ALLOWED or attr in HOST or not callable(getattr(mod, attr, None)):
            return None
    return dead, shaped


def _holds(deps) -> bool:
    """Whether the globals an analysis read (the kernel's functions called, their modules and tensors) hold what
    they held."""
    for where, name, obj in deps:
        if where.get(name) is not obj:
            return False
    return True


class _Val:
    """A value on the abstract stack: whether the loop index reaches it, whether a loop inside the body does,
    what it is known to be, its name (a global or outside local) or the function it is, and whether it is the
    same in every iteration (`fixed`: _SAME the value, _LAID a tensor's layout only)."""

    __slots__ = ("tainted", "varies", "kind", "name", "where", "fixed")

    def __init__(self, tainted=False, kind="other", name=None, varies=False, where=None, fixed=0):
        self.tainted, self.kind, self.name, self.varies, self.where = tainted, kind, name, varies, where
        self.fixed = fixed


_SAME, _LAID = 2, 1  # _Val.fixed: the same value in every iteration; a tensor laid out the same in every one
LAYOUT_ATTRS = frozenset({"shape", "dtype", "ndim"})  # a part's attributes a body may read (`_steady` proves them)
_BRANCHES = frozenset({"POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_FORWARD_IF_NONE",
                       "POP_JUMP_FORWARD_IF_NOT_NONE", "JUMP_IF_FALSE_OR_POP", "JUMP_IF_TRUE_OR_POP"})
_KEEPS = frozenset({"JUMP_IF_FALSE_OR_POP", "JUMP_IF_TRUE_OR_POP"})  # branches that keep their value when taken
_BUILTINS = {"range": builtins.range, "slice": builtins.slice}  # builtins a body may call
MAX_PATHS = 64  # ways through a body (a branch forks the walk) past which it is not analysed


def _analyse(code, at, glob):
    """(the (module name, function) pairs the body of the loop whose FOR_ITER is at offset `at` calls, the names
    a tainted key indexes, whether its locals are dead after it, the globals its calls' analyses read, whether it
    reads a part's layout, the names it reads from before the loop, (globals, name) of every global read), or False when
    the body does not qualify (the module's doc). Tainted values (reached by the loop index): sums,
    differences and products with untainted numbers set outside the body's loops stay affine ("int"); a part
    taken at a tainted key ("part") may only be passed to a call or stored; a tainted key may only index a
    name the kernel holds or a tensor made by a call."""
    ins = _instructions(code)
    pos = next((n for n, i in enumerate(ins) if i.offset == at), None)
    if pos is None or ins[pos].opname != "FOR_ITER":
        return False
    end = ins[pos].argval
    body = [i for i in ins[pos + 1:] if i.offset < end]
    if not body or body[0].opname != "STORE_FAST" or body[-1].opname != "JUMP_BACKWARD" or body[-1].argval > at:
        return False
    stored: dict = {body[0].argval: _Val(True, "int")}
    seen = _Seen(glob)
    run = body[1:-1]
    seen.top = body[-1].argval
    seen.at(run)[body[-1].offset] = len(run)  # a way that jumps to the closing jump ends the iteration
    try:
        if _walk(run, code.co_consts, stored, set(), seen, None, 0) is False:
            return False
    except IndexError:
        return False
    if seen.shaped and any(v._parts is None for v in seen.views):
        return False  # a part's layout read, sliced where views.WATCH does not see it
    if seen.mixed and seen.outer & seen.stored:
        return False  # a name one way reads from before the iteration and another way stores
    globs = {}
    for where, name in seen.globs:
        globs[(id(where), name)] = (where, name)
    return (tuple(sorted((c for c in seen.calls if c[0] != "tensor"), key=str)),
            tuple(sorted(c[1] for c in seen.calls if c[0] == "tensor")),
            _dead_after(code, end, seen.stored | {body[0].argval}), tuple(seen.deps), seen.shaped,
            tuple(sorted(seen.outer)), tuple(globs.values()))


class _Seen:
    """What a body's analysis found: the API calls and indexed names to check in the kernel's frame, and the
    globals the analysis of the kernel's own functions read: (globals, name, value), to hold at each run."""

    __slots__ = ("glob", "calls", "deps", "stored", "views", "shaped", "paths", "top", "_at", "outer", "mixed", "globs")

    def __init__(self, glob):
        self.glob, self.calls, self.deps = glob, set(), []
        self.stored: set = set()  # the body's locals stored on any way through it
        self.views: list = []  # globals a tainted key indexes
        self.shaped = False  # whether the layout of a part at a tainted key is read (`_steady` proves it fixed)
        self.paths, self.top, self._at = 1, None, {}
        self.outer: set = set()  # the body's names read, on some way, before it stores them: from before the loop
        self.mixed = False  # whether a branch's way may change between an inner loop's iterations
        self.globs: list = []  # (globals, name) of each global the body or a function of the kernel's reads

    def at(self, run) -> dict:
        """Offset -> position in instruction list `run`."""
        got = self._at.get(id(run))
        if got is None or got[0] is not run:
            got = self._at[id(run)] = (run, {x.offset: n for n, x in enumerate(run)})
        return got[1]


OWN_DEPTH = 4  # the kernel's functions calling its functions: how deep their code is analysed
_SCALARS = (int, float, bool, str, type(None))  # defaults such a function may have (no state that outlives a call)
_UNFIT = 0x04 | 0x08 | 0x20 | 0x80 | 0x100 | 0x200  # *args, **kwargs, generator, coroutine, async generators


def _walk(run, consts, stored, read, seen, where, depth, n=0, stack=None, loops=None):
    """Walk instructions `run` from position `n` (of a code whose constants are `consts`) on an abstract stack;
    False when they do not qualify, else the values the paths walked return. `where` is the globals of a
    function of the kernel's being walked (None: the loop body, whose names `_plan` checks in its frame; there
    the run ends before the body's closing jump). A branch on a value fixed for the whole loop forks the walk:
    every iteration takes the same way, so each way is walked alone and must qualify alone. Where an inner
    loop's index reaches the value (a part's width there), its iterations may take different ways, each the
    same in every iteration of this loop: then no name may be read from before the iteration on one way and
    stored on another (`_analyse`), so mixing the ways carries nothing over."""
    stack, loops, prev, kw, out = stack or [], loops or [], None, (), []  # loops: (start, FOR_ITER, exit) open
    at = seen.at(run)
    while n < len(run):
        i = run[n]
        n += 1
        op = i.opname
        if op == "KW_NAMES":
            kw = consts[i.arg]
            continue
        if op in _SAFE:
            prev = i if op == "EXTENDED_ARG" else prev
            continue
        if op in ("LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_DEREF"):
            v = stored.get(i.argval)
            if v is None:
                if where is not None:
                    return False  # in a function of the kernel's every local is an argument or stored before
                read.add(i.argval)
                seen.outer.add(i.argval)
                v = _Val(False, "name", i.argval, fixed=_SAME)
            stack.append(v)
        elif op == "LOAD_CONST":
            stack.append(_Val(fixed=_SAME))
        elif op == "LOAD_GLOBAL":
            if i.arg & 1 and not _NULL_ABOVE:
                stack.append(_Val(kind="null"))
            stack.append(_Val(False, "global", i.argval, False, where, _SAME))
            if i.arg & 1 and _NULL_ABOVE:
                stack.append(_Val(kind="null"))
            seen.globs.append((where, i.argval))
        elif op == "PUSH_NULL":
            stack.append(_Val(kind="null"))
        elif op in ("LOAD_ATTR", "LOAD_METHOD"):
            x = stack.pop()
            fixed = _SAME if x.fixed == _SAME or i.argval in LAYOUT_ATTRS and x.fixed else 0
            if x.tainted:
                if x.kind != "part" or i.argval not in LAYOUT_ATTRS or op != "LOAD_ATTR":
                    return False  # an attribute of the index, or of a part other than its layout's
                seen.shaped = True  # the same in every iteration once each part's key is proven to stay inside
                stack.append(_Val(False, "other", None, x.varies, None, _SAME))
                continue
            if op == "LOAD_METHOD" and x.kind != "global":
                return False  # a method of another object
            if op == "LOAD_METHOD" and not _NULL_ABOVE:
                stack.append(_Val(kind="null"))
            name = (x.name, i.argval) if x.kind == "global" else None
            stack.append(_Val(False, "function", name, x.varies, x.where, fixed))
            if op == "LOAD_METHOD" and _NULL_ABOVE:
                stack.append(_Val(kind="null"))
        elif op == "STORE_FAST":
            if i.argval in read:
                return False  # read before it is stored: carried from the previous iteration
            stored[i.argval] = stack.pop()
            if where is None:
                seen.stored.add(i.argval)
        elif op == "POP_TOP":
            stack.pop()
        elif op in ("BUILD_SLICE", "BUILD_TUPLE", "BINARY_OP", "UNARY_NEGATIVE", "COMPARE_OP", "IS_OP",
                    "CONTAINS_OP", "UNARY_NOT"):
            k = 1 if op in ("UNARY_NEGATIVE", "UNARY_NOT") else i.arg if op in ("BUILD_SLICE", "BUILD_TUPLE") else 2
            args = [stack.pop() for _ in range(k)]
            got = _combined(op, i.arg, args)
            if got is None:
                return False
            stack.append(got)
        elif op == "BINARY_SUBSCR":
            k, c = stack.pop(), stack.pop()
            if c.tainted or k.tainted and k.kind != "int" or "part" in (c.kind, k.kind):
                return False
            if k.tainted and c.kind not in ("name", "global", "made"):
                return False  # a tainted key indexes a tensor the kernel names or makes, nothing else
            if k.tainted and c.kind == "global" and c.where is not None:
                held = c.where.get(c.name)
                if not isinstance(held, View):
                    return False
                seen.deps.append((c.where, c.name, held))
                seen.views.append(held)
            elif k.tainted and c.kind in ("name", "global"):
                seen.calls.add(("tensor", (c.kind, c.name)))
            varies = c.varies or k.varies
            if k.tainted:
                stack.append(_Val(True, "part", None, varies))
            else:
                stack.append(_Val(False, "other", None, varies, None, min(c.fixed, k.fixed)))
        elif op in _BRANCHES:
            cond = stack[-1] if op in _KEEPS else stack.pop()
            if cond.tainted or cond.fixed != _SAME:
                return False  # a branch on the index, or on what may change from one iteration to the next
            seen.mixed = seen.mixed or cond.varies  # the ways an inner loop's iterations take may differ
            to = at.get(i.argval)
            seen.paths += 1
            if to is None or to < n or seen.paths > MAX_PATHS:
                return False
            got = _walk(run, consts, dict(stored), set(read), seen, where, depth, to, list(stack), list(loops))
            if got is False:
                return False
            out += got
            if op in _KEEPS:
                stack.pop()
        elif op == "JUMP_FORWARD":
            to = at.get(i.argval)
            if to is None:
                return False
            n = to
        elif op == "RETURN_VALUE":
            if where is None or loops or len(stack) != 1:
                return False  # a loop body returns nowhere
            out.append(stack.pop())
            return out
        elif op == "CALL":
            args = [stack.pop() for _ in range(i.arg)]
            fn, null = stack.pop(), stack.pop()
            if _NULL_ABOVE:
                fn, null = null, fn
            if null.kind != "null":
                return False
            if fn.kind == "global":
                f = (seen.glob if fn.where is None else fn.where).get(fn.name)
                builtin = _BUILTINS.get(fn.name)
                if builtin is not None and (f is builtin or f is None and getattr(builtins, fn.name) is builtin):
                    if fn.where is not None:
                        seen.deps.append((fn.where, fn.name, f))
                    fn = _Val(False, "function", (None, fn.name), False, fn.where)
                else:
                    got = _own(f, args[::-1], kw, seen, depth + 1)
                    if got is False:
                        return False
                    seen.deps.append((seen.glob if fn.where is None else fn.where, fn.name, f))
                    stack.append(got)
                    kw, prev = (), None
                    continue
            if fn.kind != "function" or fn.name is None:
                return False
            kw = ()
            attr = fn.name[1]
            if fn.where is None:
                seen.calls.add(fn.name)
            elif fn.name[0] is not None:  # in a function of the kernel's: its module checked here
                mod = fn.where.get(fn.name[0])
                if getattr(mod, "__name__", None) not in ALLOWED or attr in HOST or not callable(getattr(mod, attr, None)):
                    return False
                seen.deps.append((fn.where, fn.name[0], mod))
            if fn.name == (None, "slice"):  # a key built by name, as BUILD_SLICE builds one
                got = _combined("BUILD_SLICE", len(args), args)
                if got is None:
                    return False
                stack.append(got)
                continue
            ds = attr == "ds"
            tainted = [a for a in args if a.tainted]
            if any(a.kind != ("int" if ds else "part") for a in tainted):
                return False  # the index reaches a call only through a part or nl.ds
            varies = any(a.varies for a in args)
            fixed = min((a.fixed for a in args), default=_SAME)
            if attr in RANGES or attr == "range":
                if tainted:
                    return False  # an inner loop's bounds reached by the index
                stack.append(_Val(kind="range"))
            elif attr in MAKERS:  # a new tile: laid out the same in every iteration where its arguments are fixed
                stack.append(_Val(False, "made", None, varies, None, _LAID if fixed == _SAME else 0))
            elif ds and not tainted:
                stack.append(_Val(False, "other", None, varies, None, fixed))
            else:
                stack.append(_Val(bool(tainted), "int" if ds and tainted else "part" if tainted else "other",
                                  None, varies))
        elif op == "GET_ITER":
            if stack[-1].kind != "range":
                return False
        elif op == "FOR_ITER":
            start = prev.offset if prev is not None and prev.offset == i.offset - 2 else i.offset
            loops.append((start, i.offset, i.argval))
            stack.append(_Val(False, "other", None, True, None, _SAME))  # the same numbers in every iteration
        elif op == "JUMP_BACKWARD":
            if not loops:
                if where is None and i.argval == seen.top:
                    break  # the body's own next iteration (a branch's way ending early)
                return False
            if i.argval not in loops[-1][:2]:
                return False
            start, offset, exit_ = loops.pop()
            to = at.get(exit_)
            if to is None:
                return False
            stack.pop()  # the inner loop's iterator
            n = to  # the walk goes on after the loop (its body walked once)
        elif op == "COPY":
            stack.append(stack[-i.arg])
        elif op == "SWAP":
            stack[-1], stack[-i.arg] = stack[-i.arg], stack[-1]
        else:
            return False
        if op != "EXTENDED_ARG":
            prev = None
    if where is not None or loops or stack:
        return False
    return out


def _combined(op, arg, args):
    """The value an operation on abstract values `args` gives, or None when it does not qualify: the index
    reaches only sums, differences and products (with a factor fixed for the loop) and keys."""
    tainted = [a for a in args if a.tainted]
    if any(a.kind != "int" for a in tainted) or any(a.kind == "part" for a in args):
        return None
    if tainted and op not in ("BUILD_SLICE", "BUILD_TUPLE", "BINARY_OP", "UNARY_NEGATIVE"):
        return None  # a comparison or a test of the index
    if op == "BINARY_OP" and tainted:
        if arg in _MUL:
            if len(tainted) != 1 or any(a.varies for a in args):
                return None  # the index's step must be the same at every instance of the line
        elif arg not in _ADD:
            return None
    varies = any(a.varies for a in args)
    fixed = _SAME if all(a.fixed == _SAME for a in args) else 0
    return _Val(bool(tainted), "int" if tainted else "other", None, varies, None, 0 if tainted else fixed)


def _merged(vals):
    """The value a call returns when its ways return `vals` (one way taken in every iteration), or None when
    they differ in what the analysis allows of them."""
    first = vals[0]
    if all(v is first for v in vals):
        return first
    kinds = {v.kind for v in vals}
    tainted = any(v.tainted for v in vals)
    if len(kinds) > 1 and tainted:
        return None
    kind = first.kind if len(kinds) == 1 else "other"
    name = first.name if all(v.name == first.name and v.where is first.where for v in vals) else None
    if kind in ("name", "global", "function") and name is None:
        kind = "other"
    return _Val(tainted, kind, name, any(v.varies for v in vals), first.where if name is not None else None,
                min(v.fixed for v in vals))


def _own(f, args, kw, seen, depth):
    """The value a call of the kernel's own function `f` with abstract arguments `args` (the last len(kw) by
    keyword) returns, when its code qualifies as a body's does (no branch, no state kept from one call to the
    next: no closure, defaults only plain numbers and strings, no global stored, no method called); else
    False. Its arguments carry the loop index's reach into it; it may return what a body may store."""
    if type(f) is not types.FunctionType or depth > OWN_DEPTH or f.__closure__ is not None or f.__kwdefaults__:
        return False
    code = f.__code__
    if code.co_flags & _UNFIT or code.co_cellvars or code.co_freevars or code.co_kwonlyargcount:
        return False
    defaults = f.__defaults__ or ()
    if any(type(d) not in _SCALARS for d in defaults):
        return False
    params = code.co_varnames[:code.co_argcount]
    npos = len(args) - len(kw)
    if npos > len(params):
        return False
    stored = dict(zip(params, args[:npos]))
    for name, v in zip(kw, args[npos:]):
        if name not in params or name in stored:
            return False
        stored[name] = v
    for name in params[len(params) - len(defaults):]:
        stored.setdefault(name, _Val(fixed=_SAME))
    if len(stored) != len(params):
        return False
    ins = [x for x in _instructions(code) if x.opname != "RESUME"]
    got = _walk(ins, code.co_consts, stored, set(), seen, f.__globals__, depth)
    if not got:
        return False
    out = _merged(got)
    if out is None or out.kind in ("function", "range", "null"):
        return False
    return out



def _dead_after(code, exit_, stored) -> bool:
    """Whether no local the body stores (its index included) is read after the loop before it is stored again,
    on any path from the loop's exit (an exception handler's too): then the iterations at the loop's end need not
    run for the kernel to go on as it would."""
    ins = _instructions(code)
    at = {i.offset: n for n, i in enumerate(ins)}
    if exit_ not in at:
        return False
    handlers = [(e.start, e.end, at.get(e.target)) for e in dis.Bytecode(code).exception_entries]
    for name in stored:
        seen, todo = set(), [at[exit_]]
        while todo:
            n = todo.pop()
            if n in seen or n >= len(ins):
                continue
            seen.add(n)
            i = ins[n]
            if i.argval == name and "FAST" in i.opname:
                if not i.opname.startswith(("STORE", "DELETE")):
                    return False  # read (or read by a combined load) before it is stored again
                continue  # stored again: dead on this path
            if i.opname not in _ENDS:
                todo.append(n + 1)
            if (i.opcode in dis.hasjrel or i.opcode in dis.hasjabs) and isinstance(i.argval, int):
                if i.argval not in at:
                    return False
                todo.append(at[i.argval])
            for start, end, to in handlers:  # a handler may read what the block it guards set
                if start <= i.offset < end:
                    if to is None:
                        return False
                    todo.append(to)
    return True


_ENDS = frozenset({"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_ABSOLUTE", "JUMP",
                   "JUMP_NO_INTERRUPT", "RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"})
_disassembled: dict = {}  # id of a code -> (the code, its instructions)


def _instructions(code) -> list:
    """The instructions of `code`, disassembled once, in CPython 3.11's words (`_as_311`)."""
    got = _disassembled.get(id(code))
    if got is None or got[0] is not code:
        got = _disassembled[id(code)] = (code, _as_311(list(dis.get_instructions(code))))
    return got[1]


_NULL_ABOVE = sys.version_info >= (3, 13)  # a call's NULL (or self) lies above its callable on the stack, not below
_PAIRS = {"LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"), "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST"),
          "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST")}  # CPython 3.13's instructions on two locals


def _as_311(ins: list) -> list:
    """Instructions of CPython 3.12 or 3.13 said as 3.11 says them, where the analysis reads them alike; one
    3.11 has no word for is left as it is (the analysis then refuses it). A loop's exit is the instruction after
    its END_FOR (3.13: and the POP_TOP after it), which go; LOAD_ATTR loading a method is LOAD_METHOD;
    POP_JUMP_IF_X is POP_JUMP_FORWARD_IF_X (or BACKWARD); TO_BOOL is a NOP (a branch tests the value it
    converts); the tuple of names loaded just before CALL_KW is KW_NAMES, and CALL_KW a CALL; an instruction
    doing what two of 3.11's do (BINARY_SLICE, RETURN_CONST, the superinstructions on two locals) is those two,
    the second at the odd offset after the first's (no jump lands there). The order of a call's callable and
    its NULL on the stack (3.13) is `_NULL_ABOVE`."""
    if sys.version_info < (3, 12):
        return ins
    out: list = []
    ended = set()  # offsets of the END_FOR (and 3.13's POP_TOP) closing each loop
    exits = {}  # FOR_ITER's offset -> the loop's exit
    for n, i in enumerate(ins):
        if i.opname == "FOR_ITER" and isinstance(i.argval, int):
            k = next((m for m in range(n + 1, len(ins)) if ins[m].offset == i.argval), None)
            if k is not None and ins[k].opname == "END_FOR":
                ended.add(ins[k].offset)
                if _NULL_ABOVE and k + 1 < len(ins) and ins[k + 1].opname == "POP_TOP":
                    k += 1
                    ended.add(ins[k].offset)
                if k + 1 < len(ins):
                    exits[i.offset] = ins[k + 1].offset
    for n, i in enumerate(ins):
        op = i.opname
        if i.offset in ended:
            continue
        if op == "FOR_ITER":
            i = i._replace(argval=exits.get(i.offset, -1))  # (-1: no exit found; the analysis refuses it)
        elif op == "LOAD_ATTR" and i.arg & 1:
            i = i._replace(opname="LOAD_METHOD")
        elif op.startswith("POP_JUMP_IF_") and isinstance(i.argval, int):
            way = "FORWARD" if i.argval > i.offset else "BACKWARD"
            i = i._replace(opname=f"POP_JUMP_{way}_IF_{op[len('POP_JUMP_IF_'):]}")
        elif op == "TO_BOOL":
            i = i._replace(opname="NOP")
        elif op == "CALL_KW":
            if out and out[-1].opname == "LOAD_CONST" and type(out[-1].argval) is tuple:
                out[-1] = out[-1]._replace(opname="KW_NAMES")
                i = i._replace(opname="CALL")
        elif op == "BINARY_SLICE":
            out += _split(i, ("BUILD_SLICE", 2, None), ("BINARY_SUBSCR", None, None))
            continue
        elif op == "RETURN_CONST":
            out += _split(i, ("LOAD_CONST", i.arg, i.argval), ("RETURN_VALUE", None, None))
            continue
        elif op in _PAIRS and type(i.argval) is tuple:
            (a, b), (x, y) = _PAIRS[op], i.argval
            out += _split(i, (a, i.arg >> 4, x), (b, i.arg & 15, y))
            continue
        out.append(i)
    return out


def _split(i, first, second) -> list:
    """Instruction `i` as two: (name, arg, argval) each, the second at the odd offset after the first's."""
    return [i._replace(opname=name, opcode=dis.opmap.get(name, i.opcode), arg=arg, argval=argval, offset=i.offset + k)
            for k, (name, arg, argval) in enumerate((first, second))]
