"""The simulated Neuron compiler's view of one HLO graph: its time and memory on one NeuronCore.

Each instruction of the entry computation becomes the planner's per-op work (trnsim.plan), so one
cost model serves planning and the framework path:

    dot, convolution        a matmul StepOp on TensorE, at the efficiency the kernel timing model gives
                            its bucket and dtype (fp32 stays fp32 unless NEURON_CC_FLAGS asks for
                            --auto-cast matmult|all; reference/multichip-and-training.md)
    elementwise, reduce     an elementwise StepOp: its results on the Vector engine (transcendentals on
                            the Scalar engine) or its HBM bytes through DMA, whichever is slower
    transpose, slice, ...   data movement: bytes read and written through DMA
    all-reduce, ...         the collective over its replica group, timed on the instance's fabric
    reshape, broadcast, ... free: the compiler folds them into their users
    while, call, conditional  their computations priced through: a loop's body times its trip count (read
                            from XLA's annotation or the counter's init, step and bound), a conditional at
                            its branch when the predicate is a constant; where neither is known the price
                            is an estimate and `GraphCost.estimates` says so
    anything else           unpriced: counted by name in `GraphCost.unpriced`, which the report shows

Fusion, as the compiler does it: a chain of elementwise ops keeps its intermediates on chip, so an
elementwise op reads HBM only for operands made outside the chain and writes HBM only when a
non-elementwise op or the graph's output needs its result.

Memory: the graph's parameters (weights, optimizer state, inputs: device data) plus the peak of
the buffers it creates, each alive from its definition to its last use.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from math import prod

from trnsim import numerics
from trnsim.errors import TrnsimError
from trnsim.plan import Cluster, StepOp
from trnsim.plan.comm import FabricComm
from trnsim.plan.compute import SimulatedCompute
from trnsim.plan.layout import ParallelGroup
from trnsim.xla import hlo

FREE = {"parameter", "constant", "tuple", "get-tuple-element", "reshape", "bitcast", "broadcast", "iota",
        "after-all", "partition-id", "replica-id", "opt-barrier", "add-dependency", "domain", "copy-done",
        "all-reduce-done", "all-gather-done", "collective-permute-done", "get-dimension-size"}
SCALAR = {"exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "tanh", "sqrt", "rsqrt",
          "cbrt", "power", "sine", "cosine", "tan", "erf", "atan2"}
MOVE = {"transpose", "copy", "copy-start", "concatenate", "slice", "dynamic-slice", "dynamic-update-slice", "pad",
        "gather", "scatter", "reverse", "sort"}
TENSOR = {"dot", "convolution"}
ELEMENTWISE = {"abs", "add", "and", "atan2", "cbrt", "ceil", "clamp", "clz", "compare", "complex", "convert",
               "bitcast-convert", "cosine", "divide", "erf", "exponential", "exponential-minus-one", "floor", "imag",
               "is-finite", "log", "log-plus-one", "logistic", "maximum", "minimum", "multiply", "negate", "not", "or",
               "popcnt", "power", "real", "reduce-precision", "remainder", "round-nearest-afz", "round-nearest-even",
               "rsqrt", "select", "shift-left", "shift-right-arithmetic", "shift-right-logical", "sign", "sine", "sqrt",
               "subtract", "tan", "tanh", "xor", "stochastic-convert", "map", "rng", "rng-bit-generator",
               "rng-get-and-update-state"}
REDUCE = {"reduce", "reduce-window", "select-and-scatter", "batch-norm-training", "batch-norm-inference",
          "batch-norm-grad", "fusion"}  # one pass over their inputs on the Vector engine
CONTROL = {"while", "call", "conditional"}  # priced through their computations
SLICES = {"slice", "dynamic-slice", "gather"}  # read only the part they return
COLLECTIVE = {"all-reduce": "all_reduce", "all-reduce-start": "all_reduce", "all-gather": "all_gather",
              "all-gather-start": "all_gather", "reduce-scatter": "reduce_scatter", "all-to-all": "all_to_all",
              "collective-permute": "send_recv", "collective-permute-start": "send_recv"}
PASS = {"reshape", "bitcast", "broadcast", "get-tuple-element", "copy-done"}  # an operand read through these reads their source
ENGINES = ("tensor", "vector", "scalar", "dma", "collective")


class DeviceOutOfMemoryError(TrnsimError, MemoryError):
    """A graph whose buffers do not fit the NeuronCore's HBM, as the Neuron runtime refuses it."""


