"""MX formats in training plans: Trn3's MX datapath prices the matmuls; chips without one refuse by name."""
import json
import math
from importlib import resources

import pytest

from trnsim import specs
from trnsim.plan import plan
from trnsim.plan.compute import SimulatedCompute
from trnsim.plan.layout import Cluster
from trnsim.plan.workload import StepOp
from trnsim.specs.records import UnsupportedDTypeError


def test_mx_matmul_runs_the_bf16_schedule_at_the_mx_rate():
    cluster = Cluster(specs.system("Trn3 Gen2 UltraServer"), 1, 2)
    op = StepOp("mlp_up", "matmul", 8192, 4096, 3584, 1, 0.0, float(8192 * 4096 + 4096 * 3584 + 8192 * 3584))
    c = SimulatedCompute()
    bf16 = c.op_time(op, cluster, "bf16")
    core = specs.neuroncore("trn3")
    assert core.peak_flops("mxfp8") == 4 * core.peak_flops("bf16")  # 8x128 inputs per cycle (neuroncores.toml)
    mx = c.op_time(op, cluster, "mxfp8")
    # the operands through DMA at the simulated stream rate of their bucket (elements per partition, per core)
    per_partition = 2 ** round(math.log2(op.bytes / 2 / 2 / 128))
    e = next(e for e in json.loads(resources.files("trnsim.plan").joinpath("efficiency.json").read_text())["entries"]
             if (e["target"], e["kernel"], e["shape"]) == ("trn3", "stream", [min(max(per_partition, 512), 65536)]))
    dma = op.bytes / (e["efficiency"] * core.hbm_bandwidth * 2) * 1e9
    assert mx == pytest.approx(max(bf16 / 4, dma))
    assert mx < bf16 / 2
    assert c.op_time(op, cluster, "mxfp4") == mx  # MXFP4 is widened to MXFP8 for the matmul


def test_mx_training_plan_on_trn3_is_faster_and_keeps_bf16_weights():
    kw = dict(tp=8, global_batch=1152)
    b = plan("llama3-8b", "Trn3 Gen2 UltraServer", 1, dtype="bf16", **kw)
    m = plan("llama3-8b", "Trn3 Gen2 UltraServer", 1, dtype="mxfp8", **kw)
    assert m.step_ns < 0.6 * b.step_ns
    assert m.memory["weights"] == b.memory["weights"]
    chip = specs.chip("Trainium3")
    assert m.mfu == pytest.approx(b.mfu * b.step_ns / m.step_ns * chip.peak_flops("bf16") / chip.peak_flops("mxfp8"))


def test_mx_on_a_chip_without_the_datapath_is_refused():
    with pytest.raises(UnsupportedDTypeError, match="no mxfp8 datapath"):
        plan("llama3-8b", "trn2.48xlarge", 4, tp=8, dtype="mxfp8")
