"""A CI slice of benchmarks/bench_fuzz.py: random valid and invalid calls of every nki.isa instruction and every
nl.* op of both API generations, in launches some of which fail. Each call runs or raises a named error
naming its kernel line; no internal exception."""
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


@pytest.mark.parametrize("api, wrong", [("current", 0.05), ("beta", 0.05), ("current", 0.3), ("beta", 0.3)])
def test_every_call_runs_or_raises_a_named_error_at_its_line(bench, api, wrong):
    r = bench.run(1000, seed=7, batch=25, wrong=wrong, apis=(api,))
    assert r["internal_exceptions"] == 0 and r["unlocated_named_errors"] == 0, r["first_message"]
    assert r["calls"] == 1000 == r["valid_calls"] + r["named_errors"]
    assert r["valid_calls"] > 50 and r["named_errors"] > 100  # valid and invalid forms both reached
    assert r["launches"] == 40 and r["failed_launches"] > 0


def test_the_fuzz_reaches_every_instruction_and_every_documented_language_op(bench):
    listed = bench._reference_names()
    for api, module in (("current", "nki.language"), ("beta", "neuronxcc.nki.language")):
        ops = set(bench.functions(api, "language"))
        _, _, nl = bench.modules(api)
        assert ops == {n for n in listed[module] if callable(getattr(nl, n)) and not isinstance(getattr(nl, n), type)
                       } - {"mgrid", "no_reorder"}
    assert {"nc_matmul", "activation", "dma_copy", "scalar_load", "topk"} <= set(bench.functions("current", "isa"))
    assert {"nc_matmul", "activation", "dma_copy", "tensor_copy_dynamic_src"} <= set(bench.functions("beta", "isa"))