def autocast() -> str | None:
    """The matmul dtype NEURON_CC_FLAGS' --auto-cast asks for, or None (the compiler's default: none)."""
    flags = os.environ.get("NEURON_CC_FLAGS", "")
    mode = re.search(r"--auto-cast[=\s]+(\w+)", flags)
    if not mode or mode.group(1) == "none":
        return None
    kind = re.search(r"--auto-cast-type[=\s]+(\w+)", flags)
    return {"fp8_e4m3": "fp8", "tf32": "tf32"}.get(kind.group(1), kind.group(1)) if kind else "bf16"


@dataclass
class GraphCost:
    """Time (ns) by engine and bound, FLOPs, memory (bytes) of one graph on one rank."""

    time_ns: float = 0.0
    engines: dict[str, float] = field(default_factory=lambda: dict.fromkeys(ENGINES, 0.0))
    hbm_bound_ns: float = 0.0  # the part of `time_ns` spent waiting on HBM rather than an engine
    flops: float = 0.0
    hbm_bytes: float = 0.0
    parameter_bytes: float = 0.0
    temporary_bytes: float = 0.0  # peak of the buffers the graph creates
    collectives: list[dict] = field(default_factory=list)
    ops: int = 0
    instructions: int = 0  # in the module as written (a loop's body once): what the compiler compiles
    unpriced: dict[str, int] = field(default_factory=dict)  # opcode -> instructions run that no model prices
    estimates: list[str] = field(default_factory=list)  # where a price is an estimate, and why

    def add(self, other: "GraphCost", times: float = 1.0) -> None:
        """Charge `other` (a nested computation's cost) `times` times."""
        self.time_ns += other.time_ns * times
        for k, v in other.engines.items():
            self.engines[k] += v * times
        self.hbm_bound_ns += other.hbm_bound_ns * times
        self.flops += other.flops * times
        self.hbm_bytes += other.hbm_bytes * times
        self.ops += round(other.ops * times)
        self.collectives += [dict(c, times=times) if times != 1 else c for c in other.collectives]
        for k, n in other.unpriced.items():
            self.unpriced[k] = self.unpriced.get(k, 0) + round(n * times)
        self.estimates += [e for e in other.estimates if e not in self.estimates]

    @property
    def memory_bytes(self) -> float:
        return self.parameter_bytes + self.temporary_bytes

    def to_dict(self) -> dict:
        return {"time_ns": self.time_ns, "engines_ns": dict(self.engines), "hbm_bound_ns": self.hbm_bound_ns,
                "flops": self.flops, "hbm_bytes": self.hbm_bytes, "parameter_bytes": self.parameter_bytes,
                "temporary_bytes": self.temporary_bytes, "ops": self.ops, "collectives": self.collectives,
                "unpriced": dict(self.unpriced), "estimates": list(self.estimates)}


def _dot_op(ins: hlo.Instruction, table: dict[str, hlo.Instruction]) -> StepOp:
    """A dot as `batch` products of [m, k] x [k, n]."""
    lhs, rhs = (table[o].shapes[0] for o in ins.operands[:2])
    lb, lc = ins.dims_attr("lhs_batch_dims"), ins.dims_attr("lhs_contracting_dims")
    rb, rc = ins.dims_attr("rhs_batch_dims"), ins.dims_attr("rhs_contracting_dims")
    batch = prod(lhs.dims[d] for d in lb)
    k = prod(lhs.dims[d] for d in lc)
    m = prod(s for d, s in enumerate(lhs.dims) if d not in lb and d not in lc)
    n = prod(s for d, s in enumerate(rhs.dims) if d not in rb and d not in rc)
    return StepOp(ins.name, "matmul", m=m, k=k, n=n, batch=batch, bytes=lhs.nbytes + rhs.nbytes + ins.nbytes)


