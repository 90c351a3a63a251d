"""Prices carry their status (published with a date, placeholder, none, given) and --price overrides them."""
import json

import pytest
from click.testing import CliRunner

from trnsim import specs
from trnsim.cli import cli


def run(*args):
    r = CliRunner().invoke(cli, list(args))
    assert r.exit_code == 0, r.output
    return r.output


def test_catalog_prices_have_a_status():
    """Every priced system says where its price stands; unpriced ones say none."""
    for s in specs.catalog.systems().values():
        if s.price_usd_per_hour:
            assert s.price_status.startswith(("published, ", "placeholder")), s.name
        else:
            assert s.price_status == "none", s.name
    assert specs.system("trn2.48xlarge").price_status == "placeholder"
    assert "2023-03-21" in specs.system("trn1.32xlarge").price_status
    assert "outdated" in specs.system("p5.48xlarge").price_status


def test_plan_table_and_json_show_the_status_and_price_overrides():
    """--price replaces the catalog's price: cost scales with it and the status says so."""
    args = ("plan", "llama2-7b", "--instance", "trn1.32xlarge", "--nodes", "2", "--tp", "8", "--pp", "1")
    base = json.loads(run(*args, "--json"))
    given = json.loads(run(*args, "--json", "--price", "10"))
    assert base["price_status"] == "published, on-demand 2023-03-21" and base["usd_per_hour"] == 2 * 21.50
    assert given["price_status"] == "given with --price" and given["usd_per_hour"] == 20.0
    assert given["usd_per_million_tokens"] == pytest.approx(base["usd_per_million_tokens"] * 10 / 21.50)
    assert "placeholder" in run("plan", "llama2-7b", "--instance", "trn2.48xlarge", "--tp", "8", "--pp", "1")


def test_sweep_and_compare_carry_status_and_take_prices():
    """Sweep rows and compare rows carry the status; --price SYSTEM=USD overrides one system's price."""
    d = json.loads(run("plan", "sweep", "llama2-7b", "--instances", "trn2.48xlarge", "--nodes", "1", "--workers", "1",
                       "--json", "--price", "trn2.48xlarge=20"))
    assert {r["price_status"] for r in d["ranked"]} == {"given with --price"}
    rows = json.loads(run("plan", "compare", "llama2-7b", "--systems", "trn2.48xlarge:1,p5.48xlarge:1", "--json",
                          "--price", "p5.48xlarge=54"))
    assert [r["price_status"] for r in rows] == ["placeholder", "given with --price"]
    assert rows[1]["usd_per_hour"] == 54.0
    table = run("plan", "compare", "llama2-7b", "--systems", "trn2.48xlarge:1")
    assert "placeholder" in table and "|" not in table  # a table like the other commands', not Markdown
