"""The compiler's instruction scheduling: a compute instruction takes the first idle stretch of its engine, from
when its inputs are ready, that holds it, so a later independent instruction runs before an earlier blocked
one; every dependence (RAW, WAR, WAW) still holds. Times are worked by hand from the documented costs on trn1:
VectorE streams N elements a cycle per input at 1.12 GHz, GpSimd N at 1.4 GHz (a memset: N cycles), a
Vector instruction that waited for a producer or follows the one whose output it reads adds 100 cycles, and a
cross-engine wait adds the semaphore latency."""
import numpy as np
import pytest

from trnsim.core import NeuronCore, Op
from trnsim.core.timing import simulate
from trnsim.core.timing.scheduler import ORDERED, keep_order
from trnsim.specs.timing import timing

SEM = timing("trn1").semaphore_latency
VEC, POOL, STATIC = 1.12, 1.4, 100  # GHz, GHz, cycles


def gap_kernel(nc):
    """GpSimd fills X (2048 fp32 a partition); VectorE copies X to P (blocked until then), sets Y, copies Y to Z
    (reads what the set wrote), copies P to W (reads what the first copy wrote) and sets V (too long for the
    gap). Returns the tiles."""
    x, p, w, v = (nc.tensor((128, 2048), "float32") for _ in range(4))
    y, z = nc.tensor((128, 512), "float32"), nc.tensor((128, 512), "float32")
    nc.issue(Op.MEMSET, engine="gpsimd", dst=x, value=3.0)
    nc.issue(Op.TENSOR_COPY, engine="vector", dst=p, src=x)
    nc.issue(Op.MEMSET, engine="vector", dst=y, value=2.0)
    nc.issue(Op.TENSOR_COPY, engine="vector", dst=z, src=y)
    nc.issue(Op.TENSOR_COPY, engine="vector", dst=w, src=p)
    nc.issue(Op.MEMSET, engine="vector", dst=v, value=1.0)
    return x, p, y, z, w, v


def test_later_independent_instructions_fill_the_gap_of_a_blocked_one():
    """The set of Y and the copy of Y run while the copy of X waits for GpSimd; the copy of P, which reads what
    the blocked copy wrote, and the set of V, longer than what is left of the gap, come after it."""
    nc = NeuronCore("trn1", values=False)
    gap_kernel(nc)
    fill, copy_x, set_y, copy_y, copy_p, set_v = simulate(nc.stream, "trn1").events
    fill_end = 2048 / POOL  # 1462.9 ns
    assert fill.end == pytest.approx(fill_end)
    # blocked: GpSimd's end plus the semaphore, then 2048 cycles plus the static overhead (it waited)
    assert copy_x.start == pytest.approx(fill_end + SEM)
    assert copy_x.end == pytest.approx(fill_end + SEM + (2048 + STATIC) / VEC)
    # the set of Y takes the idle stretch from 0: 512 cycles, no producer
    assert set_y.start == pytest.approx(0.0) and set_y.end == pytest.approx(512 / VEC)
    # the copy of Y follows it at once, paying the static overhead (it reads what the set wrote), and still fits
    assert copy_y.start == pytest.approx(512 / VEC)
    assert copy_y.end == pytest.approx((512 + 512 + STATIC) / VEC)
    assert copy_y.end < copy_x.start and set_y.index in copy_y.deps and copy_y.blocker == set_y.index
    # the copy of P reads the blocked copy's output: after it, back to back, with the static overhead
    assert copy_p.start == pytest.approx(copy_x.end)
    assert copy_p.end - copy_p.start == pytest.approx((2048 + STATIC) / VEC)
    assert copy_x.index in copy_p.deps
    # 2048 cycles do not fit the 1512.9 - 1003.6 ns left before the blocked copy: the set of V goes last
    assert set_v.start == pytest.approx(copy_p.end) and set_v.end - set_v.start == pytest.approx(2048 / VEC)


def test_with_no_idle_stretch_an_engine_runs_in_program_order():
    """With no gap to fill, VectorE runs its instructions in program order, back to back."""
    nc = NeuronCore("trn1", values=False)
    x, p = nc.tensor((128, 2048), "float32"), nc.tensor((128, 2048), "float32")
    y = nc.tensor((128, 512), "float32")
    nc.issue(Op.MEMSET, engine="vector", dst=x, value=3.0)
    nc.issue(Op.TENSOR_COPY, engine="vector", dst=p, src=x)
    nc.issue(Op.MEMSET, engine="vector", dst=y, value=2.0)
    set_x, copy_x, set_y = simulate(nc.stream, "trn1").events
    assert copy_x.start == pytest.approx(2048 / VEC)
    assert set_y.start == pytest.approx(copy_x.end) == pytest.approx((2048 + 2048 + STATIC) / VEC)