def _conv_op(ins: hlo.Instruction, table: dict[str, hlo.Instruction]) -> StepOp:
    """A convolution as the matmul of its im2col form: output elements x (kernel elements / output features)."""
    kernel = table[ins.operands[1]].shapes[0]
    out = ins.shapes[0]
    dl = ins.attr("dim_labels") or ""
    o_pos = dl.split("_")[1].index("o") if "_" in dl and "o" in dl.split("_")[1] else len(kernel.dims) - 1
    features = kernel.dims[o_pos]
    k = kernel.elems // max(features, 1)
    groups = int(ins.attr("feature_group_count") or 1)
    return StepOp(ins.name, "matmul", m=out.elems // max(features, 1), k=max(k // 1, 1), n=features // groups, batch=groups,
              bytes=sum(table[o].nbytes for o in ins.operands[:2]) + ins.nbytes)


def _replicas(ins: hlo.Instruction, world: int) -> int:
    """Members of the instruction's replica group (all ranks when the group list is empty)."""
    text = ins.attr("replica_groups") or ""
    groups = re.findall(r"\{([\d,\s]*)\}", text)
    groups = [g for g in groups if g.strip()]
    if groups:
        return len(groups[0].split(","))
    iota = re.match(r"\[(\d+),(\d+)\]", text)  # iota form [groups,size]<=[...]
    return int(iota.group(2)) if iota else world


