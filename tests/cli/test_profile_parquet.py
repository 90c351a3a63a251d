"""`trnsim profile --output-format parquet`: the instruction table in Neuron Explorer's Parquet schema, read
back with pyarrow and held against the profile's own figures; without pyarrow, one line saying how to get it."""
import json
import sys

import pytest
from click.testing import CliRunner

from tests.cli.kernels import MATMUL_EXP as KERNEL
from trnsim.cli import cli

pq = pytest.importorskip("pyarrow.parquet")

# Explorer's Instruction table: its required fields and their Parquet types
REQUIRED = {"start_ts": "int64", "end_ts": "int64", "duration_ns": "int64", "engine": "string", "opcode": "string",
            "operands": "string", "id": "int64", "pc": "int64", "bir_id": "string"}


def test_the_instruction_table_holds_every_instruction_with_the_profiles_times(tmp_path):
    src = tmp_path / "k.py"
    src.write_text(KERNEL)
    r = CliRunner().invoke(cli, ["profile", str(src), "--out", str(tmp_path / "p"), "--output-format", "parquet",
                                 "--json"], prog_name="trnsim")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    table = pq.read_table(out["instruction_table"])
    assert {k: str(table.schema.field(k).type) for k in REQUIRED} == REQUIRED
    rows = table.to_pylist()
    summary = json.loads((tmp_path / "p" / "matmul_exp.profile.json").read_text())
    assert len(rows) == out["instruction_rows"] == summary["instructions_total"] == 5
    by_engine = {}
    for row in rows:
        by_engine.setdefault(row["engine"], []).append(row)
    names = {"TensorE": "tensor", "ScalarE": "scalar", "DMA": "dma"}
    assert {names[k]: v for k, v in out["instructions"].items()} == {k: len(v) for k, v in by_engine.items()}
    for track, ns in out["active_ns"].items():  # each engine's busy time, to the nanosecond of each row's rounding
        if track in ("TensorE", "ScalarE"):
            got = sum(x["duration_ns"] for x in by_engine[names[track]])
            assert abs(got - ns) <= len(by_engine[names[track]]), track
    assert min(x["start_ts"] for x in rows) == 0 and abs(max(x["end_ts"] for x in rows) - out["period_ns"]) <= 1
    assert all(x["end_ts"] - x["start_ts"] == x["duration_ns"] >= 0 for x in rows)
    assert sorted(x["id"] for x in rows) == list(range(5))
    assert [x["pc"] for x in by_engine["dma"]] == [0, 1, 2]  # each engine's instructions in program order
    (mm,) = by_engine["tensor"]
    assert mm["opcode"] == "nc_matmul" and mm["raw_flops"] == 2 * 128 * 128 * 512  # a MAC is two FLOPs
    line = next(i for i, text in enumerate(KERNEL.splitlines(), 1) if "nc_matmul(" in text)
    assert mm["tensor_instruction_type"] == "REGULAR" and mm["nki_source_location"] == f"{src}:{line}"
    assert sum(x["raw_flops"] for x in rows) == out["hardware_flops"]


def test_without_pyarrow_the_format_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now fails, as where it is not installed
    src = tmp_path / "k.py"
    src.write_text(KERNEL)
    r = CliRunner().invoke(cli, ["profile", str(src), "--out", str(tmp_path / "p"), "--output-format", "parquet"],
                           prog_name="trnsim")
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert r.stderr.strip().count("\n") == 0 and "pip install 'trnsim[parquet]'" in r.stderr, r.stderr
    assert not (tmp_path / "p").exists()  # refused before the run


def test_an_output_format_is_refused_with_compare_rather_than_ignored(tmp_path):
    a = tmp_path / "a.profile.json"
    a.write_text("{}")
    r = CliRunner().invoke(cli, ["profile", str(a), "--compare", str(a), "--output-format", "parquet"],
                           prog_name="trnsim")
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert "--output-format parquet describes one run" in r.stderr, r.stderr
