"""The serving step model: each mechanism against arithmetic done here, and the calibration rows."""
import json
import math
import os
from importlib import resources

import pytest

from trnsim import specs
from trnsim.plan.serve import ServeError, plan
from trnsim.plan.serve.step import buckets, collective_ns
from trnsim.plan.layout import Cluster
from trnsim.specs import serving

HERE = os.path.join(os.path.dirname(__file__), "hf_configs")

# calibration.md section 5: (model, instance, knobs, TTFT ms, TPOT ms)
ROWS = [
    ("llama2-7b", "trn1.32xlarge", dict(tp=32, batch=1, input_len=128, output_len=8064, engine="transformers-neuronx"),
     13.32, 6.70),
    ("llama2-7b", "trn1.32xlarge", dict(tp=32, batch=8, input_len=128, output_len=8064, engine="transformers-neuronx"),
     66.40, 10.10),
    ("llama3-8b", "trn2.48xlarge", dict(tp=8, batch=2, input_len=512, output_len=128, engine="vllm-neuron"), 51.07, 10.52),
]


def table_entry(target, kernel, shape):
    text = resources.files("trnsim.plan").joinpath("efficiency.json").read_text()
    for e in json.loads(text)["entries"]:
        if (e["target"], e["kernel"], tuple(e["shape"])) == (target, kernel, tuple(shape)):
            return e
    raise KeyError((target, kernel, shape))


@pytest.mark.parametrize("row", ROWS, ids=["trn1-b1", "trn1-b8", "trn2-b2"])
def test_calibration_rows_land_within_ten_percent(row):
    model, system, knobs, ttft, tpot = row
    p = plan(model, system, **knobs)
    assert p.ttft_ms == pytest.approx(ttft, rel=0.10)
    assert p.tpot_ms == pytest.approx(tpot, rel=0.10)