def group_of(size: int, cluster: Cluster) -> ParallelGroup:
    """The first `size` ranks of the cluster as the fabric sees a group."""
    R, rpc = cluster.ranks_per_node, cluster.ranks_per_chip
    ranks = tuple(range(size))
    nodes = max(1, -(-size // R))
    chips = {r // rpc for r in ranks if r < R}
    return ParallelGroup("dp", size, nodes, size // nodes, max(len(chips), 1), 1, ranks)


class CostModel:
    """Prices HLO modules on one rank of `cluster`: `cost(module_or_text)` -> GraphCost."""

    def __init__(self, cluster: Cluster | str, world: int | None = None, matmul_dtype: str | None = None):
        self.cluster = cluster if isinstance(cluster, Cluster) else Cluster(cluster)
        self.world = world or 1
        self.compute, self.comm = SimulatedCompute(), FabricComm()
        self.matmul_dtype = matmul_dtype if matmul_dtype is not None else autocast()

    @property
    def hbm_per_rank(self) -> float:
        return self.cluster.hbm_bytes_per_rank

    def op_time(self, op: StepOp, dtype: str) -> float:
        return self.compute.op_time(op, self.cluster, dtype)

    def collective_time(self, op: str, nbytes: float, size: int) -> float:
        return self.comm.collective_time(op, nbytes, group_of(size, self.cluster), self.cluster)

    def cost(self, module: hlo.Module | str) -> GraphCost:
        if isinstance(module, str):
            module = hlo.parse(module)
        g = self._computation(module, module.entry)
        g.parameter_bytes = sum(i.nbytes for i in module.entry.instructions if i.opcode == "parameter")
        g.instructions = sum(len(c.instructions) for c in module.computations.values())
        return g

    def _computation(self, module: hlo.Module, comp: hlo.Computation, depth: int = 0) -> GraphCost:
        """One computation's cost, its nested computations priced through."""
        hlo.check(comp)
        ins_list = comp.instructions
        table = comp.by_name()
        users: dict[str, list[hlo.Instruction]] = {}
        for ins in ins_list:
            for o in ins.operands:
                users.setdefault(o, []).append(ins)

        def source(name: str) -> hlo.Instruction:
            ins = table[name]  # (an element of a tuple is read alone: get-tuple-element is not looked through)
            while ins.opcode in PASS - {"get-tuple-element"} and ins.operands and ins.operands[0] in table:
                ins = table[ins.operands[0]]
            return ins

        def fused(ins: hlo.Instruction) -> bool:
            """An elementwise result whose every user is elementwise stays on chip."""
            if not _elementwise(ins) or ins.root:
                return False
            seen = [u for u in users.get(ins.name, [])]
            while seen:  # look through free reshapes and broadcasts to the real users
                u = seen.pop()
                if u.opcode in PASS:
                    if u.root:
                        return False
                    seen.extend(users.get(u.name, []))
                elif not _elementwise(u) or u.root:
                    return False
            return bool(users.get(ins.name))

        g = GraphCost()
        on_chip = {ins.name for ins in ins_list if fused(ins)}
        nested_peak = 0.0
        for ins in ins_list:
            op = ins.opcode
            if op in FREE:
                continue
            if op in CONTROL:
                sub = self._control(module, comp, ins, depth)
                nested_peak = max(nested_peak, sub.temporary_bytes)
                g.add(sub)
                continue
            if op == "custom-call" and (_custom_target(ins) in FREE_CUSTOM or _custom_target(ins).startswith("xla.sdy.")):
                continue
            if op not in TENSOR | set(COLLECTIVE) | ELEMENTWISE | SCALAR | MOVE | REDUCE:
                name = f"custom-call({_custom_target(ins)})" if op == "custom-call" else op
                g.unpriced[name] = g.unpriced.get(name, 0) + 1
                continue
            g.ops += 1
            if op in TENSOR:
                mm = (_dot_op if op == "dot" else _conv_op)(ins, table)
                dtype = numerics.family(table[ins.operands[0]].shapes[0].dtype) or "fp32"
                dtype = self.matmul_dtype or dtype
                t = self.op_time(mm, dtype)
                g.engines["tensor"] += t
                g.flops += mm.flops
                g.hbm_bytes += mm.bytes
            elif op in COLLECTIVE:
                size = _replicas(ins, self.world)
                t = self.collective_time(COLLECTIVE[op], ins.nbytes, size)
                g.engines["collective"] += t
                g.collectives.append({"op": COLLECTIVE[op], "bytes": ins.nbytes, "ranks": size, "time_ns": t})
            else:
                if op in SLICES:
                    reads = ins.nbytes
                elif op == "dynamic-update-slice":  # in place: the update is read and written
                    reads = table[ins.operands[1]].nbytes if ins.operands[1:] and ins.operands[1] in table else 0.0
                else:
                    reads = sum(source(o).nbytes for o in ins.operands if o in table and source(o).name not in on_chip
                                and source(o).opcode not in ("constant", "iota"))
                writes = 0.0 if ins.name in on_chip else ins.nbytes
                if op == "dynamic-update-slice":
                    writes = reads
                if op in MOVE:
                    elems = 0.0
                    engine = "dma"
                else:
                    elems = float(max([ins.elems, *(table[o].elems for o in ins.operands if o in table)]))
                    engine = "scalar" if op in SCALAR else "vector"
                t = self.op_time(StepOp(ins.name, "elementwise", elems=elems, bytes=reads + writes), "bf16")
                engine_only = self.op_time(StepOp(ins.name, "elementwise", elems=elems), "bf16") if elems else 0.0
                g.engines[engine] += engine_only
                g.hbm_bound_ns += t - engine_only
                g.hbm_bytes += reads + writes
            g.time_ns += t
        g.temporary_bytes = _peak_temporaries(ins_list, table, on_chip) + nested_peak
        return g

    def _control(self, module: hlo.Module, comp: hlo.Computation, ins: hlo.Instruction, depth: int) -> GraphCost:
        """A while, call or conditional: its computations' cost, times a loop's trip count."""
        if depth > 64:
            raise hlo.HloParseError(f"HLO computation {comp.name}: calls nest deeper than 64 levels at {ins.name}")
        where = f" ({ins.source})" if ins.source else ""

        def sub(key: str) -> GraphCost:
            name = (ins.attr(key) or "").lstrip("%")
            if name not in module.computations:
                raise hlo.HloParseError(f"HLO instruction {ins.name}: {key}={name or '?'} names no computation "
                                        f"of module {module.name}")
            return self._computation(module, module.computations[name], depth + 1)

        if ins.opcode == "call":
            return sub("to_apply")
        if ins.opcode == "while":
            body, cond = sub("body"), sub("condition")
            trips = trip_count(module, comp, ins)
            g = GraphCost()
            if trips is None:
                trips = 1
                g.estimates.append(f"while {ins.name}{where}: trip count not known before the run; "
                                   f"priced as one iteration")
            g.add(body, trips)
            g.add(cond, trips + 1)
            g.temporary_bytes = max(body.temporary_bytes, cond.temporary_bytes)
            return g
        names = _branches(ins)
        for n in names:
            if n not in module.computations:
                raise hlo.HloParseError(f"HLO instruction {ins.name}: branch {n} names no computation of module "
                                        f"{module.name}")
        branches = [self._computation(module, module.computations[n], depth + 1) for n in names]
        chosen = _constant_branch(comp.by_name(), ins, len(branches))
        if chosen is not None:
            return branches[chosen]
        g = GraphCost()
        worst = max(branches, key=lambda b: b.time_ns)
        g.add(worst)
        g.temporary_bytes = max(b.temporary_bytes for b in branches)
        g.estimates.append(f"conditional {ins.name}{where}: branch not known before the run; priced at the "
                           f"costliest of its {len(branches)} branches")
        return g


# sharding bookkeeping (GSPMD's, and Shardy's `xla.sdy.*` around a shard_map or pmap body): no work on the device
FREE_CUSTOM = {"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "annotate_device_placement"}


def _custom_target(ins: hlo.Instruction) -> str:
    return (ins.attr("custom_call_target") or "?").strip('"')


def _branches(ins: hlo.Instruction) -> list[str]:
    """The branch computations of a conditional, in branch-index order (true before false)."""
    text = ins.attr("branch_computations")
    if text:
        return [n.strip().lstrip("%") for n in text.strip("{}").split(",") if n.strip()]
    return [(ins.attr(k) or "").lstrip("%") for k in ("true_computation", "false_computation")]


def _constant(table: dict[str, hlo.Instruction], name: str) -> int | None:
    """The integer value of `name` where it is a scalar constant (through converts and copies)."""
    ins = table.get(name)
    while ins is not None and ins.opcode in ("convert", "copy", "reshape", "bitcast") and ins.operands:
        ins = table.get(ins.operands[0])
    if ins is None or ins.opcode != "constant" or not ins.operands:
        return None
    text = ins.operands[0].lower()
    if text in ("true", "false"):
        return int(text == "true")
    return int(text) if re.fullmatch(r"-?\d+", text) else None


def _constant_branch(table: dict[str, hlo.Instruction], ins: hlo.Instruction, n: int) -> int | None:
    """The branch a conditional takes when its predicate or index is a constant."""
    v = _constant(table, ins.operands[0]) if ins.operands else None
    if v is None:
        return None
    if ins.attr("branch_computations"):
        return v if 0 <= v < n else n - 1  # an index out of range runs the last branch
    return 0 if v else 1


def _element(table: dict[str, hlo.Instruction], name: str) -> int | None:
    """The tuple index that `name` reads from the computation's parameter, if it is `get-tuple-element(param)`."""
    ins = table.get(name)
    while ins is not None and ins.opcode in ("convert", "copy") and ins.operands:
        ins = table.get(ins.operands[0])
    if ins is None or ins.opcode != "get-tuple-element" or not ins.operands:
        return None
    src = table.get(ins.operands[0])
    index = ins.attr("index")
    return int(index) if src is not None and src.opcode == "parameter" and index and index.isdigit() else None


_FLIP = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE", "NE": "NE"}


def trip_count(module: hlo.Module, comp: hlo.Computation, ins: hlo.Instruction) -> int | None:
    """A while loop's trip count: XLA's `known_trip_count`, else a counter compared with a constant bound,
    started at a constant and stepped by a constant in the body. None when the loop is not of that form."""
    known = re.search(r'known_trip_count"?\s*:\s*\{\s*"?n"?\s*:\s*"?(\d+)', ins.attrs)
    if known:
        return int(known.group(1))
    cond = module.computations.get((ins.attr("condition") or "").lstrip("%"))
    body = module.computations.get((ins.attr("body") or "").lstrip("%"))
    if cond is None or body is None or not ins.operands:
        return None
    ct = cond.by_name()
    root = next((i for i in cond.instructions if i.root), None)
    if root is None or root.opcode != "compare" or len(root.operands) != 2:
        return None
    direction = (root.attr("direction") or "").upper()
    a, b = root.operands
    index, bound = _element(ct, a), _constant(ct, b)
    if index is None:  # the bound on the left: `10 > i` is `i < 10`
        index, bound, direction = _element(ct, b), _constant(ct, a), _FLIP.get(direction, "")
    if index is None or bound is None or direction not in _FLIP:
        return None
    init = comp.by_name().get(ins.operands[0])
    if init is None or init.opcode != "tuple" or index >= len(init.operands):
        return None
    start = _constant(comp.by_name(), init.operands[index])
    bt = body.by_name()
    broot = next((i for i in body.instructions if i.root), None)
    if start is None or broot is None or broot.opcode != "tuple" or index >= len(broot.operands):
        return None
    upd = bt.get(broot.operands[index])
    if upd is None or upd.opcode not in ("add", "subtract") or len(upd.operands) != 2:
        return None
    x, y = upd.operands
    if _element(bt, x) == index and _constant(bt, y) is not None:
        step = _constant(bt, y)
    elif upd.opcode == "add" and _element(bt, y) == index and _constant(bt, x) is not None:
        step = _constant(bt, x)
    else:
        return None
    step = -step if upd.opcode == "subtract" else step
    if step == 0:
        return None
    if direction == "NE":
        gap = bound - start
        return gap // step if gap % step == 0 and gap // step >= 0 else None
    if direction in ("GT", "GE"):  # counting down is counting up on the negated values
        start, bound, step, direction = -start, -bound, -step, {"GT": "LT", "GE": "LE"}[direction]
    last = bound if direction == "LE" else bound - 1  # the largest counter value that still runs the body
    if start > last:
        return 0
    return (last - start) // step + 1 if step > 0 else None  # a counter that never reaches its bound


def _elementwise(ins: hlo.Instruction) -> bool:
    return ins.opcode in ELEMENTWISE | SCALAR and ins.opcode not in ("rng-bit-generator", "rng-get-and-update-state")


def _peak_temporaries(ins_list: list[hlo.Instruction], table, on_chip: set[str]) -> float:
    """The most bytes of created buffers alive at once, each from its definition to its last use (or the end
    for the graph's outputs)."""
    last: dict[str, int] = {}
    for i, ins in enumerate(ins_list):
        for o in ins.operands:
            last[o] = i
    root = next((ins for ins in ins_list if ins.root), None)
    outputs = set(root.operands if root is not None and root.opcode == "tuple" else ())
    if root is not None:
        outputs.add(root.name)
    live, peak, ends = 0.0, 0.0, {}
    for i, ins in enumerate(ins_list):
        # a loop's result is its state, updated in place in the buffers it started from
        if ins.opcode not in FREE | {"copy-done", "while"} and ins.name not in on_chip:
            live += ins.nbytes
            end = len(ins_list) if ins.name in outputs else last.get(ins.name, i)
            ends.setdefault(end, []).append(ins.nbytes)
        peak = max(peak, live)
        live -= sum(ends.pop(i, ()))
    return peak
