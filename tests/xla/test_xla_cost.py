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
    assert CostModel("trn1.32xlarge").hbm_per_rank == Cluster("trn1.32xlarge").hbm_bytes_per_rank


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


def _loop(init: int, bound: int, step: int, direction: str = "LT", extra: str = "") -> str:
    """A while loop whose body is one matmul of [M, K] x [K, K], counter from `init` by `step` to `bound`."""
    return f"""HloModule loop

%body (s: (s32[], f32[{M},{K}])) -> (s32[], f32[{M},{K}]) {{
  %s = (s32[], f32[{M},{K}]{{1,0}}) parameter(0)
  %i = s32[] get-tuple-element((s32[], f32[{M},{K}]{{1,0}}) %s), index=0
  %c = s32[] constant({step})
  %n = s32[] add(s32[] %i, s32[] %c)
  %x = f32[{M},{K}]{{1,0}} get-tuple-element((s32[], f32[{M},{K}]{{1,0}}) %s), index=1
  %y = f32[{M},{K}]{{1,0}} dot(f32[{M},{K}]{{1,0}} %x, f32[{M},{K}]{{1,0}} %x), lhs_contracting_dims={{1}}, rhs_contracting_dims={{1}}
  ROOT %t = (s32[], f32[{M},{K}]{{1,0}}) tuple(s32[] %n, f32[{M},{K}]{{1,0}} %y)
}}

%cond (s: (s32[], f32[{M},{K}])) -> pred[] {{
  %s = (s32[], f32[{M},{K}]{{1,0}}) parameter(0)
  %i = s32[] get-tuple-element((s32[], f32[{M},{K}]{{1,0}}) %s), index=0
  %b = s32[] constant({bound})
  ROOT %lt = pred[] compare(s32[] %i, s32[] %b), direction={direction}
}}

ENTRY %main (x: f32[{M},{K}]) -> (s32[], f32[{M},{K}]) {{
  %x = f32[{M},{K}]{{1,0}} parameter(0)
  %z = s32[] constant({init})
  %t = (s32[], f32[{M},{K}]{{1,0}}) tuple(s32[] %z, f32[{M},{K}]{{1,0}} %x)
  ROOT %w = (s32[], f32[{M},{K}]{{1,0}}) while((s32[], f32[{M},{K}]{{1,0}}) %t), condition=%cond, body=%body{extra}
}}
"""


@pytest.mark.parametrize("init,bound,step,direction,trips", [
    (0, 10, 1, "LT", 10), (3, 12, 3, "LT", 3), (3, 12, 3, "LE", 4), (10, 0, -2, "GT", 5), (10, 0, -2, "GE", 6),
    (5, 5, 1, "LT", 0), (0, 8, 2, "NE", 4)])
def test_while_loop_body_is_priced_times_its_trip_count(init, bound, step, direction, trips):
    model = CostModel("trn1.32xlarge")
    g = model.cost(_loop(init, bound, step, direction))
    assert g.flops == trips * 2 * M * M * K and not g.estimates and not g.unpriced
    assert g.engines["tensor"] == pytest.approx(trips * _matmul_ns(M, M, K), rel=1e-9)


def test_while_loop_trip_count_from_xla_annotation_and_unknown_loops_say_so():
    model = CostModel("trn1.32xlarge")
    known = model.cost(_loop(0, 1, 0, extra=', backend_config={"known_trip_count":{"n":"7"}}'))
    assert known.flops == 7 * 2 * M * M * K and not known.estimates
    unknown = model.cost(_loop(0, 10, 0))  # a counter that never moves: no static trip count
    assert unknown.flops == 2 * M * M * K
    assert unknown.estimates == ["while w: trip count not known before the run; priced as one iteration"]


def test_jax_fori_loop_is_priced_like_the_unrolled_blocks():
    """10 MLP blocks in a lax.fori_loop against the same 10 blocks unrolled in Python."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from trnsim import jax as tjax

    B, D, blocks = 256, 512, 10

    def block(x, w):
        return jnp.tanh(x @ w)

    def looped(x, w):
        return jax.lax.fori_loop(0, blocks, lambda i, x: block(x, w[i]), x)

    def unrolled(x, w):
        for i in range(blocks):
            x = block(x, w[i])
        return x

    spec = [jax.ShapeDtypeStruct((B, D), jnp.float32), jax.ShapeDtypeStruct((blocks, D, D), jnp.float32)]
    loop, flat = (tjax.cost(f, *spec, instance="trn2.48xlarge") for f in (looped, unrolled))
    assert loop.flops == flat.flops == blocks * 2 * B * D * D
    assert loop.time_ns == pytest.approx(flat.time_ns, rel=0.10) and not loop.estimates
    one = tjax.cost(lambda x, w: block(x, w[0]), *spec, instance="trn2.48xlarge")
    assert loop.time_ns > 9 * one.time_ns


COND = f"""HloModule cond

%double (x: f32[{M},{K}]) -> f32[{M},{K}] {{
  %x = f32[{M},{K}]{{1,0}} parameter(0)
  ROOT %y = f32[{M},{K}]{{1,0}} add(f32[{M},{K}]{{1,0}} %x, f32[{M},{K}]{{1,0}} %x)
}}

%square (x: f32[{M},{K}]) -> f32[{M},{M}] {{
  %x = f32[{M},{K}]{{1,0}} parameter(0)
  ROOT %y = f32[{M},{M}]{{1,0}} dot(f32[{M},{K}]{{1,0}} %x, f32[{M},{K}]{{1,0}} %x), lhs_contracting_dims={{1}}, rhs_contracting_dims={{1}}
}}

