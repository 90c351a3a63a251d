"""A finished kernel schedule: the one input every report reads.

The timing model replays a kernel's instruction stream and produces a `Schedule`: one `Span` per
instruction or DMA transfer, placed on a track (an engine or a DMA queue), with the ids of the spans
it waited on. Everything here is derived from those spans alone: latency, per-track busy time
(the union of intervals, since transfers on one DMA queue overlap), utilisation and the critical
path. Figures only the timing model knows (FLOPs, MFU, bytes moved, memory peaks) travel in `meta`.
Times are nanoseconds.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from trnsim.errors import TrnsimError


class ScheduleError(TrnsimError, ValueError):
    """A schedule that breaks its own rules: duplicate ids, unknown deps, negative or NaN times."""


@dataclass(frozen=True, slots=True)
class Span:
    """One instruction or transfer on one track, from `start` for `duration` ns.

    `args` holds what a profiler shows for the instruction (operands, bytes, source line); `deps`
    are the ids of spans this one waited on (semaphore waits become flow arrows in the trace).
    """

    id: int
    track: str
    name: str
    start: float
    duration: float
    args: Mapping[str, Any] = field(default_factory=dict, hash=False)
    deps: tuple[int, ...] = ()

    @property
    def end(self) -> float:
        return self.start + self.duration


# Row order of a NeuronCore profile: the four compute engines, the Sync engine, then DMA queues.
_TRACK_RANKS = (("Tensor", 0), ("Vector", 1), ("Scalar", 2), ("Act", 2), ("GpSimd", 3), ("Pool", 3),
                ("Sync", 4), ("DMA", 5), ("q", 5))


def track_sort_key(track: str) -> tuple:
    """Tensor, Vector, Scalar, GpSimd, Sync, DMA queues (numbered naturally: q2 before q10), others."""
    rank = next((r for prefix, r in _TRACK_RANKS if track.startswith(prefix)), len(_TRACK_RANKS))
    natural = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", track) if p)
    return rank, natural


def merge_intervals(starts: np.ndarray, ends: np.ndarray, gap: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals [start, end), as sorted disjoint segments; intervals closer than `gap` join."""
    if len(starts) == 0:
        return np.empty(0), np.empty(0)
    order = np.argsort(starts, kind="stable")
    s, e = np.asarray(starts, float)[order], np.asarray(ends, float)[order]
    reach = np.maximum.accumulate(e)  # furthest end seen so far
    first = np.ones(len(s), bool)
    first[1:] = s[1:] > reach[:-1] + gap
    idx = np.flatnonzero(first)
    return s[idx], np.maximum.reduceat(e, idx)


@dataclass(frozen=True)
class CriticalPath:
    """The chain of spans that ends last, walked back through whatever each span waited on.

    `length` runs from the first span's start to the last span's end; `by_track` is the busy time
    each track contributes to it; the rest of `length` is `waiting` (gaps between the spans).
    """

    span_ids: tuple[int, ...]
    length: float
    by_track: Mapping[str, float]

    @property
    def waiting(self) -> float:
        return self.length - sum(self.by_track.values())

    @property
    def bound(self) -> str | None:
        """The track with the most time on the path: what bound the kernel."""
        return max(sorted(self.by_track, key=track_sort_key), key=self.by_track.get, default=None)


