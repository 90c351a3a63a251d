"""Simulated compute: buckets, the shipped efficiency table, and how an op's time follows from them."""
import math

import numpy as np
import pytest

from trnsim import specs
from trnsim.specs import training
from trnsim.plan import Cluster, StepOp, efficiency, plan
from trnsim.plan.compute import SimulatedCompute


def _nearest_pow2(x, lo, hi):
    return int(np.clip(2.0 ** np.round(np.log2(x)), lo, hi))


def test_matmul_bucket_rounds_in_log_space_and_caps_the_product():
    """Each dim goes to its nearest power of two in [128, 8192]; past 2^36 the largest dim halves."""
    for m, n, k in [(8192, 384, 4096), (8192, 448, 4096), (100, 3000, 5), (8192, 14336, 8192)]:
        dims = [_nearest_pow2(d, 128, 8192) for d in (m, n, k)]
        while dims[0] * dims[1] * dims[2] > 2**36:
            dims[int(np.argmax(dims))] //= 2
        assert efficiency.matmul_bucket(m, n, k) == tuple(dims)
    assert efficiency.matmul_bucket(8192, 384, 4096) == (8192, 512, 4096)


def test_small_table_entries_match_a_fresh_simulation():
    """The shipped table holds what the timing model gives today (small buckets, every generation and kernel)."""
    table = efficiency._table()
    small = {}
    for (target, kernel, dtype, shape), e in sorted(table.items(), key=lambda kv: math.prod(kv[0][3])):
        small.setdefault((target, kernel), e)
    assert {t for t, _ in small} == {"trn1", "trn2", "trn3"} and {k for _, k in small} == {"matmul", "attention", "vector", "stream"}
    for e in small.values():
        fresh = efficiency.simulate.__wrapped__(e["target"], e["kernel"], tuple(e["shape"]), e["dtype"])
        assert fresh["latency_ns"] == pytest.approx(e["latency_ns"], rel=1e-9), e
        assert fresh["efficiency"] == pytest.approx(e["efficiency"], rel=1e-5), e


def test_matmul_runs_at_its_bucket_efficiency_of_the_core_peak():
    """A trn1 matmul takes FLOPs / (bucket efficiency x PE rows x cols x 2 x TensorE clock)."""
    cluster = Cluster("trn1.32xlarge", 1)
    core = specs.neuroncore("trn1")
    op = StepOp("qkv", "matmul", 8192, 4096, 384, bytes=1.0)
    eff = efficiency._table()[("trn1", "matmul", "bf16", (8192, 512, 4096))]["efficiency"]
    peak = core.pe_rows * core.pe_cols * 2 * core.clocks["tensor"]
    assert SimulatedCompute().op_time(op, cluster, "bf16") == pytest.approx(2 * 8192 * 4096 * 384 / (eff * peak) * 1e9)
    assert 0.05 < eff < 1


# A BF16 add's elements a lane a cycle, both inputs in SBUF: N cycles on NC-v2 (nki.isa tensor_tensor cost note),
# twice that with v3/v4's tensor_tensor perf mode (trainium2_arch.rst, trainium3_arch.rst)
BF16_ADD = {"trn1": 1, "trn2": 2, "trn3": 2}


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_vector_efficiency_is_a_share_of_the_documented_bf16_add_peak(target):
    """The vector bucket's efficiency counts its elements against the engine's documented BF16 add rate, so it
    stays within 100% on every generation (a fresh simulation of the table's largest vector bucket)."""
    core = specs.neuroncore(target)
    shape = max(s for (t, k, _, s) in efficiency._table() if t == target and k == "vector")
    fresh = efficiency.simulate.__wrapped__(target, "vector", shape, "bf16")
    elems = shape[0] * core.partitions
    rate = elems / (fresh["latency_ns"] * 1e-9)
    assert fresh["efficiency"] == pytest.approx(rate / (core.partitions * core.clocks["vector"] * BF16_ADD[target]),
                                                rel=1e-5)
    assert 0.5 < fresh["efficiency"] <= 1.0