%call (x: f32[{M},{K}]) -> f32[{M},{M}] {{
  %x = f32[{M},{K}]{{1,0}} parameter(0)
  ROOT %y = f32[{M},{M}]{{1,0}} call(f32[{M},{K}]{{1,0}} %x), to_apply=%square
}}

ENTRY %main (p: s32[], x: f32[{M},{K}]) -> f32[{M},{K}] {{
  %p = s32[] PREDICATE
  %x = f32[{M},{K}]{{1,0}} parameter(1)
  ROOT %c = f32[{M},{K}]{{1,0}} conditional(s32[] %p, f32[{M},{K}]{{1,0}} %x, f32[{M},{K}]{{1,0}} %x), branch_computations={{%double, %call}}
}}
"""


def test_conditional_takes_a_constant_branch_or_says_it_priced_the_costliest():
    model = CostModel("trn1.32xlarge")
    add, _ = _elementwise_ns(M * K, 3 * M * K * 4)  # reads its operand twice (once per use), writes once
    first = model.cost(COND.replace("PREDICATE", "constant(0)"))
    assert first.flops == 0 and first.time_ns == pytest.approx(add, rel=1e-9) and not first.estimates
    second = model.cost(COND.replace("PREDICATE", "constant(1)"))
    assert second.flops == 2 * M * M * K and not second.estimates  # through the call to the dot
    unknown = model.cost(COND.replace("PREDICATE", "parameter(0)"))
    assert first.time_ns != second.time_ns and unknown.time_ns == max(first.time_ns, second.time_ns)
    assert unknown.estimates == ["conditional c: branch not known before the run; priced at the costliest of its 2 "
                                 "branches"]


UNKNOWN = MLP.replace("  Arg_2.7", "  chol.1 = f32[{0},{0}]{{1,0}} cholesky(maximum.6), lower=true\n"
                                   "  kern.2 = f32[{0},{0}]{{1,0}} custom-call(maximum.6), custom_call_target=\"MyKernel\"\n"
                                   "  kern.3 = f32[{0},{0}]{{1,0}} custom-call(kern.2), custom_call_target=\"MyKernel\"\n"
                                   "  Arg_2.7".format(M))


def test_unknown_ops_are_counted_by_name_not_priced():
    model = CostModel("trn1.32xlarge")
    g = model.cost(UNKNOWN)
    assert g.unpriced == {"cholesky": 1, "custom-call(MyKernel)": 2}
    # the rest is priced as before: ReLU's result now also feeds an unknown op, so it is written to HBM
    assert g.flops == model.cost(MLP).flops and g.time_ns > 0


def _ledger_report(text: str, steps: int = 3) -> dict:
    from trnsim.xla.graphs import Ledger, Record
    from trnsim.xla.report import summarize

    led = Ledger(CostModel("trn1.32xlarge"))
    for _ in range(steps):
        led.add(Record([("sync", "/x/torch_xla/torch_xla.py", 87), ("<module>", "train.py", 9)], text))
        led.end_step()
    data = {"steps": [s.to_dict() for s in led.steps], "compilations": led.compilations, "cache_hits": led.hits,
            "graphs": len(led.priced), "unpriced": led.unpriced, "estimates": led.estimates}
    return summarize(data, Cluster("trn1.32xlarge"), world=1, procs=1, script="train.py", wall_s=0.0)


def test_report_names_unpriced_ops_and_refuses_a_zero_step():
    from rich.console import Console

    from trnsim.xla.report import ZeroStepError, render

    rep = _ledger_report(UNKNOWN)
    assert rep["unpriced"] == {"cholesky": 3, "custom-call(MyKernel)": 6} and rep["step_time_ms"] > 0
    console = Console(record=True, width=160)
    render(rep, console)
    assert "custom-call(MyKernel) x6, cholesky x3" in console.export_text()
    only = """HloModule only
ENTRY %main (x: f32[8,8]) -> f32[8,8] {
  %x = f32[8,8]{1,0} parameter(0)
  ROOT %l = f32[8,8]{1,0} cholesky(f32[8,8]{1,0} %x), lower=true
}
"""
    with pytest.raises(ZeroStepError, match=r"train.py: 3 step\(s\) ran and each priced at 0 ms .*cholesky x3"):
        _ledger_report(only)


def test_bf16_storage_prices_fp32_graphs_as_stored():
    from trnsim.xla.precision import as_stored

    g = CostModel("trn1.32xlarge").cost(as_stored(LINEAR))
    assert g.parameter_bytes == (M * K + N * K + N) * 2
    assert g.engines["tensor"] == pytest.approx(_matmul_ns(M, N, K, "bf16"), rel=1e-9)


def test_bf16_rounding_is_rne_or_seeded_stochastic(monkeypatch):
    import numpy as np

    from trnsim.xla.precision import round_to_bf16

    x = np.full(4096, 1 + 2**-10, dtype=np.float32)  # a quarter of the way from 1 to the next bf16 (1 + 2**-7)
    assert (round_to_bf16(x, 0, "rne") == 1.0).all()
    sr = round_to_bf16(x, 0, "stochastic")
    assert set(np.unique(sr)) == {1.0, 1 + 2**-7} and abs(sr.mean() - x[0]) < 2e-4  # unbiased
    assert (round_to_bf16(x, 0, "stochastic") == sr).all() and not (round_to_bf16(x, 1, "stochastic") == sr).all()
    monkeypatch.setenv("NEURON_RT_STOCHASTIC_ROUNDING_EN", "1")
    assert (round_to_bf16(x, 0) == sr).all()
