"""`Kernel.with_schedule(edges)`: order between named instructions, kept by the timing model.

nki/guides/how-to-scheduling-apis.rst: the edges are a list of pairs (consumer, producers), producers one name or
a list of names, each name one an nki.isa call was given with `name=` (an nki.collectives call too, NKI 0.5);
the consumer runs after each producer. The compiler checks them and hands them to its scheduling pass, so they
are schedule edges (nki.isa.dependency.schedule, which the enum's page says `with_schedule` takes too): kept
here as `depends_on(kind=schedule)` edges are (core/isa/registry.py: AFTER), or as runtime ones with
`kind=dependency.runtime`.

A name names every instruction issued with it: each iteration's in a loop, and each instruction one call lowers
to (a collective's transfers, a cast the compiler inserts). The documents say no more about a name given more
than once, so an edge orders every instance of its consumer after every instance of its producer; distinct
names (`name=f"act{i}"`, as the guide's loop does) order instances pairwise. The guide's pair "could execute in
any order", so an edge may name a producer issued after its consumer: the consumer is then issued after it, as
the compiler's scheduler would, unless the data (bytes the two share, one writing them), an instruction that
orders its engine, or an nl.no_reorder() block keeps it where it is, which is refused by name.
"""
from __future__ import annotations

import dataclasses
import heapq

from trnsim.core.errors import ScheduleEdgeError, where
from trnsim.core.isa.registry import AFTER, NAME, add_after, waits_at_runtime
from trnsim.core.timing.scheduler import ORDERED


