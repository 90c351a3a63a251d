"""Schedule records: checks on the input, busy time, utilisation and the critical path."""
import math

import numpy as np
import pytest
from report_schedules import pipeline_schedule, random_schedule

from trnsim.report import Schedule, ScheduleError, Span
from trnsim.report.schedule import merge_intervals


def grid_busy(spans, track):
    """Busy ns of a track, counted on a 1-ns grid (spans have integer times)."""
    end = int(max(s.end for s in spans))
    mask = np.zeros(end + 1, bool)
    for s in spans:
        if s.track == track:
            mask[int(s.start):int(s.end)] = True
    return float(mask.sum())


def test_pipeline_busy_is_union_not_sum():
    """Overlapping loads on one DMA queue count once: busy time is the union of intervals."""
    sched = pipeline_schedule()
    for track in sched.tracks:
        assert sched.busy[track] == grid_busy(sched.spans, track)
    assert sched.busy["DMA q0"] == 1500.0  # 0..1000 and 500..1500 overlap
    assert sum(s.duration for s in sched.spans if s.track == "DMA q0") == 2000.0


def test_pipeline_latency_share_and_active():
    """Latency is last end minus first start; share is busy / latency; active is the union of all."""
    sched = pipeline_schedule()
    latency = max(s.end for s in sched.spans) - min(s.start for s in sched.spans)
    assert sched.latency == latency == 4600.0
    for track in sched.tracks:
        assert math.isclose(sched.utilisation[track], grid_busy(sched.spans, track) / latency)
    everything = [Span(s.id, "all", s.name, s.start, s.duration) for s in sched.spans]
    assert sched.active == grid_busy(everything, "all")


def test_tracks_in_profile_row_order():
    """Tracks sort as Tensor, Vector, Scalar, GpSimd, Sync, then DMA queues numbered naturally."""
    names = ["DMA q10", "Sync", "DMA q2", "VectorE", "GpSimdE", "TensorE", "ScalarE", "DMA q0"]
    sched = Schedule(tuple(Span(i, t, "NOP", 0, 1) for i, t in enumerate(names)), "trn2", "k", {})
    assert sched.tracks == ("TensorE", "VectorE", "ScalarE", "GpSimdE", "Sync", "DMA q0", "DMA q2", "DMA q10")


def test_pipeline_critical_path():
    """The walk from the store goes back through activation, both matmuls and the later q0 load.

    Store(7) waited on activation(5), which waited on matmul 4; matmul 4 was held by matmul 3 on
    TensorE (ends 2500 = its start), not by load 1 (ends 1400); matmul 3's latest dep is load 2
    (ends 1500); load 2 overlapped load 0 on q0, so nothing blocked it.
    """
    cp = pipeline_schedule().critical_path()
    assert cp.span_ids == (2, 3, 4, 5, 7)
    assert cp.length == 4600 - 500
    assert dict(cp.by_track) == {"DMA q0": 1000, "TensorE": 1500, "ScalarE": 500, "DMA q2": 1000}
    assert cp.bound == "TensorE"
    assert cp.waiting == 100  # the semaphore gap between matmul 4 and the activation


def reference_critical_path(spans):
    """Independent walk: blockers found by scanning all spans, no sorting tricks."""
    by_id = {s.id: s for s in spans}
    cur = max(spans, key=lambda s: (s.end, -spans.index(s)))
    path = [cur]
    while True:
        same = [s for s in spans if s.track == cur.track and (s.start, spans.index(s)) < (cur.start, spans.index(cur))]
        before = max(same, key=lambda s: (s.start, spans.index(s)), default=None)
        blockers = [by_id[d] for d in cur.deps]
        if before is not None and before.end <= cur.start:
            blockers.append(before)
        if not blockers:
            return [s.id for s in reversed(path)]
        cur = max(blockers, key=lambda s: (s.end, -spans.index(s)))
        path.append(cur)


@pytest.mark.parametrize("seed", range(5))
def test_random_schedules_match_references(seed):
    """On random schedules busy time matches a 1-ns grid count and the critical path a plain walk."""
    sched = random_schedule(seed, 200)
    for track in sched.tracks:
        assert sched.busy[track] == grid_busy(sched.spans, track)
    cp = sched.critical_path()
    assert list(cp.span_ids) == reference_critical_path(list(sched.spans))
    ends = [s.end for s in sched.spans]
    assert sched.spans[[s.id for s in sched.spans].index(cp.span_ids[-1])].end == max(ends)
    on_path = [s for s in sched.spans if s.id in set(cp.span_ids)]
    assert math.isclose(cp.waiting, cp.length - sum(s.duration for s in on_path))


def test_merge_intervals_joins_within_gap():
    """Intervals closer than the gap join; touching ones always join; disjoint ones stay apart."""
    s, e = merge_intervals(np.array([5.0, 0.0, 2.0, 10.0]), np.array([6.0, 2.0, 3.0, 11.0]))
    assert s.tolist() == [0.0, 5.0, 10.0] and e.tolist() == [3.0, 6.0, 11.0]
    s, e = merge_intervals(np.array([0.0, 4.0, 10.0]), np.array([3.0, 6.0, 11.0]), gap=1.5)
    assert s.tolist() == [0.0, 10.0] and e.tolist() == [6.0, 11.0]


def test_empty_schedule_has_zero_latency():
    """A schedule without spans reports zero latency, no tracks and an empty critical path."""
    sched = Schedule((), "trn2", "empty", {})
    assert sched.latency == 0.0 and sched.tracks == () and sched.critical_path().span_ids == ()


@pytest.mark.parametrize("spans, words", [
    ((Span(1, "TensorE", "MATMUL", 0, 10), Span(1, "VectorE", "ADD", 10, 5)), "id 1 is used twice"),
    ((Span(1, "TensorE", "MATMUL", 0, 10, deps=(9,)),), "unknown span id 9"),
    ((Span(1, "TensorE", "MATMUL", 0, -3),), "duration -3 ns"),
    ((Span(1, "TensorE", "MATMUL", float("nan"), 3),), "start nan ns"),
    ((Span(1, "", "MATMUL", 0, 3),), "has no track"),
    ((Span(1, "DMA q0", "DMA", 0, 100), Span(2, "TensorE", "MATMUL", 50, 10, deps=(1,))),
     "starts at 50 ns but waits on span 1"),
])
def test_bad_schedules_are_rejected(spans, words):
    """Each broken rule of the input raises ScheduleError naming the span and the numbers."""
    with pytest.raises(ScheduleError, match=words):
        Schedule(spans, "trn2", "bad", {})


def test_zero_time_dependency_cycle_is_reported():
    """Two zero-length spans waiting on each other cannot be walked: the cycle is named."""
    sched = Schedule((Span(1, "Sync", "WAIT", 0, 0, deps=(2,)), Span(2, "Sync", "WAIT", 0, 0, deps=(1,))),
                     "trn2", "cycle", {})
    with pytest.raises(ScheduleError, match="dependency cycle"):
        sched.critical_path()
