"""Why a kernel is bound where it is: its critical path's time by mechanism, and how sure each figure is.

The critical path (result.critical_path: the chain of events each of which set the next one's start) is
split into mechanisms: per DMA transfer its fixed latency, its bytes at the engines' rate, its descriptors
and the wait for a free engine or queue; per compute instruction its engine's work; between events the
semaphore waits; and the execution's start-up and tear-down. Each mechanism names the catalog figure it
rests on and whether that figure is documented, fitted to the calibration figures or assumed (its source
tag in specs/data). The headroom is how far the largest mechanism could shrink before the next one is
the largest.
"""
from __future__ import annotations

from dataclasses import dataclass

from trnsim import specs
from trnsim.core.isa.registry import REGISTRY
from trnsim.core.isa.work import PE
from trnsim.core.timing.rules import Rules
from trnsim.specs.timing import timing

# mechanism -> (catalog, figure) whose source tag says how sure it is
FIGURES = {
    "DMA fixed latency": ("core", "dma_fixed_latency"),
    "DMA bytes": ("core", "dma_engine_bandwidth"),
    "DMA descriptors": ("timing", "dma_descriptor_latency"),
    "DMA engine and queue waits": ("timing", "dma_turnaround_latency"),
    "semaphore waits": ("timing", "semaphore_latency"),
    "execution start-up and tear-down": ("timing", "execution_overhead"),
}
_FITTED = ("LADDER", "MAMBA", "FITTED")
# work the kernel left to the compiler to place (registry.workload_engine): the documents say the compiler
# places it by workload, not how it weighs the engines, so the placement is an assumption
PLACED = " placed by workload"


@dataclass(frozen=True)
class Mechanism:
    name: str
    ns: float
    figure: str  # the catalog field it rests on
    basis: str  # "documented", "fitted" (to calibration.md) or "assumed"
    source: str  # the source tag


def basis(tag: str) -> str:
    """How sure a figure is, from its source tag."""
    if "ASSUMED" in tag or "assumed" in tag:
        return "assumed"
    return "fitted" if any(k in tag for k in _FITTED) else "documented"


def mechanisms(result) -> list[Mechanism]:
    """The critical path of `result` (a BenchmarkResult) by mechanism, largest first."""
    tl = next((t for t in result.timelines if t.events), None)
    if tl is None:
        return []
    spec, t = specs.neuroncore(result.target), timing(result.target)
    rules, ev = Rules(spec, t), tl.events
    ns: dict[str, float] = {}

    def add(name, value):
        if value > 0:
            ns[name] = ns.get(name, 0.0) + value

    cur = max(range(len(ev)), key=lambda i: (ev[i].end, -i))
    while cur >= 0:
        e = ev[cur]
        # the path runs through this event from its blocker's end (or its own start) to its end
        begin = max(e.start, ev[e.blocker].end) if e.blocker >= 0 else e.start
        gap, on_path = max(0.0, e.start - ev[e.blocker].end) if e.blocker >= 0 else 0.0, e.end - begin
        if e.pieces:  # a transfer starts its pieces a fixed latency after its trigger
            busy = max(f - s for _, s, f in e.pieces)
            moving = min(on_path, busy)
            desc = moving * min(1.0, _descriptors(rules, e.rec, spec, t) / busy) if busy else 0.0
            add("DMA fixed latency", min(spec.dma_fixed_latency, gap))
            gap -= min(spec.dma_fixed_latency, gap)
            add("DMA engine and queue waits", on_path - moving)
            add("DMA descriptors", desc)
            add("DMA bytes", moving - desc)
        else:
            w = REGISTRY[e.rec.op].cost(e.rec, spec)  # PE work says what it is
            what = "matmuls" if isinstance(w, PE) and w.kind == "matmul" else "instructions"
            add(f"{e.track} {what}{PLACED if 'choices' in e.rec.attrs else ''}", on_path)
        add("semaphore waits", gap)
        cur = e.blocker
    add("execution start-up and tear-down", result.overhead)
    out = []
    for name, v in ns.items():
        if name.endswith(PLACED):
            out.append(Mechanism(name, v, "engine placement", "assumed",
                                 "nki.isa.tensor_copy/memset engine=unknown; the greedy rule of docs/timing.md"))
            continue
        cat, fig = FIGURES.get(name, ("core", "cycles"))
        tag = (t if cat == "timing" else spec).sources.get(fig, "uncited")
        out.append(Mechanism(name, v, fig, basis(tag), tag.split(" (")[0].split("; ")[0]))
    return sorted(out, key=lambda m: -m.ns)


def _descriptors(rules: Rules, rec, spec, t) -> float:
    """ns of descriptor cost on the busiest DMA engine of a transfer (Rules.dma_pieces, less its bytes)."""
    w = REGISTRY[rec.op].cost(rec, spec)
    if w.transpose:
        return 0.0
    parts = max(1, w.partitions)
    per_part = w.bytes / parts
    chunks = -(-per_part // max(1, w.chunk_bytes or per_part))
    return min(parts, rules.partitions_per_dma) * chunks * t.dma_descriptor_latency


def explain(result) -> list[str]:
    """Lines saying why the kernel is bound where it is, and the next mechanism's headroom."""
    ms = mechanisms(result)
    if not ms:
        return ["nothing ran: no critical path"]
    total = sum(m.ns for m in ms)
    lines = [f"{result.kernel} on {result.target}: {result.latency / 1e3:,.1f} us; bound by {result.bound}. "
             f"Its critical path and start-up, by mechanism:"]
    for m in ms:
        lines.append(f"  {m.ns / 1e3:10,.1f} us {m.ns / total:6.1%}  {m.name} ({m.figure}: {m.basis}, {m.source})")
    if len(ms) > 1:
        a, b = ms[0], ms[1]
        lines.append(f"Headroom: {a.name} could shrink by {(a.ns - b.ns) / 1e3:,.1f} us "
                     f"({(a.ns - b.ns) / total:.0%} of the latency) before {b.name} is the largest.")
    assumed = [m.name for m in ms if m.basis == "assumed"]
    if assumed:
        lines.append(f"Assumed figures (no document or calibration): {', '.join(assumed)}.")
    return lines
