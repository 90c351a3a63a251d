"""Instructions a kernel issues with no engine are placed as the compiler places them, by workload
(nki.isa.tensor_copy / memset, engine=unknown: "compiler selects best engine based on engine workload";
core/isa/registry.py: workload_engine): on the engine that can run them and would end them first given the
work already placed there, ties to VectorE first. Expected schedules are worked out here from the documented
rates: N elements a cycle per lane, 0.96 GHz VectorE and 1.2 GHz ScalarE/GpSimd on trn2, an fp32 SBUF copy
at twice the rate on VectorE (datapath width, reference 1.6), 2N cycles for a two-input tensor_tensor."""
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core import Engine, NeuronCore, Op
from trnsim.core.errors import GenerationError
from trnsim.core.timing import simulate

N = 512
TT = 2 * N / 0.96  # ns: fp32 tensor_tensor of two SBUF inputs on VectorE
COPY_PSUM_V, COPY_PSUM_S = N / 0.96, N / 1.2  # ns: fp32 PSUM -> SBUF copy on VectorE, on ScalarE


def _interleaved(named):
    """Three VectorE tensor_tensors, each followed by a PSUM -> SBUF copy; all inputs unwritten (timing only),
    so nothing waits on a producer."""
    nc = NeuronCore("trn2", values=False)
    a, p = nc.tensor((128, N), "float32"), nc.tensor((128, N), "float32", "psum")
    for _ in range(3):
        nc.issue(Op.TENSOR_TENSOR, engine="vector", dst=nc.tensor((128, N), "float32"), data1=a, data2=a, op="add")
        nc.issue(Op.TENSOR_COPY, engine=named, dst=nc.tensor((128, N), "float32"), src=p)
    return nc.stream, simulate(nc.stream, "trn2").events


def test_unassigned_copies_move_to_scalar_beside_vector_work():
    """VectorE holds a tensor_tensor when each copy comes, so each copy ends first on ScalarE: the copies run
    back to back there ([0, c], [c, 2c], [2c, 3c]) while VectorE runs the three tensor_tensors, and the kernel
    ends with the third of those, at 3 * TT, not at 3 * (TT + VectorE's copy)."""
    stream, events = _interleaved(None)
    copies = [e for e in events if e.rec.op is Op.TENSOR_COPY]
    assert [r.engine for r in stream if r.op is Op.TENSOR_COPY] == [Engine.SCALAR] * 3
    assert {e.track for e in copies} == {"ScalarE"}
    for k, e in enumerate(copies):
        assert (e.start, e.end) == (pytest.approx(k * COPY_PSUM_S), pytest.approx((k + 1) * COPY_PSUM_S))
    assert max(e.end for e in events) == pytest.approx(3 * TT)


def test_a_kernel_that_names_the_engine_keeps_it():
    """The same kernel with engine=vector on its copies: all six on VectorE, one after another."""
    stream, events = _interleaved("vector")
    assert {r.engine for r in stream} == {Engine.VECTOR}
    assert all("choices" not in r.attrs for r in stream)
    assert max(e.end for e in events) == pytest.approx(3 * (TT + COPY_PSUM_V))


def test_sbuf_copies_spread_over_all_three_engines_ties_in_fixed_order():
    """fp32 SBUF -> SBUF copies, nothing else: VectorE (N/2 cycles at 0.96 GHz) ends first, then ScalarE and
    GpSimd tie (N cycles at 1.2 GHz, both idle) and ScalarE, earlier in the order, takes it; the third ends
    first on the idle GpSimd."""
    nc = NeuronCore("trn2", values=False)
    a = nc.tensor((128, N), "float32")
    for _ in range(3):
        nc.issue(Op.TENSOR_COPY, dst=nc.tensor((128, N), "float32"), src=a)
    events = simulate(nc.stream, "trn2").events
    assert [e.track for e in events] == ["VectorE", "ScalarE", "GpSimdE"]
    assert [e.end for e in events] == [pytest.approx(N / 2 / 0.96), pytest.approx(N / 1.2), pytest.approx(N / 1.2)]


def test_only_engines_that_can_run_it_and_keep_the_bits_are_offered():
    """GpSimd reaches no PSUM; ScalarE converts through FP32, which a 32-bit integer does not survive
    (nki.isa.tensor_copy); NeuronCore-v2 has no ScalarE tensor_copy. Where one engine is left, none is chosen."""
    def choices(target, dtype, src_space):
        nc = NeuronCore(target, values=False)
        nc.issue(Op.TENSOR_COPY, dst=nc.tensor((128, 64), dtype), src=nc.tensor((128, 64), dtype, src_space))
        return nc.stream[-1].attrs.get("choices")
    assert choices("trn2", "bfloat16", "psum") == (Engine.VECTOR, Engine.SCALAR)
    assert choices("trn2", "int32", "sbuf") == (Engine.VECTOR, Engine.GPSIMD)
    assert choices("trn2", "int32", "psum") is None
    assert choices("trn1", "float32", "psum") is None
    assert choices("trn1", "float32", "sbuf") == (Engine.VECTOR, Engine.GPSIMD)


