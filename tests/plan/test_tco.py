"""TCO: owned chips' cost per hour from capex, life, power, PUE and electricity, for serving and training plans."""
import json

import pytest
from click.testing import CliRunner

from trnsim.cli import cli
from trnsim.plan.tco import TCOError, parse, tco


def test_chip_hour_is_capex_over_life_plus_power():
    t = tco("trn2.48xlarge")
    per_chip = 4000 / (5 * 365.25 * 24) + 0.500 * 1.15 * 0.08  # seed 002's $4,000; 500 W; PUE 1.15; $0.08/kWh
    assert t.usd_per_chip_hour == pytest.approx(per_chip)
    assert t.usd_per_hour == pytest.approx(16 * per_chip)
    h = tco("p5.48xlarge", nodes=2)
    assert h.usd_per_hour == pytest.approx(16 * (23000 / (5 * 8766) + 0.700 * 1.15 * 0.08))
    assert "NAND" in t.sources["power_w"] and "1.15" in t.sources["pue"]


def test_a_missing_figure_is_named_never_zero():
    with pytest.raises(TCOError, match="no capex_usd for Trainium"):
        tco("trn1.32xlarge")
    t = tco("trn1.32xlarge", figures=parse("capex_usd=2000,power_w=400,lifetime_years=4"))
    assert t.usd_per_chip_hour == pytest.approx(2000 / (4 * 8766) + 0.4 * 1.15 * 0.08)
    with pytest.raises(TCOError, match="unknown figure 'watts'"):
        parse("watts=3")
    with pytest.raises(TCOError, match="must be positive"):
        parse("pue=0")


def test_serving_and_training_plans_report_tco():
    r = CliRunner().invoke(cli, ["plan", "serve", "llama3-8b", "--tp", "8", "--batch", "4", "--tco", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["tco"]["usd_per_million_output_tokens"] == pytest.approx(
        d["tco"]["usd_per_hour"] / 3600 / d["output_tokens_per_s"] * 1e6)
    r = CliRunner().invoke(cli, ["plan", "llama3-8b", "--instance", "trn2.48xlarge", "--nodes", "2", "--tp", "8", "--pp", "1",
                                 "--tco", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["tco"]["chips"] == 32
    assert d["tco"]["train_usd"] == pytest.approx(d["tco"]["usd_per_hour"] * d["train_hours"])
    r = CliRunner().invoke(cli, ["plan", "serve", "llama3-8b", "--instance", "trn1.32xlarge", "--tp", "8", "--tco"])
    assert r.exit_code == 2 and "--tco-figures capex_usd=VALUE" in r.output