def test_decode_at_batch_one_is_the_hbm_read_of_weights_and_kv():
    """Llama-2-7B on 32 Trn1 cores: every layer streams its weight shard and its KV cache from HBM once."""
    p = plan("llama2-7b", "trn1.32xlarge", tp=32, batch=1, input_len=1000, output_len=24)
    h, f, tp, ctx = 4096, 11008, 32, 1024  # every output token falls in the 1024 bucket
    weights = 2 * (h * 3 * h / tp + h * h / tp + 3 * h * f / tp)  # qkv, o, gate/up/down, bf16
    kv = ctx * 2 * (32 // tp) * 128 * 2
    entry = table_entry("trn1", "stream", (65536,))
    rate = entry["efficiency"] * specs.neuroncore("trn1").hbm_bandwidth
    expected = 32 * (weights + kv) / rate * 1e9
    assert p.decode.parts["compute"] == pytest.approx(expected, rel=0.03)


def test_prefill_of_a_long_prompt_is_tensor_engine_bound():
    """Llama-3-8B on TP8 Trn2, an 8k prompt: the MLP matmuls run at their simulated bucket's TensorE rate."""
    p = plan("llama3-8b", "trn2.48xlarge", tp=8, batch=1, input_len=8192, output_len=1)
    up = next(r for r in p.prefill.ops if r["name"] == "mlp_up")
    m, k, n = 8192, 4096, 2 * 14336 // 8
    flops = 2.0 * m * k * n
    # the planner's bucket: each of M (halved per LNC-2 core), N, K to a power of two, trimmed to 2^36
    dims = [2 ** round(math.log2(d)) for d in (m / 2, n, k)]
    while math.prod(dims) > 2**36:
        dims[dims.index(max(dims))] //= 2
    e = table_entry("trn2", "matmul", dims)
    assert e["bound"] == "TensorE" or e["efficiency"] > 0.5
    rate = e["efficiency"] * specs.neuroncore("trn2").peak_flops("bf16") * 2
    assert up["ns"] == pytest.approx(flops / rate * 1e9, rel=1e-6)
    stream = table_entry("trn2", "stream", (65536,))["efficiency"] * specs.neuroncore("trn2").hbm_bandwidth * 2
    assert up["bytes"] / stream * 1e9 < up["ns"]  # HBM is not the bound


def test_tp_all_reduce_of_a_decode_token_is_latency_bound():
    """8 bytes over TP32 on a Trn1 4x4 torus: the in-graph floor plus two mesh rounds of the farthest chip (4 hops)."""
    c = serving.collective()
    cluster = Cluster(specs.system("trn1.32xlarge"), 1, 1)
    t = collective_ns("all_reduce", 8, tuple(range(32)), cluster)
    assert t == pytest.approx(c["launch_floor"] + 2 * 4 * c["link_hop_latency"], rel=1e-3)
    # on TP8 Trn2 at LNC 2 the group spans two neighbouring chips: one hop per round
    cluster = Cluster(specs.system("trn2.48xlarge"), 1, 2)
    t = collective_ns("all_reduce", 8, tuple(range(8)), cluster)
    assert t == pytest.approx(c["launch_floor"] + 2 * c["link_hop_latency"], rel=1e-3)
    # and a decode step pays two of them per layer
    p = plan("llama3-8b", "trn2.48xlarge", tp=8, batch=1, input_len=100, output_len=10)
    per = collective_ns("all_reduce", 4096 * 2, tuple(range(8)), cluster)
    assert p.decode.parts["tp_comm"] == pytest.approx(32 * 2 * per)


def test_buckets_pad_prompts_and_contexts():
    assert buckets(1000) == (128, 256, 512, 1000)
    p = plan("llama3-8b", "trn2.48xlarge", tp=8, batch=1, input_len=300, output_len=100)
    b = p.buckets
    assert b["compiled"] == [128, 256, 400] and b["prefill"] == 400
    assert b["prefill_padding"] == pytest.approx((400 - 300) / 400)
    expected = sum((400 - L) / 400 for L in range(302, 401)) / 99  # the 99 decode steps hold 302..400 tokens
    assert b["decode_padding"] == pytest.approx(expected)
    # a padded prompt costs what its bucket costs
    q = plan("llama3-8b", "trn2.48xlarge", tp=8, batch=1, input_len=399, output_len=1, max_context=400)
    assert p.prefill.parts["compute"] == pytest.approx(q.prefill.parts["compute"])


def test_kv_capacity_refuses_a_batch_that_does_not_fit():
    m_kv = 80 * 2 * 1 * 128 * 2  # Llama-3-70B on TP32: one KV head per rank, bf16, per token
    with pytest.raises(ServeError) as e:
        plan("llama3-70b", "trn1.32xlarge", tp=32, batch=64, input_len=4096, output_len=4096)
    msg = str(e.value)
    kv_gib = 64 * 8192 * m_kv / 2**30
    assert "'batch'" in msg and f"KV cache {kv_gib:.2f}" in msg and "tokens of KV fit" in msg
    ok = plan("llama3-70b", "trn1.32xlarge", tp=32, batch=4, input_len=4096, output_len=4096)
    assert ok.kv_tokens * m_kv <= ok.capacity - ok.memory["weights"]
    assert ok.memory["kv_cache"] == pytest.approx(4 * 8192 * m_kv)


def test_speculation_divides_tpot_by_the_accepted_tokens():
    base = plan("llama3-8b", "trn2.48xlarge", tp=8, batch=2, input_len=512, output_len=128)
    spec = plan("llama3-8b", "trn2.48xlarge", tp=8, batch=2, input_len=512, output_len=128, speculation=_eagle())
    accepted = (1 - 0.741**6) / (1 - 0.741)
    assert spec.setup.speculation.accepted_per_step == pytest.approx(accepted)
    assert spec.tpot_ms < base.tpot_ms


def _eagle():
    from trnsim.plan.serve import Speculation

    return Speculation.parse("eagle:5:0.741")


def test_bad_knobs_are_named():
    with pytest.raises(ServeError, match="'tp'.*heads"):
        plan("llama3-8b", "trn2.48xlarge", tp=3)
    with pytest.raises(ServeError, match="'weights'.*mxfp8"):
        plan("llama3-8b", "trn2.48xlarge", tp=8, weights="mxfp8")
    with pytest.raises(ServeError, match="'weights'.*H100.*mxfp4"):
        plan("llama3-8b", "p5.48xlarge", tp=8, weights="mxfp4")
    with pytest.raises(ServeError, match="'input_len'.*4096-token context"):
        plan(os.path.join(HERE, "dense.json"), "trn2.48xlarge", tp=4, input_len=4000, output_len=100)
    with pytest.raises(ServeError, match="'ep'.*dense"):
        plan("llama3-8b", "trn2.48xlarge", tp=8, ep=2)


def test_fp8_weights_halve_the_decode_stream():
    b = plan("llama3-8b", "trn2.48xlarge", tp=8, batch=1, input_len=100, output_len=10)
    f = plan("llama3-8b", "trn2.48xlarge", tp=8, batch=1, input_len=100, output_len=10, weights="fp8")
    assert f.memory["weights"] == pytest.approx(b.memory["weights"] / 2)
    assert f.decode.parts["compute"] < 0.6 * b.decode.parts["compute"]


def test_gpu_baseline_and_moe_plans_run():
    h = plan("llama3-8b", "p5.48xlarge", tp=8, batch=4, input_len=512, output_len=128)
    assert h.ttft_ms > 0 and h.tpot_ms > 0 and h.usd_per_million_output_tokens > 0
    assert "roofline" in h.timed_by["compute"] and "fitted on Neuron" in h.timed_by["engine"]
    inside = plan("mixtral-8x7b", "trn2.48xlarge", tp=16, ep=4, batch=4, input_len=512, output_len=128)
    assert inside.decode.parts["ep_comm"] == 0  # EP inside the TP group: tokens are already on every rank
    wide = plan("mixtral-8x7b", "trn2.48xlarge", tp=4, ep=8, batch=4, input_len=512, output_len=128)
    assert wide.decode.parts["ep_comm"] > 0  # two attention groups exchange tokens around the experts
    experts = 32 * 8 * 3 * 4096 * 14336 * 2  # every routed expert of every layer, bf16
    assert wide.memory["weights"] - inside.memory["weights"] == pytest.approx(experts / 8 - experts / 16
                                                                                + _attention_and_tables(4) - _attention_and_tables(16))


def _attention_and_tables(tp):
    """Mixtral's per-rank attention, norms, router, embedding and LM head bytes at TP tp (kv heads 8)."""
    h, kv = 4096, max(8 // tp, 1) * 128
    attn = h * (32 // tp) * 128 * 2 + 2 * h * kv
    return 2 * (32 * (attn + 2 * h + h * 8) + 2 * math.ceil(32000 / tp) * h + h)


def test_causal_and_windowed_prefill_attends_the_keys_each_token_sees():
    from trnsim.plan.serve.step import attended

    for prefix, new, window in ((0, 8, 100), (5, 8, 100), (0, 10, 4), (3, 10, 6), (50, 10, 6)):
        assert attended(prefix, new, window) == sum(min(window, prefix + i + 1) for i in range(new))
    # a 4k prompt on a model with a 1k window: its window layers compute about a quarter of a full layer's scores
    p = plan(os.path.join(HERE, "sliding.json"), "trn2.48xlarge", tp=4, batch=1, input_len=4096, output_len=1,
             max_context=4097)
    att = next(r for r in p.prefill.ops if r["name"] == "attention")
    assert att["n"] == 1024 and att["flops"] == pytest.approx(4 * 4 * 4096 * 1024 * 64 * attended(0, 4096, 1024) / (4096 * 1024))
