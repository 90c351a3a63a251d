"""JAX data parallelism on 4 host devices: the values of one device, each device's step priced with its all-reduce."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("jax", reason="the framework path needs pip install 'trnsim[torch]'")

from trnsim.xla import CostModel  # noqa: E402

SCRIPT = pathlib.Path(__file__).parent / "scripts" / "jax_dp.py"


def test_pmap_data_parallel_matches_one_device_and_is_priced():
    src = str(pathlib.Path(__file__).parents[2] / "src")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]), JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["devices"] == 4 and got["max_diff"] < 1e-6
    per_device, features_in, features_out = 64 // 4, 32, 8
    assert got["flops"] == 2 * 2 * per_device * features_in * features_out  # forward and weight gradient
    (ar,) = got["collectives"]
    grad_bytes = features_in * features_out * 4
    assert ar["op"] == "all_reduce" and ar["ranks"] == 4 and ar["bytes"] == grad_bytes
    assert ar["time_ns"] == pytest.approx(CostModel("trn2.48xlarge", world=4).collective_time("all_reduce",
                                                                                              grad_bytes, 4))
    assert got["time_ns"] > ar["time_ns"] and got["unpriced"] == {}
