"""The interval map behind dependence tracking, in both its forms, against a byte-by-byte list kept in the test."""
import bisect
import importlib.util
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from trnsim.core import NeuronCore, Op
from trnsim.core.timing import simulate
from trnsim.core import timing
from trnsim.core.timing import intervals
from trnsim.core.timing.intervals import right
from trnsim.core.timing.scheduler import Event, _in_order, _place
from trnsim.core.timing.result import summarize
from trnsim import specs

SPAN = 64
ranges = st.tuples(st.integers(0, SPAN - 1), st.integers(1, SPAN)).map(lambda t: (min(t), max(t[0] + 1, t[1])))


class Bytes:
    """The reference: per byte, None (nothing recorded) or [writer, readers, owner, track], kept in the test."""

    def __init__(self):
        self.b = [None] * SPAN

    def producers(self, lo, hi, w, tile, eng, dma, waits, fed):
        for x in range(lo, hi):
            c = self.b[x]
            if c is None or (w and tile >= 0 and c[2] >= 0 and c[2] != tile):
                continue
            writer, readers, _, track = c
            if writer >= 0 and (not dma or not w or track != eng):
                waits.append(writer)
                if not w and not dma and track == eng:
                    fed.add(writer)
            if w:
                waits.extend(readers)

    def note(self, lo, hi, w, index, tile, eng, accumulated, mine, eng_of, end_of):
        for x in range(lo, hi):
            c = self.b[x]
            if w:
                self.b[x] = [index, [index] if accumulated else [], tile, eng]
            elif c is None:
                self.b[x] = [-1, [index], tile, -1]
            else:
                same = [j for j in c[1] if eng_of[j] == eng]  # a track keeps its reader that ends last (ties: later)
                if same and end_of[same[0]] > mine:
                    continue
                c[1] = [j for j in c[1] if eng_of[j] != eng] + [index]

    def forget(self, lo, hi):
        self.b[lo:hi] = [None] * (hi - lo)


