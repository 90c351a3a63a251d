"""Every command's --json prints one strict JSON document on stdout: no NaN/Infinity, lowercase keys."""
import json
import textwrap

import pytest
from click.testing import CliRunner

from trnsim.cli import cli


def strict(text: str):
    """json.loads that refuses NaN, Infinity and -Infinity (RFC 8259), and keys with capitals."""
    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")

    doc = json.loads(text, parse_constant=refuse)

    def walk(v, path="$"):
        if isinstance(v, dict):
            # a map from names to figures (profile's per-engine times: "VectorE", "DMA q3") is data, not schema
            table = all(isinstance(x, (int, float)) for x in v.values())
            for k, x in v.items():
                assert k == k.lower() or table, f"key {k!r} at {path} is not lowercase"
                walk(x, f"{path}.{k}")
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, f"{path}[{i}]")
    walk(doc)
    return doc


KERNEL = textwrap.dedent('''
    import numpy as np
    import nki, nki.language as nl, nki.isa as nisa

    @nki.jit
    def double(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(out, nl.add(t, t))
        return out

    def inputs():
        return (np.ones((128, 64), np.float32),)

    if __name__ == "__main__":
        print("the script talks on stdout")
        double(*inputs())
''')


@pytest.fixture
def kernel_file(tmp_path):
    f = tmp_path / "k.py"
    f.write_text(KERNEL)
    return str(f)


def commands(kernel_file, tmp_path):
    return [
        ["ls", "--json"], ["ls", "-j", "--instance", "trn1.32xlarge"],
        ["specs", "--list", "--json"], ["specs", "trn2.48xlarge", "--json"], ["specs", "NeuronCore-v3", "--json"],
        ["dtypes", "nan", "inf", "-inf", "-5", "0.1", "--json"], ["dtypes", "-j"],
        ["run", kernel_file, "--json"],
        ["profile", kernel_file, "--json", "--out", str(tmp_path / "prof"), "--timing-only"],
        ["collective", "allr", "-r", "8", "-b", "8", "-e", "64K", "-f", "64", "-c", "--json"],
        ["plan", "llama3-8b", "--instance", "trn1.32xlarge", "--nodes", "4", "--tp", "8", "--pp", "1", "--json"],
        ["plan", "sweep", "llama2-7b", "--instances", "trn1.32xlarge", "--nodes", "1", "--workers", "1", "--json"],
        ["plan", "compare", "llama2-7b", "--systems", "trn1.32xlarge:4,p5.48xlarge:1", "--json"],
        ["plan", "models", "--json"],
        ["plan", "serve", "llama3-8b", "--tp", "8", "--batch", "2", "--json"],
        ["plan", "serve", "sweep", "llama3-8b", "--instances", "trn2.48xlarge,Trn3 Gen2 UltraServer", "--batches", "1",
         "--max-tp", "8", "--tpot-slo", "12", "--json"],
        ["serve", "llama3-8b", "--tp", "8", "--requests", "5", "--json"],
        ["demo", "--only", "Numerics", "--json"],
    ]


def test_every_command_prints_strict_json(kernel_file, tmp_path):
    for args in commands(kernel_file, tmp_path):
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 0, (args, r.output)
        strict(r.stdout)


def test_run_json_keeps_the_scripts_prints_off_stdout(kernel_file):
    r = CliRunner().invoke(cli, ["run", kernel_file, "--json"])
    doc = strict(r.stdout)
    assert doc["launches"][0]["kernel"] == "double" and "talks" in r.stderr and "talks" not in r.stdout


def test_non_finite_values_are_strings():
    doc = strict(CliRunner().invoke(cli, ["dtypes", "nan", "inf", "--json"]).stdout)
    f32 = next(t for t in doc["types"] if t["dtype"] == "float32")
    assert f32["values"] == ["nan", "inf"]
