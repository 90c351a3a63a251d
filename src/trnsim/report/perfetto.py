"""Chrome trace-event JSON for a schedule, which ui.perfetto.dev and chrome://tracing open.

The NeuronCore is one process; each track is a thread (Tensor, Vector, Scalar, GpSimd, Sync, then
the DMA queues), each span a complete event ("X") with its operands as args, and each dependency a
flow arrow ("s" on the producer, "f" on the consumer). Transfers on one DMA queue overlap in time,
which the format forbids on one thread (slices there must nest), so such a track is split into as
many lanes as it needs, shown as adjacent threads.

`validate_trace_events` checks a trace against the format's rules; the tests use it and so can
anyone handing a trace to another tool.
"""
from __future__ import annotations

import gzip
import heapq
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from trnsim.errors import TrnsimError
from trnsim.report.schedule import Schedule

PID = 1
SPAN_CAT = "instruction"
FLOW_CAT, FLOW_NAME = "dependency", "waits on"


def _lanes(schedule: Schedule) -> list[tuple[str, int]]:
    """(track, lane) for each span: the lowest-numbered lane free when the span starts."""
    out: list[tuple[str, int]] = [("", 0)] * len(schedule.spans)
    by_track: dict[str, list[int]] = defaultdict(list)
    for i, s in enumerate(schedule.spans):
        by_track[s.track].append(i)
    for track, idx in by_track.items():
        idx.sort(key=lambda i: schedule.spans[i].start)
        running: list[tuple[float, int]] = []  # (end, lane) of spans still running
        free: list[int] = []
        for i in idx:
            s = schedule.spans[i]
            while running and running[0][0] <= s.start:
                heapq.heappush(free, heapq.heappop(running)[1])
            lane = heapq.heappop(free) if free else len(running)
            heapq.heappush(running, (s.end, lane))
            out[i] = (track, lane)
    return out


def iter_trace_events(schedule: Schedule):
    """The trace's events one at a time (metadata, spans, then flow arrows), times in microseconds."""
    lanes = _lanes(schedule)
    threads = sorted(set(lanes), key=lambda tl: (schedule.tracks.index(tl[0]), tl[1]))
    tid = {tl: n + 1 for n, tl in enumerate(threads)}
    yield {"ph": "M", "name": "process_name", "pid": PID,
           "args": {"name": f"NeuronCore ({schedule.target}): {schedule.kernel}"}}
    for (track, lane), t in tid.items():
        name = track if lane == 0 else f"{track} ({lane + 1})"
        yield {"ph": "M", "name": "thread_name", "pid": PID, "tid": t, "args": {"name": name}}
        yield {"ph": "M", "name": "thread_sort_index", "pid": PID, "tid": t, "args": {"sort_index": t}}

    where = {}
    for s, tl in zip(schedule.spans, lanes):
        ts = s.start / 1e3
        args = {**s.args, "span_id": s.id}
        if s.deps:
            args["waits_on"] = list(s.deps)
        yield {"ph": "X", "name": s.name, "cat": SPAN_CAT, "pid": PID, "tid": tid[tl],
               "ts": ts, "dur": s.duration / 1e3, "args": args}
        where[s.id] = (tid[tl], ts)
    # Flow events bind to the slice enclosing their timestamp on their thread: the producer's start
    # for "s", the consumer's start for "f" (bp "e": bind to the enclosing slice, not the next one).
    flow = 0
    for s in schedule.spans:
        for d in s.deps:
            flow += 1
            src_tid, src_ts = where[d]
            dst_tid, dst_ts = where[s.id]
            common = {"name": FLOW_NAME, "cat": FLOW_CAT, "id": flow, "pid": PID}
            yield {"ph": "s", **common, "tid": src_tid, "ts": src_ts}
            yield {"ph": "f", "bp": "e", **common, "tid": dst_tid, "ts": dst_ts}


def _other(schedule: Schedule) -> dict:
    return {**schedule.meta, "kernel": schedule.kernel, "target": schedule.target}


def to_trace_events(schedule: Schedule) -> dict:
    """The schedule as a trace-event JSON object (`{"traceEvents": [...], ...}`), times in microseconds."""
    return {"traceEvents": list(iter_trace_events(schedule)), "displayTimeUnit": "ns", "otherData": _other(schedule)}


def _plain(o: Any) -> Any:
    """numpy scalars and arrays (common in operands) as JSON values; anything else as its str."""
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)


