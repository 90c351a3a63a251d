"""`Kernel.with_schedule(edges)`: order between named instructions, kept by the timing model.

nki/guides/how-to-scheduling-apis.rst: the edges are a list of pairs (consumer, producers), producers one name or
a list of names, each name one an nki.isa call was given with `name=` (an nki.collectives call too, NKI 0.5);
the consumer runs after each producer. The compiler checks them and hands them to its scheduling pass, so they
are schedule edges (nki.isa.dependency.schedule, which the enum's page says `with_schedule` takes too): kept
here as `depends_on(kind=schedule)` edges are (core/isa/registry.py: AFTER), or as runtime ones with
`kind=dependency.runtime`.

A name names every instruction issued with it: each iteration's in a loop, and each instruction one call lowers
to (a collective's transfers, a cast the compiler inserts). The documents say no more about a name given more
than once, so an edge orders every instance of its consumer after every instance of its producer, which trnsim,
placing the stream in program order, keeps only when every producer instance was issued before every consumer
instance; distinct names (`name=f"act{i}"`, as the guide's loop does) order instances pairwise.
"""
from __future__ import annotations

import dataclasses

from trnsim.core.errors import ScheduleEdgeError, where
from trnsim.core.isa.registry import NAME, add_after, waits_at_runtime


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
        with; refuse a name no core issued and an edge trnsim cannot place."""
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
            raise ScheduleEdgeError(f"with_schedule names {', '.join(map(repr, unknown))}, which no instruction of the "
                                f"kernel was given (name= of an nki.isa call); names given: {shown}", self.location)
        for found in named:
            added: dict[str, tuple] = {}
            for c, p in self.edges:
                consumers, producers = found.get(c), found.get(p)
                if not consumers or not producers:
                    continue  # a program that issued one end only (an LNC 2 launch's other core)
                first, last = consumers[0], producers[-1]
                if first.index < last.index:
                    raise ScheduleEdgeError(
                        f"with_schedule edge ({c!r}, {p!r}): {c!r} at {first.location} is issued before {p!r} at "
                        f"{last.location}; trnsim places instructions in program order and keeps an edge only where "
                        f"every instance of the producer was issued before every instance of the consumer (give "
                        f"instances distinct names to order them pairwise)", self.location)
                added[c] = added.get(c, ()) + tuple((rec.index, self.runtime) for rec in producers)
            for c, edges in added.items():
                for rec in found[c]:
                    add_after(rec, edges)
