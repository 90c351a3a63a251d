"""The interval map behind dependence tracking, against a byte-by-byte list kept in the test."""
import bisect

from hypothesis import given, settings
from hypothesis import strategies as st

from trnsim.core import NeuronCore, Op
from trnsim.core.timing import simulate
from trnsim.core.timing.intervals import Cell, IntervalMap, cell, covers, own, right, seek
from trnsim.core.timing.scheduler import _in_order, _place
from trnsim.core.timing.result import summarize
from trnsim import specs

SPAN = 64
ranges = st.tuples(st.integers(0, SPAN - 1), st.integers(1, SPAN)).map(lambda t: (min(t), max(t[0] + 1, t[1])))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["assign", "update", "query"]), ranges), max_size=30))
def test_interval_map_matches_a_byte_list(ops):
    """assign/update/overlapping agree with a plain per-byte list for any sequence of operations."""
    m, ref = IntervalMap(), [None] * (SPAN + 1)
    for n, (kind, (lo, hi)) in enumerate(ops):
        if kind == "assign":
            m.assign(lo, hi, ("w", n))
            ref[lo:hi] = [("w", n)] * (hi - lo)
        elif kind == "update":
            m.update(lo, hi, lambda v, n=n: (v, n))
            ref[lo:hi] = [(v, n) for v in ref[lo:hi]]
        else:
            got = {v for v in m.overlapping(lo, hi)}
            assert got == {v for v in ref[lo:hi] if v is not None}


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


def test_split_cells_are_owned_by_their_segment():
    """A cell (list) value split in two becomes two cells: changing one side in place leaves the other alone."""
    m = IntervalMap()
    m.assign(0, 10, [1, {"vector": 1}, -1])
    m.assign(3, 5, None)  # [0, 3) and [5, 10) keep the old cell's contents
    left, right = m.values[m.bounds.index(0)], m.values[m.bounds.index(5)]
    assert left == right == [1, {"vector": 1}, -1] and left is not right and left[1] is not right[1]
    right[1]["tensor"] = 2
    assert left == [1, {"vector": 1}, -1]


@given(st.lists(st.one_of(st.integers(-50, 50), st.floats(-50, 50, allow_nan=False)), max_size=30),
       st.one_of(st.integers(-60, 60), st.floats(-60, 60, allow_nan=False)))
def test_the_schedulers_bisection_is_bisect_right(items, x):
    """The scheduler searches its sorted lists with its own bisection (compiled to a C loop): bisect's answer."""
    items.sort()
    assert right(items, x) == bisect.bisect_right(items, x)


@given(st.sets(st.integers(1, 1 << 40), max_size=30), st.lists(st.tuples(st.integers(0, 1 << 40), st.integers(0, 40))))
def test_seeking_a_segment_is_bisecting_whatever_was_found_before(bounds, seeks):
    """seek() starts from the segment found last (`hint`, which may point anywhere, even past the end after the
    map shrank): its answer is always bisect's, and so is covers()' for the segment found."""
    m = IntervalMap()
    m.bounds = b = [0] + sorted(bounds)
    for x, hint in seeks:
        m.hint = hint
        i = seek(m, x)
        assert i == bisect.bisect_right(b, x) - 1
        assert covers(b, i, b[i], b[i + 1] if i + 1 < len(b) else -1) == (i + 1 < len(b))
        assert not covers(b, i, b[i] + 1, b[i + 1] if i + 1 < len(b) else -1)


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


def test_a_cell_made_without_its_constructor_is_the_same_cell():
    """intervals.cell (the scheduler's quick Cell) gives what Cell(...) gives, and own() copies one apart."""
    readers = [3, 5]
    c, d = cell(7, readers, 2, 1), Cell(7, readers, 2, 1)
    assert ((type(c), c.writer, c.readers, c.owner, c.track) == (type(d), d.writer, d.readers, d.owner, d.track)
            == (Cell, 7, [3, 5], 2, 1))
    e = own(c)
    assert (e.writer, e.readers, e.owner, e.track) == (7, [3, 5], 2, 1) and e is not c and e.readers is not c.readers


@given(st.sets(st.integers(0, 1 << 20), min_size=1, max_size=6).flatmap(lambda s: st.permutations(sorted(s))))
def test_the_events_waited_for_are_given_in_index_order(waits):
    """An event's deps: the distinct events it waited for, in the order found, given sorted."""
    assert _in_order(list(waits)) == tuple(sorted(waits))
