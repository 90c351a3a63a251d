"""Step model: the seams, the arithmetic of step time, throughput, MFU and cost, and the interim models."""
import numpy as np
import pytest

from trnsim import fabric

from trnsim import specs
from trnsim.plan import Cluster, Layout, Recipe, StepModel, model, plan
from trnsim.plan.comm import AlphaBeta, FabricComm
from trnsim.plan.compute import Roofline
from trnsim.plan.layout import Placement
from trnsim.plan.workload import StepOp, head_ops, layer_ops
from trnsim.specs import training


class Each:
    """A stand-in model: every op, or every collective, takes the same time."""

    name, interim = "stub", False

    def __init__(self, ns):
        self.ns = ns

    def op_time(self, op, cluster, dtype):
        return self.ns

    def collective_time(self, op, nbytes, group, cluster):
        return self.ns if group.size > 1 else 0.0


def test_step_time_from_pluggable_compute_and_comm():
    """With every op 1 us and every collective 10 us, the step is the count of each on the critical path."""
    m = model("llama3-8b")
    cluster = Cluster("trn1.32xlarge", 2)
    rec = Recipe.nxd(m, checkpointing="none")
    p = StepModel(Each(1000.0), Each(10_000.0)).evaluate(m, cluster, Layout(tp=32, dp=2), rec)
    n_layer = len(layer_ops(m, 1, 8192, 32))
    n_bwd = sum(len(o.backward()) for o in layer_ops(m, 1, 8192, 32))
    n_head = sum(1 + len(o.backward()) for o in head_ops(m, 1, 8192, 32))
    mbs = 1024 // 2
    assert p.breakdown["compute"] == pytest.approx(mbs * (32 * (n_layer + n_bwd) + n_head) * 1000)
    assert p.breakdown["tp_comm"] == pytest.approx(mbs * 32 * 4 * 2 * 10_000)  # AG + RS, 2 blocks, fwd + bwd
    # DP: reduce-scatter hidden under the last backward (1 us x ops), all-gather exposed
    assert p.breakdown["dp_comm"] == pytest.approx(10_000)
    assert p.step_ns == pytest.approx(sum(p.breakdown.values()))
    assert p.models == {"compute": "stub", "comm": "stub"}


def test_throughput_mfu_and_cost_arithmetic():
    """tokens/s, MFU (AWS formula over the catalog's BF16 peak) and $/M tokens follow from the step time."""
    p = plan("llama3-8b", "trn1.32xlarge", 32, tp=32)
    step_s = p.step_ns * 1e-9
    assert p.tokens_per_s == pytest.approx(1024 * 8192 / step_s)
    h, s, L, V, i, kvd = 4096, 8192, 32, 128256, 14336, 1024
    flops = 3 * (L * (4 * h * h * s + 4 * h * kvd * s + 4 * s * s * h + 6 * 32 * s * s + 6 * h * i * s) + 4 * V * h * s)
    assert p.mfu == pytest.approx(flops * 1024 / step_s / (32 * 16 * 190e12))
    price = specs.system("trn1.32xlarge").price_usd_per_hour
    assert p.usd_per_million_tokens == pytest.approx(32 * price / 3600 / p.tokens_per_s * 1e6)
    assert p.usd_to_train(1e12) == pytest.approx(1e12 / p.tokens_per_s / 3600 * 32 * price)


def test_roofline_uses_catalog_peak_and_declared_efficiency():
    """A big matmul runs at peak x efficiency; an elementwise pass at HBM bandwidth, per trn1 core."""
    cluster = Cluster("trn1.32xlarge")
    chip = specs.chip("Trainium")
    mm = StepOp("mm", "matmul", 4096, 8192, 8192)
    eff = training.matmul_efficiency(chip)
    assert Roofline().op_time(mm, cluster, "bf16") == pytest.approx(2 * 4096 * 8192 * 8192 / (190e12 / 2 * eff) * 1e9)
    ew = StepOp("ew", "elementwise", elems=1e6, bytes=1e9)
    assert Roofline().op_time(ew, cluster, "bf16") == pytest.approx(1e9 / (chip.hbm_bandwidth / 2) * 1e9)
    assert "matrix_multiplication.rst" in training.source("matmul_efficiency", "trainium")


