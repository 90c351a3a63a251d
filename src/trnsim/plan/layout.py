"""Parallel layouts: TP, SP, PP (1F1B or interleaved), DP with ZeRO-1, CP and EP, placed as NxD places them.

Ranks are numbered instance by instance (instance k owns ranks [kR, (k+1)R)), and the parallel
groups come from reshaping the ranks row-major to [PP, DP, CP, TP] (reference/multichip-and-
training.md 3.4): TP innermost, so a TP group sits on neighbouring cores of one instance. Expert
regions re-view the ranks as [PP, DP_exp, EP, TP].
"""
from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from functools import cached_property

from trnsim import specs
from trnsim.errors import ConfigError
from trnsim.fabric.cluster import Cluster, ClusterError  # noqa: F401  (the planner's cluster is the fabric's)
from trnsim.specs import training
from trnsim.plan.workload import Model

CHECKPOINTING = ("none", "selective", "full")
SCHEDULES = ("1f1b", "interleaved")
DTYPES = {"bf16": 2, "fp16": 2, "fp8": 1, "fp32": 4, "mxfp8": 1, "mxfp4": 1}  # bytes of a weight, activation or
# gradient; MXFP4 operands are widened to MXFP8 for the matmul (neuroncores.toml), so both move 8-bit elements


class LayoutError(ConfigError):
    """A layout that cannot run: names the field, the rule and the numbers."""

    def __init__(self, field: str, rule: str):
        self.field, self.rule = field, rule
        super().__init__(f"layout field {field!r}: {rule}")


