"""A CI slice of the API fuzz (fuzz_forms.py; benchmarks/fuzz_api.py runs 10^5 calls): random valid and invalid
calls of every nki.isa function of both generations each run or raise a named error naming the call's line."""
import pytest
from hypothesis import HealthCheck, given, settings

from tests.nki.fuzz_forms import APIS, Tally, batches, functions, run


@pytest.mark.parametrize("api", APIS)
def test_every_call_runs_or_raises_a_named_error_at_its_line(api):
    tally = Tally()

    @settings(max_examples=20, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(batches(api))
    def fuzz(batch):
        run(api, batch, tally)

    fuzz()
    assert tally.failures == 0, tally.first
    assert tally.calls == tally.ran + tally.named
    assert tally.ran > 0 and tally.named > 0  # valid and invalid forms both reached


def test_both_generations_have_their_functions():
    assert {"nc_matmul", "activation", "dma_copy", "scalar_load", "topk"} <= set(functions("current"))
    assert {"nc_matmul", "activation", "dma_copy", "tensor_copy_dynamic_src"} <= set(functions("beta"))
