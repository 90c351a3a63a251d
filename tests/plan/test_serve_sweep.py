"""`plan serve sweep`: layouts and batches ranked under SLOs, each rejected one with its reason."""
import json

import pytest
from click.testing import CliRunner

from trnsim.cli import cli
from trnsim.plan.serve import plan
from trnsim.plan.serve.sweep import sweep


def test_sweep_ranks_by_tokens_per_dollar_and_names_each_rejection():
    r = sweep("llama3-8b", ["trn1.32xlarge", "trn2.48xlarge", "p5.48xlarge"], (1, 8, 64), input_len=1024,
              output_len=128, tpot_slo=30.0, ttft_slo=2000.0)
    assert r.ranked and r.rejected
    per_usd = [x["output_tokens_per_usd"] for x in r.ranked if x["output_tokens_per_usd"]]
    assert per_usd == sorted(per_usd, reverse=True)
    for x in r.ranked:
        assert x["tpot_ms"] <= 30.0 and x["ttft_ms"] <= 2000.0
        p = plan("llama3-8b", x["system"], tp=x["tp"], dp=0, batch=x["batch"], input_len=1024, output_len=128)
        assert x["output_tokens_per_usd"] == pytest.approx(p.output_tokens_per_s * 3600 / p.usd_per_hour)
    rules = {x["rule"] for x in r.rejected}
    assert {"tp", "tpot_slo"} <= rules
    slow = next(x for x in r.rejected if x["rule"] == "tpot_slo")
    assert slow["tpot_ms"] > 30.0 and f"{slow['tpot_ms']:.1f} ms exceeds the 30 ms" in slow["reason"]
    assert {x["system"] for x in r.ranked} == {"trn1.32xlarge", "trn2.48xlarge", "p5.48xlarge"}


def test_sweep_cli_json_and_table():
    args = ["plan", "serve", "sweep", "mixtral-8x7b", "--instances", "trn2.48xlarge,Trn3 Gen2 UltraServer",
            "--batches", "1,8", "--max-tp", "16", "--input-len", "512", "--output-len", "64", "--tpot-slo", "40"]
    r = CliRunner().invoke(cli, args + ["--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert any(x["ep"] > 1 for x in d["ranked"])  # MoE: expert-parallel layouts are candidates
    assert all(x["reason"] for x in d["rejected"])
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0 and "tokens/$" in r.output and "rejected:" in r.output


def test_sweep_refuses_a_fixed_ep():
    r = CliRunner().invoke(cli, ["plan", "serve", "sweep", "mixtral-8x7b", "--ep", "2"])
    assert r.exit_code == 2 and "--ep" in r.output and "every EP degree" in r.output
