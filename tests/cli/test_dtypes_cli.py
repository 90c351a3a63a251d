"""`trnsim dtypes`: format facts and casts per type, against ml_dtypes written here."""
import json

import ml_dtypes
import numpy as np
from click.testing import CliRunner

from trnsim.cli import cli


def test_values_round_as_ml_dtypes_does():
    r = CliRunner().invoke(cli, ["dtypes", "0.1", "300", "--rounding", "rne", "--json"])
    assert r.exit_code == 0, r.output
    rows = {row["dtype"]: row for row in json.loads(r.output)["types"]}
    for name, np_type in (("bfloat16", ml_dtypes.bfloat16), ("float8_e4m3fn", ml_dtypes.float8_e4m3fn),
                          ("float8_e5m2", ml_dtypes.float8_e5m2), ("float16", np.float16)):
        want = np.array([0.1, 300], np.float32).astype(np_type).astype(np.float32)
        assert rows[name]["values"] == [float(w) for w in want]
    assert rows["float8_e4m3fn"]["max"] == 448 and rows["float8_e4m3fn"]["overflow"] == "nan"


def test_table_prints_every_float_type():
    r = CliRunner().invoke(cli, ["dtypes", "1.5"])
    assert r.exit_code == 0
    for name in ("float32", "tfloat32", "bfloat16", "float8_e4m3", "float8_e8m0fnu", "float4_e2m1fn"):
        assert name in r.output


def test_negative_values_and_formats_without_nan():
    """`dtypes -5` reads -5 as a value; fp4 e2m1 has no NaN or Inf: the note says what the cast made of them."""
    r = CliRunner().invoke(cli, ["dtypes", "-5", "nan", "inf", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    fp4 = next(t for t in doc["types"] if t["dtype"] == "float4_e2m1fn")
    want = np.array([-5, np.nan, np.inf], np.float32).astype(ml_dtypes.float4_e2m1fn).astype(np.float32)
    assert doc["inputs"][0] == -5 and fp4["values"][0] == float(want[0]) == -4.0
    note = next(n for n in doc["notes"] if n.startswith("float4_e2m1fn"))
    assert "no NaN encoding" in note and f"nan -> {float(want[1]):g}" in note
    assert "note: float4_e2m1fn has no NaN" in CliRunner().invoke(cli, ["dtypes", "nan"]).output
