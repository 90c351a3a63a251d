"""The cost of single instructions, against the documented formulas evaluated here."""
import pytest

from trnsim.core import NeuronCore, Op
from trnsim.core.timing import simulate
from trnsim.specs.timing import timing


def run(target, build):
    """Issue instructions on a shapes-only core; return its scheduled events."""
    nc = NeuronCore(target, values=False)
    build(nc)
    return simulate(nc.stream, target).events



def apart(nc):
    """An unrelated Vector instruction, so the one measured next does not read what its engine's previous
    instruction wrote (that adds the static overhead: tests/timing/test_overlap.py)."""
    nc.issue(Op.MEMSET, engine="vector", dst=nc.tensor((128, 8), "float32"), value=0.0)

def tiles(nc, k, m, n, dtype):
    st, mv = nc.tensor((k, m), dtype), nc.tensor((k, n), dtype)
    return st, mv, nc.tensor((m, n), "float32", "psum")


@pytest.mark.parametrize("n, cycles", [(512, 512), (128, 128), (32, 64)])
def test_bf16_matmul_issue_interval_v2(n, cycles):
    """A bf16 matmul on v2 costs max(min(64, N_stationary), N_moving) TensorE cycles at 2.8 GHz."""
    def build(nc):
        st, mv, ps = tiles(nc, 128, 128, n, "bfloat16")
        nc.issue(Op.NC_MATMUL, dst=ps, stationary=st, moving=mv)
    ev = run("trn1", build)[-1]
    assert ev.end - ev.start == pytest.approx(cycles / 2.8)
    assert ev.flops == 2 * 128 * 128 * n


def test_fp32_matmul_is_four_times_slower():
    """An fp32 matmul of a 512-wide moving tile costs 4 x 512 TensorE cycles."""
    def build(nc):
        st, mv, ps = tiles(nc, 128, 128, 512, "float32")
        nc.issue(Op.NC_MATMUL, dst=ps, stationary=st, moving=mv)
    ev = run("trn1", build)[-1]
    assert ev.end - ev.start == pytest.approx(4 * 512 / 2.8)


def test_small_stationary_bounds_short_moving():
    """With 16 stationary columns and 8 moving ones the interval is min(64, 16) = 16 cycles."""
    def build(nc):
        st, mv, ps = tiles(nc, 128, 16, 8, "bfloat16")
        nc.issue(Op.NC_MATMUL, dst=ps, stationary=st, moving=mv)
    ev = run("trn1", build)[-1]
    assert ev.end - ev.start == pytest.approx(16 / 2.8)


@pytest.mark.parametrize("target, dtype, cycles, ghz", [("trn1", "bfloat16", 128, 2.8), ("trn1", "float32", 512, 2.8),
                                                      ("trn3", "bfloat16", 128, 2.4), ("trn3", "float32", 256, 2.4)])
def test_pe_transpose_of_fp32_runs_at_the_fp32_matmul_rate_or_twice_it_in_transpose_mode(target, dtype, cycles, ghz):
    """A [128, 128] nc_transpose on TensorE: max(P, min(64, F)) cycles for 16-bit data; FP32 data costs what an
    FP32 matmul does (4x) on v2, where a transpose is a matmul with the identity, and half that with v3+'s
    transpose mode (trainium2_arch.rst: 2x speedup in FP32 transpose). Matmuls first bring a v3+ TensorE past
    its dI/dt warm-up."""
    def build(nc):
        data = nc.tensor((128, 128), dtype)
        nc.issue(Op.MEMSET, engine="vector", dst=data, value=0.0)
        st, mv, ps = tiles(nc, 128, 128, 512, "bfloat16")
        for _ in range(40):
            nc.issue(Op.NC_MATMUL, dst=ps, stationary=st, moving=mv)
        nc.issue(Op.NC_TRANSPOSE, dst=nc.tensor((128, 128), dtype, "psum"), data=data, engine="tensor")
    ev = run(target, build)[-1]
    assert ev.end - ev.start == pytest.approx(cycles / ghz, rel=1e-6)


