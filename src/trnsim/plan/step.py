"""Step time of a training layout, its breakdown, throughput, MFU and cost.

    >>> p = plan("llama3-8b", "trn1.32xlarge", nodes=32, tp=32)
    >>> p.layout.short()
    'TP32 PP1 DP32'

One micro-batch on the slowest pipeline stage costs its ops' compute (forward, backward and any
recomputation, each op timed by the ComputeModel) plus the exposed part of its TP, CP and EP
collectives and pipeline sends (each timed by the CommModel). A step runs m of them plus the
pipeline bubble, (pp - 1) / vpp more, then the exposed part of the DP gradient reduction and
ZeRO-1 parameter gather, and the optimizer update. training.toml's `overlap` says which
communication hides under compute.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from trnsim import specs
from trnsim.specs import training
from trnsim.plan.comm import CommModel, FabricComm
from trnsim.plan.compute import MX, ComputeModel, SimulatedCompute
from trnsim.plan.layout import Cluster, Layout, LayoutError, Placement, Recipe, microbatches, validate
from trnsim.plan.memory import memory
from trnsim.plan.workload import Model, StepOp, aws_flops_per_sequence, head_ops, layer_ops
from trnsim.plan import workload

GiB = 2.0**30
PARTS = ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "pp_comm", "bubble", "dp_comm", "optimizer")


@dataclass(frozen=True)
class Plan:
    """One evaluated layout: step time (ns) with its breakdown, throughput, memory and cost."""

    model: Model
    cluster: Cluster
    layout: Layout
    recipe: Recipe
    step_ns: float
    breakdown: dict[str, float]  # ns per step, summing to step_ns
    memory: dict[str, float]  # bytes per rank
    capacity: float  # HBM bytes per rank
    models: dict[str, str] = field(default_factory=dict)  # which compute and comm models timed it
    ops: tuple[dict, ...] = ()  # one layer's ops on one rank, per micro-batch: shape, FLOPs, bytes, times

    @property
    def seqs_per_s(self) -> float:
        return self.recipe.global_batch / (self.step_ns * 1e-9)

    @property
    def tokens_per_s(self) -> float:
        return self.seqs_per_s * self.recipe.seq

    @property
    def mfu(self) -> float:
        """AWS's MFU: model FLOPs per second over the cluster's dense BF16 peak (AWS's own rating where kept);
        an MX plan's over the chip's MX peak, which its matmuls run at."""
        chip = self.cluster.system.chip
        rating = "aws-mfu" if "aws-mfu" in chip.ratings else None
        dtype = self.recipe.dtype if self.recipe.dtype in MX else "bf16"
        peak = self.cluster.nodes * self.cluster.system.chips * chip.peak_flops(dtype, rating)
        return aws_flops_per_sequence(self.model, self.recipe.seq) * self.seqs_per_s / peak

    @property
    def price_per_hour(self) -> float | None:
        """On-demand USD/h of the whole cluster, None where the catalog has no price."""
        p = self.cluster.system.price_usd_per_hour
        return p * self.cluster.nodes if p else None

    @property
    def price_status(self) -> str:
        """Where the price comes from: published (with its date), placeholder, given with --price, or none."""
        return self.cluster.system.price_status

    @property
    def usd_per_million_tokens(self) -> float | None:
        return self.price_per_hour / 3600 / self.tokens_per_s * 1e6 if self.price_per_hour else None

    def hours_to_train(self, tokens: float) -> float:
        return tokens / self.tokens_per_s / 3600

    def usd_to_train(self, tokens: float) -> float | None:
        return self.hours_to_train(tokens) * self.price_per_hour if self.price_per_hour else None

    def to_dict(self, tokens: float | None = None) -> dict:
        d = {
            "model": self.model.name, "system": self.cluster.system.name, "nodes": self.cluster.nodes,
            "lnc": self.cluster.lnc, "ranks": self.cluster.ranks, "layout": dataclasses.asdict(self.layout),
            "schedule": self.layout.schedule, "recipe": dataclasses.asdict(self.recipe),
            "step_s": self.step_ns * 1e-9, "breakdown_s": {k: v * 1e-9 for k, v in self.breakdown.items()},
            "seqs_per_s": self.seqs_per_s, "tokens_per_s": self.tokens_per_s, "mfu": self.mfu,
            "memory_gib": {k: v / GiB for k, v in self.memory.items()}, "memory_total_gib": sum(self.memory.values()) / GiB,
            "capacity_gib": self.capacity / GiB, "usd_per_hour": self.price_per_hour, "price_status": self.price_status,
            "usd_per_million_tokens": self.usd_per_million_tokens, "models": self.models, "layer_ops": list(self.ops),
        }
        if tokens:
            d.update(train_tokens=tokens, train_hours=self.hours_to_train(tokens), train_usd=self.usd_to_train(tokens))
        return d


@dataclass(frozen=True)
class StepModel:
    """Step time from a ComputeModel (per op) and a CommModel (per collective)."""

    compute: ComputeModel = field(default_factory=SimulatedCompute)
    comm: CommModel = field(default_factory=FabricComm)

    def _ops_time(self, ops, cluster, dtype) -> float:
        return sum(self.compute.op_time(op, cluster, dtype) for op in ops)

    def evaluate(self, model: Model, cluster: Cluster, layout: Layout, recipe: Recipe) -> Plan:
        """Validate the layout, check that it fits in memory, and time one training step."""
        lay = validate(model, cluster, layout, recipe)
        mem = memory(model, cluster, lay, recipe)
        cap = cluster.hbm_bytes_per_rank
        if sum(mem.values()) > cap:
            parts = ", ".join(f"{k} {v / GiB:.1f}" for k, v in mem.items())
            raise LayoutError("memory", f"{sum(mem.values()) / GiB:.1f} GiB per rank exceeds the {cap / GiB:.1f} GiB "
                                        f"of HBM per rank ({parts} GiB); try more tp/pp, zero1, or checkpointing")
        dt, mb, s = recipe.dtype_bytes, recipe.micro_batch, recipe.seq
        place = Placement(cluster, lay)
        ops = layer_ops(model, mb, s, lay.tp, lay.cp, lay.ep, recipe.sp, dt)
        per_op = [(op, self.compute.op_time(op, cluster, recipe.dtype), self._ops_time(op.backward(), cluster, recipe.dtype))
                  for op in ops]
        fwd, bwd = sum(f for _, f, _ in per_op), sum(b for _, _, b in per_op)
        redo = {"none": (), "full": ops,
                "selective": [op for op in ops if op.kind != "matmul"]}[recipe.checkpointing]
        recompute = self._ops_time(redo, cluster, recipe.dtype)
        head = head_ops(model, mb, s, lay.tp, lay.cp, dt)
        head_t = self._ops_time(head, cluster, recipe.dtype) + self._ops_time(
            [b for op in head for b in op.backward()], cluster, recipe.dtype)
        layers = math.ceil(model.layers / lay.pp)  # the last stage: the most layers, and the head

        # per micro-batch, per layer: exposed collectives
        tokens = mb * s // lay.cp
        act = tokens * model.hidden * dt
        coll = self.comm.collective_time
        comm_ops = []  # the --ops table's rows for one layer's exposed collectives

        def comm_row(name, what, group, nbytes, total):
            comm_ops.append({"name": name, "kind": "collective", "collective": what, "group": group, "m": 0, "k": 0,
                             "n": 0, "batch": 1, "flops": 0.0, "bytes": nbytes, "forward_ns": total / 2,
                             "backward_ns": total / 2})

        tp_t = 0.0
        if lay.tp > 1:
            g = place.group("tp")
            one = (coll("all_gather", act, g, cluster) + coll("reduce_scatter", act, g, cluster)) if recipe.sp \
                else coll("all_reduce", act, g, cluster)
            tp_t = 4 * one * (1 - training.overlap("tp"))  # attention and MLP, forward and backward
            comm_row("tp", "all_gather+reduce_scatter" if recipe.sp else "all_reduce", lay.tp, 4 * act, tp_t)
        cp_t = 0.0
        if lay.cp > 1:
            kv = tokens * 2 * max(model.kv_heads // lay.tp, 1) * model.head_dim * dt
            hops = (lay.cp - 1) * 3 * coll("send_recv", kv, place.group("cp"), cluster)  # KV forward, dKV backward
            attn = sum(self.compute.op_time(o, cluster, recipe.dtype) for o in ops if o.kind == "attention") * 3
            cp_t = max(0.0, hops - training.overlap("cp") * attn)
            comm_row("cp", "send_recv (KV ring)", lay.cp, (lay.cp - 1) * 3 * kv, cp_t)
        ep_t = 0.0
        if lay.ep > 1:
            routed = tokens * model.top_k * model.hidden * dt
            ep_t = 4 * coll("all_to_all", routed, place.group("ep"), cluster) * (1 - training.overlap("ep"))
            comm_row("ep", "all_to_all", lay.ep, 4 * routed, ep_t)
        pp_t = 0.0
        if lay.pp > 1:
            msg = act / (lay.tp if recipe.sp else 1)
            pp_t = 2 * lay.vpp * coll("send_recv", msg, place.group("pp"), cluster) * (1 - training.overlap("pp"))

        m = microbatches(lay, recipe)
        per_mb = layers * (fwd + bwd + recompute + tp_t + cp_t + ep_t) + head_t + pp_t
        bubble = (lay.pp - 1) / lay.vpp * per_mb

        # once per step: gradient reduction over DP x CP, ZeRO-1 gather, optimizer update
        tables = 2 if lay.pp == 1 and not model.tied_embeddings else 1  # embedding and/or LM head
        stage_params = layers * model.layer_params(lay.tp, lay.ep) + tables * model.embedding_params / lay.tp
        d = training.recipe()
        dp_group = place.group("dpcp")
        dp_t = 0.0
        if dp_group.size > 1:
            grads = stage_params * (d["grad_bytes"] if recipe.dtype != "fp32" else 4)
            weights = stage_params * (d["weight_bytes"] if recipe.dtype != "fp32" else 4)
            last_bwd = layers * bwd
            if recipe.zero1:
                rs = coll("reduce_scatter", grads, dp_group, cluster)
                ag = coll("all_gather", weights, dp_group, cluster)
            else:
                rs, ag = coll("all_reduce", grads, dp_group, cluster), 0.0
            dp_t = max(0.0, rs - training.overlap("dp_reduce") * last_bwd) + ag * (1 - training.overlap("dp_gather"))
        shard = stage_params / (dp_group.size if recipe.zero1 else 1)
        # Adam: read weight, gradient, master, m, v; write them back (FP32 states, 16-bit weight copy)
        adam_bytes = 2 * d["optimizer_bytes"] + 2 * d["weight_bytes"] + d["grad_bytes"]
        opt = self.compute.op_time(StepOp("adam", "elementwise", elems=10 * shard, bytes=shard * adam_bytes), cluster, recipe.dtype)

        breakdown = {
            "compute": m * (layers * (fwd + bwd) + head_t), "recompute": m * layers * recompute,
            "tp_comm": m * layers * tp_t, "cp_comm": m * layers * cp_t, "ep_comm": m * layers * ep_t,
            "pp_comm": m * pp_t, "bubble": bubble, "dp_comm": dp_t, "optimizer": opt,
        }
        comm = self.comm.which(cluster) if hasattr(self.comm, "which") else self.comm
        compute = self.compute.which(cluster) if hasattr(self.compute, "which") else self.compute
        models = {"compute": compute.name + (" (interim)" if compute.interim else ""),
                  "comm": comm.name + (" (interim)" if comm.interim else "")}
        table = tuple({"name": op.name, "kind": op.kind, "m": op.m, "k": op.k, "n": op.n, "batch": op.batch,
                       "flops": op.flops, "bytes": op.bytes, "forward_ns": f, "backward_ns": b} for op, f, b in per_op)
        table += tuple(comm_ops)
        return Plan(model, cluster, lay, recipe, sum(breakdown.values()), breakdown, mem, cap, models, table)


DEFAULT = StepModel()


def with_price(system: specs.SystemSpec, usd_per_hour: float | None) -> specs.SystemSpec:
    """`system` with the user's on-demand price per node-hour (None: the catalog's)."""
    if usd_per_hour is None:
        return system
    if not usd_per_hour > 0:
        raise LayoutError("price", f"a price per node-hour must be positive, got {usd_per_hour!r}")
    return dataclasses.replace(system, price_usd_per_hour=float(usd_per_hour), price_status="given with --price")


def plan(model, system, nodes: int = 1, *, tp: int = 1, pp: int = 1, dp: int = 0, cp: int = 1, ep: int = 1,
         vpp: int = 1, lnc: int | None = None, step_model: StepModel = DEFAULT, **recipe) -> Plan:
    """Evaluate one layout: `plan("llama3-70b", "trn2.48xlarge", 8, tp=32, pp=4, seq=8192)`.

    `recipe` takes Recipe's fields (seq, global_batch, micro_batch, zero1, sp, checkpointing,
    dtype); what is left out follows NxD recipes (training.toml).
    """
    m = workload.model(model)
    cluster = Cluster(specs.system(system) if isinstance(system, str) else system, nodes, lnc)
    rec = Recipe.nxd(m, **recipe)
    return step_model.evaluate(m, cluster, Layout(tp, pp, dp, cp, ep, vpp), rec)
