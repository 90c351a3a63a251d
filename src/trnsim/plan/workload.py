"""Transformer workloads: their shapes, their ops on one rank, their parameters and AWS's FLOP count.

    >>> m = model("llama3-8b")
    >>> round(m.params / 1e9, 2)
    8.03

A model comes from a preset (presets.toml, each with its published source) or from a TOML, JSON
or YAML file holding the same fields, optionally on top of a preset (`preset = "llama3-8b"`).
Bad fields raise WorkloadError naming the field and the file:line it came from.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import re
import tomllib
from dataclasses import dataclass
from importlib import resources

import yaml

from trnsim.errors import ConfigError, UnknownNameError, read_user_file
from trnsim.pure import pure
from trnsim.specs import training


class WorkloadError(ConfigError):
    """A model description that breaks a rule: names the field, the numbers and the file:line."""


@dataclass(frozen=True)
class Model:
    """A dense or mixture-of-experts transformer, decoder-only or encoder (BERT-style)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int  # per expert for MoE
    vocab: int
    seq: int  # pretraining sequence length: the planner's default
    kind: str = "decoder"  # "decoder" | "encoder"
    experts: int = 1
    top_k: int = 1
    gated_mlp: bool = True  # SwiGLU (3 FFN matrices) or GELU (2)
    tied_embeddings: bool = False
    source: str = ""

    def __post_init__(self):
        check(self)

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def moe(self) -> bool:
        return self.experts > 1

    @property
    def ffn_matrices(self) -> int:
        return 3 if self.gated_mlp else 2

    def layer_params(self, tp: int = 1, ep: int = 1) -> float:
        """Parameters of one layer held by one rank of a TP group of `tp` (and EP group of `ep`)."""
        h, hd = self.hidden, self.head_dim
        kv_local = max(self.kv_heads // tp, 1) * hd  # KV heads are replicated when tp > kv_heads
        attn = h * (self.heads * hd // tp) * 2 + 2 * h * kv_local
        mlp = self.ffn_matrices * h * (self.ffn // tp) * (self.experts // ep)
        router = h * self.experts if self.moe else 0
        return attn + mlp + router + 2 * h  # two norms, replicated

    @property
    def embedding_params(self) -> float:
        return self.vocab * self.hidden

    @property
    def params(self) -> float:
        head = 0 if self.tied_embeddings else self.embedding_params
        return self.layers * self.layer_params() + self.embedding_params + head + self.hidden


# --- AWS's MFU formula (reference/multichip-and-training.md 4.1) -------------------------------


def aws_flops_per_sequence(m: Model, seq: int | None = None) -> float:
    """Model FLOPs of one sequence as NxDT's llama_perf_estimate counts them: 3 x forward.

    Forward = L x (attention + MLP) + 2Vhs (embedding) + 2Vhs (logits); attention = Q and O
    projections 2h^2s each, K and V projections sized by the KV heads, QK^T 2s^2h, softmax
    6 heads s^2, SV 2s^2h; MLP = 3 x 2his. Beyond Llama: a GELU MLP counts 2 matrices, and an
    MoE layer counts its top-k experts.
    """
    s, h, v = seq or m.seq, m.hidden, m.vocab
    kv = m.kv_heads * m.head_dim
    attention = 2 * h * h * s * 2 + 2 * h * kv * s * 2 + 2 * s * s * h + 6 * m.heads * s * s + 2 * s * s * h
    mlp = m.ffn_matrices * 2 * h * m.ffn * s * m.top_k
    return 3 * (m.layers * (attention + mlp) + 2 * v * h * s + 2 * v * h * s)


# --- Ops on one rank ----------------------------------------------------------------------------


@dataclass(frozen=True)
class StepOp:
    """One piece of work on one rank: a matmul, fused attention or elementwise pass.

    Matmuls are `batch` products of [m, k] x [k, n]; attention is `batch` heads of QK^T
    ([m, k] x [k, n]) then PV, so twice the FLOPs, of which a causal mask leaves `share` to
    compute; `elems` counts elementwise results (softmax exponentials for attention) and `bytes`
    the HBM traffic.
    """

    name: str
    kind: str  # "matmul" | "attention" | "elementwise"
    m: int = 0
    k: int = 0
    n: int = 0
    batch: int = 1
    elems: float = 0.0
    bytes: float = 0.0
    share: float = 1.0  # attention: share of the score matrix computed (a causal kernel skips the rest)

    @property
    def flops(self) -> float:
        per = 2.0 * self.m * self.k * self.n * self.batch
        return 2 * per * self.share if self.kind == "attention" else per

    def backward(self) -> tuple["StepOp", ...]:
        """The ops of this op's backward pass: data and weight gradients for a matmul."""
        if self.kind == "matmul":
            return (dataclasses.replace(self, name=f"{self.name}.dgrad", k=self.n, n=self.k),
                    dataclasses.replace(self, name=f"{self.name}.wgrad", m=self.k, k=self.m))
        # attention backward: dQ, dK, dV (and P recomputed); elementwise: read grad and input, write grad
        return (dataclasses.replace(self, name=f"{self.name}.bwd", batch=self.batch * (2 if self.kind == "attention" else 1),
                                    bytes=self.bytes * 2),)


def _matmul(name, m, k, n, dt, batch=1) -> StepOp:
    return StepOp(name, "matmul", m, k, n, batch, 0.0, float(batch * (m * k + k * n + m * n) * dt))


@pure(4096)
def layer_ops(m: Model, micro_batch: int, seq: int, tp: int, cp: int = 1, ep: int = 1, sp: bool = True,
              dt: int = 2) -> tuple[StepOp, ...]:
    """Forward ops of one transformer layer on one rank of a TP x CP x EP layout."""
    hd, h = m.head_dim, m.hidden
    sq = seq // cp  # queries this rank attends for; keys and values span the whole sequence
    tokens = micro_batch * sq  # rows of the TP-sharded matmuls (after the SP all-gather)
    rows = tokens // tp if sp else tokens  # rows of the norms and residuals
    heads, kv = m.heads // tp, max(m.kv_heads // tp, 1)
    # decoders attend causally; a context-parallel split is taken as load-balanced (each rank the same share)
    share = training.causal_share(seq) if m.kind == "decoder" else 1.0
    ops = [
        StepOp("norm_attn", "elementwise", elems=rows * h, bytes=2.0 * rows * h * dt),
        _matmul("qkv", tokens, h, (heads + 2 * kv) * hd, dt),
        StepOp("attention", "attention", sq, hd, seq, micro_batch * heads, float(micro_batch * heads * sq * seq) * share,
           float(micro_batch * (sq * heads + 2 * seq * kv + sq * heads) * hd * dt), share),
        _matmul("o_proj", tokens, heads * hd, h, dt),
        StepOp("residual", "elementwise", elems=2 * rows * h, bytes=6.0 * rows * h * dt),
        StepOp("norm_mlp", "elementwise", elems=rows * h, bytes=2.0 * rows * h * dt),
    ]
    f = m.ffn // tp
    if m.moe:
        local = m.experts // ep
        routed = math.ceil(tokens * m.top_k / local)  # rows per local expert, balanced routing
        ops.append(_matmul("router", tokens, h, m.experts, dt))
        ops.append(_matmul("mlp_up", routed, h, (m.ffn_matrices - 1) * f, dt, batch=local))
        ops.append(StepOp("mlp_act", "elementwise", elems=local * routed * f, bytes=float(local * routed * f * m.ffn_matrices * dt)))
        ops.append(_matmul("mlp_down", routed, f, h, dt, batch=local))
    else:
        ops.append(_matmul("mlp_up", tokens, h, (m.ffn_matrices - 1) * f, dt))
        ops.append(StepOp("mlp_act", "elementwise", elems=tokens * f, bytes=float(tokens * f * m.ffn_matrices * dt)))
        ops.append(_matmul("mlp_down", tokens, f, h, dt))
    return tuple(ops)


@pure(1024)
def head_ops(m: Model, micro_batch: int, seq: int, tp: int, cp: int = 1, dt: int = 2) -> tuple[StepOp, ...]:
    """Forward ops of the embedding lookup, the logits matmul and the loss on one rank."""
    tokens = micro_batch * seq // cp
    v = math.ceil(m.vocab / tp)
    return (StepOp("embedding", "elementwise", elems=tokens * m.hidden, bytes=2.0 * tokens * m.hidden * dt),
            _matmul("logits", tokens, m.hidden, v, dt),
            StepOp("loss", "elementwise", elems=float(tokens * v), bytes=float(tokens * v * 4 * 2)))  # FP32 softmax


# --- Presets and files --------------------------------------------------------------------------

_FIELDS = {f.name: f for f in dataclasses.fields(Model)}
_INTS = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq", "experts", "top_k")


@functools.cache  # a package file, read once: loading, not a memo
def _presets() -> dict[str, dict]:
    return tomllib.loads(resources.files("trnsim.plan").joinpath("presets.toml").read_text())


def _preset_table(name: str) -> tuple[str, dict]:
    key = str(name).strip().lower()
    for k, table in _presets().items():
        if key == k or key in table.get("aliases", ()):
            return k, {f: v for f, v in table.items() if f != "aliases"}
    raise UnknownNameError("model preset", name, list(_presets()))


def presets() -> list[str]:
    return list(_presets())


def check(m: Model, where=lambda field: None) -> None:
    """Raise WorkloadError for the first field of `m` that breaks a rule."""

    def fail(field, rule):
        loc = where(field)
        raise WorkloadError(f"{loc + ': ' if loc else ''}model {m.name!r}: field {field!r}: {rule}")

    if m.kind not in ("decoder", "encoder"):
        fail("kind", f"must be 'decoder' or 'encoder', got {m.kind!r}")
    for f in _INTS:
        v = getattr(m, f)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            fail(f, f"must be a positive integer, got {v!r}")
    if m.hidden % m.heads:
        fail("heads", f"hidden {m.hidden} is not divisible by heads {m.heads}")
    if m.heads % m.kv_heads:
        fail("kv_heads", f"heads {m.heads} is not divisible by kv_heads {m.kv_heads}")
    if m.top_k > m.experts:
        fail("top_k", f"top_k {m.top_k} exceeds experts {m.experts}")
    for f in ("gated_mlp", "tied_embeddings"):
        if not isinstance(getattr(m, f), bool):
            fail(f, f"must be true or false, got {getattr(m, f)!r}")


def _build(name: str, table: dict, where) -> Model:
    unknown = [k for k in table if k not in _FIELDS]
    if unknown:
        loc = where(unknown[0])
        raise WorkloadError(f"{loc + ': ' if loc else ''}unknown model field {unknown[0]!r}; known: {', '.join(_FIELDS)}")
    missing = [f.name for f in _FIELDS.values() if f.default is dataclasses.MISSING and f.name not in table and f.name != "name"]
    if missing:
        raise WorkloadError(f"{where(None) or name}: model {name!r} lacks field {missing[0]!r}")
    fields = dict(table, name=table.get("name", name))
    m = object.__new__(Model)  # check with the file's locations before the dataclass checks without them
    for f in _FIELDS:
        object.__setattr__(m, f, fields.get(f, _FIELDS[f].default))
    check(m, where)
    return Model(**fields)


def model(name_or_path: str | os.PathLike | Model, **overrides) -> Model:
    """A preset by name (`"llama3-70b"`) or a model file (.toml, .json, .yaml), with field overrides."""
    if isinstance(name_or_path, Model):
        return dataclasses.replace(name_or_path, **overrides) if overrides else name_or_path
    text = str(name_or_path)
    if os.path.exists(text) or text.endswith((".toml", ".json", ".yaml", ".yml")):
        return load(text, **overrides)
    key, table = _preset_table(text)
    return _build(key, {**table, **overrides}, lambda field: None)


def load(path: str | os.PathLike, **overrides) -> Model:
    """Read a model from a TOML, JSON or YAML file; fields may sit at the top or under [model]."""
    path = os.fspath(path)
    text = read_user_file(path, "a model file", WorkloadError)
    data = _parse(path, text)
    if not isinstance(data, dict):
        raise WorkloadError(f"{path}:1: a model file holds a table of fields, got {type(data).__name__}")
    data = data.get("model", data)
    if not isinstance(data, dict):
        raise WorkloadError(f"{_line_of(path, text, 'model')}: [model] holds a table of fields, got "
                            f"{type(data).__name__}")
    table: dict = {}
    if "preset" in data:
        if not isinstance(data["preset"], str):
            raise WorkloadError(f"{_line_of(path, text, 'preset')}: preset is a preset's name, got "
                                f"{type(data['preset']).__name__}")
        _, table = _preset_table(data["preset"])
    table.update({k: v for k, v in data.items() if k != "preset"})
    table.update(overrides)
    name = table.pop("name", os.path.splitext(os.path.basename(path))[0])
    if not isinstance(name, str):
        raise WorkloadError(f"{_line_of(path, text, 'name')}: name is text, got {type(name).__name__}")
    return _build(name, {**table, "name": name}, lambda field: _line_of(path, text, field))


class _NoAliases(yaml.SafeLoader):
    """YAML without aliases: a few nested `*name` references expand to billions of nodes once walked."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not accepted in a model file",
                                              self.peek_event().start_mark)
        return super().compose_node(parent, index)


def _parse(path: str, text: str):
    try:
        if path.endswith(".json"):
            return json.loads(text)
        if path.endswith((".yaml", ".yml")):
            return yaml.load(text, Loader=_NoAliases)  # noqa: S506 - a SafeLoader
        return tomllib.loads(text)
    except RecursionError:
        raise WorkloadError(f"{path}:1: nested deeper than a model file can be (a model is one table of "
                            "fields)") from None
    except json.JSONDecodeError as e:
        raise WorkloadError(f"{path}:{e.lineno}: malformed JSON: {e.msg}") from None
    except tomllib.TOMLDecodeError as e:
        line = re.search(r"line (\d+)", str(e))
        raise WorkloadError(f"{path}:{line.group(1) if line else 1}: malformed TOML: {e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise WorkloadError(f"{path}:{mark.line + 1 if mark else 1}: malformed YAML: {e}") from None


def _line_of(path: str, text: str, field: str | None) -> str:
    """`path:line` of the line that sets `field` (a key in TOML, YAML or JSON), else `path`."""
    if field:
        pattern = re.compile(rf'^\s*"?{re.escape(field)}"?\s*[:=]')
        for i, line in enumerate(text.splitlines(), 1):
            if pattern.search(line):
                return f"{path}:{i}"
    return path