def test_trn2_tensor_engine_warms_up_at_half_rate():
    """On trn2 a cold TensorE runs at 50% (dI/dt throttle) and reaches full rate after ~3 us of work."""
    def build(nc):
        st, mv, ps = tiles(nc, 128, 128, 512, "bfloat16")
        for _ in range(40):
            nc.issue(Op.NC_MATMUL, dst=ps, stationary=st, moving=mv)
    evs = run("trn2", build)
    full = 512 / 2.4
    assert evs[0].end - evs[0].start == pytest.approx(2 * full)
    assert evs[-1].end - evs[-1].start == pytest.approx(full)


@pytest.mark.parametrize("op, inputs", [(Op.TENSOR_TENSOR, 2), (Op.TENSOR_COPY, 1)])
def test_vector_streams_n_or_2n_cycles(op, inputs):
    """VectorE on v2 streams N elements per partition per input at 1.12 GHz (fp32, N=1024)."""
    def build(nc):
        a, b, out = (nc.tensor((128, 1024), "float32") for _ in range(3))
        nc.issue(Op.MEMSET, engine="vector", dst=a, value=1.0)
        nc.issue(Op.MEMSET, engine="vector", dst=b, value=1.0)
        apart(nc)
        if op is Op.TENSOR_TENSOR:
            nc.issue(op, dst=out, data1=a, data2=b, op="add")
        else:
            nc.issue(op, engine="vector", dst=out, src=a)
    ev = run("trn1", build)[-1]
    assert ev.end - ev.start == pytest.approx(inputs * 1024 / 1.12)


@pytest.mark.parametrize("dtype, op, cycles", [("bfloat16", "maximum", 1024), ("bfloat16", "add", 1024),
                                               ("bfloat16", "minimum", 2048), ("float32", "maximum", 2048)])
def test_bf16_add_or_max_reduce_streams_n_over_2(dtype, op, cycles):
    """tensor_reduce on VectorE: N cycles, N/2 when data and dst are BF16 and the op is add or max
    (reference 1.12, from the nki.isa cost notes); N = 2048 at 1.12 GHz."""
    def build(nc):
        a, out = nc.tensor((128, 2048), dtype), nc.tensor((128, 1), dtype)
        nc.issue(Op.MEMSET, engine="vector", dst=a, value=1.0)
        apart(nc)
        nc.issue(Op.TENSOR_REDUCE, dst=out, data=a, op=op, axis=1)
    ev = run("trn1", build)[-1]
    assert ev.end - ev.start == pytest.approx(cycles / 1.12)


@pytest.mark.parametrize("dtype, value, cycles", [("bfloat16", 0.0, 1024), ("float16", 0.0, 1024),
                                                  ("bfloat16", 1.0, 2048), ("float32", 0.0, 2048)])
def test_memset_of_zero_into_16_bit_streams_n_over_2(dtype, value, cycles):
    """memset on VectorE: N cycles, N/2 for zero into BF16/FP16 (reference 1.12); N = 2048 at 1.12 GHz."""
    def build(nc):
        apart(nc)
        nc.issue(Op.MEMSET, engine="vector", dst=nc.tensor((128, 2048), dtype), value=value)
    ev = run("trn1", build)[-1]
    assert ev.end - ev.start == pytest.approx(cycles / 1.12)


@pytest.mark.parametrize("pred_space, cycles", [("sbuf", 2048), ("psum", 1024)])
def test_predicated_copy_streams_src_and_predicate_side_by_side_across_memories(pred_space, cycles):
    """tensor_copy_predicated: 2N cycles with src and predicate both in SBUF, N when one is in PSUM (each
    memory feeds its own stream; reference 1.12); N = 1024 fp32 at 1.12 GHz."""
    def build(nc):
        src, dst = nc.tensor((128, 1024), "float32"), nc.tensor((128, 1024), "float32")
        pred = nc.tensor((128, 1024), "uint32", pred_space)
        for t in (src, dst, pred):
            nc.issue(Op.MEMSET, engine="vector", dst=t, value=1.0)
        apart(nc)
        nc.issue(Op.TENSOR_COPY_PREDICATED, dst=dst, src=src, predicate=pred)
    ev = run("trn1", build)[-1]
    assert ev.end - ev.start == pytest.approx(cycles / 1.12)


