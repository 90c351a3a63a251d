"""Perfetto / Chrome trace-event export, and the format checker."""
import copy
import json

import pytest
from report_schedules import pipeline_schedule, random_schedule

from trnsim.report import Schedule, Span, TraceFormatError, to_trace_events, validate_trace_events, write_trace


def threads(trace):
    """tid -> (thread name, sort index) from the metadata events."""
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    order = {e["tid"]: e["args"]["sort_index"] for e in trace["traceEvents"] if e["name"] == "thread_sort_index"}
    return {t: (names[t], order[t]) for t in names}


@pytest.mark.parametrize("make", [pipeline_schedule, lambda: random_schedule(7, 400)])
def test_trace_is_valid_and_holds_every_span_once(make):
    """The trace passes the checker; each span is one "X" event with ts/dur in us on its track's thread."""
    sched = make()
    trace = to_trace_events(sched)
    validate_trace_events(trace)
    names = threads(trace)
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert sorted(e["args"]["span_id"] for e in xs) == sorted(s.id for s in sched.spans)
    by_id = {e["args"]["span_id"]: e for e in xs}
    for s in sched.spans:
        e = by_id[s.id]
        assert (e["name"], e["ts"], e["dur"]) == (s.name, s.start / 1000, s.duration / 1000)
        assert e["args"]["operands"] == s.args["operands"]
        assert names[e["tid"]][0].split(" (")[0] == s.track


def test_flows_match_deps():
    """Each dependency is one flow: "s" at the producer's slice, "f" (bp "e") at the consumer's."""
    sched = random_schedule(3, 300)
    trace = to_trace_events(sched)
    slice_at = {e["args"]["span_id"]: (e["tid"], e["ts"]) for e in trace["traceEvents"] if e["ph"] == "X"}
    assert len(set(slice_at.values())) == len(slice_at)  # positive durations: one slice per (tid, ts)
    span_at = {at: i for i, at in slice_at.items()}
    starts = {e["id"]: e for e in trace["traceEvents"] if e["ph"] == "s"}
    ends = {e["id"]: e for e in trace["traceEvents"] if e["ph"] == "f"}
    assert starts.keys() == ends.keys()
    for fid, s in starts.items():
        assert ends[fid]["bp"] == "e" and (s["cat"], s["name"]) == (ends[fid]["cat"], ends[fid]["name"])
    got = sorted((span_at[(s["tid"], s["ts"])], span_at[(ends[fid]["tid"], ends[fid]["ts"])])
                 for fid, s in starts.items())
    edges = sorted((d, s.id) for s in sched.spans for d in s.deps)
    assert len(edges) > 100 and got == edges


def test_thread_order_and_names():
    """One process named after the core; threads sorted Tensor, Vector, Scalar, GpSimd, Sync, DMA queues."""
    names = ["DMA q10", "Sync", "DMA q2", "VectorE", "GpSimdE", "TensorE", "ScalarE"]
    sched = Schedule(tuple(Span(i, t, "NOP", 10 * i, 5) for i, t in enumerate(names)), "trn3", "k", {})
    trace = to_trace_events(sched)
    procs = [e for e in trace["traceEvents"] if e["name"] == "process_name"]
    assert len(procs) == 1 and "trn3" in procs[0]["args"]["name"]
    ordered = [name for name, _ in sorted(threads(trace).values(), key=lambda x: x[1])]
    assert ordered == ["TensorE", "VectorE", "ScalarE", "GpSimdE", "Sync", "DMA q2", "DMA q10"]


def test_overlapping_transfers_get_lanes():
    """Overlapping spans on one DMA queue go to separate, adjacent threads so slices still nest."""
    spans = (Span(0, "DMA q0", "DMA", 0, 100), Span(1, "DMA q0", "DMA", 50, 100),
             Span(2, "DMA q0", "DMA", 120, 10), Span(3, "TensorE", "MATMUL", 200, 10))
    trace = to_trace_events(Schedule(spans, "trn2", "k", {}))
    validate_trace_events(trace)
    names = threads(trace)
    tid = {e["args"]["span_id"]: e["tid"] for e in trace["traceEvents"] if e["ph"] == "X"}
    assert tid[0] != tid[1] and tid[2] == tid[0]  # span 2 starts after span 0 ends: lane 1 again
    assert {names[tid[0]][0], names[tid[1]][0]} == {"DMA q0", "DMA q0 (2)"}
    assert abs(names[tid[0]][1] - names[tid[1]][1]) == 1


def test_write_trace_is_json_of_the_events(tmp_path):
    """write_trace writes strict JSON (numpy operands included) equal to to_trace_events."""
    import numpy as np

    sched = Schedule((Span(0, "TensorE", "MATMUL", 0, 10, {"shape": np.array([128, 512]), "n": np.int64(3)}),),
                     "trn2", "k", {"flops": 1e9})
    path = write_trace(sched, tmp_path / "t.json")
    loaded = json.loads(path.read_text())
    validate_trace_events(loaded)
    x = [e for e in loaded["traceEvents"] if e["ph"] == "X"][0]
    assert x["args"]["shape"] == [128, 512] and x["args"]["n"] == 3
    assert loaded["otherData"]["flops"] == 1e9