@dataclass(frozen=True)
class Schedule:
    """All spans of one kernel run on one target (e.g. "trn2"), plus figures from the timing model."""

    spans: tuple[Span, ...]
    target: str
    kernel: str
    meta: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self):
        object.__setattr__(self, "spans", tuple(self.spans))
        _check(self.spans)

    @cached_property
    def tracks(self) -> tuple[str, ...]:
        """Track names in profile row order."""
        return tuple(sorted({s.track for s in self.spans}, key=track_sort_key))

    @cached_property
    def columns(self) -> dict[str, np.ndarray]:
        """Span fields as numpy columns, in `spans` order; `track` holds indices into `tracks`."""
        pos = {t: i for i, t in enumerate(self.tracks)}
        n = len(self.spans)
        start = np.fromiter((s.start for s in self.spans), float, n)
        return {"start": start, "end": start + np.fromiter((s.duration for s in self.spans), float, n),
                "track": np.fromiter((pos[s.track] for s in self.spans), np.int64, n)}

    @property
    def begin(self) -> float:
        return float(self.columns["start"].min()) if self.spans else 0.0

    @property
    def latency(self) -> float:
        """Kernel time: last end minus first start (ns)."""
        c = self.columns
        return float(c["end"].max() - c["start"].min()) if self.spans else 0.0

    @cached_property
    def busy(self) -> Mapping[str, float]:
        """Time each track had at least one span running (ns): the union of its intervals."""
        c, out = self.columns, {}
        for i, t in enumerate(self.tracks):
            s, e = merge_intervals(c["start"][c["track"] == i], c["end"][c["track"] == i])
            out[t] = float((e - s).sum())
        return out

    @cached_property
    def active(self) -> float:
        """Time at least one track was busy (ns)."""
        s, e = merge_intervals(self.columns["start"], self.columns["end"])
        return float((e - s).sum())

    @property
    def utilisation(self) -> Mapping[str, float]:
        """Busy time of each track as a share of the kernel latency (0..1)."""
        lat = self.latency
        return {t: (b / lat if lat > 0 else 0.0) for t, b in self.busy.items()}

    @cached_property
    def span_counts(self) -> Mapping[str, int]:
        counts = np.bincount(self.columns["track"], minlength=len(self.tracks))
        return {t: int(n) for t, n in zip(self.tracks, counts)}

    def critical_path(self) -> CriticalPath:
        """Walk back from the span that ends last; at each step follow whichever blocker ended last.

        A span's blockers are its deps and the span before it on its own track, when that one had
        ended by the time this one started (engines run their streams in order; transfers that
        overlap on a DMA queue did not block each other).
        """
        if not self.spans:
            return CriticalPath((), 0.0, {})
        c = self.columns
        start, end = c["start"], c["end"]
        prev = _previous_on_track(c["track"], start)
        where = {s.id: i for i, s in enumerate(self.spans)}
        cur = int(np.argmax(end))
        path, seen = [cur], {cur}
        while True:
            blockers = [where[d] for d in self.spans[cur].deps]
            p = prev[cur]
            if p >= 0 and end[p] <= start[cur] + _slack(start[cur]):
                blockers.append(int(p))
            if not blockers:
                break
            cur = max(blockers, key=lambda i: (end[i], -i))
            if cur in seen:
                raise ScheduleError(f"dependency cycle through span {self.spans[cur].id}")
            path.append(cur)
            seen.add(cur)
        path.reverse()
        by_track: dict[str, float] = {}
        for i in path:
            s = self.spans[i]
            by_track[s.track] = by_track.get(s.track, 0.0) + s.duration
        return CriticalPath(tuple(self.spans[i].id for i in path),
                            float(end[path[-1]] - start[path[0]]), by_track)


def _slack(t: float) -> float:
    """Rounding allowance when comparing times that came from sums of floats."""
    return 1e-9 * max(1.0, abs(t))


def _previous_on_track(track: np.ndarray, start: np.ndarray) -> np.ndarray:
    """For each span, the index of the span before it on its track in start order (-1 if first)."""
    order = np.lexsort((np.arange(len(track)), start, track))
    prev = np.full(len(track), -1, np.int64)
    same = track[order[1:]] == track[order[:-1]]
    prev[order[1:][same]] = order[:-1][same]
    return prev


def _check(spans: tuple[Span, ...]) -> None:
    """Each span: a unique int id, a track, finite start, non-negative duration, deps that ended first."""
    by_id: dict[int, Span] = {}
    for s in spans:
        if not isinstance(s, Span):
            raise ScheduleError(f"schedule holds {type(s).__name__} {s!r}; expected Span")
        if s.id in by_id:
            raise ScheduleError(f"span id {s.id} is used twice ({by_id[s.id].name!r} on {by_id[s.id].track}, "
                                f"{s.name!r} on {s.track}); ids must be unique")
        if not s.track:
            raise ScheduleError(f"span {s.id} ({s.name!r}) has no track")
        if not (math.isfinite(s.start) and math.isfinite(s.duration)) or s.duration < 0:
            raise ScheduleError(f"span {s.id} ({s.name!r} on {s.track}) has start {s.start} ns, duration "
                                f"{s.duration} ns; both must be finite and the duration >= 0")
        by_id[s.id] = s
    for s in spans:
        for d in s.deps:
            dep = by_id.get(d)
            if dep is None:
                raise ScheduleError(f"span {s.id} ({s.name!r} on {s.track}) depends on unknown span id {d}")
            if dep.end > s.start + _slack(s.start):
                raise ScheduleError(f"span {s.id} ({s.name!r} on {s.track}) starts at {s.start} ns but waits "
                                    f"on span {d} ({dep.name!r} on {dep.track}) that ends at {dep.end} ns")