def test_tensor_tensor_with_one_input_in_psum_streams_n_cycles():
    """SBUF and PSUM have separate read interfaces: an SBUF + PSUM tensor_tensor costs ~N cycles, two SBUF
    inputs ~2N (fp32, N=512, 1.12 GHz)."""
    def build(space):
        def b(nc):
            a, out = nc.tensor((128, 512), "float32"), nc.tensor((128, 512), "float32")
            p = nc.tensor((128, 512), "float32", space)
            nc.issue(Op.MEMSET, engine="vector", dst=a, value=1.0)
            nc.issue(Op.MEMSET, engine="vector", dst=p, value=1.0)
            apart(nc)
            nc.issue(Op.TENSOR_TENSOR, dst=out, data1=a, data2=p, op="add")
        return b
    psum, sbuf = run("trn1", build("psum"))[-1], run("trn1", build("sbuf"))[-1]
    assert psum.end - psum.start == pytest.approx(512 / 1.12)
    assert sbuf.end - sbuf.start == pytest.approx(2 * 512 / 1.12)


def test_tiny_vector_instruction_pays_min_ii():
    """A 16-element copy still costs MIN_II = 64 VectorE cycles."""
    def build(nc):
        a, out = nc.tensor((128, 16), "float32"), nc.tensor((128, 16), "float32")
        nc.issue(Op.MEMSET, engine="vector", dst=a, value=0.0)
        apart(nc)
        nc.issue(Op.TENSOR_COPY, engine="vector", dst=out, src=a)
    ev = run("trn1", build)[-1]
    assert ev.end - ev.start == pytest.approx(64 / 1.12)


def test_v3_perf_mode_speeds_up_bf16_copies():
    """On trn2 a bf16 SBUF->SBUF tensor_copy runs 4x faster than NC-v2's one element a cycle per lane, an fp32
    one 2x (the Vector datapath: 512 16-bit elements a cycle, 256 of other types; N=2048, 0.96 GHz)."""
    def build(dtype):
        def b(nc):
            a, out = nc.tensor((128, 2048), dtype), nc.tensor((128, 2048), dtype)
            nc.issue(Op.MEMSET, engine="vector", dst=a, value=0.0)
            apart(nc)
            nc.issue(Op.TENSOR_COPY, engine="vector", dst=out, src=a)
        return b
    fp32, bf16 = run("trn2", build("float32"))[-1], run("trn2", build("bfloat16"))[-1]
    assert fp32.end - fp32.start == pytest.approx(2048 / 256 * 128 / 0.96)
    assert bf16.end - bf16.start == pytest.approx(2048 / 512 * 128 / 0.96)


@pytest.mark.parametrize("target, src_dtype, src_space, ghz, per_cycle", [
    ("trn1", "float32", "sbuf", 1.12, 128),      # NC-v2: 128 elements a cycle, any type
    ("trn2", "float32", "sbuf", 0.96, 256),      # fp32 in, bf16 out, all SBUF: the 256-wide datapath
    ("trn3", "float32", "sbuf", 1.2, 256),
    ("trn2", "float32", "psum", 0.96, 128),      # reading PSUM halves it, as for the 16-bit modes
])
def test_a_32_bit_copy_streams_at_the_datapath_width_for_other_types(target, src_dtype, src_space, ghz, per_cycle):
    """A copy casting fp32 to bf16 is not in the 16-bit perf mode (both sides must be 16-bit); it streams at
    the Vector datapath's width for other data types (trainium2_arch.rst, trainium3_arch.rst)."""
    def b(nc):
        a, out = nc.tensor((128, 512), src_dtype, src_space), nc.tensor((128, 512), "bfloat16")
        nc.issue(Op.MEMSET, engine="vector", dst=a, value=0.0)
        apart(nc)
        nc.issue(Op.TENSOR_COPY, engine="vector", dst=out, src=a)
    ev = run(target, b)[-1]
    assert ev.end - ev.start == pytest.approx(512 * 128 / per_cycle / ghz)