def _python_form():
    """intervals.py run as Python, whatever build the test process loaded (its arrays: arrays.py's lists)."""
    path = Path(timing.__file__).with_name("intervals.py")  # the package's __init__ is never compiled
    spec = importlib.util.spec_from_file_location("intervals_as_python", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PYTHON = _python_form()


def ends_of(mod, eng_of, end_of):
    """An intervals.Ends (of module `mod`'s form) holding each event's track and end."""
    ends = mod.Ends()
    for eng, end in zip(eng_of, end_of):
        mod.ended(ends, eng, end)
    return ends


def per_byte(m) -> list:
    """A map's segments() spread over the bytes the test uses."""
    segs = m.segments()
    starts = [lo for lo, _ in segs]
    out = []
    for x in range(SPAN):
        cell = segs[bisect.bisect_right(starts, x) - 1][1]
        out.append(None if cell is None else [cell[0], list(cell[1]), cell[2], cell[3]])
    return out


accesses = st.lists(st.tuples(ranges, st.booleans(), st.integers(-1, 3), st.integers(0, 5), st.booleans(),
                              st.integers(0, 4), st.sampled_from(["touch", "walk", "forget"])), max_size=40)


@settings(max_examples=120, deadline=None)
@given(accesses)
def test_the_maps_c_and_python_forms_track_what_a_byte_list_tracks(ops):
    """The scheduler's accesses (touch when the bytes are one segment, else producers then note; a whole-memory
    write forgetting a quadrant map's bytes) in both forms of the map, the build's (C arrays, when compiled) and
    intervals.py as Python: the same segments, waits and fed in both, and against a per-byte reference the same
    record and the same events waited for, in the order found."""
    forms = [(intervals, intervals.IntervalMap()), (PYTHON, PYTHON.IntervalMap())]
    ref, eng_of, end_of = Bytes(), [], []
    ends = [mod.Ends() for mod, _ in forms]
    for index, ((lo, hi), w, tile, eng, accumulated, end, how) in enumerate(ops):
        dma, mine = eng >= 4, float(end)
        eng_of.append(eng)
        end_of.append(mine)
        for (mod, _), e in zip(forms, ends):
            mod.ended(e, eng, mine)
        if how == "forget":
            for mod, m in forms:
                mod.forget(m, lo, hi)
            ref.forget(lo, hi)
        else:
            got = []
            for (mod, m), e in zip(forms, ends):
                waits, fed, pending = mod.Waits(), [], mod.Pending()
                done = how == "touch" and mod.touch(m, lo, hi, w, tile, eng, dma, index, accumulated, waits, fed, pending)
                if not done:
                    mod.producers(m, lo, hi, w, tile, eng, dma, waits, fed)
                    mod.note(m, lo, hi, w, index, tile, eng, accumulated, mine, e)
                mod.noted(pending, index, mine, eng, e)
                got.append((done, waits.found(), fed))
            assert got[0] == got[1]
            waits, fed = [], set()
            ref.producers(lo, hi, w, tile, eng, dma, waits, fed)
            ref.note(lo, hi, w, index, tile, eng, accumulated, mine, eng_of, end_of)
            assert got[0][1] == list(dict.fromkeys(waits)) and set(got[0][2]) == fed
        assert forms[0][1].segments() == forms[1][1].segments()
        assert per_byte(forms[0][1]) == ref.b


def test_memory_peaks_are_high_water_marks():
    """SBUF and PSUM peaks are the highest byte touched in each partition, summed over partitions."""
    nc = NeuronCore("trn1", values=False)
    a, b = nc.tensor((128, 1024), "float32"), nc.tensor((64, 1024), "float32")
    ps = nc.tensor((128, 512), "float32", "psum")
    nc.issue(Op.MEMSET, dst=a, value=0.0)
    nc.issue(Op.MEMSET, dst=b, value=0.0)
    nc.issue(Op.MEMSET, dst=ps, value=0.0)
    r = summarize("k", [simulate(nc.stream, "trn1")], specs.neuroncore("trn1"))
    high = [0] * 128
    for t in (a, b):
        reg = t.region()
        for p in range(reg.partition, reg.partition + reg.partitions):
            high[p] = max(high[p], reg.byte_hi)
    assert r.sbuf_peak_bytes == sum(high) > 128 * 4096
    assert r.psum_peak_bytes == 128 * 2048


@given(st.lists(st.one_of(st.integers(-50, 50), st.floats(-50, 50, allow_nan=False)), max_size=30),
       st.one_of(st.integers(-60, 60), st.floats(-60, 60, allow_nan=False)))
def test_the_schedulers_bisection_is_bisect_right(items, x):
    """The scheduler searches its sorted lists with its own bisection (compiled to a C loop, the last item looked at
    first): bisect's answer, in both forms, with x below, between, equal to and above the items."""
    items.sort()
    for mod in (intervals, PYTHON):
        assert mod.right(items, x) == bisect.bisect_right(items, x)
        if items:
            last = items[-1]
            assert mod.right(items, last) == bisect.bisect_right(items, last) == len(items)


@given(st.sets(st.integers(1, 1 << 40), max_size=30), st.lists(st.tuples(st.integers(0, 1 << 40), st.integers(0, 40))))
def test_seeking_a_segment_is_bisecting_whatever_was_found_before(bounds, seeks):
    """seek() starts from the segment found last (`hint`, which may point anywhere, even past the end after the
    map shrank): its answer is always bisect's, and so is covers()' for the segment found."""
    for mod in (intervals, PYTHON):
        m, b = mod.IntervalMap(), [0] + sorted(bounds)
        for k in range(1, len(b)):  # one write per segment makes the boundaries
            mod.note(m, b[k - 1], b[k], True, k, -1, 0, False, 0.0, mod.Ends())
        assert [lo for lo, _ in m.segments()] == b
        for x, hint in seeks:
            m.hint = hint
            i = mod.seek(m, x)
            assert i == bisect.bisect_right(b, x) - 1
            assert mod.covers(m, i, b[i], b[i + 1] if i + 1 < len(b) else -1) == (i + 1 < len(b))
            assert not mod.covers(m, i, b[i] + 1, b[i + 1] if i + 1 < len(b) else -1)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(1, 12)), max_size=25))