def valid_trace():
    return {"displayTimeUnit": "ns", "traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "core"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "TensorE"}},
        {"ph": "X", "name": "A", "cat": "c", "pid": 1, "tid": 1, "ts": 0.0, "dur": 2.0, "args": {}},
        {"ph": "X", "name": "A1", "pid": 1, "tid": 1, "ts": 0.5, "dur": 1.0},
        {"ph": "X", "name": "B", "pid": 1, "tid": 2, "ts": 3.0, "dur": 1.0},
        {"ph": "s", "name": "dep", "cat": "d", "id": 1, "pid": 1, "tid": 1, "ts": 0.0},
        {"ph": "f", "name": "dep", "cat": "d", "id": 1, "pid": 1, "tid": 2, "ts": 3.0, "bp": "e"},
        {"ph": "B", "name": "C", "pid": 1, "tid": 3, "ts": 1.0},
        {"ph": "E", "pid": 1, "tid": 3, "ts": 2.0},
        {"ph": "i", "name": "I", "pid": 1, "tid": 3, "ts": 1.5, "s": "t"},
        {"ph": "C", "name": "sbuf", "pid": 1, "ts": 1.0, "args": {"bytes": 10}},
        {"ph": "b", "name": "as", "cat": "c", "id": "0x1", "pid": 1, "ts": 1.0},
    ]}


def test_validator_accepts_nesting_and_every_phase_used():
    """A well-formed trace with nested slices, B/E, instants, counters, async and flows passes."""
    validate_trace_events(valid_trace())
    validate_trace_events(valid_trace()["traceEvents"])  # the JSON array form


def _set(i, key, value):
    def edit(t):
        if value is _DELETE:
            del t["traceEvents"][i][key]
        else:
            t["traceEvents"][i][key] = value
    return edit


_DELETE = object()
EV_X, EV_S, EV_F, EV_B, EV_E = 2, 5, 6, 7, 8


@pytest.mark.parametrize("edit, words", [
    (lambda t: t.update(traceEvents={}), "no 'traceEvents' list"),
    (lambda t: t.update(displayTimeUnit="s"), "displayTimeUnit"),
    (lambda t: t["traceEvents"].append(3), "must be an object"),
    (_set(EV_X, "ph", "Q"), "has phase 'Q'"),
    (_set(EV_X, "name", 5), "'name' must be a string"),
    (_set(EV_X, "cat", ["c"]), "'cat' must be a string"),
    (_set(EV_X, "args", [1]), "'args' must be an object"),
    (_set(EV_X, "pid", "1"), "'pid' must be an integer"),
    (_set(EV_X, "tid", _DELETE), "'tid' must be an integer"),
    (_set(EV_X, "ts", _DELETE), "'ts' must be a finite number"),
    (_set(EV_X, "ts", float("nan")), "'ts' must be a finite number"),
    (_set(EV_X, "tts", "x"), "'tts' must be a finite number"),
    (_set(EV_X, "dur", _DELETE), "'dur' must be a finite number >= 0"),
    (_set(EV_X, "dur", -1.0), "'dur' must be a finite number >= 0"),
    (_set(EV_X + 1, "dur", 5.0), "without nesting"),
    (_set(EV_B, "ph", "i"), "no 'B' is open"),
    (_set(EV_E, "ts", 0.5), "before its 'B'"),
    (_set(9, "s", "x"), "instant scope"),
    (_set(10, "args", {"bytes": "ten"}), "numeric series"),
    (_set(11, "id", _DELETE), "async event needs an 'id'"),
    (_set(EV_S, "id", _DELETE), "flow event needs an 'id'"),
    (_set(EV_F, "bp", "x"), "binding point"),
    (_set(EV_F, "ts", -1.0), "no open 's'"),
    (_set(EV_F, "id", 2), "never ends"),
    (_set(EV_F, "ph", "s"), "starts again"),
    (_set(1, "name", "thread_color"), "metadata name"),
    (_set(1, "args", {"title": "x"}), "needs args {'name': str}"),
])
def test_validator_names_each_broken_rule(edit, words):
    """Each malformed trace is rejected with the broken rule in the error's problem list."""
    trace = copy.deepcopy(valid_trace())
    edit(trace)
    with pytest.raises(TraceFormatError) as err:
        validate_trace_events(trace)
    assert any(words in p for p in err.value.problems), err.value.problems
    assert words in str(err.value)


def test_validator_rejects_non_documents():
    """Neither an object nor an array is not a trace."""
    with pytest.raises(TraceFormatError, match="must be an object or an array"):
        validate_trace_events("[]")


def test_validator_lists_all_problems():
    """Several problems are all reported, with their count, not just the first."""
    trace = valid_trace()
    trace["traceEvents"][EV_X]["dur"] = -1
    trace["traceEvents"][1]["args"] = {}
    with pytest.raises(TraceFormatError, match=r"2 problem\(s\)") as err:
        validate_trace_events(trace)
    assert len(err.value.problems) == 2
