"""`trnsim profile --output-format summary-json|summary-text`: the run's figures under Neuron Explorer's
summary keys, checked against the profile's own JSON; and one meaning of "SBUF peak" across outputs."""
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from trnsim.cli import cli
from trnsim.specs import neuroncore

ROOT = Path(__file__).parents[2]
KERNEL = str(ROOT / "examples" / "rmsnorm.py")


def _profile(tmp_path, *args):
    r = CliRunner().invoke(cli, ["profile", KERNEL, "--timing-only", "--out", str(tmp_path), "-q", *args])
    assert r.exit_code == 0, r.output
    return r.stdout


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("p")
    return (json.loads(_profile(tmp, "--output-format", "summary-json")), json.loads(_profile(tmp, "--json")),
            _profile(tmp, "--output-format", "summary-text"), tmp)


def test_summary_json_has_explorers_keys_from_the_same_figures(runs):
    summary, full, _, _ = runs
    (kernel, s), = summary.items()
    assert kernel == full["kernel"]
    total = s["total_time"]
    assert total == pytest.approx(full["latency_ns"] * 1e-9)  # the latency, start-up and tear-down included
    assert s["vector_engine_active_time"] == pytest.approx(full["active_ns"]["VectorE"] * 1e-9)
    for key in ("tensor_engine", "vector_engine", "scalar_engine", "gpsimd_engine", "dma"):
        assert s[f"{key}_active_time_percent"] == pytest.approx(100 * s[f"{key}_active_time"] / total)
        assert 0 <= s[f"{key}_active_time_percent"] <= 100
    assert s["vector_engine_active_time"] > 0 and s["dma_active_time"] > 0  # rmsnorm: Vector, Scalar and DMA
    meta = full
    assert s["hbm_read_bytes"] == meta["hbm_read_bytes"] and s["hbm_write_bytes"] == meta["hbm_write_bytes"]
    assert s["mfu_estimated_percent"] == pytest.approx(100 * meta["mfu"])
    mbu = 100 * (meta["hbm_read_bytes"] + meta["hbm_write_bytes"]) / total / neuroncore("trn2").hbm_bandwidth
    assert s["mbu_estimated_percent"] == pytest.approx(mbu) and 0 < mbu < 100
    assert s["trnsim_sbuf_peak_bytes"] == meta["sbuf_peak_bytes"]


def test_summary_text_is_one_key_and_value_per_line(runs):
    summary, _, text, _ = runs
    (s,) = summary.values()
    lines = dict(line.split(" ", 1) for line in text.splitlines())
    assert set(lines) == set(s)
    assert float(lines["total_time"]) == pytest.approx(s["total_time"], rel=1e-5)


def test_the_chart_and_the_summary_mean_the_same_sbuf_peak(runs):
    """The page carries the allocated peak the summary calls SBUF peak, and the capacity apart from the axis."""
    summary, _, _, tmp = runs
    (s,) = summary.values()
    page = next(tmp.glob("*.html")).read_text()
    assert f'"alloc": {s["trnsim_sbuf_peak_bytes"]}' in page or f'"alloc":{s["trnsim_sbuf_peak_bytes"]}' in page
    spec = neuroncore("trn2")
    cap = spec.partitions * spec.sbuf_partition_bytes
    assert f'"cap": {cap}' in page or f'"cap":{cap}' in page
    assert "allocated peak" in page and "'of '" not in page