def test_a_write_waits_for_the_reader_that_ends_last_not_the_last_in_program_order():
    """Write after read with an out-of-order reader: VectorE's first reader of T is blocked behind GpSimd, its
    second reader runs in the gap before it and ends first. GpSimd's later write of T waits for the first
    reader's end (the reader that ends last), plus the semaphore: a track keeps the reader that ends last, not
    the latest in program order, which here would let the write start at 1553 ns, under a live reader."""
    nc = NeuronCore("trn1", values=False)
    t, x = nc.tensor((128, 512), "float32"), nc.tensor((128, 2048), "float32")
    a, b = nc.tensor((128, 512), "float32"), nc.tensor((128, 512), "float32")
    nc.issue(Op.MEMSET, engine="vector", dst=t, value=1.0)  # [0, 457.1)
    nc.issue(Op.MEMSET, engine="gpsimd", dst=x, value=2.0)  # [0, 1462.9)
    nc.issue(Op.TENSOR_TENSOR, dst=a, data1=t, data2=x[:, 0:512], op="add")  # blocked by GpSimd
    nc.issue(Op.TENSOR_COPY, engine="vector", dst=b, src=t)  # free after the set of T
    nc.issue(Op.MEMSET, engine="gpsimd", dst=t, value=5.0)  # overwrites T: waits for both readers
    set_t, fill, first, second, rewrite = simulate(nc.stream, "trn1").events
    first_start = 2048 / POOL + SEM
    first_end = first_start + (2 * 512 + STATIC) / VEC  # two inputs, waited
    assert first.start == pytest.approx(first_start) and first.end == pytest.approx(first_end)
    second_end = 512 / VEC + (512 + STATIC) / VEC  # back to back after the set of T, whose output it reads
    assert second.start == pytest.approx(512 / VEC) and second.end == pytest.approx(second_end)
    assert second_end < first_end
    assert rewrite.start == pytest.approx(first_end + SEM)
    assert rewrite.blocker == first.index and first.index in rewrite.deps


def test_a_write_after_a_write_on_one_engine_keeps_its_order():
    """Write after write on one engine: the second set of X, free to start at 0, waits for the first, which is
    blocked behind GpSimd (no semaphore: the same engine)."""
    nc = NeuronCore("trn1", values=False)
    y, x = nc.tensor((128, 2048), "float32"), nc.tensor((128, 512), "float32")
    nc.issue(Op.MEMSET, engine="gpsimd", dst=y, value=2.0)
    nc.issue(Op.TENSOR_TENSOR, dst=x, data1=y[:, 0:512], data2=y[:, 512:1024], op="add")
    nc.issue(Op.MEMSET, engine="vector", dst=x, value=7.0)
    _, first, second = simulate(nc.stream, "trn1").events
    assert first.start == pytest.approx(2048 / POOL + SEM)
    assert second.start == pytest.approx(first.end) and second.blocker == first.index


def test_values_follow_program_order_whatever_the_schedule():
    """The same kernel with values, and a last GpSimd set of Y: every tile holds what program order gives, though
    the schedule ran the set and copy of Y before the copy of X (the executor computes in program order; the
    schedule is time alone), and the new set of Y waited for the copy that read Y."""
    nc = NeuronCore("trn1", values=True)
    x, p, y, z, w, v = gap_kernel(nc)
    nc.issue(Op.MEMSET, engine="gpsimd", dst=y, value=9.0)  # WAR on Y against the copy of Y
    evs = simulate(nc.stream, "trn1").events
    assert evs[2].start < evs[1].start  # the schedule did reorder
    assert evs[6].start >= evs[3].end + SEM
    expect = {x: 3.0, p: 3.0, z: 2.0, w: 3.0, v: 1.0, y: 9.0}
    for tile, value in expect.items():
        np.testing.assert_array_equal(nc.host_read(tile), np.full(tile.shape, value, np.float32))


def test_an_instruction_that_writes_no_memory_keeps_its_place():
    """An RNG seed writes no memory: the state it sets is invisible to the dependences, so the seed starts after
    the blocked copy before it on VectorE, and the independent set of Y after it waits for its end instead of
    filling the gap before the copy."""
    nc = NeuronCore("trn1", values=False)
    x, p = nc.tensor((128, 2048), "float32"), nc.tensor((128, 2048), "float32")
    seed, y = nc.tensor((1, 1), "uint32"), nc.tensor((128, 512), "float32")
    nc.issue(Op.MEMSET, engine="gpsimd", dst=x, value=3.0)
    nc.issue(Op.MEMSET, engine="gpsimd", dst=seed, value=7)
    nc.issue(Op.TENSOR_COPY, engine="vector", dst=p, src=x)
    nc.issue(Op.SET_RNG_SEED, engine="vector", src_seeds=seed)
    nc.issue(Op.MEMSET, engine="vector", dst=y, value=2.0)
    *_, copy_x, set_seed, set_y = simulate(nc.stream, "trn1").events
    assert copy_x.start == pytest.approx(2048 / POOL + SEM)
    assert set_seed.start == pytest.approx(copy_x.end)
    assert set_y.start == pytest.approx(set_seed.end) and set_y.blocker == set_seed.index


