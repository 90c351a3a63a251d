"""Models to serve: their attention (MHA, GQA, MQA, MLA, sliding windows) and MLP (dense or MoE) shapes.

    >>> m = load("llama3-8b")
    >>> m.kv_bytes_per_token(2) // 1024          # K and V, 32 layers x 8 heads x 128, bf16
    128

A model comes from a training preset (trnsim.plan presets) or from a Hugging Face `config.json`
(llama, mistral, mixtral, qwen2/qwen3 and their MoE, deepseek-v2/v3 with MLA, gpt-oss). A config
that breaks a rule raises ServeModelError naming the config's field and its file:line.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

from trnsim.errors import ConfigError
from trnsim.plan import workload


class ServeModelError(ConfigError):
    """A model config that cannot be served: names the field, the rule and the file:line."""


@dataclass(frozen=True)
class LLM:
    """A decoder to serve. Layers are uniform except `dense_layers` (MoE models' first dense layers)
    and `window_layers` (layers whose attention sees only the last `window` tokens)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int  # dense MLP width (also the width of MoE models' dense layers)
    vocab: int
    max_context: int = 0  # max_position_embeddings (0: unknown)
    experts: int = 1
    top_k: int = 1
    expert_ffn: int = 0  # each routed expert's width
    shared_ffn: int = 0  # the always-on shared experts' total width
    dense_layers: int = 0  # MoE models: how many layers (the first ones) keep a dense MLP
    window: int = 0  # sliding-window size in tokens (0: none)
    window_layers: int = 0  # how many layers use the window
    kv_rank: int = 0  # MLA: compressed KV width per token (kv_lora_rank); 0: plain K and V heads
    q_rank: int = 0  # MLA: compressed query width (q_lora_rank; 0: a full query projection)
    rope_dim: int = 0  # MLA: decoupled RoPE key width per token
    v_head_dim: int = 0  # MLA: value width per head (0: head_dim)
    gated_mlp: bool = True
    tied_embeddings: bool = False
    source: str = ""

    @property
    def moe(self) -> bool:
        return self.experts > 1

    @property
    def mla(self) -> bool:
        return self.kv_rank > 0

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.moe else 0

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.gated_mlp else 2

    def kv_width(self, tp: int = 1) -> int:
        """Elements of KV cache per token and layer on one rank: K and V heads (split over TP, replicated
        past kv_heads), or MLA's compressed latent and RoPE key (replicated on every rank)."""
        if self.mla:
            return self.kv_rank + self.rope_dim
        return 2 * max(self.kv_heads // tp, 1) * self.head_dim

    def kv_bytes_per_token(self, dtype_bytes: float, tp: int = 1, context: int | None = None) -> float:
        """KV-cache bytes of one sequence's token on one rank; with `context`, a window layer holds at most
        `window` tokens, so the figure is the average per token of a `context`-token sequence."""
        full = self.layers - self.window_layers
        windowed = self.window_layers * (min(1.0, self.window / context) if context and self.window else 1.0)
        return (full + windowed) * self.kv_width(tp) * dtype_bytes

    def attention_params(self, tp: int = 1) -> float:
        """One layer's attention weights on one rank of a TP group."""
        h, hd, heads = self.hidden, self.head_dim, self.heads // tp
        if self.mla:
            vd = self.v_head_dim or hd
            q = (h * self.q_rank + self.q_rank * heads * hd) if self.q_rank else h * heads * hd
            return q + h * (self.kv_rank + self.rope_dim) + self.kv_rank * heads * (hd - self.rope_dim + vd) + heads * vd * h
        kv = max(self.kv_heads // tp, 1) * hd
        return h * heads * hd * 2 + 2 * h * kv

    def mlp_params(self, tp: int = 1, moe: bool = True, ep: int = 1) -> float:
        """One layer's MLP weights on one rank: dense, or the router, the rank's share of the routed experts
        (over max(tp, ep) ranks: EP inside a TP group splits them by expert and width, the same bytes) and
        the shared experts, split like a dense MLP."""
        if not (moe and self.moe):
            return self.mlp_matrices * self.hidden * self.ffn / tp
        routed = self.mlp_matrices * self.hidden * self.expert_ffn * self.experts / max(tp, ep)
        return self.hidden * self.experts + routed + self.mlp_matrices * self.hidden * self.shared_ffn / tp

    def weights(self, tp: int = 1, ep: int = 1) -> float:
        """Parameters one rank holds: every layer's share, the embedding and LM head split over TP."""
        layers = self.layers * (self.attention_params(tp) + 2 * self.hidden)
        layers += (self.layers - self.moe_layers) * self.mlp_params(tp, moe=False)
        layers += self.moe_layers * self.mlp_params(tp, moe=True, ep=ep)
        tables = (1 if self.tied_embeddings else 2) * math.ceil(self.vocab / tp) * self.hidden
        return layers + tables + self.hidden

    @property
    def params(self) -> float:
        return self.weights()

    @property
    def active_params(self) -> float:
        """Parameters one token touches: its top-k experts instead of all of them."""
        if not self.moe:
            return self.params
        unused = self.moe_layers * self.mlp_matrices * self.hidden * self.expert_ffn * (self.experts - self.top_k)
        return self.params - unused


def load(name_or_path) -> LLM:
    """A Hugging Face config.json (a path), or a trnsim model preset or model file (`trnsim plan models`)."""
    if isinstance(name_or_path, LLM):
        return name_or_path
    if isinstance(name_or_path, workload.Model):
        return from_workload(name_or_path)
    text = os.fspath(name_or_path)
    if text.endswith(".json") and os.path.exists(text):
        with open(text, encoding="utf-8") as fh:
            raw = fh.read()
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as e:
            raise ServeModelError(f"{text}:{e.lineno}: malformed JSON: {e.msg}") from None
        if isinstance(data, dict) and ("model_type" in data or "architectures" in data):
            return from_hf(data, text, raw)
    return from_workload(workload.model(text))


def from_workload(m: workload.Model) -> LLM:
    if m.kind != "decoder":
        raise ServeModelError(f"model {m.name!r}: field 'kind': serving needs a decoder, got {m.kind!r}")
    return LLM(m.name, m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn, m.vocab, 0,  # seq: pretraining only
               experts=m.experts, top_k=m.top_k, expert_ffn=m.ffn if m.moe else 0, gated_mlp=m.gated_mlp,
               tied_embeddings=m.tied_embeddings, source=m.source)


# --- Hugging Face configs -----------------------------------------------------------------------

MODEL_TYPES = ("llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3",
               "gpt_oss")
EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")


def from_hf(cfg: dict, path: str = "config.json", raw: str = "") -> LLM:
    """An LLM from a Hugging Face config; each field is checked where it is read."""
    def fail(key, rule):
        raise ServeModelError(f"{workload._line_of(path, raw, key)}: field {key!r}: {rule}")

    def get(key, default=None, required=False, minimum=1):
        v = cfg.get(key, default)
        if v is None and not required:
            return default
        if v is None:
            fail(key, "is required and missing")
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            fail(key, f"must be an integer >= {minimum}, got {v!r}")
        return v

    kind = cfg.get("model_type")
    if kind not in MODEL_TYPES:
        fail("model_type", f"{kind!r} is not a decoder trnsim knows; known: {', '.join(MODEL_TYPES)}")
    hidden = get("hidden_size", required=True)
    layers = get("num_hidden_layers", required=True)
    heads = get("num_attention_heads", required=True)
    kv_heads = get("num_key_value_heads", heads)
    if heads % kv_heads:
        fail("num_key_value_heads", f"num_attention_heads {heads} is not divisible by num_key_value_heads {kv_heads}")
    head_dim = get("head_dim", 0, minimum=0) or (hidden // heads if not hidden % heads else 0)
    if not head_dim:
        fail("num_attention_heads", f"hidden_size {hidden} is not divisible by {heads} heads and no head_dim is given")
    vocab = get("vocab_size", required=True)
    ffn = get("intermediate_size", required=kind != "deepseek_v3")
    n_exp = next((k for k in EXPERT_KEYS if cfg.get(k) is not None), None)
    experts = get(n_exp, 1) if n_exp else 1
    top_k = 1
    if experts > 1:
        top_key = "num_experts_per_tok" if "num_experts_per_tok" in cfg else "experts_per_token"
        top_k = get(top_key, required=True)
        if top_k > experts:
            fail(top_key, f"{top_k} experts per token exceeds the {experts} experts")
    expert_ffn = get("moe_intermediate_size", ffn) if experts > 1 else 0
    shared = get("n_shared_experts", 0, minimum=0) * expert_ffn if "n_shared_experts" in cfg else 0
    shared = get("shared_expert_intermediate_size", shared, minimum=0)
    dense_layers = get("first_k_dense_replace", 0, minimum=0) if experts > 1 else 0
    if dense_layers > layers:
        fail("first_k_dense_replace", f"{dense_layers} dense layers in a {layers}-layer model")
    if experts > 1 and ("decoder_sparse_step" in cfg or cfg.get("mlp_only_layers")):  # qwen MoE: which layers route
        step = get("decoder_sparse_step", 1)
        only = cfg.get("mlp_only_layers") or []
        if not isinstance(only, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in only):
            fail("mlp_only_layers", f"must list layer indices, got {only!r:.80}")
        dense_layers = sum(1 for i in range(layers) if i in only or (i + 1) % step)
    window, window_layers = _window(cfg, layers, get, fail)
    mla = {}
    if kind.startswith("deepseek") and cfg.get("kv_lora_rank"):
        rope, nope = get("qk_rope_head_dim", required=True), get("qk_nope_head_dim", required=True)
        mla = dict(kv_rank=get("kv_lora_rank"), q_rank=get("q_lora_rank", 0, minimum=0), rope_dim=rope,
                   v_head_dim=get("v_head_dim", required=True))
        head_dim = rope + nope
    act = cfg.get("hidden_act", "silu")
    stem = os.path.splitext(os.path.basename(path))[0]
    folder = os.path.basename(os.path.dirname(os.path.abspath(path)))
    name = cfg.get("_name_or_path") or (folder if stem == "config" and folder else stem)
    return LLM(str(name), layers, hidden, heads, kv_heads, head_dim, ffn or expert_ffn, vocab,
               get("max_position_embeddings", 0, minimum=0), experts=experts, top_k=top_k, expert_ffn=expert_ffn,
               shared_ffn=shared, dense_layers=dense_layers, window=window, window_layers=window_layers,
               gated_mlp=act not in ("gelu", "gelu_new", "gelu_pytorch_tanh"),
               tied_embeddings=bool(cfg.get("tie_word_embeddings", False)), source=f"{path} ({kind})", **mla)


def _window(cfg: dict, layers: int, get, fail) -> tuple[int, int]:
    """(window, layers using it) from sliding_window and layer_types (gpt-oss) or use_sliding_window (qwen)."""
    window = get("sliding_window", 0, minimum=0)
    if not window or cfg.get("use_sliding_window") is False:
        return 0, 0
    types = cfg.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers:
            fail("layer_types", f"must list one type per layer ({layers}), got {types!r:.80}")
        return window, sum(t == "sliding_attention" for t in types)
    if "max_window_layers" in cfg:  # qwen2: layers from max_window_layers on use the window
        return window, layers - min(get("max_window_layers", 0, minimum=0), layers)
    return window, layers
