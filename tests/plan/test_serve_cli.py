"""`trnsim plan serve`: JSON keys, the table, one-line errors."""
import json
import os

import pytest
from click.testing import CliRunner

from trnsim.cli import cli
from trnsim.plan.serve import plan

HERE = os.path.join(os.path.dirname(__file__), "hf_configs")


def run(*args):
    return CliRunner().invoke(cli, list(args))


def test_plan_serve_json_has_the_figures_of_the_plan():
    r = run("plan", "serve", "llama3-8b", "--instance", "trn2.48xlarge", "--tp", "8", "--batch", "2",
            "--input-len", "512", "--output-len", "128", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    p = plan("llama3-8b", "trn2.48xlarge", tp=8, dp=0, batch=2, input_len=512, output_len=128)
    assert d["ttft_ms"] == p.ttft_ms and d["tpot_ms"] == p.tpot_ms
    assert d["output_tokens_per_s"] == p.output_tokens_per_s
    assert d["layout"] == {"tp": 8, "dp": 8, "ep": 1, "cp": 1}  # 64 ranks at LNC 2: eight TP8 replicas
    assert d["output_tokens_per_s"] == pytest.approx(8 * 2 * 128 / ((d["ttft_ms"] + 127 * d["tpot_ms"]) * 1e-3))
    assert d["usd_per_million_output_tokens"] == pytest.approx(d["usd_per_hour"] / 3600 / d["output_tokens_per_s"] * 1e6)
    for key in ("memory_gib", "kv_tokens_fit", "buckets", "prefill_ms", "decode_ms"):
        assert key in d


def test_plan_serve_table_and_options():
    r = run("plan", "serve", os.path.join(HERE, "gqa.json"), "--instance", "trn1.32xlarge", "--tp", "8",
            "--batch", "4", "--weights", "fp8", "--kv-dtype", "fp8", "--speculation", "eagle:4:0.7",
            "--prefix-hit", "0.5", "--ops")
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())  # table cells wrap
    for word in ("TTFT", "TPOT", "tokens of KV fit", "buckets", "per million output tokens", "mlp_up", "gqa"):
        assert word in text


def test_plan_serve_errors_are_one_line():
    r = run("plan", "serve", "llama3-70b", "--instance", "trn1.32xlarge", "--batch", "64", "--input-len", "4096",
            "--output-len", "4096")
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "'batch'" in r.output and "tokens of KV fit" in r.output and len(r.output.strip().splitlines()) == 1
    r = run("plan", "serve", os.path.join(HERE, "bad.json"))
    assert r.exit_code == 2 and "num_key_value_heads" in r.output and "bad.json:7" in r.output
    r = run("plan", "serve", "llama3-8b", "--speculation", "eagle")
    assert r.exit_code == 2 and "speculation" in r.output
