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
