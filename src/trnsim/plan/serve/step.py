"""One serving layout priced per op: prefill (context encoding) and decode (token generation) steps,
memory per core, compiled buckets, and cost per million output tokens.

    >>> p = plan("llama3-8b", "trn2.48xlarge", tp=8, batch=2, input_len=512, output_len=128)
    >>> round(p.ttft_ms), round(p.tpot_ms, 1)   # doctest: +SKIP

Each op of a step runs on one rank of the TP group and is priced by the planner's per-op path
(trnsim.plan.compute, simulated kernels of the rank's NeuronCore generation):

    matmul     up to 128 token rows (decode, small prefills): a weight stream, TensorE sweeping the weights
               once at its peak (a matmul of 1 row takes the PE array as long as one of 128) against the
               bytes through the simulated HBM stream rate; more rows: the simulated matmul bucket, or
               the bytes through the stream rate if slower
    attention  prefill: the simulated flash-attention bucket over the keys each new token sees (causal,
               windowed); decode: the KV cache read through the stream rate against the TensorE time of
               128 padded queries
    collective the TP all-reduces (two per layer), MoE all-to-alls and the logits all-gather, timed by
               trnsim.fabric on the instance's topology with in-graph constants (specs/data/serving.toml)

A step adds the engine's fixed cost per model execution. GPUs have no NeuronCore: their ops keep the
planner's roofline at a declared matmul efficiency, their collectives its alpha-beta model.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from trnsim import fabric, specs
from trnsim.pure import pure
from trnsim.specs import serving
from trnsim.specs.records import UnsupportedDTypeError
from trnsim.plan import efficiency as eff
from trnsim.plan.comm import AlphaBeta
from trnsim.plan.compute import SimulatedCompute
from trnsim.plan.layout import Cluster, ParallelGroup, LayoutError
from trnsim.plan.serve.model import LLM, load
from trnsim.plan.workload import StepOp

GiB = 2.0**30
WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0, "int8": 1.0, "mxfp8": 1.0 + 1 / 32, "mxfp4": 0.5 + 1 / 32}  # MX: +1 scale byte per 32
COMPUTE_DTYPE = {"bf16": "bf16", "fp8": "fp8", "int8": "bf16", "mxfp8": "mxfp8", "mxfp4": "mxfp4"}  # int8: dequantized
KV_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0}


class ServeError(LayoutError):
    """A serving layout that cannot run: names the field, the rule and the numbers."""


@dataclass(frozen=True)
class Speculation:
    """Speculative decoding: `tokens` drafted per step, each accepted with probability `acceptance`; the
    drafter is an EAGLE head (one decoder layer of the target's width) or a `draft` model."""

    tokens: int
    acceptance: float
    draft: str = "eagle"

    @property
    def accepted_per_step(self) -> float:
        """Mean tokens a verification step emits: the accepted prefix plus the target's own token."""
        a, k = self.acceptance, self.tokens
        return float(k + 1) if a >= 1 else (1 - a ** (k + 1)) / (1 - a)

    @classmethod
    def parse(cls, text: str) -> "Speculation":
        """`eagle:K:ACCEPT` or `MODEL:K:ACCEPT` (a draft model preset or config.json)."""
        parts = str(text).rsplit(":", 2)
        try:
            draft, k, a = parts[0], int(parts[1]), float(parts[2])
        except (IndexError, ValueError):
            raise ServeError("speculation", f"expected eagle:TOKENS:ACCEPTANCE or DRAFT:TOKENS:ACCEPTANCE "
                                            f"(e.g. eagle:5:0.74), got {text!r}") from None
        if k < 1 or not 0 <= a <= 1:
            raise ServeError("speculation", f"tokens must be >= 1 and acceptance in [0, 1], got {k} and {a}")
        return cls(k, a, draft)


@dataclass(frozen=True)
class Setup:
    """The serving knobs: layout, batch, request lengths, dtypes, engine."""

    tp: int = 1
    dp: int = 1
    ep: int = 1
    cp: int = 1
    lnc: int | None = None
    batch: int = 1
    input_len: int = 128
    output_len: int = 128
    weights: str = "bf16"
    kv_dtype: str = "bf16"
    speculation: Speculation | None = None
    prefix_hit: float = 0.0
    engine: str = ""
    max_context: int = 0  # largest compiled sequence length (0: input + output)

    def __post_init__(self):
        for f in ("tp", "dp", "ep", "cp", "batch", "input_len", "output_len"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ServeError(f, f"must be a positive integer, got {v!r}")
        if self.weights not in WEIGHT_BYTES:
            raise ServeError("weights", f"must be one of {', '.join(WEIGHT_BYTES)}, got {self.weights!r}")
        if self.kv_dtype not in KV_BYTES:
            raise ServeError("kv_dtype", f"must be one of {', '.join(KV_BYTES)}, got {self.kv_dtype!r}")
        if not 0 <= self.prefix_hit < 1:
            raise ServeError("prefix_hit", f"must be in [0, 1), got {self.prefix_hit!r}")
        if self.max_context and self.max_context < self.input_len + self.output_len:
            raise ServeError("max_context", f"{self.max_context} tokens cannot hold input {self.input_len} + output "
                                            f"{self.output_len}")
        if not self.engine:
            object.__setattr__(self, "engine", serving.defaults()["engine"])
        serving.engine(self.engine)  # an unknown engine is named here

    @property
    def context(self) -> int:
        return self.max_context or self.input_len + self.output_len


# --- Buckets ------------------------------------------------------------------------------------


def buckets(max_len: int, smallest: int | None = None) -> tuple[int, ...]:
    """Compiled sequence lengths: powers of two from the smallest bucket, then the maximum itself."""
    lo = smallest or int(serving.defaults()["bucket_min"])
    out, b = [], lo
    while b < max_len:
        out.append(b)
        b *= 2
    return tuple(out + [max_len])


def bucket_of(n: int, compiled: tuple[int, ...]) -> int:
    """The smallest compiled length that holds `n` tokens."""
    for b in compiled:
        if b >= n:
            return b
    raise ServeError("input_len", f"{n} tokens exceed the largest compiled bucket {compiled[-1]}")


# --- Pricing one op on one rank -----------------------------------------------------------------


def _chip_ratio(chip, dtype: str) -> float:
    """BF16 peak over `dtype`'s peak: how much faster the matmul datapath runs this dtype (the NeuronCore's
    MACs per PE-cycle on Trainium, the chip's rating on a GPU)."""
    unit = chip.core or chip
    try:
        return unit.peak_flops("bf16") / unit.peak_flops(dtype)
    except UnsupportedDTypeError as e:
        raise ServeError("weights", str(e)) from None


@pure(16)
def stream_rate(target: str, lnc: int) -> float:
    """HBM bytes/s one rank moves in steady streaming (the simulated stream kernel's largest bucket)."""
    core = specs.neuroncore(target)
    big = eff.elementwise_bucket(1e12, core.partitions)
    return eff.efficiency(target, "stream", big) * eff.peak(core, "stream") * lnc


_COMPUTE = SimulatedCompute()


def op_ns(op: StepOp, cluster: Cluster, dtype: str = "bf16", decode: bool = False) -> float:
    """Time of one op on one rank of `cluster` (see the module docstring)."""
    chip = cluster.system.chip
    if chip.core is None:
        return _COMPUTE.op_time(op, cluster, dtype)
    target, lnc = chip.core.target, cluster.lnc
    hbm = op.bytes / stream_rate(target, lnc) * 1e9
    peak = chip.core.peak_flops("bf16") * lnc / _chip_ratio(chip, dtype)
    pe_rows = chip.core.pe_rows  # tokens a TensorE matmul pass covers at once
    if op.kind == "matmul" and op.m <= pe_rows:  # a weight stream: TensorE sweeps it once at its peak
        return max(2.0 * pe_rows * op.k * op.n * op.batch / peak * 1e9, hbm)
    if op.kind == "matmul":
        return max(_COMPUTE.op_time(op, cluster, "bf16") * _chip_ratio(chip, dtype), hbm)
    if op.kind == "attention" and decode:
        queries = math.ceil(op.m / pe_rows) * pe_rows
        return max(4.0 * queries * op.k * op.n * op.batch / (chip.core.peak_flops("bf16") * lnc) * 1e9, hbm)
    return _COMPUTE.op_time(op, cluster, "bf16")


# --- Collectives inside a graph -----------------------------------------------------------------


class _InGraph(fabric.Cluster):
    """The fabric's cluster, its collectives driven from inside a compiled graph (serving.toml)."""

    @property
    def constants(self):
        k, c = super().constants, serving.collective()
        share = c.pop("bandwidth_share")
        return dataclasses.replace(k, **c, hbm_efficiency=k.hbm_efficiency * share,
                                   link_efficiency=k.link_efficiency * share, policy="runtime")


@pure(64)
def _in_graph(system_key: str, nodes: int, lnc: int) -> _InGraph:
    base = fabric.cluster(specs.system(system_key), nodes=nodes, lnc=lnc)
    return _InGraph(base.system, base.nodes, base.lnc)


@pure(4096)
def _coll(op: str, nbytes: float, ranks: tuple[int, ...], system_key: str, nodes: int, lnc: int) -> float:
    return fabric.collective_time(op, nbytes, list(ranks), _in_graph(system_key, nodes, lnc))[0]


def collective_ns(op: str, nbytes: float, ranks: tuple[int, ...], cluster: Cluster) -> float:
    """One collective over `ranks` inside a step's graph; the planner's alpha-beta model on GPUs."""
    if len(ranks) <= 1 or nbytes <= 0:
        return 0.0
    if cluster.system.chip.is_neuron:
        return _coll(op, float(nbytes), ranks, cluster.system.key, cluster.nodes, cluster.lnc)
    R = cluster.ranks_per_node
    nodes = len({r // R for r in ranks})
    g = ParallelGroup("tp", len(ranks), nodes, len(ranks) // nodes, 1, 1, ranks)
    return AlphaBeta().collective_time(op, nbytes, g, cluster)


# --- The ops of one step ------------------------------------------------------------------------


def _mm(name, m, k, n, wb, batch=1) -> StepOp:
    """A matmul whose [k, n] operand is weights of `wb` bytes per element (activations bf16)."""
    return StepOp(name, "matmul", int(m), int(k), int(n), batch, 0.0, float(batch * (2 * m * k + wb * k * n + 2 * m * n)))


def experts_hit(tokens: float, experts: int, top_k: int) -> float:
    """Expected distinct experts a batch of tokens routes to (uniform routing)."""
    return experts * (1 - (1 - top_k / experts) ** tokens)


def attended(prefix: int, new: int, window: int) -> float:
    """Keys the `new` tokens after `prefix` cached ones attend to in all, each seeing itself, the tokens before
    it and nothing further back than `window`: the sum of min(window, prefix + i + 1) over i < new."""
    lo, hi = prefix + 1, prefix + new
    if hi <= window:
        return (lo + hi) * new / 2
    if lo >= window:
        return float(window * new)
    return (lo + window) * (window - lo + 1) / 2 + window * (hi - window)


def layer_ops(m: LLM, s: Setup, seqs: int, new: int, ctx: int, moe: bool, decode: bool, groups: int = 1,
              prefix: int | None = None) -> list[StepOp]:
    """One layer's ops on one rank: `seqs` sequences of its attention group, each adding `new` tokens over
    `ctx` keys of context (the layer's window where it has one; `prefix` tokens were cached before the new
    ones, default ctx - new); the experts see the tokens of all `groups` attention groups of the EP group."""
    prefix = ctx - new if prefix is None else prefix
    tp, wb = s.tp, WEIGHT_BYTES[s.weights]
    kvb = KV_BYTES[s.kv_dtype]
    T, h, hd = seqs * new, m.hidden, m.head_dim
    heads = m.heads // tp
    ops = [StepOp("norm_attn", "elementwise", elems=T * h, bytes=4.0 * T * h)]
    if m.mla:
        vd = m.v_head_dim or hd
        if m.q_rank:
            ops += [_mm("q_a", T, h, m.q_rank, wb), _mm("q_b", T, m.q_rank, heads * hd, wb)]
        else:
            ops.append(_mm("q", T, h, heads * hd, wb))
        ops += [_mm("kv_a", T, h, m.kv_rank + m.rope_dim, wb),
                _mm("kv_b", T, m.kv_rank, heads * (hd - m.rope_dim + vd), wb)]
        width = m.kv_rank + m.rope_dim  # attention runs over the compressed cache (weights absorbed)
        attn_heads, kv_groups, q_per, o_in = heads, 1, heads, heads * vd
    else:
        kv = max(m.kv_heads // tp, 1)
        ops.append(_mm("qkv", T, h, (heads + 2 * kv) * hd, wb))
        width, attn_heads, kv_groups, q_per, o_in = hd, heads, kv, heads // kv, heads * hd
    kv_read = seqs * ctx * m.kv_width(tp) * kvb
    if decode:  # each KV group's queries (its heads x new tokens) read the group's cache once
        ops.append(StepOp("attention", "attention", q_per * new, width, ctx, seqs * kv_groups,
                      float(seqs * attn_heads * new * ctx), kv_read + 4.0 * T * heads * hd))
    else:
        share = attended(prefix, new, ctx) / (new * ctx)  # causal (and windowed): the keys each new token sees
        ops.append(StepOp("attention", "attention", new, width, ctx, seqs * attn_heads, float(seqs * attn_heads * new * ctx) * share,
                      kv_read + 4.0 * T * heads * hd, share))
    ops.append(_mm("o_proj", T, o_in, h, wb))
    ops.append(StepOp("norm_mlp", "elementwise", elems=2 * T * h, bytes=8.0 * T * h))
    if moe:
        f = m.expert_ffn // max(1, tp // s.ep)  # EP inside TP splits each expert's width over tp / ep ranks
        routed = T * groups
        hit = experts_hit(routed, m.experts, m.top_k) / s.ep  # this rank's experts that receive tokens
        rows = math.ceil(routed * m.top_k / m.experts)  # tokens per expert, balanced routing
        ops.append(_mm("router", T, h, m.experts, 2))
        ops.append(_mm("expert_up", rows, h, (m.mlp_matrices - 1) * f, wb, batch=max(1, round(hit))))
        ops.append(_mm("expert_down", rows, f, h, wb, batch=max(1, round(hit))))
        if m.shared_ffn:
            sf = m.shared_ffn // tp
            ops += [_mm("shared_up", T, h, (m.mlp_matrices - 1) * sf, wb), _mm("shared_down", T, sf, h, wb)]
    else:
        f = m.ffn // tp
        ops.append(_mm("mlp_up", T, h, (m.mlp_matrices - 1) * f, wb))
        ops.append(StepOp("mlp_act", "elementwise", elems=T * f, bytes=float(T * f * 2 * 3)))
        ops.append(_mm("mlp_down", T, f, h, wb))
    return ops


@dataclass(frozen=True)
class StepTime:
    """One model execution: ns per part (compute, tp_comm, ep_comm, cp_comm, head, overhead) and its ops."""

    parts: dict[str, float]
    ops: tuple[dict, ...] = ()

    @property
    def ns(self) -> float:
        return sum(self.parts.values())


def attention_groups(s: Setup) -> int:
    """TP groups that share one EP group: an EP group wider than TP spans several, each attending for its own
    sequences (data-parallel attention), their tokens exchanged by all-to-alls around the experts."""
    return max(1, s.ep // s.tp)


def replica_ranks(s: Setup) -> int:
    """Ranks of one model replica (before context parallelism)."""
    return max(s.tp, s.ep)


def step_time(m: LLM, s: Setup, cluster: Cluster, seqs: int, new: int, ctx: int, decode: bool) -> StepTime:
    """One forward of `seqs` sequences adding `new` tokens each over `ctx` tokens of (bucketed) context."""
    dtype = COMPUTE_DTYPE[s.weights]
    groups = attention_groups(s)
    seqs = math.ceil(seqs / groups)  # each attention group of an EP group wider than TP runs its share
    tp_ranks = tuple(range(s.tp))
    ep_ranks = tuple(range(s.ep))
    cp_ranks = tuple(range(0, replica_ranks(s) * s.cp, replica_ranks(s)))
    T = seqs * new
    # context parallelism: prefill splits the new tokens over cp groups, decode splits the cached context
    T_local, ctx_local = (T, math.ceil(ctx / s.cp)) if decode else (math.ceil(T / s.cp), ctx)
    new_local = new if decode else math.ceil(new / s.cp)
    # window layers are counted as the last ones and dense layers as the first: the counts are what matter
    full, dense = m.layers - m.window_layers, m.layers - m.moe_layers
    kinds = [(n, windowed, moe) for windowed, a0, an in ((False, 0, full), (True, full, m.window_layers))
             for moe, b0, bn in ((False, 0, dense), (True, dense, m.moe_layers))
             if (n := max(0, min(a0 + an, b0 + bn) - max(a0, b0)))]
    parts = dict(compute=0.0, tp_comm=0.0, ep_comm=0.0, cp_comm=0.0, head=0.0, overhead=0.0)
    rows = []
    for n, windowed, moe in kinds:
        c = min(ctx_local, m.window) if windowed else ctx_local
        ops = layer_ops(m, s, seqs, new_local, c, moe, decode, groups, prefix=max(0, ctx_local - new_local))
        times = [op_ns(op, cluster, dtype, decode) for op in ops]
        parts["compute"] += n * sum(times)
        act = T_local * m.hidden * 2
        ar = collective_ns("all_reduce", act, tp_ranks, cluster)
        parts["tp_comm"] += n * 2 * ar
        if moe and groups > 1:  # dispatch and combine: each TP rank sends its 1/tp of its group's tokens
            parts["ep_comm"] += n * 2 * collective_ns("all_to_all", act * m.top_k / s.tp, ep_ranks, cluster)
        if s.cp > 1:
            # decode gathers each group's partial attention outputs, prefill the other groups' K and V
            nbytes = (T * m.heads // s.tp * m.head_dim * 4) if decode else T * m.kv_width(s.tp) * KV_BYTES[s.kv_dtype]
            parts["cp_comm"] += n * collective_ns("all_gather", nbytes, cp_ranks, cluster)
        rows += [{"name": op.name, "kind": op.kind, "m": op.m, "k": op.k, "n": op.n, "batch": op.batch, "flops": op.flops,
                  "bytes": op.bytes, "ns": t, "layers": n} for op, t in zip(ops, times)]
        rows.append({"name": "tp_all_reduce", "kind": "collective", "m": 0, "k": 0, "n": 0, "batch": 1, "flops": 0.0,
                     "bytes": act, "ns": 2 * ar, "layers": n})
    out_rows = seqs * (new if decode else 1)  # prefill emits one token per sequence
    v = math.ceil(m.vocab / s.tp)
    head = [StepOp("final_norm", "elementwise", elems=out_rows * m.hidden, bytes=4.0 * out_rows * m.hidden),
            _mm("logits", out_rows, m.hidden, v, WEIGHT_BYTES[s.weights])]
    parts["head"] = sum(op_ns(op, cluster, dtype, decode) for op in head)
    parts["head"] += collective_ns("all_gather", out_rows * v * s.tp * 2, tp_ranks, cluster)
    parts["overhead"] = serving.engine(s.engine)["decode_overhead" if decode else "prefill_overhead"]
    return StepTime(parts, tuple(rows))


# --- A layout: validation, memory, TTFT, TPOT, throughput, cost -----------------------------------


def validate(m: LLM, s: Setup, system) -> Cluster:
    """The cluster the layout needs, or ServeError naming the first rule it breaks."""
    probe = Cluster(system, 1, s.lnc)
    _chip_ratio(system.chip, COMPUTE_DTYPE[s.weights])  # a weight format the chip cannot multiply is refused here
    if m.max_context and s.context > m.max_context:
        raise ServeError("input_len", f"input {s.input_len} + output {s.output_len} = {s.context} tokens exceed "
                                      f"{m.name}'s {m.max_context}-token context (max_position_embeddings)")
    if m.heads % s.tp:
        raise ServeError("tp", f"{m.name}'s {m.heads} attention heads are not divisible by tp {s.tp}")
    if not m.mla and (m.kv_heads % s.tp if m.kv_heads >= s.tp else s.tp % m.kv_heads):
        raise ServeError("tp", f"kv_heads {m.kv_heads} and tp {s.tp}: one must divide the other (KV heads are split, "
                               "or replicated when tp > kv_heads)")
    if m.moe:
        if (s.tp % s.ep if s.ep <= s.tp else s.ep % s.tp) or m.experts % s.ep:
            raise ServeError("ep", f"ep {s.ep} and tp {s.tp}: one must divide the other, and ep the {m.experts} experts")
        if s.ep < s.tp and m.expert_ffn % (s.tp // s.ep):
            raise ServeError("tp", f"expert width {m.expert_ffn} is not divisible by tp / ep = {s.tp // s.ep}")
    elif s.ep != 1:
        raise ServeError("ep", f"{m.name} is dense (no experts): ep must be 1, got {s.ep}")
    if m.ffn % s.tp and (not m.moe or m.dense_layers):
        raise ServeError("tp", f"ffn {m.ffn} is not divisible by tp {s.tp}")
    R, width = probe.ranks_per_node, replica_ranks(s)
    if R % width:
        field = "tp" if width == s.tp else "ep"
        raise ServeError(field, f"a TP or EP group stays inside one {system.name} ({R} ranks at LNC {probe.lnc}): "
                                f"{field} {width} does not divide {R}")
    return Cluster(system, math.ceil(width * s.cp * s.dp / R), s.lnc)


def memory(m: LLM, s: Setup, cluster: Cluster) -> dict[str, float]:
    """Bytes per rank: weights, the KV cache of `batch` sequences at the largest compiled context, and the
    activations of the largest prefill (its hidden states, QKV, MLP intermediates and logits, bf16)."""
    seqs = math.ceil(s.batch / attention_groups(s))
    kv = seqs * m.kv_bytes_per_token(KV_BYTES[s.kv_dtype], s.tp, s.context) * s.context / s.cp
    T = seqs * bucket_of(s.input_len, buckets(s.context)) / s.cp
    width = 4 * m.hidden + (m.heads // s.tp + 2 * max(m.kv_heads // s.tp, 1)) * m.head_dim
    width += 3 * max(m.ffn, m.expert_ffn * m.top_k + m.shared_ffn) // s.tp
    act = 2.0 * T * width + 4.0 * s.batch * math.ceil(m.vocab / s.tp)
    return {"weights": m.weights(s.tp, s.ep) * WEIGHT_BYTES[s.weights], "kv_cache": kv, "activations": act}


@dataclass(frozen=True)
class ServePlan:
    """One serving layout evaluated: latency, throughput, memory per rank, buckets and cost."""

    model: LLM
    cluster: Cluster
    setup: Setup
    ttft_ns: float
    tpot_ns: float
    prefill: StepTime
    decode: StepTime  # at the largest context bucket
    memory: dict[str, float]
    capacity: float  # usable HBM bytes per rank
    kv_tokens: int  # tokens of KV cache that fit beside the weights and activations
    buckets: dict[str, dict] = field(default_factory=dict)

    @property
    def ttft_ms(self) -> float:
        return self.ttft_ns * 1e-6

    @property
    def tpot_ms(self) -> float:
        return self.tpot_ns * 1e-6

    @property
    def replicas(self) -> int:
        return self.setup.dp

    @property
    def request_ns(self) -> float:
        """End-to-end time of one request of the batch: its prompt, then its other output tokens."""
        return self.ttft_ns + (self.setup.output_len - 1) * self.tpot_ns

    @property
    def output_tokens_per_s(self) -> float:
        """Every replica running batches of `batch` requests back to back."""
        return self.replicas * self.setup.batch * self.setup.output_len / (self.request_ns * 1e-9)

    @property
    def usd_per_hour(self) -> float | None:
        p = self.cluster.system.price_usd_per_hour
        return p * self.cluster.nodes if p else None

    @property
    def usd_per_million_output_tokens(self) -> float | None:
        return self.usd_per_hour / 3600 / self.output_tokens_per_s * 1e6 if self.usd_per_hour else None

    @property
    def timed_by(self) -> dict[str, str]:
        """Which models priced the plan: GPUs have no simulated core nor fabric, and the engine's launch
        costs were fitted on Neuron."""
        neuron = self.cluster.system.chip.is_neuron
        return {"compute": "simulated kernels" if neuron else "roofline at a declared matmul efficiency",
                "comm": "fabric, in-graph constants" if neuron else "alpha-beta",
                "engine": self.setup.engine + ("" if neuron else " launch costs (fitted on Neuron; no GPU serving figure "
                                                                 "is calibrated)")}

    def to_dict(self) -> dict:
        s = self.setup
        return {
            "model": self.model.name, "system": self.cluster.system.name, "nodes": self.cluster.nodes,
            "lnc": self.cluster.lnc, "engine": s.engine,
            "layout": {"tp": s.tp, "dp": s.dp, "ep": s.ep, "cp": s.cp}, "batch": s.batch,
            "input_len": s.input_len, "output_len": s.output_len, "weights": s.weights, "kv_dtype": s.kv_dtype,
            "speculation": dataclasses.asdict(s.speculation) if s.speculation else None, "prefix_hit": s.prefix_hit,
            "ttft_ms": self.ttft_ms, "tpot_ms": self.tpot_ms, "e2e_ms": self.request_ns * 1e-6,
            "output_tokens_per_s": self.output_tokens_per_s,
            "prefill_ms": {k: v * 1e-6 for k, v in self.prefill.parts.items()},
            "decode_ms": {k: v * 1e-6 for k, v in self.decode.parts.items()},
            "memory_gib": {k: v / GiB for k, v in self.memory.items()}, "capacity_gib": self.capacity / GiB,
            "kv_tokens_fit": self.kv_tokens, "buckets": self.buckets,
            "usd_per_hour": self.usd_per_hour, "price_status": self.cluster.system.price_status,
            "usd_per_million_output_tokens": self.usd_per_million_output_tokens,
            "timed_by": self.timed_by, "decode_ops": list(self.decode.ops),
        }


def drafter(m: LLM, s: Setup) -> tuple[LLM, Setup]:
    """The speculation's draft model and its setup: an EAGLE head is one decoder layer of the target's width
    with its LM head, run inside the target's graphs; a draft model runs its own graphs on the same ranks."""
    if s.speculation.draft == "eagle":
        return dataclasses.replace(m, name=f"{m.name}-eagle", layers=1, window=0, window_layers=0, experts=1, top_k=1,
                                   expert_ffn=0, shared_ffn=0, dense_layers=0, ffn=m.ffn or m.expert_ffn), s
    return load(s.speculation.draft), dataclasses.replace(s, speculation=None, ep=1)


def _own(t: StepTime, s: Setup) -> float:
    """A drafter's step time, less the launch it shares with the target's graph (EAGLE)."""
    return t.ns - (t.parts["overhead"] if s.speculation.draft == "eagle" else 0.0)


def _speculative(m: LLM, s: Setup, cluster: Cluster, ctx: int) -> float:
    """ns of one speculative step: the drafter's k tokens, then the target verifying k + 1 at once."""
    verify = step_time(m, s, cluster, s.batch, s.speculation.tokens + 1, ctx, decode=True).ns
    d, ds = drafter(m, s)
    return verify + s.speculation.tokens * _own(step_time(d, ds, cluster, s.batch, 1, ctx, decode=True), s)


def kv_room(m: LLM, s: Setup, cluster: Cluster, mem: dict | None = None) -> tuple[float, float, float]:
    """(usable HBM bytes per rank, KV bytes per token on a rank, bytes left for the KV cache)."""
    mem = mem or memory(m, s, cluster)
    capacity = cluster.hbm_bytes_per_rank * (1 - serving.defaults()["hbm_reserved"])
    per_token = m.kv_bytes_per_token(KV_BYTES[s.kv_dtype], s.tp, s.context) / s.cp
    return capacity, per_token, capacity - mem["weights"] - mem["activations"]


def plan(model, system, **knobs) -> ServePlan:
    """Evaluate one serving layout: `plan("llama3-70b", "trn2.48xlarge", tp=64, batch=4, input_len=1024)`.

    `knobs` are Setup's fields; `dp=0` fills the instance with replicas.
    """
    m = load(model)
    sysspec = specs.system(system) if isinstance(system, str) else system
    if knobs.get("dp", 1) == 0:
        probe = Cluster(sysspec, 1, knobs.get("lnc"))
        width = max(knobs.get("tp", 1), knobs.get("ep", 1)) * knobs.get("cp", 1)
        knobs["dp"] = max(1, probe.ranks_per_node // width)
    s = Setup(**knobs)
    cluster = validate(m, s, sysspec)
    mem = memory(m, s, cluster)
    capacity, per_token, room = kv_room(m, s, cluster, mem)
    if room < mem["kv_cache"]:
        used = sum(mem.values())
        raise ServeError("batch", f"{used / GiB:.2f} GiB per rank (weights {mem['weights'] / GiB:.2f}, KV cache "
                                  f"{mem['kv_cache'] / GiB:.2f} for {math.ceil(s.batch / attention_groups(s))} x "
                                  f"{s.context} tokens, activations "
                                  f"{mem['activations'] / GiB:.2f}) exceeds the {capacity / GiB:.2f} GiB usable per rank "
                                  f"of {cluster.system.name}; {max(0, int(room / per_token)):,} tokens of KV fit "
                                  f"(batch {max(0, int(room / per_token) // s.context)} at this context): lower "
                                  "--batch, raise --tp, or use --kv-dtype fp8")
    compiled = buckets(s.context)
    # prefill: the uncached part of the prompt padded to a bucket, over the prompt's context bucket
    cached = int(s.input_len * s.prefix_hit)
    new_b, ctx_b = bucket_of(s.input_len - cached, compiled), bucket_of(s.input_len, compiled)
    one = step_time(m, s, cluster, s.batch, new_b, max(ctx_b, new_b), decode=False)  # the batch's prompts together
    ttft = one.ns
    if s.speculation:  # the drafter encodes the prompt too
        d, ds = drafter(m, s)
        ttft += _own(step_time(d, ds, cluster, s.batch, new_b, max(ctx_b, new_b), False), s)
    # decode: each output token's step runs at its context's bucket; speculation emits several per step
    accepted = s.speculation.accepted_per_step if s.speculation else 1.0
    # the decode step emitting output token j + 1 holds the prompt, j tokens and itself
    contexts = [min(s.input_len + j + 1, s.context) for j in range(1, max(s.output_len, 2))]
    counts: dict[int, int] = {}  # decode steps per context bucket
    for L in contexts:
        b = bucket_of(L, compiled)
        counts[b] = counts.get(b, 0) + 1
    steps = {}
    for b in counts:
        steps[b] = _speculative(m, s, cluster, b) if s.speculation else step_time(m, s, cluster, s.batch, 1, b, True).ns
    tpot = sum(counts[b] * steps[b] for b in counts) / sum(counts.values()) / accepted
    top = step_time(m, s, cluster, s.batch, 1, max(counts), True)
    padded_prompt = (new_b - (s.input_len - cached)) / new_b
    padded_kv = sum((bucket_of(L, compiled) - L) / bucket_of(L, compiled) for L in contexts) / len(contexts)
    bucket_info = {"compiled": list(compiled), "prefill": new_b, "prefill_padding": padded_prompt,
                   "decode": sorted(counts), "decode_padding": padded_kv}
    return ServePlan(m, cluster, s, ttft, tpot, one, top, mem, capacity, int(room / per_token), bucket_info)
