"""`trnsim plan`, `plan sweep` and `plan compare`: JSON output, files, one-line errors, the tour."""
import json

import pytest

from click.testing import CliRunner
from rich.console import Console

from trnsim.cli import cli
from trnsim.cli.plan import tour


def run(*args):
    return CliRunner().invoke(cli, list(args))


def test_plan_json_has_the_layout_and_figures():
    """`plan MODEL --json` prints the chosen layout, the breakdown summing to the step and the cost."""
    r = run("plan", "llama3-70b", "--instance", "trn2.48xlarge", "--nodes", "8", "--tp", "32", "--pp", "4", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert (d["layout"]["tp"], d["layout"]["pp"], d["layout"]["dp"], d["lnc"]) == (32, 4, 4, 2)
    assert abs(sum(d["breakdown_s"].values()) - d["step_s"]) < 1e-9 * d["step_s"] + 1e-12
    assert d["recipe"] == {"seq": 8192, "global_batch": 1024, "micro_batch": 1, "zero1": True, "sp": True,
                           "checkpointing": "selective", "dtype": "bf16"}
    assert abs(d["train_usd"] - d["train_hours"] * d["usd_per_hour"]) < 1e-6 * d["train_usd"]
    ops = {o["name"]: o for o in d["layer_ops"]}
    assert ops["qkv"]["flops"] == 2 * 8192 * 8192 * (64 // 32 + 2) * 128  # KV heads 8 over TP32: one each
    layers, m = 80 // 4, 1024 // 4
    compute = [o for o in d["layer_ops"] if o["kind"] != "collective"]
    per_layer = sum(o["forward_ns"] + o["backward_ns"] for o in compute) * 1e-9
    assert d["breakdown_s"]["compute"] > m * layers * per_layer  # plus the head on the last stage
    tp = next(o for o in d["layer_ops"] if o["kind"] == "collective" and o["name"] == "tp")
    assert tp["group"] == 32 and (tp["forward_ns"] + tp["backward_ns"]) * 1e-9 * m * layers == \
        pytest.approx(d["breakdown_s"]["tp_comm"])  # the per-layer TP communication --ops shows
    assert d["price_status"] == "placeholder"


def test_plan_from_a_file_and_knobs(tmp_path):
    """A model file with recipe knobs on the command line plans and prints a table."""
    f = tmp_path / "small.toml"
    f.write_text('preset = "llama2-7b"\nlayers = 8\n')
    r = run("plan", str(f), "--instance", "trn1.32xlarge", "--tp", "8", "--pp", "1", "--seq", "2048",
            "--global-batch", "64", "--micro-batch", "2", "--checkpointing", "full", "--no-zero1")
    assert r.exit_code == 0, r.output
    assert "small on 1 x trn1.32xlarge" in r.output and "micro-batch 2" in r.output and "full checkpointing" in r.output


def test_errors_are_one_line_with_the_field():
    """An impossible layout and an unknown preset give one line naming the problem, no traceback."""
    r = run("plan", "llama3-8b", "--instance", "trn1.32xlarge", "--tp", "5", "--pp", "1")
    assert r.exit_code == 2 and "layout field 'tp'" in r.output and "Traceback" not in r.output
    r = run("plan", "lama3-8b")
    assert r.exit_code == 2 and "did you mean llama3-8b" in r.output
    r = run("plan", "llama3-8b", "--instance", "trn1.32xlarge", "--lnc", "2", "--tp", "8", "--pp", "1")
    assert r.exit_code == 2 and "'lnc'" in r.output


def test_sweep_json_csv_and_chart(tmp_path):
    """`plan sweep` ranks layouts as JSON and writes the CSV and the PNG frontier."""
    csv_path, png = tmp_path / "s.csv", tmp_path / "s.png"
    r = run("plan", "sweep", "llama2-7b", "--instances", "trn1.32xlarge,p4d.24xlarge", "--nodes", "1,2",
            "--workers", "1", "--json", "--csv", str(csv_path), "--chart", str(png), "--by", "cost")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    usd = [x["usd_per_million_tokens"] for x in d["ranked"]]
    assert d["by"] == "cost" and usd == sorted(usd) and d["valid"] == len(d["ranked"])
    assert csv_path.read_text().startswith("rank,system") and png.read_bytes()[:4] == b"\x89PNG"


def test_sweep_table_with_progress():
    """The sweep's table lists the best layouts."""
    r = run("plan", "sweep", "llama2-7b", "--instances", "trn2.48xlarge", "--nodes", "1", "--workers", "1", "--top", "3")
    assert r.exit_code == 0, r.output
    assert "valid of" in r.output and "MFU" in r.output


def test_compare_json():
    """`plan compare` gives one row per system with time and cost."""
    r = run("plan", "compare", "llama2-7b", "--systems", "trn1.32xlarge:2,p4d.24xlarge:2", "--tokens", "1e9", "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    assert [x["system"] for x in rows] == ["trn1.32xlarge", "p4d.24xlarge"]
    assert all(abs(x["hours"] - 1e9 / x["tokens_per_s"] / 3600) < 1e-9 for x in rows)


def test_tour_is_short():
    """The tour prints one plan in under 15 lines."""
    con = Console(record=True, width=100)
    tour(con)
    text = con.export_text()
    assert "llama3-8b on 32 x trn1.32xlarge" in text and len(text.strip().splitlines()) <= 15