@pytest.mark.parametrize("target, dtype, ghz, per_cycle", [
    ("trn3", "bfloat16", 1.2, 256),   # NC-v4 ScalarE: 256 BF16/FP16/FP8 elements a cycle
    ("trn3", "float32", 1.2, 128),    # 128 of other types
    ("trn2", "bfloat16", 1.2, 128),   # NC-v3 ScalarE: 128 for every type
])
def test_scalar_engine_streams_at_its_datapath_width(target, dtype, ghz, per_cycle):
    """An activation streams N elements per partition at the ScalarE datapath's elements a cycle over 128
    partitions (trainium2_arch.rst, trainium3_arch.rst: compute engine specifications)."""
    def b(nc):  # its input written by no instruction: no wait, no static overhead
        nc.issue(Op.ACTIVATION, dst=nc.tensor((128, 2048), dtype), data=nc.tensor((128, 2048), dtype), op="exp")
    ev = run(target, b)[-1]
    assert ev.end - ev.start == pytest.approx(2048 * 128 / per_cycle / ghz)


@pytest.mark.parametrize("target, rate", [("trn1", 17.0), ("trn3", 33.0)])
def test_dma_splits_over_16_engines(target, rate):
    """A [128, 512] bf16 load gives each of 16 DMA engines 8 partitions of 1 KiB: fixed latency,
    then bytes / per-engine rate plus one descriptor per partition."""
    def build(nc):
        src = nc.hbm_tensor((128, 512), "bfloat16")
        nc.issue(Op.DMA_COPY, dst=nc.tensor((128, 512), "bfloat16"), src=src)
    ev = run(target, build)[-1]
    desc = timing(target).dma_descriptor_latency
    assert [p[0] for p in ev.pieces] == list(range(16))
    for _, start, end in ev.pieces:
        assert start == pytest.approx(1300.0)
        assert end - start == pytest.approx(8 * 1024 / rate + 8 * desc)


def test_dma_hbm_share_caps_trn2_engines():
    """On trn2 16 engines x 23 B/ns exceed the core's 362.5 GB/s HBM share, so each gets 1/16 of it."""
    def build(nc):
        nc.issue(Op.DMA_COPY, dst=nc.tensor((128, 2048), "bfloat16"), src=nc.hbm_tensor((128, 2048), "bfloat16"))
    ev = run("trn2", build)[-1]
    _, start, end = ev.pieces[0]
    assert end - start == pytest.approx(8 * 4096 / (362.5 / 16) + 8 * timing("trn2").dma_descriptor_latency)


def test_small_dma_uses_one_engine():
    """A 4-partition transfer runs on a single DMA engine."""
    def build(nc):
        nc.issue(Op.DMA_COPY, dst=nc.tensor((4, 256), "float32"), src=nc.hbm_tensor((4, 256), "float32"))
    ev = run("trn1", build)[-1]
    assert len(ev.pieces) == 1


def test_indirect_gather_moves_whole_rows_per_descriptor():
    """A vector_offset gather of 128 rows of 1280 bf16 moves each row (2,560 contiguous bytes) with one
    descriptor, as a direct load of the same rows does: the rows are the gather's contiguous runs, not its
    elements (nki-dma-overview.rst: one scatter-gather buffer per contiguous run)."""
    import numpy as np

    def build(indirect):
        def issue(nc):
            table = nc.hbm_tensor((600, 1280), "bfloat16")
            src = table.ap([[1280, 128], [1, 1280]], vector_offset=np.arange(128) * 3) if indirect else table[0:128, :]
            nc.issue(Op.DMA_COPY, dst=nc.tensor((128, 1280), "bfloat16"), src=src)
        return issue
    gather, direct = run("trn1", build(True))[-1], run("trn1", build(False))[-1]
    busy = max(e - s for _, s, e in gather.pieces)
    assert busy == pytest.approx(8 * (2560 / 17.0 + timing("trn1").dma_descriptor_latency))
    assert busy == pytest.approx(max(e - s for _, s, e in direct.pieces))


