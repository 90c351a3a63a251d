"""The example kernel files run unchanged under `trnsim run` and `trnsim profile`."""
import json
import pathlib

import numpy as np
from click.testing import CliRunner

from trnsim.cli import cli

EXAMPLES = pathlib.Path(__file__).parents[1] / "examples"


def test_rmsnorm_example_runs_and_matches_numpy(shim_as_found):
    """`trnsim run examples/rmsnorm.py` prints an error against numpy that is at fp32 rounding level."""
    r = CliRunner().invoke(cli, ["run", str(EXAMPLES / "rmsnorm.py"), "--json"])
    assert r.exit_code == 0, r.output
    err = float(r.output.split("max |error| vs numpy ")[1].split()[0])
    assert err < 1e-5


def test_rmsnorm_example_profiles(tmp_path, shim_as_found):
    """`trnsim profile` resolves the file's `import nki` and times it: Vector-bound, no TensorE work."""
    r = CliRunner().invoke(cli, ["profile", str(EXAMPLES / "rmsnorm.py"), "--out", str(tmp_path), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["latency_ns"] > 0 and out["flops"] == 0 and out["bound"] == "VectorE"
    x_bytes = 512 * 1024 * 4
    assert np.isclose(out["dma_bytes"], 2 * x_bytes + 128 * 1024 * 4)  # x in, y out, gamma on 128 partitions
    assert pathlib.Path(out["html"]).exists() and pathlib.Path(out["trace"]).exists()
