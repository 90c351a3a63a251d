"""A CI-sized slice of benchmarks/bench_fuzz.py: random valid and invalid instruction calls inside launches,
some of which fail. Every call is accounted for, both kinds of form are exercised, and the launch
machinery itself never raises anything but a named error."""
import importlib.util
import pathlib

import pytest

PATH = pathlib.Path(__file__).parents[2] / "benchmarks" / "bench_fuzz.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_fuzz", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("wrong", [0.0, 0.3])
def test_a_fuzz_slice_accounts_for_every_call(bench, wrong):
    r = bench.run(600, seed=1, batch=25, wrong=wrong)
    assert r["calls"] == 600 == r["valid_calls"] + r["named_errors"] + r["internal_exceptions"]
    assert r["valid_calls"] > 30 and r["named_errors"] > 100  # valid and invalid forms both reached
    assert r["launches"] == 24 and r["failed_launches"] > 0
    assert not [k for k in r["internal_by_kind"] if k.startswith("launch")], r["internal_first_message"]
    assert {k.split(":")[0] for k in r["internal_by_kind"]} <= set(bench.INSTRUCTIONS)