@dataclasses.dataclass(frozen=True)
class Schedule:
    """A kernel's edges, (consumer, producer) name pairs, with their kind and the with_schedule call's file:line."""

    edges: tuple
    runtime: bool
    location: str

    @staticmethod
    def of(edges, kind=None) -> Schedule:
        """The edges as `with_schedule` was given them, checked: pairs of names, and no cycle."""
        location = where()
        runtime = waits_at_runtime(kind, "schedule", "with_schedule", location)
        if isinstance(edges, (str, bytes)) or not hasattr(edges, "__iter__"):
            raise ScheduleEdgeError(f"with_schedule takes a list of (consumer, producer) pairs of instruction names; "
                                f"got {type(edges).__name__} {str(edges)[:60]!r}", location)
        pairs: dict = {}  # (consumer, producer) -> None: each edge once, in the order given
        for n, pair in enumerate(edges):
            producers = pair[1] if isinstance(pair, (tuple, list)) and len(pair) == 2 else None
            if isinstance(producers, str):
                producers = (producers,)
            if producers is None or not isinstance(pair[0], str) or not isinstance(producers, (tuple, list)) \
                    or not all(isinstance(p, str) for p in producers):
                raise ScheduleEdgeError(f"with_schedule edge {n} {pair!r}: an edge is a pair (consumer name, producer "
                                    f"name or list of names), each a name given to an instruction with name=",
                                    location)
            pairs.update(dict.fromkeys((pair[0], p) for p in producers))
        schedule = Schedule(tuple(pairs), runtime, location)
        cycle = schedule.cycle()
        if cycle:
            raise ScheduleEdgeError(f"with_schedule edges form a cycle: {' after '.join(map(repr, cycle))}; no order "
                                f"runs each named instruction after the ones it depends on", location)
        return schedule

    def cycle(self) -> list[str]:
        """Names that each run after the next, the last being the first again; [] when the edges are acyclic."""
        after: dict[str, list[str]] = {}
        for c, p in self.edges:
            after.setdefault(c, []).append(p)
        done: set = set()
        for start in after:
            if start in done:
                continue
            path, walking = [start], [iter(after[start])]  # a depth-first walk, without recursion
            while walking:
                nxt = next(walking[-1], None)
                if nxt is None:
                    done.add(path.pop())
                    walking.pop()
                elif nxt in path:
                    return path[path.index(nxt):] + [nxt]
                elif nxt not in done:
                    path.append(nxt)
                    walking.append(iter(after.get(nxt, ())))
        return []

    def apply(self, cores) -> None:
        """Add the edges to the records of each core's stream (attrs[AFTER]), from the names they were issued
        with, first moving a consumer issued before its producer to just after it; refuse a name no core
        issued, and a move that would break the order the data needs."""
        named = []
        for nc in cores:
            found: dict[str, list] = {}
            for rec in nc.stream:
                name = rec.attrs.get(NAME)
                if name is not None:
                    found.setdefault(name, []).append(rec)
            named.append(found)
        given = {n for found in named for n in found}
        unknown = sorted({n for edge in self.edges for n in edge} - given)
        if unknown:
            shown = ", ".join(map(repr, sorted(given)[:12])) + (" ..." if len(given) > 12 else "") or "none"
            raise ScheduleEdgeError(f"with_schedule names {', '.join(map(repr, unknown))}, which no instruction of "
                                    f"the kernel was given (name= of an nki.isa call); names given: {shown}",
                                    self.location)
        for nc, found in zip(cores, named):
            producers: dict[str, list] = {}  # consumer name -> the producer instances it runs after
            for c, p in self.edges:
                if found.get(c) and found.get(p):  # else a program that issued one end only (LNC 2's other core)
                    producers.setdefault(c, []).extend(found[p])
            if any(found[c][0].index < max(r.index for r in ps) for c, ps in producers.items()):
                self._reorder(nc, found, producers)
            for c, ps in producers.items():
                edges = tuple((r.index, self.runtime) for r in ps)
                for rec in found[c]:
                    add_after(rec, edges)

    def _reorder(self, nc, found: dict, producers: dict) -> None:
        """Issue each consumer after all its producers, the rest in program order, and number the stream anew: what
        the compiler's scheduler does with an edge to an instruction issued later. A consumer moves past the
        instructions issued between; one it shares bytes with (one of the two writing them), or one that orders
        its engine without writing memory, keeps the order and the edge is refused."""
        stream = nc.stream
        after: dict[int, list] = {}  # id of a record -> the records it must follow: edges, depends_on, hoisting
        for c, ps in producers.items():
            for rec in found[c]:
                after.setdefault(id(rec), []).extend(ps)
        for rec in stream:
            earlier = [stream[i] for i, _ in rec.attrs.get(AFTER, ())]
            if rec.hoisted is not None:
                earlier.append(stream[rec.hoisted])
            if earlier:
                after.setdefault(id(rec), []).extend(earlier)
        out: list = []
        placed: set = set()
        held: dict[int, int] = {}  # id of a record waiting for its producers -> len(out) when it was reached
        waiting: dict[int, list] = {}  # id of a producer not yet issued -> the held records waiting for it
        missing: dict[int, int] = {}

        def issue(rec):
            """Issue `rec`, then each held record it releases (and those release), in program order."""
            ready = [(rec.index, rec)]
            while ready:
                _, r = heapq.heappop(ready)
                if id(r) in held:
                    self._passes(r, out[held.pop(id(r)):])
                out.append(r)
                placed.add(id(r))
                for w in waiting.pop(id(r), ()):
                    missing[id(w)] -= 1
                    if not missing[id(w)]:
                        heapq.heappush(ready, (w.index, w))

        for rec in stream:
            late = {id(p): p for p in after.get(id(rec), ()) if id(p) not in placed}
            if not late:
                issue(rec)
                continue
            held[id(rec)] = len(out)
            missing[id(rec)] = len(late)
            for k in late:
                waiting.setdefault(k, []).append(rec)
        if held:  # the edges are acyclic: with depends_on edges (or a hoisted instance) they are not
            stuck = min((r for r in stream if id(r) in held), key=lambda r: r.index)
            raise ScheduleEdgeError(f"with_schedule edges and depends_on edges together form a cycle through "
                                    f"{stuck.op.value} at {stuck.location}: no order issues each instruction after "
                                    f"the ones it depends on", self.location)
        renumbered = {rec.index: i for i, rec in enumerate(out)}
        for i, rec in enumerate(out):
            rec.index = i
            if rec.hoisted is not None:
                rec.hoisted = renumbered[rec.hoisted]
            if AFTER in rec.attrs:
                rec.attrs = {**rec.attrs, AFTER: tuple((renumbered[j], w) for j, w in rec.attrs[AFTER])}
        stream[:] = out

    def _passes(self, rec, passed: list) -> None:
        """Refuse to issue `rec` after `passed` (issued after it in program order) where the data or its engine's
        order needs it before one of them."""
        what = f"with_schedule edges of {rec.attrs.get(NAME)!r} move its instruction at {rec.location}"
        if rec.attrs.get(ORDERED):
            raise ScheduleEdgeError(f"{what} after instructions issued later, out of the nl.no_reorder() block that "
                                    f"keeps it in place", self.location)
        mine = rec.operands
        for x in passed:
            if x.index < rec.index:
                continue  # issued before it in program order, and still is
            if not x.writes or not rec.writes:
                fence = x if not x.writes else rec
                raise ScheduleEdgeError(f"{what} past {x.op.value} at {x.location}; {fence.op.value} writes no memory "
                                        f"and orders its engine, which the compiler keeps", self.location)
            theirs = x.operands
            for n, r in mine.items():
                for m, q in theirs.items():
                    if (n in rec.writes or m in x.writes) and _overlap(r, q):
                        raise ScheduleEdgeError(
                            f"{what} past {x.op.value} at {x.location}, which {'writes' if m in x.writes else 'reads'} "
                            f"{r.space} bytes {max(r.byte_lo, q.byte_lo)}..{min(r.byte_hi, q.byte_hi)} it "
                            f"{'writes' if n in rec.writes else 'reads'}: the data keeps that order, so no schedule "
                            f"runs it after its producer", self.location)


def _overlap(a, b) -> bool:
    """Whether two regions share bytes: the same memory, overlapping partitions and byte ranges."""
    return (a.space == b.space and a.memory == b.memory and a.partition < b.partition + b.partitions
            and b.partition < a.partition + a.partitions and a.byte_lo < b.byte_hi and b.byte_lo < a.byte_hi)