def _transpose_ns(target, src_space, p=128, f=512, dtype="bfloat16"):
    """One dma_transpose [f, p] -> [p, f] alone on the core: (latency ns, descriptor ns, byte ns) per engine."""
    from trnsim.core import NeuronCore, Op
    from trnsim.core.timing import simulate
    from trnsim.specs import neuroncore
    from trnsim.specs.timing import timing

    nc = NeuronCore(target, values=False)
    src = nc.hbm_tensor((f, p), dtype) if src_space == "hbm" else nc.tensor((f, p), dtype)
    if src_space != "hbm":
        nc.issue(Op.MEMSET, engine="vector", dst=src, value=0.0)
    nc.issue(Op.DMA_TRANSPOSE, dst=nc.tensor((p, f), dtype), src=src)
    ev = simulate(nc.stream, target).events[-1]
    spec, t = neuroncore(target), timing(target)
    rate = min(spec.dma_engine_bandwidth, spec.hbm_bandwidth / spec.dma_engines)
    per_engine_bytes = (p // spec.dma_engines) * f * 2
    return max(e - s for _, s, e in ev.pieces), t.dma_descriptor_latency, per_engine_bytes / rate * 1e9


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_dma_transpose_costs_one_descriptor_per_16_element_block(target):
    """trainium2_arch.rst (DMA Transpose): the engines write [128, 16] blocks, one descriptor each, at 90% of
    the copy rate from HBM and 50% SBUF to SBUF; not one descriptor per element."""
    busy, desc, data = _transpose_ns(target, "hbm")
    assert busy == pytest.approx(data / 0.9 + (512 // 16) * desc)
    busy, desc, data = _transpose_ns(target, "sbuf", f=128)
    assert busy == pytest.approx(data / 0.5 + (128 // 16) * desc)


def test_dma_transpose_partial_block_costs_a_whole_descriptor():
    """A free size off the 16-element grid pays for the partial block (the doc's multiple-of-16 advice)."""
    busy, desc, data = _transpose_ns("trn1", "hbm", f=520)
    assert busy == pytest.approx(data / 0.9 + 33 * desc)


@pytest.mark.parametrize("step, slower", [(2, 1.0), (4, 1.0), (8, 2.0)])
def test_minor_stride_over_16_bytes_halves_vector_rate(step, slower):
    """trainium_inferentia2_arch.rst (access pattern): fp32 with an innermost stride of 2 or 4 elements
    (8, 16 B) streams at full rate; 8 elements (32 B) at half."""
    def build(nc):
        a, out = nc.tensor((128, 512 * step), "float32"), nc.tensor((128, 512), "float32")
        nc.issue(Op.MEMSET, engine="vector", dst=a, value=1.0)
        apart(nc)
        nc.issue(Op.TENSOR_COPY, engine="vector", dst=out, src=a[:, ::step])
    ev = run("trn1", build)[-1]
    assert ev.end - ev.start == pytest.approx(slower * 512 / 1.12)


@pytest.mark.parametrize("sdk, desc, turnaround", [("2024", 60.0, 300.0), ("2025", 2.0, 100.0)])
def test_dma_costs_are_those_of_the_software_stack(sdk, desc, turnaround, monkeypatch):
    """What a descriptor and a queue's turnaround cost on trn1 depends on the Neuron SDK that built the DMA
    program: 60 ns per contiguous run and 300 ns between transfers with the 2024 compiler (the 2024 ladder),
    2 and 100 ns with the 2025 one (the tiled kernel's 20.99 ms). Two [128, 512] bf16 loads from one call site
    share a queue: each engine moves 8 runs of 1 KiB, and the second load starts a turnaround after the first."""
    from trnsim import flags
    monkeypatch.setenv(flags.NEURON_SDK.name, sdk)

    def build(nc):
        src = nc.hbm_tensor((128, 512), "bfloat16")
        for _ in range(2):
            nc.issue(Op.DMA_COPY, dst=nc.tensor((128, 512), "bfloat16"), src=src)
    one, two = run("trn1", build)[-2:]
    for _, start, end in one.pieces:
        assert end - start == pytest.approx(8 * 1024 / 17.0 + 8 * desc)
    assert two.start == pytest.approx(one.end + turnaround)


def test_the_current_stack_is_the_default_and_an_unknown_one_is_refused(monkeypatch):
    from trnsim import flags
    from trnsim.errors import ConfigError

    monkeypatch.delenv(flags.NEURON_SDK.name, raising=False)
    assert timing("trn1") is timing("trn1", sdk="2025")
    assert timing("trn2", sdk="2024").dma_descriptor_latency == timing("trn2", sdk="2025").dma_descriptor_latency
    with pytest.raises(ConfigError, match="2024 and 2025"):
        timing("trn1", sdk="2023")


@pytest.mark.parametrize("dtype, op0, op1, n, cycles", [("bfloat16", "subtract", "multiply", 1024, 1024),
                                                        ("float32", "subtract", "multiply", 1024, 2048),
                                                        ("bfloat16", "add", "multiply", 1024, 2048),
                                                        ("bfloat16", "subtract", "multiply", 1023, 2046)])
def test_scalar_tensor_tensor_streams_2n_or_n_for_bf16_subtract_multiply(dtype, op0, op1, n, cycles):
    """scalar_tensor_tensor: 2N cycles; N when both tensors are BF16, op0 subtract, op1 multiply and N even
    (reference 1.12, the nki.isa cost notes); at 1.12 GHz on trn1."""
    def build(nc):
        data, t1, out = (nc.tensor((128, n), dtype) for _ in range(3))
        col = nc.tensor((128, 1), "float32")
        for t in (data, t1, col):
            nc.issue(Op.MEMSET, engine="vector", dst=t, value=1.0)
        apart(nc)
        nc.issue(Op.SCALAR_TENSOR_TENSOR, engine="vector", dst=out, data=data, op0=op0, operand0=col, op1=op1,
                 operand1=t1)
    ev = run("trn1", build)[-1]
    assert ev.end - ev.start == pytest.approx(cycles / 1.12)


def _warm(nc):
    """Matmuls that bring a v3+ TensorE past its dI/dt warm-up, so the next instruction runs at full rate."""
    st, mv, ps = tiles(nc, 128, 128, 512, "bfloat16")
    for _ in range(40):
        nc.issue(Op.NC_MATMUL, dst=ps, stationary=st, moving=mv)


@pytest.mark.parametrize("st_dtype, mv_dtype, double_row", [
    ("float8_e4m3", "float8_e4m3", True), ("bfloat16", "bfloat16", False), ("float8_e4m3", "float8_e4m3", False),
    ("bfloat16", "float8_e4m3", False), ("float8_e4m3", "bfloat16", False)])
def test_trn2_matmul_rates_by_dtype_and_double_row(st_dtype, mv_dtype, double_row):
    """NeuronCore-v3 TensorE: 79 BF16 TFLOPS and 158 FP8 TFLOPS (neuron-core-v3.rst), the FP8 figure only in
    double_row mode, which contracts K = 128 partitions x 2 in the time of a BF16 K = 128 matmul
    (trainium2_arch.rst; nki.isa.matmul_perf_mode). A 512-wide moving tile: 512 cycles at 2.4 GHz = 213.3 ns
    whatever the dtypes, FP8 alone or mixed with BF16 at the BF16 rate; double_row does twice the FLOPs."""
    rows = 2 if double_row else 1
    def build(nc):
        _warm(nc)
        st = nc.tensor((128, rows, 128) if double_row else (128, 128), st_dtype)
        mv = nc.tensor((128, rows, 512) if double_row else (128, 512), mv_dtype)
        nc.issue(Op.NC_MATMUL, dst=nc.tensor((128, 512), "float32", "psum"), stationary=st, moving=mv,
                 perf_mode="double_row" if double_row else None)
    ev = run("trn2", build)[-1]
    ns = 512 / 2.4
    assert ev.end - ev.start == pytest.approx(ns, rel=1e-6)
    assert ev.flops == 2 * (128 * rows) * 128 * 512
    tflops = ev.flops / ns / 1e3
    assert tflops == pytest.approx(157.3 if double_row else 78.6, abs=0.1)  # 158 and 79 as published, at 2.4 GHz


def test_trn2_fp8_pe_transpose_costs_a_16_bit_one():
    """A [128, 128] FP8 nc_transpose on TensorE: max(P, min(64, F)) = 128 cycles at 2.4 GHz, as for 16-bit
    data (transpose mode's speed-up is for FP32 alone, trainium2_arch.rst)."""
    def build(nc):
        data = nc.tensor((128, 128), "float8_e4m3")
        nc.issue(Op.MEMSET, engine="vector", dst=data, value=0.0)
        _warm(nc)
        nc.issue(Op.NC_TRANSPOSE, dst=nc.tensor((128, 128), "float8_e4m3", "psum"), data=data, engine="tensor")
    ev = run("trn2", build)[-1]
    assert ev.end - ev.start == pytest.approx(128 / 2.4, rel=1e-6)


@pytest.mark.parametrize("target, ghz", [("trn1", 1.12), ("trn2", 0.96)])
@pytest.mark.parametrize("n", [512, 16])
def test_fp32_psum_scale_and_max_gets_no_perf_mode_so_trn2_is_slower(target, ghz, n):
    """A tensor_scalar_reduce of an FP32 [128, n] PSUM tile into FP32 SBUF (the allocated SD attention's
    scale-and-max at n = 512) costs max(MIN_II, N) + MIN_II Vector cycles (nki.isa.tensor_scalar_reduce,
    estimated instruction cost; MIN_II = 64). NC-v3's perf modes need BF16/FP16 operands (trainium2_arch.rst,
    Vector Engine Performance Mode), so N streams at one element a cycle on both generations, and the lower
    NC-v3 Vector clock (0.96 GHz against 1.12, the compute engine specification tables) makes trn2 slower."""
    def b(nc):
        ps = nc.tensor((128, n), "float32", "psum")
        nc.issue(Op.MEMSET, engine="vector", dst=ps, value=0.0)
        apart(nc)
        nc.issue(Op.TENSOR_SCALAR_REDUCE, dst=nc.tensor((128, n), "float32"), data=ps, op0="multiply",
                 operand0=1.0, reduce_op="max", reduce_res=nc.tensor((128, 1), "float32"))
    ev = run(target, b)[-1]
    assert ev.end - ev.start == pytest.approx((max(64, n) + 64) / ghz)


@pytest.mark.parametrize("target, ghz", [("trn1", 1.4), ("trn2", 1.2)])
@pytest.mark.parametrize("n", [512, 8])
def test_gpsimd_pattern_instructions_start_up_before_they_stream(target, ghz, n):
    """iota and affine_select cost ~150 + N GpSimd cycles (the nki.isa cost notes): a start-up, then N elements
    a partition at the GpSimd clock (1.4 GHz on NC-v2, 1.2 on NC-v3), so even a short one is past MIN_II."""
    def iota(nc):
        nc.issue(Op.IOTA, dst=nc.tensor((128, n), "int32"), pattern=((1, n),))

    def select(nc):  # on a shapes-only core its input needs no producer, so no static overhead is added
        nc.issue(Op.AFFINE_SELECT, dst=nc.tensor((128, n), "float32"), pattern=((-1, n),), channel_multiplier=1,
                 on_true_tile=nc.tensor((128, n), "float32"), on_false_value=0.0, cmp_op="greater_equal")
    for build in (iota, select):
        ev = run(target, build)[-1]
        assert ev.track == "GpSimdE"
        assert ev.end - ev.start == pytest.approx((150 + n) / ghz)


@pytest.mark.parametrize("operands", ["immediates", "one vector", "two vectors"])
def test_tensor_scalar_reads_its_per_partition_operands_at_no_streaming_cost(operands):
    """tensor_scalar streams its data tile alone, N cycles (reference 1.12: a one-input Vector instruction),
    whether operand0/operand1 are immediates or [P, 1] tiles, which the engine broadcasts along the free dims
    (the nki.isa cost notes of tensor_scalar_reduce and scalar_tensor_tensor count the full tensors only);
    flash attention's rescale `o * alpha`, [128, 96] FP32, at 1.12 GHz on trn1."""
    def build(nc):
        data = nc.tensor((128, 96), "float32")
        col0, col1 = nc.tensor((128, 1), "float32"), nc.tensor((128, 1), "float32")
        for t in (data, col0, col1):
            nc.issue(Op.MEMSET, engine="vector", dst=t, value=1.0)
        apart(nc)
        kw = {"immediates": dict(operand0=2.0, op1="add", operand1=1.0), "one vector": dict(operand0=col0),
              "two vectors": dict(operand0=col0, op1="add", operand1=col1)}[operands]
        nc.issue(Op.TENSOR_SCALAR, engine="vector", dst=nc.tensor((128, 96), "float32"), data=data, op0="multiply",
                 **kw)
    ev = run("trn1", build)[-1]
    assert ev.end - ev.start == pytest.approx(96 / 1.12)