def test_elementwise_takes_the_slower_of_vector_and_dma():
    """An elementwise op's time is max(elements at the Vector rate, bytes at the DMA rate), both simulated."""
    cluster = Cluster("trn2.48xlarge", 1, lnc=2)
    core = specs.neuroncore("trn2")
    elems, nbytes = 2.0**22, 2.0**26
    per_core = elems / 2 / core.partitions
    vec = efficiency.efficiency("trn2", "vector", (_nearest_pow2(per_core, 512, 65536),))
    dma = efficiency.efficiency("trn2", "stream", (_nearest_pow2(nbytes / 2 / 2 / core.partitions, 512, 65536),))
    expect = max(elems / (vec * core.partitions * core.clocks["vector"] * BF16_ADD["trn2"] * 2),
                 nbytes / (dma * core.hbm_bandwidth * 2))
    op = StepOp("norm", "elementwise", elems=elems, bytes=nbytes)
    assert SimulatedCompute().op_time(op, cluster, "bf16") == pytest.approx(expect * 1e9)


def test_gpus_keep_the_declared_efficiency():
    """On H100 a matmul runs at training.toml's declared efficiency of the chip's BF16 peak."""
    cluster = Cluster("p5.48xlarge", 1)
    op = StepOp("mm", "matmul", 4096, 4096, 4096, bytes=1.0)
    eff = training.matmul_efficiency(specs.chip("h100-80gb"))
    assert SimulatedCompute().op_time(op, cluster, "bf16") == pytest.approx(2 * 4096**3 / (989.5e12 * eff) * 1e9)


def test_bucket_outside_the_table_is_simulated_once():
    """A bucket the table lacks (fp32 here) is simulated on first use and then served from memory."""
    key = ("trn1", "matmul", "fp32", (128, 128, 128))
    assert key not in efficiency._table()
    before = efficiency.simulate.cache_info().misses
    first = efficiency.entry("trn1", "matmul", (128, 128, 128), "fp32")
    again = efficiency.entry("trn1", "matmul", (128, 128, 128), "fp32")
    assert first is again and efficiency.simulate.cache_info().misses == before + 1
    assert first["latency_ns"] > efficiency.entry("trn1", "matmul", (128, 128, 128))["latency_ns"]  # fp32: 4x passes


def test_calibration_case_lands_near_the_published_throughput():
    """Llama-3.1-8B on 32 trn1.32xlarge (TP32 DP32) plans within 25% of the published 47.95 seq/s."""
    p = plan("llama3.1-8b", "trn1.32xlarge", 32, tp=32, seq=8192, global_batch=1024)
    assert p.seqs_per_s == pytest.approx(47.95, rel=0.25)
    assert p.breakdown["compute"] > 0 and p.models["compute"] == "simulated"


def test_lnc2_rank_splits_a_matmul_over_its_two_cores():
    """On trn2 at LNC 2 a matmul's bucket holds half the rows, and the rank runs at twice one core's peak."""
    cluster = Cluster("trn2.48xlarge", 1, lnc=2)
    core = specs.neuroncore("trn2")
    op = StepOp("qkv", "matmul", 8192, 4096, 512, bytes=1.0)
    eff = efficiency._table()[("trn2", "matmul", "bf16", (4096, 512, 4096))]["efficiency"]
    peak = 2 * core.pe_rows * core.pe_cols * 2 * core.clocks["tensor"]
    assert SimulatedCompute().op_time(op, cluster, "bf16") == pytest.approx(2 * 8192 * 4096 * 512 / (eff * peak) * 1e9)


def test_documented_plans_need_no_simulation_beyond_the_table():
    """Every bucket the calibration case and the 70B NxD layout ask for is in the shipped table."""
    from trnsim.plan import compute

    compute._simulated_time.cache_clear()
    try:
        with efficiency.collecting() as keys:
            plan("llama3.1-8b", "trn1.32xlarge", 32, tp=32)
            plan("llama3-70b", "trn2.48xlarge", 8, tp=32, pp=4)
    finally:
        compute._simulated_time.cache_clear()
    assert keys and {k[0] for k in keys} == {"trn1", "trn2"}
    assert keys <= set(efficiency._table())
