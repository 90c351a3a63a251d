"""The compile cache and step accounting of one rank: every graph torch-xla executes, priced and explained.

torch-xla writes each graph it executes (XLA_SAVE_TENSORS_FILE, XLA_SAVE_TENSORS_FMT=hlo) with the
Python frames that cut it. A `Ledger` reads those records as they come and keeps what the Neuron
compiler's cache would: a graph whose structure it has seen is a cache hit; a new one is a
compilation, and when a graph cut at a line that ran before is new, the report says why:

    changed shape        the graph's inputs have other shapes (a batch that changes size)
    baked-in value       same input shapes, other constants (a Python number folded into the graph)
    early execution      a graph cut outside mark_step (printing a lazy tensor, `.item()`, `.cpu()`)

Under torch.compile(backend="openxla") each compiled graph is compiled once (torch-xla's cache warm-up,
not an execution) and then run from the cache; the worker hands those runs to the Ledger as records of
kind "compiled", and the inputs torch-xla computes just before a compiled graph are that graph's own
preparation, not an early execution.

A step is everything executed between two `mark_step`s; its time is the sum of its graphs on the
simulated NeuronCore plus its collectives on the fabric (no overlap assumed between them).
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field

from trnsim.xla import hlo
from trnsim.xla.cost import CostModel, GraphCost

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_FRAME = re.compile(r"^\s+(\S+) \((.*):(\d+)\)\s*$")


def eager_debug() -> bool:
    """NEURON_USE_EAGER_DEBUG_MODE=1: ops run (and are priced) one by one, torch-xla's and the neuron device's."""
    return os.environ.get("NEURON_USE_EAGER_DEBUG_MODE", "0") not in ("", "0")


@dataclass
class Record:
    """One executed graph: who cut it and its HLO text."""

    frames: list[tuple[str, str, int]]  # (function, file, line), innermost first
    text: str
    kind: str | None = None  # set by whoever records the graph outside the dump ("compiled")

    @property
    def via(self) -> str:
        """How the graph was cut: 'mark_step', 'collective' (trnsim's value exchange), 'compiled' (a
        torch.compile graph run from the cache), 'warm-up' (one compiled, not run), 'compile-inputs'
        (the inputs of a compiled graph, computed before it) or 'forced'."""
        if self.kind:
            return self.kind
        for fn, path, _ in self.frames:
            if "/torch_xla/_dynamo/" in path:
                return "warm-up" if fn == "extract_graph_helper" else "compile-inputs"
        for fn, path, _ in self.frames:  # innermost first: the first frame that is not torch's own decides
            if fn in ("sync", "mark_step") and "torch_xla" in path:
                return "mark_step"
            if os.path.abspath(path).startswith(_PACKAGE_DIR):
                return "collective"
            if "site-packages" not in path and "/torch" not in path:
                break
        return "forced"

    def user_line(self, script_dir: str | None = None) -> str:
        """`file:line` of the innermost frame in the user's code."""
        for _, path, line in self.frames:
            ap = os.path.abspath(path)
            if path.startswith("<") or ap.startswith(_PACKAGE_DIR) or "site-packages" in ap or "/torch_xla/" in ap:
                continue
            return f"{path}:{line}"
        return "?"


def read_records(text: str) -> tuple[list[Record], int]:
    """The complete records in a dump's text and how many characters they span."""
    out, used = [], 0
    for m in re.finditer(r"\[ScheduleSyncTensorsGraph\]\n(.*?)## BEGIN_GRAPH\n(.*?)## END_GRAPH\n", text, re.S):
        frames = [(f.group(1), f.group(2), int(f.group(3))) for f in map(_FRAME.match, m.group(1).splitlines()) if f]
        out.append(Record(frames, m.group(2)))
        used = m.end()
    return out, used


def structure_key(text: str) -> str:
    """A hash of the graph with torch-xla's running instruction ids removed: equal graphs, equal keys."""
    body = re.sub(r"(%?[A-Za-z_][\w\-]*)\.\d+\b", r"\1", text)
    return hashlib.sha1(body.encode()).hexdigest()[:16]