@dataclass(frozen=True)
class Recipe:
    """The training knobs of a recipe; `Recipe.nxd` fills what is left out from NxD's defaults."""

    seq: int
    global_batch: int
    micro_batch: int = 1
    zero1: bool = True
    sp: bool = True
    checkpointing: str = "selective"
    dtype: str = "bf16"

    @classmethod
    def nxd(cls, model: Model, **knobs) -> "Recipe":
        """NxD defaults (training.toml) with the model's pretraining sequence length."""
        d = training.recipe()
        base = dict(seq=model.seq, global_batch=d["global_batch"], micro_batch=d["micro_batch"], zero1=d["zero1"],
                    sp=d["sequence_parallel"], checkpointing=d["checkpointing"], dtype=d["dtype"])
        base.update({k: v for k, v in knobs.items() if v is not None})
        return cls(**base)

    def __post_init__(self):
        for f in ("seq", "global_batch", "micro_batch"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise LayoutError(f, f"must be a positive integer, got {v!r}")
        if self.checkpointing not in CHECKPOINTING:
            raise LayoutError("checkpointing", f"must be one of {', '.join(CHECKPOINTING)}, got {self.checkpointing!r}")
        if self.dtype not in DTYPES:
            raise LayoutError("dtype", f"must be one of {', '.join(DTYPES)}, got {self.dtype!r}")

    @property
    def dtype_bytes(self) -> int:
        return DTYPES[self.dtype]


@dataclass(frozen=True)
class Layout:
    """Degrees of parallelism. `dp` of 0 means: whatever the cluster leaves (world / (tp pp cp))."""

    tp: int = 1
    pp: int = 1
    dp: int = 0
    cp: int = 1
    ep: int = 1
    vpp: int = 1  # virtual stages per rank: > 1 is the interleaved schedule

    @property
    def schedule(self) -> str:
        return "interleaved" if self.vpp > 1 else "1f1b"

    def resolve(self, cluster: Cluster) -> "Layout":
        """This layout with `dp` filled in from the cluster's size."""
        if self.dp:
            return self
        denom = self.tp * self.pp * self.cp
        if cluster.ranks % denom:
            raise LayoutError("tp", f"tp {self.tp} x pp {self.pp} x cp {self.cp} = {denom} does not divide the "
                                    f"{cluster.ranks} ranks of {cluster.short()}")
        return dataclasses.replace(self, dp=cluster.ranks // denom)

    def short(self) -> str:
        parts = [f"TP{self.tp}", f"PP{self.pp}" + (f"x{self.vpp}" if self.vpp > 1 else ""), f"DP{self.dp}"]
        parts += [f"CP{self.cp}"] * (self.cp > 1) + [f"EP{self.ep}"] * (self.ep > 1)
        return " ".join(parts)


def microbatches(layout: Layout, recipe: Recipe) -> int:
    """Micro-batches each DP replica runs per step (gradient accumulation)."""
    return recipe.global_batch // (recipe.micro_batch * layout.dp)


def bubble_fraction(pp: int, vpp: int, m: int) -> float:
    """Idle time of the pipeline as a fraction of the useful time: (pp - 1) / (vpp m)."""
    return (pp - 1) / (vpp * m)


def check_degree(model: Model, cluster: Cluster, recipe: Recipe, field: str, v) -> None:
    """LayoutError naming `field` when degree `v` breaks a rule on its own: the model's shape first
    (heads, KV heads, FFN for tp; seq for cp; layers for pp; experts for ep), then where it must fit."""
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise LayoutError(field, f"must be a positive integer, got {v!r}")
    if field == "tp":
        if model.heads % v:
            raise LayoutError("tp", f"heads {model.heads} are not divisible by tp {v}")
        kv = model.kv_heads
        if (kv % v) if kv >= v else (v % kv):
            raise LayoutError("tp", f"kv_heads {kv} and tp {v}: one must divide the other (KV heads are "
                                    "split, or replicated when tp > kv_heads)")
        if model.ffn % v:
            raise LayoutError("tp", f"ffn {model.ffn} is not divisible by tp {v}")
        R = cluster.ranks_per_node
        if R % v:
            raise LayoutError("tp", f"a TP group stays inside one {cluster.system.name} ({R} ranks): "
                                    f"tp {v} does not divide {R}")
    elif field == "cp" and recipe.seq % v:
        raise LayoutError("cp", f"seq {recipe.seq} is not divisible by cp {v}")
    elif field == "pp" and v > model.layers:
        raise LayoutError("pp", f"pp {v} stages for {model.layers} layers")
    elif field == "ep" and model.experts % v:
        raise LayoutError("ep", f"experts {model.experts} are not divisible by ep {v}" if model.moe else
                                f"{model.name} is dense (no experts): ep must be 1, got {v}")
    if field in ("tp", "pp", "cp") and cluster.ranks % v:
        raise LayoutError(field, f"{field} {v} does not divide the {cluster.ranks} ranks of {cluster.short()}")


def validate(model: Model, cluster: Cluster, layout: Layout, recipe: Recipe) -> Layout:
    """The resolved layout, or LayoutError with the first rule it breaks (memory is checked by plan)."""
    for f in ("tp", "pp", "cp", "ep", "vpp"):
        v = getattr(layout, f)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise LayoutError(f, f"must be a positive integer, got {v!r}")
    for f in ("tp", "cp", "pp", "ep"):
        check_degree(model, cluster, recipe, f, getattr(layout, f))
    lay = layout.resolve(cluster)
    t, world = lay.tp * lay.pp * lay.dp * lay.cp, cluster.ranks
    if t != world:
        raise LayoutError("dp", f"tp {lay.tp} x pp {lay.pp} x dp {lay.dp} x cp {lay.cp} = {t}, but "
                                f"{cluster.short()} has {world} ranks")
    if recipe.sp and (recipe.seq // lay.cp) % lay.tp:
        raise LayoutError("tp", f"sequence parallelism splits each rank's {recipe.seq // lay.cp} tokens over "
                                f"tp {lay.tp}: not divisible")
    stages = lay.pp * lay.vpp
    if stages > model.layers:
        raise LayoutError("pp", f"pp {lay.pp} x vpp {lay.vpp} = {stages} stages for {model.layers} layers")
    if lay.vpp > 1 and (lay.pp == 1 or model.layers % stages):
        raise LayoutError("vpp", f"the interleaved schedule needs pp > 1 and layers {model.layers} divisible "
                                 f"by pp x vpp = {stages}")
    if lay.dp % lay.ep:
        raise LayoutError("ep", f"ep {lay.ep} must divide dp {lay.dp} (DP_exp x EP = DP)")
    per_step = recipe.micro_batch * lay.dp
    if recipe.global_batch % per_step:
        raise LayoutError("global_batch", f"global batch {recipe.global_batch} is not divisible by micro-batch "
                                          f"{recipe.micro_batch} x dp {lay.dp} = {per_step}")
    m = microbatches(lay, recipe)
    if lay.vpp > 1 and m % lay.pp:
        raise LayoutError("global_batch", f"the interleaved schedule needs micro-batches per replica ({m}) "
                                          f"divisible by pp {lay.pp}")
    return lay


# --- Where each group lands ---------------------------------------------------------------------


@dataclass(frozen=True)
class ParallelGroup:
    """One parallel group as the fabric sees it: how many ranks, over how many chips and nodes."""

    dim: str
    size: int
    nodes: int  # instances the group spans
    per_node: int  # members in each of those instances
    chips_per_node: int  # distinct chips holding its members in one instance
    stride: int  # rank distance between members
    ranks: tuple[int, ...] = ()  # the group that holds rank 0

    @property
    def per_chip(self) -> int:
        return self.per_node // self.chips_per_node


class Placement:
    """The rank grid [PP, DP, CP, TP] (or [PP, DP_exp, EP, TP]) laid over a cluster."""

    def __init__(self, cluster: Cluster, layout: Layout):
        self.cluster, self.layout = cluster, layout

    @cached_property
    def strides(self) -> dict[str, int]:
        lay = self.layout
        return {"tp": 1, "cp": lay.tp, "dp": lay.tp * lay.cp, "pp": lay.tp * lay.cp * lay.dp, "ep": lay.tp,
                "dpcp": lay.tp}  # gradients are reduced over DP and CP together

    def size(self, dim: str) -> int:
        return self.layout.dp * self.layout.cp if dim == "dpcp" else getattr(self.layout, dim)

    def coords(self, rank: int) -> dict[str, int]:
        """(pp, dp, cp, tp) indices of a global rank."""
        lay = self.layout
        return {"pp": rank // self.strides["pp"], "dp": rank // self.strides["dp"] % lay.dp,
                "cp": rank // lay.tp % lay.cp, "tp": rank % lay.tp}

    def members(self, dim: str, rank: int = 0) -> list[int]:
        """Global ranks of the `dim` group that holds `rank`."""
        size, st = self.size(dim), self.strides[dim]
        base = rank - (rank // st % size) * st
        return [base + j * st for j in range(size)]

    def group(self, dim: str) -> ParallelGroup:
        R, rpc = self.cluster.ranks_per_node, self.cluster.ranks_per_chip
        ranks = self.members(dim)
        nodes = {r // R for r in ranks}
        chips = {r // rpc for r in ranks if r // R == 0}
        return ParallelGroup(dim, len(ranks), len(nodes), len(ranks) // len(nodes), max(len(chips), 1),
                             self.strides[dim], tuple(ranks))


# --- Enumeration --------------------------------------------------------------------------------


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def enumerate_layouts(model: Model, cluster: Cluster, recipe: Recipe, *, max_pp: int = 32,
                      vpps: tuple[int, ...] = (1, 2), cps: tuple[int, ...] = (1, 2, 4, 8)) -> list[Layout]:
    """Every candidate layout for the cluster (TP inside an instance); validity is checked later."""
    out = []
    world, R = cluster.ranks, cluster.ranks_per_node
    pps = [d for d in _divisors(world) if d <= max_pp]
    for tp, pp, cp, ep, vpp in itertools.product(_divisors(R), pps, cps,
                                                 _divisors(model.experts), vpps):
        if world % (tp * pp * cp) or (vpp > 1 and pp == 1):
            continue
        out.append(Layout(tp=tp, pp=pp, cp=cp, ep=ep, vpp=vpp, dp=world // (tp * pp * cp)))
    return out