def test_the_compilers_own_copies_may_be_v2_activation_copies():
    """A copy the compiler writes itself (nl.copy, an assignment out of PSUM: `lowered`) may go to NeuronCore-v2's
    ScalarE, where the compiler copies with activation(op=copy), through FP32 (nki.isa.tensor_copy); an
    nisa.tensor_copy keeps its documented v2 engines (Vector, GpSimd); 32-bit integers never go through FP32."""
    def choices(dtype, src_space, lowered=True):
        nc = NeuronCore("trn1", values=False)
        nc.issue(Op.TENSOR_COPY, dst=nc.tensor((128, 64), dtype), src=nc.tensor((128, 64), dtype, src_space),
                 **({"lowered": True} if lowered else {}))
        return nc.stream[-1].attrs.get("choices")
    assert choices("float32", "psum") == (Engine.VECTOR, Engine.SCALAR)
    assert choices("bfloat16", "sbuf") == (Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD)
    assert choices("float32", "psum", lowered=False) is None
    assert choices("int32", "psum") is None
    assert choices("int32", "sbuf") == (Engine.VECTOR, Engine.GPSIMD)


def test_v2_activation_copies_cost_as_activations():
    """trn1: VectorE at 1.12 GHz, ScalarE at 1.4 GHz, no perf modes, so an fp32 PSUM copy takes N / 1.12 ns on
    VectorE and N / 1.4 on ScalarE, the time of an explicit activation copy; each of the compiler's copies
    beside a two-input tensor_tensor (2N / 1.12 ns) ends first on ScalarE, and the copies run back to back there."""
    nc = NeuronCore("trn1", values=False)
    a, p = nc.tensor((128, N), "float32"), nc.tensor((128, N), "float32", "psum")
    for _ in range(3):
        nc.issue(Op.TENSOR_TENSOR, engine="vector", dst=nc.tensor((128, N), "float32"), data1=a, data2=a, op="add")
        nc.issue(Op.TENSOR_COPY, dst=nc.tensor((128, N), "float32"), src=p, lowered=True)
    nc.issue(Op.ACTIVATION, dst=nc.tensor((128, N), "float32"), data=p, op="copy")
    events = simulate(nc.stream, "trn1").events
    copies = [e for e in events if e.rec.op is Op.TENSOR_COPY]
    assert {e.track for e in copies} == {"ScalarE"}
    for k, e in enumerate(copies):
        assert (e.start, e.end) == (pytest.approx(k * N / 1.4), pytest.approx((k + 1) * N / 1.4))
    act = events[-1]
    assert act.end - act.start == pytest.approx(N / 1.4)
    assert max(e.end for e in events) == pytest.approx(3 * 2 * N / 1.12)


def test_v2_scalar_tensor_copy_named_by_the_kernel_is_refused():
    """The activation copy is the compiler's own choice; a kernel asking for tensor_copy on ScalarE of a v2 core
    is told to use an activation."""
    nc = NeuronCore("trn1", values=False)
    with pytest.raises(GenerationError, match="activation"):
        nc.issue(Op.TENSOR_COPY, engine="scalar", dst=nc.tensor((128, 64), "float32"),
                 src=nc.tensor((128, 64), "float32", "psum"))


@nki.jit
def _copies(x, w, i):
    """Matmul products copied out of PSUM with casts, an int32 copy and a memset, none of them given an
    engine, interleaved with VectorE work."""
    out = nl.ndarray((128, 512), nl.bfloat16, buffer=nl.shared_hbm)
    ints = nl.ndarray((128, 64), nl.int32, buffer=nl.shared_hbm)
    xs, ws = nl.ndarray((128, 128), nl.bfloat16), nl.ndarray((128, 512), nl.bfloat16)
    nisa.dma_copy(xs, x)
    nisa.dma_copy(ws, w)
    acc = nl.ndarray((128, 512), nl.bfloat16)
    nisa.memset(acc, 0.0)
    for _ in nl.affine_range(4):
        p = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(p, xs, ws)
        s = nl.copy(p, dtype=nl.bfloat16)  # fp32 -> bf16, RNE, on whichever engine
        busy = nl.ndarray((128, 512), nl.bfloat16)
        nisa.tensor_tensor(busy, ws, ws, nl.multiply, engine=nisa.vector_engine)
        nisa.tensor_tensor(acc, acc, s, nl.add, engine=nisa.vector_engine)
    nisa.dma_copy(out, acc)
    big = nl.ndarray((128, 64), nl.int32)
    nisa.dma_copy(big, i)
    nisa.dma_copy(ints, nl.copy(big))
    return out, ints


def _bf16(a):
    """numpy: float32 to bfloat16 (round to nearest even), returned as float32."""
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_values_do_not_depend_on_the_engine_chosen(target):
    """Small integers multiply and add exactly, so the products are known here; the bf16 casts round them
    (to nearest even), and 32-bit integers over 2^24 come through the copy unchanged. On trn1 the ScalarE
    copies are activation copies through FP32."""
    rng = np.random.default_rng(3)
    x = rng.integers(-8, 9, (128, 128)).astype(np.float32)
    w = rng.integers(-8, 9, (128, 512)).astype(np.float32)
    i = (rng.integers(-2**31, 2**31 - 1, (128, 64), dtype=np.int64) | 1).astype(np.int32)
    kernel = nki.jit(platform_target=target)(_copies.fn)
    out, ints = kernel(x, w, i)
    prod = _bf16(x.T.astype(np.float64) @ w.astype(np.float64))
    acc = np.zeros((128, 512), np.float32)
    for _ in range(4):
        acc = _bf16(acc + prod)
    np.testing.assert_array_equal(np.asarray(out, np.float32), acc)
    np.testing.assert_array_equal(ints, i)
    stream = kernel.last_cores[0].stream
    simulate(stream, target)
    placed = [r.engine for r in stream if r.op is Op.TENSOR_COPY]
    assert Engine.SCALAR in placed[:4]  # the PSUM copies, balanced against the VectorE work
    assert placed[-1] is not Engine.SCALAR  # int32: FP32 would lose its bits