def _inputs(text: str) -> list[str]:
    return re.findall(r"=\s*(\S+\[[\d,]*\])\S*\s+parameter\(", text)


def _shapes(text: str) -> list[str]:
    """Every array shape of the graph's instructions, in order (layouts dropped)."""
    body = text.split("ENTRY", 1)[-1]
    return re.findall(r"\b[a-z]+\d*\[[\d,]*\]", body)


def _constants(text: str) -> list[str]:
    return re.findall(r"constant\(([^)]*)\)", text)


class CompileCache:
    """The persistent compile cache, as neuronx-cc keeps one across runs (NEURON_COMPILE_CACHE_URL): a graph
    compiled once for a target is loaded by later runs, not compiled again. An entry is a small file named by
    the target and the graph's structure."""

    def __init__(self, root: str | None = None, run: str = ""):
        self.run = run  # the ranks of one run compile side by side: an entry one of them wrote is no hit
        self.root = root or os.environ.get("NEURON_COMPILE_CACHE_URL") or os.path.join(
            os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "trnsim", "neuron-compile-cache")

    def _path(self, key: str) -> str:
        return os.path.join(self.root, f"MODULE_{key}.json")

    def hit(self, key: str) -> bool:
        import json

        try:
            with open(self._path(key)) as f:
                return json.load(f).get("run") != self.run or not self.run
        except (OSError, ValueError):
            return False

    def store(self, key: str, entry: dict) -> None:
        """Record a compiled graph; a cache that cannot be written (read-only, full) only loses the hit later."""
        import json

        try:
            os.makedirs(self.root, exist_ok=True)
            tmp = f"{self._path(key)}.{os.getpid()}"
            with open(tmp, "w") as f:
                json.dump(entry, f)
            os.replace(tmp, self._path(key))
        except OSError:
            pass


@dataclass
class Step:
    graphs: int = 0
    time_ns: float = 0.0
    compute: GraphCost = field(default_factory=GraphCost)
    collective_ns: float = 0.0
    compilations: int = 0
    memory_bytes: float = 0.0
    custom_ops: dict = field(default_factory=dict)  # "ns::op" -> {"calls", "time_ns"} on the GpSimd engine
    compile_ns: float = 0.0  # estimated wall time of this step's compilations (warm-up, not step time)
    warm_up: bool = False  # set-up work ran in it (the first optimizer step on the neuron device): not steady
    events: list = field(default_factory=list)  # (kind, name, ns, args) in order, when the Ledger keeps a timeline

    @property
    def custom_op_ns(self) -> float:
        return sum(c["time_ns"] for c in self.custom_ops.values())

    def to_dict(self) -> dict:
        engines = {k: v for k, v in self.compute.engines.items() if k != "collective"}
        return {"time_ns": self.time_ns, "graphs": self.graphs, "compilations": self.compilations,
                "engines_ns": engines, "hbm_bound_ns": self.compute.hbm_bound_ns,
                "collective_ns": self.collective_ns, "flops": self.compute.flops, "memory_bytes": self.memory_bytes,
                "compile_ns": self.compile_ns, "warm_up": self.warm_up, "custom_op_ns": self.custom_op_ns, "custom_ops": self.custom_ops, "collectives": self.collectives()}

    def collectives(self) -> dict:
        """Per collective op: calls, bytes and fabric time in this step."""
        out: dict = {}
        for c in self.compute.collectives:
            o = out.setdefault(c["op"], {"calls": 0, "bytes": 0.0, "time_ns": 0.0})
            times = c.get("times", 1)
            o["calls"] += times
            o["bytes"] += c["bytes"] * times
            o["time_ns"] += c["time_ns"] * times
        return out


