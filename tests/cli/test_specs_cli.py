"""`trnsim specs`: spec sheets, JSON in base units with sources, the name list and bad names."""
import json

import pytest
from click.testing import CliRunner

from trnsim.cli import cli

GiB = 2**30


def _specs(*args):
    return CliRunner().invoke(cli, ["specs", *args])


def test_json_has_base_units_totals_and_sources():
    """trn2.48xlarge --json: 20.8 PF FP8 and 1,536 GiB (seed 001) from the derived totals; every figure sourced."""
    r = _specs("trn2.48xlarge", "--json")
    assert r.exit_code == 0
    d = json.loads(r.output)
    assert abs(d["derived"]["peak_flops"]["current"]["fp8"] / 1e15 - 20.8) <= 0.05
    assert d["derived"]["hbm_bytes"] == 1536 * GiB and d["derived"]["cores"] == 128
    assert d["host_memory_bytes"] == 2048 * GiB and d["efa_bandwidth"] == 3200e9 / 8
    assert "trn2-arch.rst" in d["sources"]["vcpus"] and d["chip"]["sources"]["hbm_bandwidth"]


def test_sheet_shows_totals_ratings_and_disagreements():
    """The trn1.32xlarge sheet shows both ratings (3,040 and 3,360 TFLOPS) and the GB-vs-GiB disagreement."""
    r = _specs("trn1.32xlarge")
    assert r.exit_code == 0
    bf16 = next(ln for ln in r.output.splitlines() if ln.strip().startswith("bf16")).split()
    assert bf16 == ["bf16", "190", "3,040", "210", "3,360"]
    for text in ("13,120 GiB/s", "$21.50/h", "820 GB/s", "4 x 4 torus"):
        assert text in r.output


def test_sources_flag_names_the_seed():
    """--sources prints where figures were published."""
    r = _specs("Trn3 Gen2 UltraServer", "--sources")
    assert r.exit_code == 0 and "trn3-arch.rst" in r.output and "seeds/" not in r.output and "reference/" not in r.output and "362,448" in r.output


def test_gpu_sheet_has_the_aws_mfu_rating():
    """p5.48xlarge: datasheet dense peaks and AWS's 8,000 TFLOPS per node."""
    r = _specs("p5.48xlarge")
    assert r.exit_code == 0 and "aws-mfu" in r.output and "8,000" in r.output and "NVSwitch" in r.output


@pytest.mark.parametrize("name, key", [("NeuronCore-v4", "v4"), ("v2", "v2"), ("Trainium2", "trainium2")])
def test_cores_and_chips_resolve(name, key):
    """Chip and NeuronCore names give their own sheets; v4's MXFP8 peak is 4 x 2 x 128 x 128 x 2.4 GHz."""
    d = json.loads(_specs(name, "--json").output)
    assert d["key"] == key
    if key == "v4":
        assert d["derived"]["peak_flops"]["mxfp8"] == pytest.approx(4 * 2 * 128 * 128 * 2.4e9)


def test_list_names():
    """--list names every instance, UltraServer, chip and NeuronCore."""
    r = _specs("--list", "--json")
    known = json.loads(r.output)
    assert "trn2u.48xlarge" in known["instances"] and "Trn3 Gen2 UltraServer" in known["ultraservers"]
    assert "H100 80GB" in known["chips"] and "NeuronCore-v3" in known["neuroncores"]


def test_unknown_name_exits_2_with_close_names():
    """A misspelt name exits 2 with one line naming the closest known names."""
    r = _specs("Trainum2")
    assert r.exit_code == 2 and "did you mean Trainium2" in r.output and "Traceback" not in r.output