def test_a_no_reorder_block_keeps_program_order_on_each_engine():
    """The gap kernel with its Vector work in an nl.no_reorder() block (keep_order marks it): the set of Y no
    longer fills the gap before the blocked copy of X, it follows the copy."""
    nc = NeuronCore("trn1", values=False)
    gap_kernel(nc)
    keep_order(nc.stream, 1)
    fill, copy_x, set_y, copy_y, copy_p, set_v = simulate(nc.stream, "trn1").events
    assert copy_x.start == pytest.approx(2048 / POOL + SEM)
    assert set_y.start == pytest.approx(copy_x.end) and set_y.blocker == copy_x.index
    assert copy_y.start == pytest.approx(set_y.end)
    assert copy_p.start == pytest.approx(copy_y.end) and set_v.start == pytest.approx(copy_p.end)


def test_nl_no_reorder_marks_the_block():
    """In a kernel, the instructions issued inside `with nl.no_reorder():` are the ones kept in order."""
    import trnsim.nki as nki
    import trnsim.nki.language as nl

    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        with nl.no_reorder():
            u = nl.multiply(t, 2.0)
            v = nl.add(u, 1.0)
        nl.store(out, nl.exp(v))
        return out

    x = np.ones((128, 512), np.float32)
    np.testing.assert_allclose(kernel(x), np.exp(x * 2.0 + 1.0), rtol=1e-6)
    stream = kernel.last_cores[0].stream
    marked = [r.attrs.get(ORDERED, False) for r in stream]
    assert any(marked) and not marked[0] and not marked[-1]


FULL = 512 / 2.4  # ns: a bf16 [128, 128] x [128, 512] matmul on trn2's TensorE at full rate (2.4 GHz)
RAMP, START = 3000.0, 0.5  # trn2's dI/dt throttle: from half rate to full over 3 us; idle half of it re-engages it


def _rate(start, since):
    """TensorE's rate at `start` on a ramp begun at `since`."""
    return START + (1 - START) * min(1.0, (start - since) / RAMP)


def _warm_up_kernel(fill_columns):
    """GpSimd fills X (bf16, `fill_columns` a partition); matmul A and then C read X (C waits behind A on TensorE);
    matmul B, last in program order, reads nothing written and takes TensorE's idle stretch from 0."""
    nc = NeuronCore("trn2", values=False)
    x = nc.tensor((128, fill_columns), "bfloat16")
    st, mv = nc.tensor((128, 128), "bfloat16"), nc.tensor((128, 512), "bfloat16")
    nc.issue(Op.MEMSET, engine="gpsimd", dst=x, value=1.0)
    for _ in range(2):
        nc.issue(Op.NC_MATMUL, dst=nc.tensor((128, 512), "float32", "psum"), stationary=st, moving=x[:, 0:512])
    nc.issue(Op.NC_MATMUL, dst=nc.tensor((128, 512), "float32", "psum"), stationary=st, moving=mv)
    return simulate(nc.stream, "trn2").events


def test_a_matmul_placed_in_an_earlier_gap_warms_those_after_it_in_time():
    """X takes 1500 ns to fill, so A starts at 1550 ns, after TensorE idled more than half the window: placed
    alone it runs cold, at half rate. B, placed after it in program order, runs in the gap from 0 (cold, 426.7 ns)
    and leaves TensorE idle 1123 ns before A, under half the window: A and C now follow B's ramp, from 0, each
    from its own start (C keeps its start, A's end as first placed)."""
    fill, a, c, b = _warm_up_kernel(1800)
    assert fill.end == pytest.approx(1800 / 1.2)
    assert b.start == pytest.approx(0.0) and b.end == pytest.approx(2 * FULL)
    a_start = fill.end + timing("trn2").semaphore_latency
    assert a.start == pytest.approx(a_start)
    assert a.end == pytest.approx(a_start + FULL / _rate(a_start, 0.0))
    c_start = a_start + 2 * FULL  # placed when A still ran at half rate
    assert c.start == pytest.approx(c_start)
    assert c.end == pytest.approx(c_start + FULL / _rate(c_start, 0.0))


def test_a_gap_filler_that_leaves_half_the_window_idle_warms_nothing_after_it():
    """X takes 2000 ns: B leaves TensorE idle 1623 ns before A, over half the window, so A starts a ramp of its
    own at half rate and C follows A's ramp, as when B is not there."""
    fill, a, c, b = _warm_up_kernel(2400)
    assert b.start == pytest.approx(0.0) and b.end == pytest.approx(2 * FULL)
    a_start = fill.end + timing("trn2").semaphore_latency
    assert a_start - b.end > RAMP / 2
    assert a.start == pytest.approx(a_start) and a.end == pytest.approx(a_start + 2 * FULL)
    assert c.start == pytest.approx(a.end)
    assert c.end == pytest.approx(a.end + FULL / _rate(a.end, a_start))