class Ledger:
    """Prices each executed graph once per structure and keeps the compile cache and the steps."""

    def __init__(self, model: CostModel, bf16: bool = False, cache: CompileCache | None = None):
        self.model = model
        self.cache = cache  # the persistent compile cache; None: every run compiles afresh
        self.timeline = False  # keep each step's events (compilations, compute, collectives) for a trace
        self.eager_debug = False  # NEURON_USE_EAGER_DEBUG_MODE: every op runs as a graph of its own
        self.bf16 = bf16  # fp32 tensors stored in bf16 (XLA_USE_BF16): priced as stored
        self.priced: dict[str, GraphCost] = {}
        self.compiled: dict[str, str] = {}  # key -> the user line that first cut it
        self.by_line: dict[tuple[str, str], str] = {}  # (user line, via) -> the HLO text of its last graph
        self.compilations: list[dict] = []
        self.hits = 0
        self.steps: list[Step] = []
        self.current = Step()
        self.pending: list[str] = []  # graphs cut by trnsim's collective: compiled with the next one on the device
        self.unpriced: dict[str, int] = {}  # HLO op -> instructions executed that the cost model cannot price
        self.estimates: list[str] = []  # prices that are estimates (a loop of unknown trip count), and why

    def add(self, rec: Record) -> None:
        via = rec.via
        if via == "warm-up":  # compiled, not run: its runs come as records of kind "compiled"
            return
        key = structure_key(rec.text)
        cost = self.priced.get(key)
        if cost is None:
            cost = self.priced[key] = self.model.cost(hlo.parse(self.stored(rec.text)))
        self.charge(cost, name=f"graph ({via}) {rec.user_line().rsplit('/', 1)[-1]}")
        s = self.current
        if via == "collective":  # on the device the collective sits inside the step's graph
            self.pending.append(key)
            return
        unit = structure_key("".join(self.pending) + key) if self.pending else key
        self.pending = []
        line = rec.user_line()
        if unit in self.compiled:
            self.hits += 1
        else:
            s.compilations += 1
            self.compiled[unit] = line
            self.compilations.append({"step": len(self.steps) + 1, "line": line, "cause": self._cause(rec, line, via),
                                      **self._compile(unit, cost)})
        self.by_line[line, via] = rec.text

    def _compile(self, key: str, cost: GraphCost) -> dict:
        """Charge a new graph's compilation to the step's warm-up: the estimated compile time, or nothing when
        the persistent cache holds the graph for this target."""
        from trnsim.specs import training

        c = self.model.cluster
        target = structure_key(f"{c.system.chip.key}|lnc{c.lnc}|{key}")
        if self.cache is not None and self.cache.hit(target):
            self.event("compile", f"load {key[:8]} from the persistent cache", 0.0)
            return {"compile_s": 0.0, "cache": "hit"}
        ns = training.compile_time(cost.instructions)
        self.current.compile_ns += ns
        self.event("compile", f"compile {key[:8]} (estimate)", ns, instructions=cost.instructions)
        if self.cache is not None:
            self.cache.store(target, {"instructions": cost.instructions, "compile_s": ns / 1e9, "run": self.cache.run})
        return {"compile_s": ns / 1e9, "cache": "miss", "instructions": cost.instructions}

    def event(self, kind: str, name: str, ns: float, **args) -> None:
        if self.timeline:
            self.current.events.append((kind, name, ns, args))

    def charge(self, cost: GraphCost, graphs: int = 1, name: str = "graph") -> None:
        """Add one executed graph's (or eager op's) cost to the current step."""
        if self.timeline:
            compute = cost.time_ns - cost.engines["collective"]
            self.event("compute", name, compute, flops=cost.flops,
                       **{f"{k}_ns": v for k, v in cost.engines.items() if v and k != "collective"})
            for c in cost.collectives:
                self.event("collective", c["op"], c["time_ns"] * c.get("times", 1), bytes=c["bytes"], ranks=c["ranks"])
        for e in cost.estimates:
            if e not in self.estimates:
                self.estimates.append(e)
        for op, n in cost.unpriced.items():
            self.unpriced[op] = self.unpriced.get(op, 0) + n
        s = self.current
        s.graphs += graphs
        s.time_ns += cost.time_ns
        for k, v in cost.engines.items():
            s.compute.engines[k] += v
        s.compute.hbm_bound_ns += cost.hbm_bound_ns
        s.compute.flops += cost.flops
        s.collective_ns += cost.engines["collective"]
        s.compute.collectives += cost.collectives
        s.memory_bytes = max(s.memory_bytes, cost.memory_bytes)

    def compiled_graph(self, key: str, line: str, kind: str, shapes: str, cost: GraphCost) -> None:
        """A graph compiled outside the dump (torch.compile on the `neuron` device, `kind` forward or
        backward): a compilation, with its cause when the same line compiled before."""
        before = self.by_line.get((line, kind))
        cause = f"first compilation ({kind})" if before is None else f"new input shapes ({kind}): {before} -> {shapes}"
        self.current.compilations += 1
        self.compiled[key] = line
        self.compilations.append({"step": len(self.steps) + 1, "line": line, "cause": cause, **self._compile(key, cost)})
        self.by_line[line, kind] = shapes

    def stored(self, text: str) -> str:
        """The graph as the device stores its arrays."""
        from trnsim.xla.precision import as_stored

        return as_stored(text) if self.bf16 else text

    def _cause(self, rec: Record, line: str, via: str) -> str:
        if via == "forced" and self.eager_debug:
            return f"eager debug mode: the op at {line} compiled and run on its own"
        if via == "forced":
            return f"early execution: {line} needed a value (print, .item(), .cpu()) before mark_step"
        if via == "compile-inputs":
            return f"the inputs of a torch.compile graph at {line}, computed by torch-xla before it runs"
        before = self.by_line.get((line, via))
        if before is None:
            return "first compilation" + (" (torch.compile graph)" if via == "compiled" else "")
        a, b = _inputs(before), _inputs(rec.text)
        sa, sb = _shapes(before), _shapes(rec.text)
        if len(a) != len(b):  # pairing shapes in order would misname them: compare what went and what came
            gone = [x for x in dict.fromkeys(sa) if x not in set(sb)]
            new = [x for x in dict.fromkeys(sb) if x not in set(sa)]
            if not gone:  # every earlier shape remains: state was added (optimizer buffers, say)
                return (f"the graph's inputs changed: {len(a)} -> {len(b)} device tensors (new state, such as "
                        "optimizer buffers)")
            return f"changed shape: {', '.join(f'{x} -> {y}' for x, y in zip(gone[:3], new[:3])) or ', '.join(gone)}"
        if sa != sb:
            changed = list(dict.fromkeys(f"{x} -> {y}" for x, y in zip(sa, sb) if x != y))
            if changed:
                return f"changed shape: {', '.join(changed[:3])}"
        ca, cb = _constants(before), _constants(rec.text)
        if ca != cb:
            diff = [f"{x} -> {y}" for x, y in zip(ca, cb) if x != y][:3]
            return f"a Python value baked into the graph: constant {', '.join(diff) or 'list changed'}"
        return "a different graph at the same line"

    def collective(self, op: str, nbytes: float, ranks: int) -> float:
        """A collective trnsim ran for values, timed on the fabric and charged to the current step."""
        t = self.model.collective_time(op, nbytes, ranks)
        self.event("collective", op, t, bytes=nbytes, ranks=ranks)
        self.current.collective_ns += t
        self.current.time_ns += t
        self.current.compute.collectives.append({"op": op, "bytes": nbytes, "ranks": ranks, "time_ns": t})
        return t

    def custom_op(self, name: str, ns: float) -> None:
        """A custom C++ operator call, timed on the GpSimd engine and charged to the current step."""
        c = self.current.custom_ops.setdefault(name, {"calls": 0, "time_ns": 0.0})
        c["calls"] += 1
        c["time_ns"] += ns
        self.current.time_ns += ns
        self.event("compute", f"custom op {name}", ns, gpsimd_ns=ns)

    def end_step(self) -> Step:
        done, self.current = self.current, Step()
        self.steps.append(done)
        return done
