"""One CLI surface: --json on every command, errors as JSON under --json, one default instance, plan's help,
one --price form, tables that fit the terminal, bare `trnsim` prints its help."""
import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from trnsim.cli import cli
from trnsim.specs import DEFAULT_INSTANCE

ROOT = Path(__file__).parents[2]


def _commands(group=cli, path=()):
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, path + (name,))
        else:
            yield path + (name,), cmd


def _run(*args, columns=None):
    env = {"COLUMNS": str(columns)} if columns else {}
    return CliRunner(env=env).invoke(cli, list(args), prog_name="trnsim")


@pytest.mark.parametrize("path, cmd", list(_commands()), ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_every_command_takes_json(path, cmd):
    assert any("--json" in p.opts for p in cmd.params if isinstance(p, click.Option)), path


def test_every_command_that_takes_an_instance_defaults_to_the_same_one():
    defaults = {" ".join(path): p.default for path, cmd in _commands() for p in cmd.params
                if isinstance(p, click.Option) and "--instance" in p.opts}
    assert {"ls", "collective", "plan one", "torchrun"} <= set(defaults)
    assert set(defaults.values()) == {DEFAULT_INSTANCE}, defaults


@pytest.mark.parametrize("args, kind, code", [
    (["ls", "--instance", "trn9", "--json"], "UnknownNameError", 2),
    (["plan", "llama3-8b", "--tp", "x", "--json"], "UsageError", 2),
    (["collective", "all_reduce", "-b", "1K", "-e", "1X", "--json"], "OptionError", 2),
    (["specs", "nothing", "--json"], "UnknownNameError", 2),
    (["dtypes", "abc", "-j"], None, 2),
])
def test_errors_under_json_are_a_json_object_on_stdout(args, kind, code):
    r = _run(*args)
    assert r.exit_code == code
    err = json.loads(r.stdout)["error"]
    assert err["exit_code"] == code and err["message"] in r.stderr and "Traceback" not in r.output
    assert kind is None or err["type"] == kind


def test_errors_without_json_stay_one_line_on_stderr():
    r = _run("ls", "--instance", "trn9")
    assert r.exit_code == 2 and r.stdout == "" and r.stderr.startswith("trnsim: error: unknown instance")


def test_bare_trnsim_prints_its_help_without_an_error():
    r = subprocess.run([sys.executable, "-m", "trnsim"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    assert r.returncode == 0 and r.stdout.startswith("Usage: trnsim") and "error" not in r.stderr
    assert "torchrun" in r.stdout and "plan" in r.stdout


def test_plan_help_lists_the_options_of_plan_model():
    r = _run("plan", "--help")
    assert r.exit_code == 0 and "Options of plan MODEL" in r.output
    for opt in ("--instance", "--nodes", "--tp", "--pp", "--price", "--seq", "--json"):
        assert opt in r.output
    r = _run("plan", "llama3-8b", "--help")
    assert r.output.startswith("Usage: trnsim plan MODEL [OPTIONS]") and "plan one" not in r.output


def test_one_price_form_everywhere():
    """USD alone prices the only system; SYSTEM=USD any; a bare USD with several systems is refused."""
    base = ["plan", "llama3-8b", "--instance", "trn1.32xlarge", "--nodes", "4", "--tp", "8", "--pp", "1", "--json"]
    a = json.loads(_run(*base, "--price", "10").stdout)
    b = json.loads(_run(*base, "--price", "trn1.32xlarge=10").stdout)
    assert a["usd_per_hour"] == b["usd_per_hour"] == 40  # 4 nodes x 10 USD per node-hour
    r = _run("plan", "compare", "llama3-8b", "--systems", "trn1.32xlarge:4,trn2.48xlarge:1", "--price", "10")
    assert r.exit_code == 2 and "--price: '10' names no system and 2 are planned" in r.stderr
    rows = json.loads(_run("plan", "compare", "llama3-8b", "--systems", "trn2.48xlarge:1", "--price", "7",
                           "--json").stdout)
    assert rows[0]["usd_per_hour"] == 7


def test_plan_compare_fits_80_columns_and_keeps_every_number_whole():
    args = ["plan", "compare", "llama3-70b"]
    rows = json.loads(_run(*args, "--json").stdout)
    text = _run(*args, columns=80).stdout
    assert max(map(len, text.splitlines())) <= 80
    for r in rows:
        assert f"{r['tokens_per_s']:,.0f}" in text and (not r["usd"] or f"${r['usd'] / 1e6:,.2f}M" in text)
        assert f"price of {r['system']}: {r['price_status']}" in text


def test_specs_sources_cite_by_number_and_list_each_source_once():
    text = _run("specs", "trn1.32xlarge", "--sources", columns=80).stdout
    assert max(map(len, text.splitlines())) <= 80
    body, legend = text.split("\nSources\n")
    body = body.split("Notes and disagreeing sources")[0]  # the notes quote the sources that disagree
    assert "[1]" in body and legend.startswith("[1] ") and legend.count("[1] ") == 1
    assert "trn1-arch.rst" in legend and "trn1-arch.rst" not in body
