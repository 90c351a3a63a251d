"""Workloads: preset shapes, parameter counts, AWS's FLOP formula, per-op FLOPs, files and their errors."""
import json

import pytest

from trnsim.errors import UnknownNameError
from trnsim.plan import WorkloadError, aws_flops_per_sequence, model, presets
from trnsim.plan.workload import head_ops, layer_ops

# Published parameter counts (model cards / papers), in billions.
PUBLISHED = {"llama2-7b": 6.74, "llama2-13b": 13.02, "llama2-70b": 68.98, "llama3-8b": 8.03, "llama3-70b": 70.55,
             "llama3-405b": 405.85, "mixtral-8x7b": 46.70, "gpt3-175b": 175.0}


def _params(L, h, a, kv, f, V, experts=1, mats=3, tied=False):
    hd = h // a
    layer = h * h * 2 + 2 * h * kv * hd + experts * mats * h * f + (h * experts if experts > 1 else 0) + 2 * h
    return L * layer + V * h * (1 if tied else 2) + h


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_preset_parameter_counts_match_published(name):
    """Each preset's parameter count lands within 0.5% of the published figure."""
    assert model(name).params / 1e9 == pytest.approx(PUBLISHED[name], rel=5e-3)


def test_parameter_count_follows_the_layer_formula():
    """Llama-3-70B's count equals attention + SwiGLU + norms per layer plus untied embeddings."""
    assert model("llama3-70b").params == _params(80, 8192, 64, 8, 28672, 128256)
    assert model("mixtral-8x7b").params == _params(32, 4096, 32, 8, 14336, 32000, experts=8)


def test_aws_flops_formula_and_published_mfu():
    """AWS's formula for Llama-3.1-8B at seq 8192, and 47.95 seq/s on 32 trn1 nodes giving MFU 24.7%."""
    h, s, L, V, a, kv, i = 4096, 8192, 32, 128256, 32, 8, 14336
    kvd = kv * h // a
    attn = 2 * h * h * s * 2 + 2 * h * kvd * s * 2 + 2 * s * s * h + 6 * a * s * s + 2 * s * s * h
    fwd = L * (attn + 3 * 2 * h * i * s) + 2 * V * h * s * 2
    assert aws_flops_per_sequence(model("llama3.1-8b")) == 3 * fwd
    mfu = 3 * fwd * 47.95 / (32 * 3040e12)
    assert round(mfu, 3) == 0.247


