"""fp32 plans: the planner's own matmul kernel fits SBUF in fp32 on every generation."""
import pytest

from trnsim.plan import efficiency, plan


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
@pytest.mark.parametrize("shape", [(2048, 1024, 512), (2048, 1024, 2048)])  # one K block; K blocks summed in SBUF
def test_fp32_matmul_bucket_fits_sbuf(target, shape):
    """16 M tiles of fp32 double-buffered overflowed Trn1's SBUF; the kernel now halves its block in fp32."""
    e = efficiency.simulate(target, "matmul", shape, "fp32")
    assert 0.05 < e["efficiency"] <= 1.0


def test_fp32_plan_runs_and_is_slower_than_bf16():
    """An fp32 plan on Trn1 gives a step time; the same layout in bf16 is faster (twice the peak)."""
    kw = dict(tp=8, pp=4, seq=1024, global_batch=32)
    fp32 = plan("llama2-7b", "trn1.32xlarge", 1, dtype="fp32", **kw)
    bf16 = plan("llama2-7b", "trn1.32xlarge", 1, **kw)
    assert fp32.step_ns > 1.2 * bf16.step_ns
