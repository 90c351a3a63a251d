"""The HLO cost model against the planner's per-op figures, computed here from the efficiency table and catalog."""
import pytest

from trnsim import specs
from trnsim.plan import Cluster
from trnsim.plan import efficiency as eff
from trnsim.xla import CostModel, hlo
from trnsim.xla.cost import DeviceOutOfMemoryError  # noqa: F401  (the class the worker raises)

M, K, N = 256, 512, 1024

LINEAR = f"""HloModule linear, entry_computation_layout={{(f32[{M},{K}]{{1,0}}, f32[{N},{K}]{{1,0}}, f32[{N}]{{0}})->(f32[{M},{N}]{{1,0}})}}

ENTRY %linear (x: f32[{M},{K}], w: f32[{N},{K}], b: f32[{N}]) -> (f32[{M},{N}]) {{
  %x = f32[{M},{K}]{{1,0}} parameter(0)
  %w = f32[{N},{K}]{{1,0}} parameter(1)
  %t.1 = f32[{K},{N}]{{0,1}} transpose(f32[{N},{K}]{{1,0}} %w), dimensions={{1,0}}
  %d.2 = f32[{M},{N}]{{1,0}} dot(f32[{M},{K}]{{1,0}} %x, f32[{K},{N}]{{0,1}} %t.1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  %b = f32[{N}]{{0}} parameter(2)
  %bb.3 = f32[{M},{N}]{{1,0}} broadcast(f32[{N}]{{0}} %b), dimensions={{1}}
  %a.4 = f32[{M},{N}]{{1,0}} add(f32[{M},{N}]{{1,0}} %d.2, f32[{M},{N}]{{1,0}} %bb.3)
  ROOT %r.5 = (f32[{M},{N}]{{1,0}}) tuple(f32[{M},{N}]{{1,0}} %a.4)
}}
"""

# JAX's printer: no % sigils, operands without shapes, a two-layer MLP block with a ReLU between the dots
MLP = f"""HloModule jit_mlp

ENTRY main.9 {{
  Arg_0.1 = f32[{M},{K}]{{1,0}} parameter(0)
  Arg_1.2 = f32[{K},{N}]{{1,0}} parameter(1)
  dot.3 = f32[{M},{N}]{{1,0}} dot(Arg_0.1, Arg_1.2), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  constant.4 = f32[] constant(0)
  broadcast.5 = f32[{M},{N}]{{1,0}} broadcast(constant.4), dimensions={{}}
  maximum.6 = f32[{M},{N}]{{1,0}} maximum(dot.3, broadcast.5)
  exponential.6b = f32[{M},{N}]{{1,0}} exponential(maximum.6)
  Arg_2.7 = f32[{N},{K}]{{1,0}} parameter(2)
  ROOT dot.8 = f32[{M},{K}]{{1,0}} dot(exponential.6b, Arg_2.7), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}
"""


def _matmul_ns(m, n, k, dtype="fp32", target="trn1"):
    """The kernel timing model's figure: FLOPs over the bucket's efficiency x the core's peak."""
    core = specs.neuroncore(target)
    return 2 * m * n * k / (eff.efficiency(target, "matmul", eff.matmul_bucket(m, n, k), dtype) * core.peak_flops(dtype)) * 1e9


def _elementwise_ns(elems, nbytes, target="trn1"):
    """Hand-computed: elements at the Vector engine's simulated rate, bytes at the core's simulated HBM rate."""
    core = specs.neuroncore(target)
    vec = eff.efficiency(target, "vector", eff.elementwise_bucket(elems), "bf16") * core.partitions * core.clocks["vector"]
    hbm = eff.efficiency(target, "stream", eff.elementwise_bucket(nbytes / 2), "bf16") * core.hbm_bandwidth
    return max(elems / vec, nbytes / hbm) * 1e9, elems / vec * 1e9


