"""`x[...] = nl.load(...)` / `x[...] = nisa.op(...)`: the instruction writes x itself, no temporary and no copy."""
import pytest
import ml_dtypes
import numpy as np

import trnsim.nki.beta as nki
import trnsim.nki.beta.isa as nisa
import trnsim.nki.beta.language as nl


@nki.jit
def load_exp_store(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    y = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    x[...] = nl.load(a)
    y[...] = nisa.activation(op=nl.exp, data=x)
    nl.store(out, y)
    return out


@nki.jit
def assign_later(a):
    """The loaded tile is used before it is assigned: the assignment stays a copy."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    t = nl.load(a)
    s = nl.multiply(t, 2.0)
    x[...] = t
    nl.store(out, nl.add(x, s))
    return out


@nki.jit
def in_place(a):
    """x is an input of the call that is assigned to it: it still runs, and stays correct."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    x[...] = nl.load(a)
    x[...] = nl.transpose(x)
    nl.store(out, x)
    return out


def _ops(kernel):
    return [r.op.value for r in kernel.last_cores[0].stream]


def test_assignment_writes_the_destination_directly(rng):
    a = rng.standard_normal((128, 64)).astype(np.float32)
    got = load_exp_store(a)
    np.testing.assert_allclose(got, np.exp(a), rtol=1e-5)
    assert _ops(load_exp_store) == ["dma_copy", "activation", "dma_copy"]
    # The re-issued instructions keep the kernel's own source lines.
    lines = [int(r.location.rsplit(":", 1)[1]) for r in load_exp_store.last_cores[0].stream]
    assert lines[0] + 1 == lines[1] and lines[1] + 1 == lines[2]
    assert all(r.location.startswith(__file__) for r in load_exp_store.last_cores[0].stream)


def test_a_used_result_is_still_copied(rng):
    a = rng.standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_allclose(assign_later(a), 3 * a, rtol=1e-6)
    assert _ops(assign_later).count("tensor_copy") == 1


def test_destination_read_by_the_call_keeps_the_copy(rng):
    a = rng.standard_normal((64, 64)).astype(np.float32)
    np.testing.assert_allclose(in_place(a), a.T, rtol=1e-6)
    assert _ops(in_place).count("tensor_copy") == 1


@nki.jit
def windowed_in_place(a):
    """Flash attention's sliding-window mask: an affine_select of a score block assigned back to that block,
    then a shifted in-place multiply (element i from element i - 1: not position for position)."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    ip, jf = nl.mgrid[0:128, 0:64]
    x[:, 0:64] = nisa.affine_select(pred=(jf > ip - 32), on_true_tile=x[:, 0:64], on_false_value=-9984.0,
                                    dtype=nl.float32)
    x[:, 65:128] = nl.multiply(x[:, 64:127], 2.0)
    nl.store(out, x)
    return out


def test_an_element_wise_call_reading_its_destination_writes_it_in_place(rng):
    a = rng.standard_normal((128, 128)).astype(np.float32)
    want = a.copy()
    want[:, :64] = np.where(np.arange(64)[None, :] > np.arange(128)[:, None] - 32, a[:, :64], -9984.0)
    want[:, 65:] = 2 * want[:, 64:127]
    np.testing.assert_array_equal(windowed_in_place(a), want)
    assert _ops(windowed_in_place) == ["dma_copy", "affine_select", "tensor_scalar", "tensor_copy", "dma_copy"]


# -- results whose shape differs from the destination's only by size-1 free dims --------------------------------
@nki.jit
def column_max(a):
    """Each 32-wide block's negated max written to one column of m, with grid and with slice indices."""
    out = nl.ndarray((128, 8), a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    m = nl.ndarray((128, 8), a.dtype, buffer=nl.sbuf)
    ip, jf = nl.arange(128)[:, None], nl.arange(32)[None, :]
    for j in nl.affine_range(4):
        m[ip, j] = nisa.tensor_reduce(np.max, data=x[ip, j * 32 + jf], axis=(1,), dtype=a.dtype, negate=True)
        m[:, 4 + j] = nl.min(x[:, j * 32:(j + 1) * 32], axis=1)
    nl.store(out, m)
    return out


@nki.jit
def kept_into_partition_tile(a):
    """A keepdims [P, 1] result assigned to a partition-only [P] tile."""
    out = nl.ndarray((128,), a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    v = nl.ndarray((128,), a.dtype, buffer=nl.sbuf)
    v[...] = nl.max(x, axis=1, keepdims=True)
    nl.store(out, v)
    return out


@nki.jit
def rows_into_middle_slot(a):
    """A [P, 4] result assigned to m[:, j:j+1, :], a [P, 1, 4] slice of a [P, 2, 4] tile."""
    out = nl.ndarray((128, 2, 4), a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    m = nl.ndarray((128, 2, 4), a.dtype, buffer=nl.sbuf)
    for j in nl.affine_range(2):
        m[:, j:j + 1, :] = nl.max(x[:, j], axis=2)
    nl.store(out, m)
    return out


@nki.jit
def broadcast_column(a):
    """A [P, 1] result assigned to a [P, 4] tile is a broadcast: the copy stays."""
    out = nl.ndarray((128, 4), a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    m = nl.ndarray((128, 4), a.dtype, buffer=nl.sbuf)
    m[...] = nl.max(x, axis=1, keepdims=True)
    nl.store(out, m)
    return out


def test_a_reduction_writes_its_column_directly(rng):
    for dt in (np.float32, ml_dtypes.bfloat16):
        a = rng.standard_normal((128, 128)).astype(dt)
        blocks = a.reshape(128, 4, 32)
        want = np.concatenate([-blocks.max(axis=2), blocks.min(axis=2)], axis=1)
        got = column_max(a)
        assert got.dtype == want.dtype and np.array_equal(got, want)
        assert _ops(column_max) == ["dma_copy"] + ["tensor_reduce"] * 8 + ["dma_copy"]


def test_a_kept_dim_result_fills_a_partition_tile_directly(rng):
    a = rng.standard_normal((128, 64)).astype(np.float32)
    assert np.array_equal(kept_into_partition_tile(a), a.max(axis=1))
    assert _ops(kept_into_partition_tile) == ["dma_copy", "tensor_reduce", "dma_copy"]


def test_a_result_fills_a_slice_with_a_size_one_middle_dim_directly(rng):
    a = rng.standard_normal((128, 2, 4, 8)).astype(np.float32)
    assert np.array_equal(rows_into_middle_slot(a), a.max(axis=3))
    assert _ops(rows_into_middle_slot) == ["dma_copy", "tensor_reduce", "tensor_reduce", "dma_copy"]


def test_a_broadcast_assignment_keeps_its_copy(rng):
    a = rng.standard_normal((128, 64)).astype(np.float32)
    assert np.array_equal(broadcast_column(a), np.repeat(a.max(axis=1, keepdims=True), 4, axis=1))
    assert _ops(broadcast_column) == ["dma_copy", "tensor_reduce", "tensor_copy", "dma_copy"]


# -- an FP32 result assigned to a tile of another float dtype; a subscript that calls the language --------------
@nki.jit
def masked_scores_into_bf16(s):
    """The causal mask of attention backward: an fp32 affine_select of a PSUM tile assigned to a bf16 tile."""
    out = nl.ndarray(s.shape, nl.bfloat16, buffer=nl.shared_hbm)
    ps = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
    ps[...] = nl.copy(nl.load(s))
    res = nl.ndarray((128, 128), nl.bfloat16, buffer=nl.sbuf)
    iq, ik = nl.mgrid[0:128, 0:128]
    res[:, :] = nisa.affine_select(pred=(iq >= ik), on_true_tile=ps[:, :], on_false_value=-9984.0, dtype=nl.float32)
    nl.store(out, res)
    return out


@nki.jit
def copy_into_a_slice(a):
    """nl.copy assigned to a column block named by nl.ds: the subscript's call runs after the copy."""
    out = nl.ndarray((128, 128), a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    y = nl.ndarray((128, 128), a.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(2):
        y[:, nl.ds(i * 64, 64)] = nl.copy(x[:, nl.ds(i * 64, 64)])
    nl.store(out, y)
    return out


@nki.jit
def exp_into_bf16(a):
    """An FP32 activation (no accumulation) assigned to a bf16 tile."""
    out = nl.ndarray(a.shape, nl.bfloat16, buffer=nl.shared_hbm)
    d = nl.ndarray(a.shape, nl.bfloat16, buffer=nl.sbuf)
    d[...] = nisa.activation(op=nl.exp, data=nl.load(a))
    nl.store(out, d)
    return out


def test_an_fp32_activation_writes_a_bf16_destination_itself(rng):
    a = rng.standard_normal((128, 64)).astype(np.float32)
    got = np.asarray(exp_into_bf16(a)).astype(np.float32)
    np.testing.assert_allclose(got, np.exp(a).astype(ml_dtypes.bfloat16).astype(np.float32), rtol=8e-3)
    assert _ops(exp_into_bf16) == ["dma_copy", "activation", "dma_copy"]


def test_an_fp32_result_is_written_in_the_destination_dtype_without_a_copy(rng):
    s = rng.standard_normal((128, 128)).astype(np.float32)
    got = np.asarray(masked_scores_into_bf16(s)).astype(np.float32)
    want = np.where(np.arange(128)[:, None] >= np.arange(128)[None, :], s, -9984.0)
    np.testing.assert_array_equal(got, want.astype(ml_dtypes.bfloat16).astype(np.float32))
    stream = masked_scores_into_bf16.last_cores[0].stream
    line = next(r.location for r in stream if r.op.value == "affine_select")
    # the PSUM tile is staged to SBUF for GpSimd (it cannot read PSUM), then affine_select writes bf16 itself
    assert [r.op.value for r in stream if r.location == line] == ["tensor_copy", "affine_select"]


def test_a_subscript_that_calls_the_language_keeps_the_direct_write(rng):
    a = rng.standard_normal((128, 128)).astype(np.float32)
    np.testing.assert_array_equal(copy_into_a_slice(a), a)
    assert _ops(copy_into_a_slice).count("tensor_copy") == 2


def transposes_into_fp32_psum(p):
    """Flash attention forward's transpose_p_local: [128, 128] PE transposes of bf16 blocks assigned to the
    slices of an fp32 PSUM tile, then one copy out."""
    out = nl.ndarray((128, 512), nl.bfloat16, buffer=nl.shared_hbm)
    x = nl.load(p)
    t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    for j in nl.affine_range(4):
        t[:, nl.ds(j * 128, 128)] = nisa.nc_transpose(x[:, nl.ds(j * 128, 128)])
    nl.store(out, nl.copy(t, dtype=nl.bfloat16))
    return out


@pytest.mark.parametrize("target, copies", [("trn1", 1), ("trn2", 5)])
def test_a_v2_pe_transpose_writes_an_fp32_psum_tile_itself(rng, target, copies):
    """On NeuronCore-v2 a PE transpose is a matmul with the identity, which writes FP32 to PSUM: the transpose
    writes the fp32 tile, no copy. v3's transpose mode writes the input's 16-bit type: a copy widens it."""
    p = rng.standard_normal((128, 512)).astype(ml_dtypes.bfloat16)
    kernel = nki.jit(transposes_into_fp32_psum, platform_target=target)
    got = np.asarray(kernel(p)).astype(np.float32)
    want = np.concatenate([p[:, j * 128:(j + 1) * 128].T for j in range(4)], axis=1).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    assert [r.op.value for r in kernel.last_cores[0].stream].count("tensor_copy") == copies


# -- the call's own result, still read after it was written straight into the destination -----------------------
@nki.jit
def exp_read_after_assignment(a, overwrite=False):
    """r is written into d directly (no copy); r itself is read afterwards, and with `overwrite` d is
    written again before that: r keeps its own values."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    d = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    r = nl.exp(x)
    d[...] = r
    if overwrite:
        d[...] = nl.multiply(x, 3.0)
        nl.store(out, nl.add(r, d))
    else:
        nl.store(out, nl.multiply(r, 2.0))
    return out


@nki.jit
def result_written_after_assignment(a):
    """r is written into d directly, then r itself is written: d keeps the exponentials."""
    out = nl.ndarray((2,) + a.shape, a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    d = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    r = nl.exp(x)
    d[...] = r
    r[...] = nl.multiply(x, 3.0)
    nl.store(out[0], d)
    nl.store(out[1], r)
    return out


def test_writing_the_result_after_its_direct_write_leaves_the_destination(rng):
    a = rng.standard_normal((128, 64)).astype(np.float32)
    got = result_written_after_assignment(a)
    np.testing.assert_allclose(got[0], np.exp(a), rtol=1e-5)
    np.testing.assert_allclose(got[1], 3 * a, rtol=1e-6)


@nki.jit
def fp32_result_read_after_bf16_assignment(a):
    """An FP32 result assigned to a bf16 tile and read again itself: it keeps its FP32 values."""
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    x = nl.load(a)
    d = nl.ndarray(a.shape, nl.bfloat16, buffer=nl.sbuf)
    r = nisa.activation(op=nl.exp, data=x)
    d[...] = r
    nl.store(out, nl.subtract(r, d, dtype=nl.float32))
    return out


def _timed(kernel, target):
    from trnsim.core.timing import simulate
    stream = kernel.last_cores[0].stream
    return stream, simulate(stream, target).events


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_a_result_read_after_its_direct_write_waits_for_it(rng, target):
    """The result tile is the destination's bytes: its reader depends on the direct write and starts a
    semaphore latency after it ends (ScalarE -> VectorE), not as soon as the load is in."""
    from trnsim.specs.timing import timing
    a = rng.standard_normal((128, 512)).astype(np.float32)
    kernel = nki.jit(exp_read_after_assignment, platform_target=target)
    np.testing.assert_allclose(kernel(a), 2 * np.exp(a), rtol=1e-5)
    stream, evs = _timed(kernel, target)
    assert [r.op.value for r in stream] == ["dma_copy", "activation", "tensor_scalar", "dma_copy"]
    load, act, twice, _ = evs
    assert stream[1].placed["dst"][0] == stream[2].placed["data"][0]  # the reader reads the written bytes
    assert act.index in twice.deps
    assert twice.start == pytest.approx(act.end + timing(target).semaphore_latency)
    assert act.start == pytest.approx(load.end + timing(target).semaphore_latency)


def test_a_result_whose_destination_is_written_again_keeps_its_own_copy(rng):
    a = rng.standard_normal((128, 512)).astype(np.float32)
    np.testing.assert_allclose(exp_read_after_assignment(a, overwrite=True), np.exp(a) + 3 * a, rtol=1e-5)
    ops = _ops(exp_read_after_assignment)
    # the copy the compiler keeps once the two live ranges interfere, taken before the overwrite
    assert ops == ["dma_copy", "activation", "tensor_copy", "tensor_scalar", "tensor_tensor", "dma_copy"]
    stream, evs = _timed(exp_read_after_assignment, "trn2")
    copy, overwrite = evs[2], evs[3]
    assert overwrite.start >= copy.end  # the overwrite waits for the copy's read
    assert stream[2].placed["dst"][0] in {p[0] for p in stream[4].placed.values()}  # the add reads r's copy


def test_an_fp32_result_read_again_is_cast_by_a_copy(rng):
    """The direct write in the destination's dtype would lose r's FP32 bits: the copy casts instead."""
    a = rng.standard_normal((128, 64)).astype(np.float32)
    e = np.exp(a)
    want = e - e.astype(ml_dtypes.bfloat16).astype(np.float32)  # the bf16 rounding error, not zero
    got = fp32_result_read_after_bf16_assignment(a)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6 * np.abs(e).max())
    assert np.abs(want).max() > 1e-3
    assert _ops(fp32_result_read_after_bf16_assignment) == ["dma_copy", "activation", "tensor_copy",
                                                           "tensor_tensor", "dma_copy"]
