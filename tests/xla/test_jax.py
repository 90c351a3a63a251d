"""JAX data parallelism on 4 host devices: the values of one device, each device's step priced with its all-reduce."""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
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


def test_trnsim_jax_runs_a_training_script_on_simulated_cores(tmp_path):
    """`trnsim jax --devices 4`: the pmap script's weights are the full-batch ones, each step priced."""
    from click.testing import CliRunner

    from trnsim.cli import cli

    out = tmp_path / "run.npz"
    res = CliRunner().invoke(cli, ["jax", "--devices", "4", "--instance", "trn2.48xlarge", "--json",
                                   str(pathlib.Path(__file__).parents[2] / "examples" / "train_jax.py"), str(out)])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    d = np.load(out)
    w = d["w0"].astype(np.float64)
    for x, y in zip(d["xs"], d["ys"]):  # full-batch gradient descent on mean((tanh(x w) - y)^2)
        t = np.tanh(x @ w)
        w = w - d["lr"] * x.T @ (2 * (t - y) * (1 - t * t)) / y.size
    assert d["w"].shape[0] == 4
    for dev in d["w"]:
        np.testing.assert_allclose(dev, w, rtol=1e-5, atol=1e-6)
    assert rep["steps"] == 3 and rep["step_time_ms"] > 0 and rep["unpriced"] == {}
    assert [c["cause"] for c in rep["compilations"]] == ["first compilation (pmap)"]
    assert [s["collectives"] for s in rep["per_step"]] == [{"all_reduce": 1}] * 3
    grad_bytes = 32 * 8 * 4
    ar = CostModel("trn2.48xlarge", world=4).collective_time("all_reduce", grad_bytes, 4)
    assert rep["breakdown_ms"]["collective"] == pytest.approx(ar / 1e6)