def write_trace(schedule: Schedule, path: str | Path) -> Path:
    """Write the trace-event JSON file that ui.perfetto.dev opens (gzip-compressed when the name ends in .gz).

    Events are encoded and written one batch at a time, so a trace of millions of events never sits in
    memory as one document."""
    path = Path(path)
    enc = json.JSONEncoder(separators=(",", ":"), allow_nan=False, default=_plain)
    opener = (lambda: gzip.open(path, "wt", encoding="utf-8", compresslevel=6)) if path.suffix == ".gz" else \
        (lambda: path.open("w", encoding="utf-8"))
    with opener() as f:
        f.write('{"displayTimeUnit":"ns","otherData":' + enc.encode(_other(schedule)) + ',"traceEvents":[')
        batch = []
        for n, ev in enumerate(iter_trace_events(schedule)):
            batch.append(enc.encode(ev))
            if len(batch) == 4096:
                f.write(("," if n >= 4096 else "") + ",".join(batch))
                batch = []
        if batch:
            f.write(("," if n >= len(batch) else "") + ",".join(batch))
        f.write("]}")
    return path


# ------------------------------------------------------------------------------------------------
# The format's rules

class TraceFormatError(TrnsimError, ValueError):
    """A trace that breaks the trace-event format; `problems` lists every rule broken, where."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        shown = "; ".join(self.problems[:10])
        more = f"; and {len(self.problems) - 10} more" if len(self.problems) > 10 else ""
        super().__init__(f"not a valid trace-event file, {len(self.problems)} problem(s): {shown}{more}")


# Every phase the format defines (I, S, T, p, F are its deprecated spellings, still accepted).
_PHASES = frozenset("BEXiICbneSTpFstfPNODMVvRc()")
_METADATA_ARGS = {"process_name": ("name", str), "process_labels": ("labels", str),
                  "process_sort_index": ("sort_index", int), "thread_name": ("name", str),
                  "thread_sort_index": ("sort_index", int)}
_NEEDS_TID = frozenset("BEXstf")
_EPS_US = 1e-6  # one picosecond: rounding room when comparing microsecond floats


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def validate_trace_events(obj: Any) -> None:
    """Check a trace-event document (the JSON object or array form); raise TraceFormatError if broken.

    Rules: each event is an object with a known phase `ph`; `name` and `cat` are strings, `args`
    an object, `pid`/`tid` integers, `ts` a finite number (all but metadata events); "X" needs a
    finite `dur` >= 0 and "X" slices on one thread must nest; "E" closes an open "B" on its thread
    no earlier than it; instants have scope g, p or t; counters carry numeric args; async events
    need an `id` or `id2`; flow events need an `id`, `bp` is "e" if given, and each flow (cat, name,
    id) starts once ("s"), steps only while open ("t") and ends ("f") no earlier than it started;
    metadata events use a known name with the argument it requires.
    """
    problems: list[str] = []
    if isinstance(obj, list):
        events = obj
    elif isinstance(obj, dict):
        events = obj.get("traceEvents")
        if not isinstance(events, list):
            raise TraceFormatError(["the top-level object has no 'traceEvents' list"])
        if obj.get("displayTimeUnit", "ms") not in ("ms", "ns"):
            problems.append(f"displayTimeUnit is {obj['displayTimeUnit']!r}; must be 'ms' or 'ns'")
    else:
        raise TraceFormatError([f"the document is a {type(obj).__name__}; must be an object or an array"])

    slices = defaultdict(list)  # (pid, tid) -> [(ts, end, event index)] of "X" events
    opened = defaultdict(list)  # (pid, tid) -> [(ts, event index)] of "B" events not yet ended
    flows = defaultdict(list)   # (cat, name, id) -> [(ts, ph, event index)]
    for i, ev in enumerate(events):
        if not isinstance(ev, dict):
            problems.append(f"event {i} is a {type(ev).__name__}; must be an object")
            continue
        ph = ev.get("ph")
        if ph not in _PHASES:
            problems.append(f"event {i} has phase {ph!r}; known phases are {''.join(sorted(_PHASES))}")
            continue
        at = f"event {i} (ph {ph!r}, name {ev.get('name')!r})"

        def bad(rule: str, at=at):
            problems.append(f"{at}: {rule}")
        if not isinstance(ev.get("name"), str) and (ph != "E" or "name" in ev):  # "E" may omit it
            bad("'name' must be a string")
        if "cat" in ev and not isinstance(ev["cat"], str):
            bad("'cat' must be a string")
        if "args" in ev and not isinstance(ev["args"], dict):
            bad("'args' must be an object")
        if not _is_int(ev.get("pid")):
            bad(f"'pid' must be an integer, got {ev.get('pid')!r}")
        needs_tid = (ph in _NEEDS_TID or (ph in "iI" and ev.get("s", "t") == "t")
                     or (ph == "M" and str(ev.get("name")).startswith("thread_")))
        if ("tid" in ev or needs_tid) and not _is_int(ev.get("tid")):
            bad(f"'tid' must be an integer, got {ev.get('tid')!r}")
        for key in ("tts", "tdur"):
            if key in ev and not _is_num(ev[key]):
                bad(f"'{key}' must be a finite number, got {ev[key]!r}")
        ts = ev.get("ts")
        if ph != "M" and not _is_num(ts):
            bad(f"'ts' must be a finite number of microseconds, got {ts!r}")
            continue
        thread = (ev.get("pid"), ev.get("tid"))
        if ph == "X":
            dur = ev.get("dur")
            if not _is_num(dur) or dur < 0:
                bad(f"'dur' must be a finite number >= 0, got {dur!r}")
            else:
                slices[thread].append((ts, ts + dur, i))
        elif ph == "B":
            opened[thread].append((ts, i))
        elif ph == "E":
            if not opened[thread]:
                bad(f"ends a slice but no 'B' is open on pid {thread[0]} tid {thread[1]}")
            elif opened[thread][-1][0] > ts:
                bad(f"ends at {ts} us before its 'B' (event {opened[thread][-1][1]}) began at "
                    f"{opened[thread][-1][0]} us")
            else:
                opened[thread].pop()
        elif ph in "iI" and ev.get("s", "t") not in ("g", "p", "t"):
            bad(f"instant scope 's' is {ev.get('s')!r}; must be 'g', 'p' or 't'")
        elif ph == "C":
            args = ev.get("args")
            if not isinstance(args, dict) or not args or not all(_is_num(v) for v in args.values()):
                bad("a counter needs 'args' holding one or more numeric series")
        elif ph in "bneSTpF" and "id" not in ev and not (
                isinstance(ev.get("id2"), dict) and len(ev["id2"].keys() & {"local", "global"}) == 1):
            bad("an async event needs an 'id' or an 'id2' with one of 'local' or 'global'")
        elif ph in "stf":
            if not isinstance(ev.get("id"), (str, int)) or isinstance(ev.get("id"), bool):
                bad(f"a flow event needs an 'id' (string or integer), got {ev.get('id')!r}")
                continue
            if "bp" in ev and ev["bp"] != "e":
                bad(f"binding point 'bp' is {ev['bp']!r}; the only one defined is 'e' (enclosing slice)")
            flows[(ev.get("cat"), ev.get("name"), ev["id"])].append((ts, "stf".index(ph), i))
        elif ph == "M":
            rule = _METADATA_ARGS.get(ev.get("name"))
            if rule is None:
                bad(f"metadata name must be one of {', '.join(_METADATA_ARGS)}")
            elif not isinstance(ev.get("args"), dict) or not (
                    isinstance(ev["args"].get(rule[0]), rule[1]) and not isinstance(ev["args"][rule[0]], bool)):
                bad(f"metadata {ev['name']!r} needs args {{'{rule[0]}': {rule[1].__name__}}}")

    problems += _nesting_problems(slices) + _flow_problems(flows)
    if problems:
        raise TraceFormatError(problems)


def _nesting_problems(slices) -> list[str]:
    """Complete events on one thread must nest: each ends before the one it starts inside ends."""
    out = []
    for (pid, tid), xs in slices.items():
        xs.sort(key=lambda x: (x[0], -x[1]))
        stack: list[tuple[float, float, int]] = []
        for ts, end, i in xs:
            while stack and stack[-1][1] <= ts + _EPS_US:
                stack.pop()
            if stack and end > stack[-1][1] + _EPS_US:
                top = stack[-1]
                out.append(f"event {i} ({ts}..{end} us) overlaps event {top[2]} ({top[0]}..{top[1]} us) "
                           f"on pid {pid} tid {tid} without nesting inside it")
            stack.append((ts, end, i))
    return out


def _flow_problems(flows) -> list[str]:
    """Each flow starts ("s"), may step ("t"), then ends ("f"), in time order; ids may be reused after."""
    out = []
    for (cat, name, fid), steps in flows.items():
        steps.sort()
        open_at = None
        for ts, kind, i in steps:
            ph = "stf"[kind]
            if ph == "s" and open_at is not None:
                out.append(f"flow {fid!r} ({cat}/{name}) starts again at event {i} before it ended")
            elif ph != "s" and open_at is None:
                out.append(f"flow {fid!r} ({cat}/{name}) has {ph!r} event {i} with no open 's' before it")
            open_at = None if ph == "f" else (ts if ph == "s" else open_at)
        if open_at is not None:
            out.append(f"flow {fid!r} ({cat}/{name}) starts but never ends ('f' missing)")
    return out