def test_alpha_beta_hierarchical_all_reduce():
    """A DP all-reduce over 4 nodes with 1 rank each is a 4-rank ring over each rank's EFA share."""
    cluster = Cluster("trn1.32xlarge", 4)
    g = Placement(cluster, Layout(tp=32, dp=4)).group("dp")
    efa = specs.system("trn1.32xlarge").efa_bandwidth / 32
    alpha = training.link_latency("inter_node")
    B = 1e9
    expect = 2 * 3 * alpha + 2 * 3 / 4 * B / efa * 1e9
    assert AlphaBeta().collective_time("all_reduce", B, g, cluster) == pytest.approx(expect)
    tp = Placement(cluster, Layout(tp=32, dp=4)).group("tp")
    link = specs.system("trn1.32xlarge").intra_link_bandwidth / 2
    expect = 31 * training.link_latency("intra_node") + 31 / 32 * B / link * 1e9
    assert AlphaBeta().collective_time("all_gather", B, tp, cluster) == pytest.approx(expect)


def test_calibration_case_says_which_models_timed_it():
    """The published Llama-3.1-8B trn1 layout plans with the fabric's collectives and the simulated compute model."""
    p = plan("llama3.1-8b", "trn1.32xlarge", 32, tp=32, seq=8192, global_batch=1024, zero1=True)
    assert (p.layout.dp, p.cluster.ranks) == (32, 1024)
    assert p.models == {"compute": "simulated", "comm": "fabric"}
    assert sum(p.memory.values()) < p.capacity


def test_fabric_comm_prices_the_real_groups():
    """FabricComm asks trnsim.fabric about the group's own ranks; groups across nodes share their NICs.

    trn1.32xlarge has 8 EFA NICs, one per 2 chips (4 ranks). The 32 DP groups (one rank per node
    each) run at once, so the NIC of rank 0's chip carries 4 groups' bytes: 32 groups x 1 NIC / 8."""
    cluster = Cluster("trn1.32xlarge", 4)
    fc = fabric.cluster("trn1.32xlarge", nodes=4)
    grid = np.arange(128).reshape(1, 4, 1, 32)  # [PP, DP, CP, TP]
    place = Placement(cluster, Layout(tp=32, dp=4))
    B = 2.0**26
    expect = fabric.collective_time("all_gather", B, list(grid[0, 0, 0, :]), fc)[0]
    assert FabricComm().collective_time("all_gather", B, place.group("tp"), cluster) == pytest.approx(expect)
    expect = fabric.collective_time("reduce_scatter", 4 * B, list(grid[0, :, 0, 0]), fc)[0]
    assert FabricComm().collective_time("reduce_scatter", B, place.group("dp"), cluster) == pytest.approx(expect)


def test_gpu_cluster_has_one_rank_per_gpu():
    """p4d.24xlarge plans with 8 ranks per node, A100 memory per rank and its declared efficiency."""
    p = plan("llama2-7b", "p4d.24xlarge", 2, tp=8)
    assert p.cluster.ranks == 16 and p.capacity == specs.system("p4d.24xlarge").chip.hbm_bytes
    assert training.matmul_efficiency(p.cluster.system.chip) == 0.52
    assert p.models == {"compute": "roofline at declared efficiency", "comm": "alpha-beta (interim)"}


def test_every_training_figure_has_a_source():
    """Every figure of training.toml names its source, and source tags expand to the documents they stand for."""
    data = training._data()
    for table, figures in data.items():
        if table == "sources":
            continue
        for key in figures:
            if key != "sources":
                text = training.source(table, key)
                assert text and not any(text.startswith(tag) for tag in data["sources"]), (table, key)
    assert training.source("matmul_efficiency", "h100-80gb").startswith("measured for trnsim")