def test_forward_op_flops_sum_to_matmul_params_and_attention():
    """Forward matmul FLOPs of a layer are 2 x tokens x matmul parameters; attention is 4 b s^2 h over
    the causal kernel's computed tiles: 128-query tiles each run the 2048-key tiles up to the diagonal."""
    m = model("llama3-8b")
    b, s = 2, 4096
    ops = layer_ops(m, b, s, 1)
    matmul = sum(o.flops for o in ops if o.kind == "matmul")
    weights = m.layer_params() - 2 * m.hidden
    assert matmul == 2 * b * s * weights
    tiles_run = sum(q * 128 // 2048 + 1 for q in range(s // 128))
    share = tiles_run / ((s // 128) * (s // 2048))
    assert share == 0.75
    assert sum(o.flops for o in ops if o.kind == "attention") == 4 * b * s * s * m.hidden * share
    bwd = sum(x.flops for o in ops if o.kind == "matmul" for x in o.backward())
    assert bwd == 2 * matmul


def test_encoders_attend_to_every_key():
    """A BERT-style encoder is not causal: its attention computes the whole s x s score matrix."""
    m = model("bert-large")
    att = [o for o in layer_ops(m, 1, 512, 1) if o.kind == "attention"][0]
    assert att.flops == 4 * 512 * 512 * m.hidden


def test_tp_shards_the_layer_flops_evenly():
    """With TP 8 each rank does 1/8 of the layer's matmul and attention FLOPs (KV heads split, not replicated)."""
    m = model("llama3-70b")
    full = sum(o.flops for o in layer_ops(m, 1, 8192, 1) if o.kind != "elementwise")
    shard = sum(o.flops for o in layer_ops(m, 1, 8192, 8) if o.kind != "elementwise")
    assert shard * 8 == pytest.approx(full)
    logits = [o for o in head_ops(m, 1, 8192, 8) if o.name == "logits"][0]
    assert logits.flops == 2 * 8192 * 8192 * 128256 / 8


def test_moe_layer_runs_top_k_experts_per_token():
    """Mixtral's expert matmuls do top-k (2) times the FLOPs of one dense FFN per token."""
    m = model("mixtral-8x7b")
    ops = {o.name: o for o in layer_ops(m, 1, 4096, 1)}
    assert ops["mlp_up"].flops + ops["mlp_down"].flops == pytest.approx(2 * 4096 * 3 * 4096 * 14336 * 2)


def test_every_preset_has_a_source():
    """Each preset names where its figures were published."""
    for name in presets():
        assert model(name).source


def test_toml_file_on_a_preset_with_overrides(tmp_path):
    """A TOML file can start from a preset and override fields."""
    f = tmp_path / "mine.toml"
    f.write_text('[model]\npreset = "llama3-8b"\nname = "llama3-8b-32k"\nseq = 32768\n')
    m = model(str(f))
    assert (m.name, m.seq, m.hidden, m.kv_heads) == ("llama3-8b-32k", 32768, 4096, 8)


def test_json_file_encoder(tmp_path):
    """A JSON file describes a BERT-style encoder."""
    f = tmp_path / "enc.json"
    f.write_text(json.dumps({"kind": "encoder", "layers": 12, "hidden": 768, "heads": 12, "kv_heads": 12,
                             "ffn": 3072, "vocab": 30522, "seq": 512, "gated_mlp": False}))
    m = model(str(f))
    assert m.kind == "encoder" and m.name == "enc" and m.ffn_matrices == 2


def test_bad_field_names_the_field_and_line(tmp_path):
    """A field that breaks a rule is reported with the field, the numbers and file:line."""
    f = tmp_path / "bad.toml"
    f.write_text('layers = 4\nhidden = 1000\nheads = 3\nkv_heads = 3\nffn = 4000\nvocab = 100\nseq = 128\n')
    with pytest.raises(WorkloadError, match=r"bad.toml:3: .*field 'heads': hidden 1000 is not divisible by heads 3"):
        model(str(f))


@pytest.mark.parametrize("name, text, error", [
    ("broken.toml", 'layers = 4\nhidden = = 3\n', r"broken.toml:2: malformed TOML"),
    ("broken.json", '{"layers": 4,\n "hidden": }', r"broken.json:2: malformed JSON"),
    ("extra.toml", 'preset = "llama2-7b"\nheadz = 3\n', r"extra.toml:2: unknown model field 'headz'"),
    ("neg.json", '{"preset": "llama2-7b",\n "layers": -1}', r"neg.json:2: .*field 'layers': must be a positive integer, got -1"),
    ("few.toml", 'layers = 2\nhidden = 64\n', r"few.toml: model 'few' lacks field 'heads'"),
])
def test_malformed_and_unknown_fields(tmp_path, name, text, error):
    """Malformed TOML and JSON give their line; unknown, bad and missing fields are named."""
    f = tmp_path / name
    f.write_text(text)
    with pytest.raises(WorkloadError, match=error):
        model(str(f))


def test_unknown_preset_suggests_close_names():
    """An unknown preset name suggests the closest presets."""
    with pytest.raises(UnknownNameError, match="did you mean llama3-70b"):
        model("llama3-71b")


def test_yaml_file(tmp_path):
    """A YAML model file loads like TOML; a malformed one names its file and line."""
    f = tmp_path / "m.yaml"
    f.write_text("preset: llama2-13b\nseq: 2048\n")
    assert model(str(f)).seq == 2048
    bad = tmp_path / "bad.yaml"
    bad.write_text("preset: llama2-13b\nseq: [2048\n")
    with pytest.raises(WorkloadError, match=r"bad.yaml:\d+: malformed YAML"):
        model(str(bad))
