"""The simulated Neuron compiler's view of one HLO graph: its time and memory on one NeuronCore.

Each instruction of the entry computation becomes the planner's per-op work (trnsim.plan), so one
cost model serves planning and the framework path:

    dot, convolution        a matmul Op on TensorE, at the efficiency the kernel timing model gives
                            its bucket and dtype (fp32 stays fp32 unless NEURON_CC_FLAGS asks for
                            --auto-cast matmult|all; reference/multichip-and-training.md)
    elementwise, reduce     an elementwise Op: its results on the Vector engine (transcendentals on
                            the Scalar engine) or its HBM bytes through DMA, whichever is slower
    transpose, slice, ...   data movement: bytes read and written through DMA
    all-reduce, ...         the collective over its replica group, timed on the instance's fabric
    reshape, broadcast, ... free: the compiler folds them into their users

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

from trnsim.errors import TrnsimError
from trnsim.plan import Cluster, Op
from trnsim.plan.comm import FabricComm
from trnsim.plan.compute import SimulatedCompute
from trnsim.plan.layout import Group
from trnsim.xla import hlo

FREE = {"parameter", "constant", "tuple", "get-tuple-element", "reshape", "bitcast", "broadcast", "iota",
        "after-all", "partition-id", "replica-id", "opt-barrier", "add-dependency", "domain", "copy-done",
        "all-reduce-done", "all-gather-done", "collective-permute-done", "get-dimension-size"}
SCALAR = {"exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "tanh", "sqrt", "rsqrt",
          "cbrt", "power", "sine", "cosine", "tan", "erf", "atan2"}
MOVE = {"transpose", "copy", "copy-start", "concatenate", "slice", "dynamic-slice", "dynamic-update-slice", "pad",
        "gather", "scatter", "reverse", "sort"}
TENSOR = {"dot", "convolution"}
COLLECTIVE = {"all-reduce": "all_reduce", "all-reduce-start": "all_reduce", "all-gather": "all_gather",
              "all-gather-start": "all_gather", "reduce-scatter": "reduce_scatter", "all-to-all": "all_to_all",
              "collective-permute": "send_recv", "collective-permute-start": "send_recv"}
PASS = {"reshape", "bitcast", "broadcast", "get-tuple-element", "copy-done"}  # an operand read through these reads their source
DTYPES = {"f32": "fp32", "bf16": "bf16", "f16": "fp16", "f8e4m3fn": "fp8", "f8e5m2": "fp8", "f8e4m3": "fp8"}
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

    @property
    def memory_bytes(self) -> float:
        return self.parameter_bytes + self.temporary_bytes

    def to_dict(self) -> dict:
        return {"time_ns": self.time_ns, "engines_ns": dict(self.engines), "hbm_bound_ns": self.hbm_bound_ns,
                "flops": self.flops, "hbm_bytes": self.hbm_bytes, "parameter_bytes": self.parameter_bytes,
                "temporary_bytes": self.temporary_bytes, "ops": self.ops, "collectives": self.collectives}


def _dot_op(ins: hlo.Instruction, table: dict[str, hlo.Instruction]) -> Op:
    """A dot as `batch` products of [m, k] x [k, n]."""
    lhs, rhs = (table[o].shapes[0] for o in ins.operands[:2])
    lb, lc = ins.dims_attr("lhs_batch_dims"), ins.dims_attr("lhs_contracting_dims")
    rb, rc = ins.dims_attr("rhs_batch_dims"), ins.dims_attr("rhs_contracting_dims")
    batch = prod(lhs.dims[d] for d in lb)
    k = prod(lhs.dims[d] for d in lc)
    m = prod(s for d, s in enumerate(lhs.dims) if d not in lb and d not in lc)
    n = prod(s for d, s in enumerate(rhs.dims) if d not in rb and d not in rc)
    return Op(ins.name, "matmul", m=m, k=k, n=n, batch=batch, bytes=lhs.nbytes + rhs.nbytes + ins.nbytes)


def _conv_op(ins: hlo.Instruction, table: dict[str, hlo.Instruction]) -> Op:
    """A convolution as the matmul of its im2col form: output elements x (kernel elements / output features)."""
    kernel = table[ins.operands[1]].shapes[0]
    out = ins.shapes[0]
    dl = ins.attr("dim_labels") or ""
    o_pos = dl.split("_")[1].index("o") if "_" in dl and "o" in dl.split("_")[1] else len(kernel.dims) - 1
    features = kernel.dims[o_pos]
    k = kernel.elems // max(features, 1)
    groups = int(ins.attr("feature_group_count") or 1)
    return Op(ins.name, "matmul", m=out.elems // max(features, 1), k=max(k // 1, 1), n=features // groups, batch=groups,
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


def group_of(size: int, cluster: Cluster) -> Group:
    """The first `size` ranks of the cluster as the fabric sees a group."""
    R, rpc = cluster.ranks_per_node, cluster.ranks_per_chip
    ranks = tuple(range(size))
    nodes = max(1, -(-size // R))
    chips = {r // rpc for r in ranks if r < R}
    return Group("dp", size, nodes, size // nodes, max(len(chips), 1), 1, ranks)


class CostModel:
    """Prices HLO modules on one rank of `cluster`: `cost(module_or_text)` -> GraphCost."""

    def __init__(self, cluster: Cluster | str, world: int | None = None, matmul_dtype: str | None = None):
        self.cluster = cluster if isinstance(cluster, Cluster) else Cluster(cluster)
        self.world = world or 1
        self.compute, self.comm = SimulatedCompute(), FabricComm()
        self.matmul_dtype = matmul_dtype if matmul_dtype is not None else autocast()

    @property
    def hbm_per_rank(self) -> float:
        return self.cluster.hbm_per_rank

    def op_time(self, op: Op, dtype: str) -> float:
        return self.compute.op_time(op, self.cluster, dtype)

    def collective_time(self, op: str, nbytes: float, size: int) -> float:
        return self.comm.collective_time(op, nbytes, group_of(size, self.cluster), self.cluster)

    def cost(self, module: hlo.Module | str) -> GraphCost:
        if isinstance(module, str):
            module = hlo.parse(module)
        comp = module.entry
        hlo.check(comp)
        ins_list = comp.instructions
        table = comp.by_name()
        users: dict[str, list[hlo.Instruction]] = {}
        for ins in ins_list:
            for o in ins.operands:
                users.setdefault(o, []).append(ins)

        def source(name: str) -> hlo.Instruction:
            ins = table[name]
            while ins.opcode in PASS and ins.operands and ins.operands[0] in table:
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
        for ins in ins_list:
            op = ins.opcode
            if op == "parameter":
                g.parameter_bytes += ins.nbytes
            if op in FREE:
                continue
            g.ops += 1
            if op in TENSOR:
                mm = (_dot_op if op == "dot" else _conv_op)(ins, table)
                dtype = DTYPES.get(table[ins.operands[0]].shapes[0].dtype, "fp32")
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
                reads = sum(source(o).nbytes for o in ins.operands if o in table and source(o).name not in on_chip
                            and source(o).opcode not in ("constant", "iota"))
                writes = 0.0 if ins.name in on_chip else ins.nbytes
                if op in MOVE:
                    elems = 0.0
                    engine = "dma"
                else:
                    elems = float(max([ins.elems, *(table[o].elems for o in ins.operands if o in table)]))
                    engine = "scalar" if op in SCALAR else "vector"
                    if op == "fusion" or op == "call":
                        engine = "vector"
                t = self.op_time(Op(ins.name, "elementwise", elems=elems, bytes=reads + writes), "bf16")
                engine_only = self.op_time(Op(ins.name, "elementwise", elems=elems), "bf16") if elems else 0.0
                g.engines[engine] += engine_only
                g.hbm_bound_ns += t - engine_only
                g.hbm_bytes += reads + writes
            g.time_ns += t
        g.temporary_bytes = _peak_temporaries(ins_list, table, on_chip)
        return g


def _elementwise(ins: hlo.Instruction) -> bool:
    return ins.opcode not in FREE | MOVE | TENSOR | set(COLLECTIVE) | {"reduce", "reduce-window", "select-and-scatter",
                                                                         "fusion", "call", "while", "conditional",
                                                                         "custom-call", "rng-bit-generator"}


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
        if ins.opcode not in FREE | {"copy-done"} and ins.name not in on_chip:
            live += ins.nbytes
            end = len(ins_list) if ins.name in outputs else last.get(ins.name, i)
            ends.setdefault(end, []).append(ins.nbytes)
        peak = max(peak, live)
        live -= sum(ends.pop(i, ()))
    return peak