def test_parse_reads_both_printers():
    lin, mlp = hlo.parse(LINEAR), hlo.parse(MLP)
    assert [i.opcode for i in lin.entry.instructions][:4] == ["parameter", "parameter", "transpose", "dot"]
    dot = mlp.entry.by_name()["dot.3"]
    assert dot.operands == ("Arg_0.1", "Arg_1.2") and dot.dims_attr("lhs_contracting_dims") == (1,)
    assert mlp.entry.by_name()["dot.8"].root and dot.shapes[0].nbytes == M * N * 4


def test_linear_layer_matches_kernel_model_and_hand_figures():
    g = CostModel("trn1.32xlarge").cost(LINEAR)
    assert g.flops == 2 * M * N * K
    assert g.engines["tensor"] == pytest.approx(_matmul_ns(M, N, K), rel=1e-9)
    # the transpose moves the weight through DMA: read and write it
    move, _ = _elementwise_ns(0, 2 * N * K * 4)
    # the bias add is the graph's output: reads the matmul result and the bias vector, writes its result
    add, add_engine = _elementwise_ns(M * N, (M * N + N + M * N) * 4)
    assert g.engines["vector"] == pytest.approx(add_engine, rel=1e-9)
    assert g.time_ns == pytest.approx(_matmul_ns(M, N, K) + move + add, rel=1e-9)
    assert g.parameter_bytes == (M * K + N * K + N) * 4


def test_mlp_block_keeps_the_elementwise_chain_on_chip():
    """ReLU then exp between two dots: the chain reads the first dot's result once and writes once."""
    g = CostModel("trn1.32xlarge").cost(MLP)
    relu, _ = _elementwise_ns(M * N, M * N * 4)  # reads dot.3; its result stays on chip (its user is elementwise)
    exp, _ = _elementwise_ns(M * N, M * N * 4)  # writes for the dot that follows
    want = _matmul_ns(M, N, K) + _matmul_ns(M, K, N) + relu + exp
    assert g.time_ns == pytest.approx(want, rel=1e-9)
    assert g.engines["scalar"] > 0 and g.flops == 2 * 2 * M * N * K


def test_autocast_prices_fp32_dots_at_bf16(monkeypatch):
    monkeypatch.setenv("NEURON_CC_FLAGS", "--auto-cast matmult --auto-cast-type bf16")
    g = CostModel("trn1.32xlarge").cost(LINEAR)
    assert g.engines["tensor"] == pytest.approx(_matmul_ns(M, N, K, "bf16"), rel=1e-9)


def test_memory_counts_parameters_and_peak_buffers():
    g = CostModel("trn1.32xlarge").cost(MLP)
    assert g.parameter_bytes == (M * K + K * N + N * K) * 4
    # dot.3 dies at the ReLU (fused, never stored); the peak is exp's result while the last dot writes
    assert g.temporary_bytes == pytest.approx((M * N + M * K) * 4)
    assert CostModel("trn1.32xlarge").hbm_per_rank == Cluster("trn1.32xlarge").hbm_per_rank


def test_all_reduce_is_timed_on_the_fabric():
    text = """HloModule ar
%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %c = f32[] add(f32[] %a, f32[] %b)
}
ENTRY %main (p: f32[1048576]) -> f32[1048576] {
  %p = f32[1048576]{0} parameter(0)
  ROOT %r = f32[1048576]{0} all-reduce(f32[1048576]{0} %p), replica_groups={{0,1,2,3,4,5,6,7}}, to_apply=%sum
}
"""
    model = CostModel("trn1.32xlarge", world=8)
    g = model.cost(text)
    assert g.collectives[0]["ranks"] == 8
    assert g.engines["collective"] == pytest.approx(model.collective_time("all_reduce", 4 * 2**20, 8))
    assert model.collective_time("all_reduce", 4 * 2**20, 8) < model.collective_time("all_reduce", 4 * 2**20, 32)