def test_a_dma_engine_fills_its_free_stretches_in_order(calls):
    """_place books `dur` of an engine's free time from `at` on, gap by gap: against a per-nanosecond list of
    owners kept in the test (a busy stretch is a run of owned nanoseconds; it belongs to the latest transfer
    booked into it)."""
    busy = ([], [], [])
    slots = [-1] * 400
    for n, (at, dur) in enumerate(calls):
        runs = [(k, j, max(slots[k:j])) for k, j in _runs(slots)]  # the stretches before this call, owned
        free = [t for t in range(at, len(slots)) if slots[t] < 0][:dur]
        for t in free:
            slots[t] = n
        start, end = free[0], free[-1] + 1
        before = [o for s, f, o in runs if f > at and s < end]
        assert _place(busy, float(at), float(dur), n) == (start, end, before[-1] if before else -1)
        starts, ends, owner = busy
        assert list(zip(starts, ends, owner)) == [(k, j, max(slots[k:j])) for k, j in _runs(slots)]


def _runs(slots):
    """The (start, end) of each run of owned nanoseconds."""
    k = 0
    while k < len(slots):
        if slots[k] < 0:
            k += 1
            continue
        j = k
        while j < len(slots) and slots[j] >= 0:
            j += 1
        yield k, j
        k = j


@given(st.sets(st.integers(0, 1 << 20), min_size=1, max_size=6).flatmap(lambda s: st.permutations(sorted(s))))
def test_the_events_waited_for_are_given_in_index_order(waits):
    """An event's deps: the distinct events it waited for, in the order found, given sorted (held as integers up
    to three, as a tuple beyond)."""
    found = intervals.Waits()
    for x in waits + waits[:1]:  # the first one twice: kept once
        intervals.add(found, x)
    ev = Event(max(waits) + 1, None, "TensorE", 0.0, 1.0)
    _in_order(found, ev)
    assert found.found() == list(waits) and ev.deps == tuple(sorted(waits))
    assert Event(0, None, "TensorE", 0.0, 1.0, tuple(sorted(waits))).deps == ev.deps  # the constructor's deps


def test_a_write_keeps_the_slices_it_covers_apart_up_to_a_bound():
    """A write over the slices a tile was read by keeps them apart (each is found exactly at the next read), unless
    there are more than intervals.KEPT of them: then it merges them. Either way, both forms hold what the per-byte
    reference holds."""
    for slices in (4, 100):
        forms, ref = [(intervals, intervals.IntervalMap()), (PYTHON, PYTHON.IntervalMap())], Bytes()
        width = SPAN // slices or 1
        eng_of, end_of = [0] * (slices + 1), [float(k) for k in range(slices + 1)]
        bounds = [k * width for k in range(slices)] + [slices * width]
        for mod, m in forms:
            ends = ends_of(mod, eng_of, end_of)
            for k in range(slices):
                mod.note(m, bounds[k], bounds[k + 1], False, k, 7, 0, False, float(k), ends)
            mod.note(m, 0, bounds[-1], True, slices, 7, 1, False, float(slices), ends)
        if slices * width <= SPAN:
            for k in range(slices):
                ref.note(bounds[k], bounds[k + 1], False, k, 7, 0, False, float(k), eng_of, end_of)
            ref.note(0, bounds[-1], True, slices, 7, 1, False, float(slices), eng_of, end_of)
            assert per_byte(forms[0][1]) == per_byte(forms[1][1]) == ref.b
        kept = [lo for lo, _ in forms[0][1].segments()]
        assert kept == [lo for lo, _ in forms[1][1].segments()]
        assert kept == (bounds if slices <= PYTHON.KEPT else [0, bounds[-1]])


def test_the_ends_of_many_events_are_read_back():
    """intervals.Ends grows past its first room (1024 events) keeping every event's track and end: a segment read
    by events far past it keeps, per track, the reader that ends last (ties: the later), in both forms."""
    def end(j):
        return float((j * 7919) % 1000)

    want = {}
    for j in range(1100, 3000):
        if j % 3 not in want or end(j) >= end(want[j % 3]):
            want[j % 3] = j
    for mod in (intervals, PYTHON):
        ends, m = mod.Ends(), mod.IntervalMap()
        for j in range(3000):
            mod.ended(ends, j % 3, end(j))
        mod.note(m, 0, 8, True, 0, 1, 0, False, end(0), ends)
        for j in range(1100, 3000):
            mod.note(m, 0, 8, False, j, 1, j % 3, False, end(j), ends)
        assert sorted(m.segments()[0][1][1]) == sorted(want.values())
