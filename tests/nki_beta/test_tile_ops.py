"""Tile arithmetic with broadcasting and the beta dtype-promotion rules; PSUM accumulation of
matmuls; load/store/load_transpose2d; loop_reduce, where, dropout, static_cast."""
import ml_dtypes
import numpy as np
import pytest

import trnsim.nki.beta as nki
import trnsim.nki.beta.isa as nisa
import trnsim.nki.beta.language as nl
from trnsim import numerics

BF16 = ml_dtypes.bfloat16


@nki.jit
def arith(a, col, row):
    """a [P, F], col [P, 1], row [1, F]."""
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    cmp_ = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    x, c, r = nl.load(a), nl.load(col), nl.load(row)
    y = (x + c) * r - x / 4.0       # free-dim broadcast of c, partition broadcast of r
    nl.store(out, 1.0 - y)
    nl.store(cmp_, nl.copy((x > c), dtype=nl.float32))
    return out, cmp_


def test_operators_with_partition_and_free_broadcasting(rng):
    """(x + col) * row - x / 4 and 1 - y, with [P,1] and [1,F] operands, match numpy; x > col gives 1/0."""
    a = rng.standard_normal((64, 40), np.float32)
    col, row = rng.standard_normal((64, 1), np.float32), rng.standard_normal((1, 40), np.float32)
    got, cmp_ = arith(a, col, row)
    y = (a + col) * row - a / np.float32(4)
    np.testing.assert_allclose(got, 1 - y, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(cmp_, (a > col).astype(np.float32))


@pytest.mark.parametrize("a, b, want", [
    ("int32", "float16", "float16"), ("uint16", "tfloat32", "tfloat32"), ("float32", "bfloat16", "float32"),
    ("float16", "bfloat16", "float32"), ("float8_e4m3", "float16", "float16"), ("float8_e4m3", "float8_e5m2", "bfloat16"),
    ("int16", "int32", "int32"), ("uint8", "uint16", "uint16"), ("uint16", "int32", "int32"), ("int8", "uint8", "int16"),
    ("int8", "uint16", "int32"), ("int32", "uint32", "float32"),
])
def test_promotion_table(a, b, want):
    """The beta API's promotion examples, pair by pair."""
    from trnsim.nki.beta._tile import promote
    ta, tb = (nl.ndarray((2, 2), numerics.dtype(x)) for x in (a, b))
    assert promote(ta, tb).name == want
    assert promote(tb, ta).name == want


def test_weak_scalars_promote_to_widest():
    """(int8 tile, 2) -> int32 and (float16 tile, 1.2) -> float32; a numpy float16 scalar keeps float16."""
    from trnsim.nki.beta._tile import promote
    assert promote(nl.ndarray((2, 2), nl.int8), 2).name == "int32"
    assert promote(nl.ndarray((2, 2), nl.float16), 1.2).name == "float32"
    assert promote(nl.ndarray((2, 2), nl.float16), np.float16(1.2)).name == "float16"


@nki.jit
def promoted_add(x, y):
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    s = nl.add(nl.load(x), nl.load(y))           # bf16 + fp16 -> fp32, no rounding to either
    assert s.dtype == nl.float32
    nl.store(out, s)
    return out


def test_promoted_add_keeps_fp32(rng):
    """bf16 + fp16 computes in fp32 and stores fp32 (not rounded to bf16)."""
    x = rng.standard_normal((8, 8)).astype(BF16)
    y = rng.standard_normal((8, 8)).astype(np.float16)
    np.testing.assert_array_equal(promoted_add(x, y), x.astype(np.float32) + y.astype(np.float32))


@nki.jit
def matmuls(x, w):
    """x [M, K] (not transposed), w [K, N]; three ways to accumulate into PSUM."""
    M, K = x.shape
    N = w.shape[1]
    out = nl.ndarray((3, M, N), nl.float32, buffer=nl.shared_hbm)
    a = nl.zeros((M, N), nl.float32, buffer=nl.psum)
    b = nl.zeros((M, N), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(K // 128):
        ks = nl.ds(k * 128, 128)
        wk = nl.load(w[ks, :])
        a += nl.matmul(nl.load(x[:, ks]), wk)           # transpose_x=False: PE transpose first
        xt = nl.load_transpose2d(x[:, ks])              # [128, M] by DMA transpose
        b[...] += nisa.nc_matmul(xt, wk)
    c = nl.matmul(nl.load_transpose2d(x[:, 0:128]), nl.load(w[0:128, :]), transpose_x=True)
    nl.store(out[0], nl.copy(a))
    nl.store(out[1], nl.copy(b))
    nl.store(out[2], c)                                 # a PSUM value goes through SBUF on its way out
    return out


def test_psum_accumulation_three_ways(rng):
    """psum += nl.matmul(x, w), psum[...] += nisa.nc_matmul and a single transpose_x matmul match numpy."""
    x = rng.standard_normal((64, 256)).astype(BF16)
    w = rng.standard_normal((256, 96)).astype(BF16)
    xf, wf = x.astype(np.float32), w.astype(np.float32)
    got = matmuls(x, w)
    np.testing.assert_allclose(got[0], xf @ wf, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got[1], xf @ wf, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got[2], xf[:, :128] @ wf[:128], rtol=1e-5, atol=1e-4)


@nki.jit
def masked_matmul(a_t, b):
    """Operand masking: only the first 40 columns of a_t and 100 of b take part."""
    out = nl.ndarray((64, 128), nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((64, 128), nl.float32, buffer=nl.psum)
    i_lf, i_rf = nl.arange(64)[None, :], nl.arange(128)[None, :]
    acc += nl.matmul(nl.load(a_t)[i_lf < 40], nl.load(b)[i_rf < 100], transpose_x=True)
    nl.store(out, nl.copy(acc))
    return out


def test_matmul_operand_masking(rng):
    """lhs[i_lhs_f < 40] and rhs[i_rhs_f < 100] restrict the output block; the rest stays zero."""
    a_t, b = rng.standard_normal((32, 64), np.float32), rng.standard_normal((32, 128), np.float32)
    ref = np.zeros((64, 128), np.float32)
    ref[:40, :100] = a_t[:, :40].T @ b[:, :100]
    np.testing.assert_allclose(masked_matmul(a_t, b), ref, rtol=1e-5, atol=1e-5)


@nki.jit
def reduce_loop(x):
    out = nl.ndarray((128, x.shape[2]), nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0]):
        acc = nl.loop_reduce(nl.load(x[i]), op=np.add, loop_indices=[i])
    nl.store(out, acc)
    return out


def test_loop_reduce_sums_across_iterations(rng):
    """nl.loop_reduce(t, np.add, [i]) accumulates the loaded tiles of all iterations."""
    x = rng.standard_normal((5, 128, 16), np.float32)
    np.testing.assert_allclose(reduce_loop(x), x.sum(0), rtol=1e-6, atol=1e-6)


@nki.jit
def select(c, x, y):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.where(nl.load(c), nl.load(x), nl.load(y)))
    return out


def test_where(rng):
    """nl.where(cond, x, y) picks x where cond is 1."""
    c = (rng.random((32, 16)) > 0.5).astype(np.float32)
    x, y = rng.standard_normal((32, 16), np.float32), rng.standard_normal((32, 16), np.float32)
    np.testing.assert_array_equal(select(c, x, y), np.where(c != 0, x, y))


@nki.jit
def drop(x, seed):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.random_seed(nl.load(seed))
    nl.store(out, nl.dropout(nl.load(x), rate=0.25))
    return out


def test_dropout_is_seeded(rng):
    """nl.dropout keeps x or gives 0, drops about 25%, and the same seed gives the same result."""
    x = rng.random((128, 256), np.float32) + 1
    seed = np.array([[7]], np.int32)
    a, b = drop(x, seed), drop(x, seed)
    np.testing.assert_array_equal(a, b)
    assert np.all((a == 0) | (a == x))
    assert 0.2 < float((a == 0).mean()) < 0.3
    assert not np.array_equal(a, drop(x, np.array([[8]], np.int32)))


def test_static_cast_on_the_host():
    """nl.static_cast of host values rounds to nearest even like the hardware cast."""
    got = nl.static_cast(np.array([1.00390625, 1.01171875], np.float32), nl.bfloat16)
    np.testing.assert_array_equal(got, np.array([1.0, 1.015625], np.float32).astype(BF16))


@nki.jit
def psum_zeros_then_add(x):
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    z = nl.zeros(x.shape, nl.float32, buffer=nl.psum)
    z += nl.load(x)                                        # not a matmul: the zero fill must happen first
    nl.store(out, z)
    return out


def test_psum_zeros_are_zeros_for_any_use(rng):
    """nl.zeros in PSUM followed by an ordinary `+=` gives x (the deferred fill runs before the add)."""
    x = rng.standard_normal((32, 16), np.float32)
    np.testing.assert_array_equal(psum_zeros_then_add(x), x)
    ops = [r.op.value for r in psum_zeros_then_add.last_cores[0].stream]
    assert ops == ["dma_copy", "memset", "tensor_tensor", "tensor_copy", "dma_copy"]  # store from PSUM via SBUF


@nki.jit
def softmax_bcast(x, row):
    out = nl.ndarray((2,) + x.shape, nl.float32, buffer=nl.shared_hbm)
    nl.store(out[0], nl.softmax(nl.load(x), axis=1))
    r = nl.broadcast_to(nl.load(row), x.shape)               # [1, F] -> [P, F]
    nl.store(out[1], nl.copy(r))
    return out


def test_softmax_and_broadcast_to(rng):
    """nl.softmax along the free axis and nl.broadcast_to of a [1, F] row over P partitions."""
    x, row = rng.standard_normal((64, 100), np.float32) * 3, rng.standard_normal((1, 100), np.float32)
    got = softmax_bcast(x, row)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(got[0], e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(got[1], np.broadcast_to(row, x.shape))


@nki.jit
def int_bcast(row):
    out = nl.ndarray((128, row.shape[1]), row.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.broadcast_to(nl.load(row), shape=(128, row.shape[1])))
    return out


def test_broadcast_to_of_an_integer_row(rng):
    """An int32 [1, F] row over 128 partitions: exact (DMA copies; the tensor engine takes no integers)."""
    row = rng.integers(-2**31, 2**31 - 1, (1, 64), dtype=np.int32)
    np.testing.assert_array_equal(int_bcast(row), np.repeat(row, 128, axis=0))


@nki.jit
def int_division(x, d):
    """x, d int32 [P, F]: quotient by `/` (true division), its floor as int32, and nl.divide of two tiles."""
    out = nl.ndarray((3,) + x.shape, nl.float32, buffer=nl.shared_hbm)
    xt, dt = nl.load(x), nl.load(d)
    q = xt / 7
    assert q.dtype == nl.float32
    nl.store(out[0], q)
    nl.store(out[1], nl.copy(nl.floor(q, dtype=nl.int32), dtype=nl.float32))
    nl.store(out[2], nl.divide(xt, dt))
    return out


def test_integer_division_is_true_division(rng):
    """int32 / int gives a float32 tile (numpy.divide's rule), so floor() of it is the integer quotient;
    rounding the quotient back to int32 would give 59 for 2241 / 38."""
    x = np.concatenate([np.arange(2176, 2240, dtype=np.int32), rng.integers(-500, 500, 64, dtype=np.int32)])
    x = x.reshape(8, 16)
    d = rng.integers(1, 40, (8, 16), dtype=np.int32)
    got = int_division(x, d)
    np.testing.assert_array_equal(got[0], x.astype(np.float32) / np.float32(7))
    np.testing.assert_array_equal(got[1], np.floor(x / 7))
    np.testing.assert_array_equal(got[2], x.astype(np.float32) / d.astype(np.float32))


@nki.jit
def reduce_outer_loop(x):
    """x [K, Q, P, F]: the reduction loop (k) runs outside the loop over q; each q keeps its own sum."""
    K, Q, P, F = x.shape
    out = nl.ndarray((2, Q, P, F), nl.float32, buffer=nl.shared_hbm)
    sums = nl.zeros((Q, nl.par_dim(P), F), nl.float32)
    maxes = nl.zeros((Q, nl.par_dim(P), F), nl.float32)
    for k in nl.sequential_range(K):
        for q in nl.affine_range(Q):
            t = nl.load(x[k, q])
            sums[q, :, :] = nl.loop_reduce(t, op=np.add, loop_indices=(k,), dtype=nl.float32)
            maxes[q, :, :] = nl.loop_reduce(t, op=np.maximum, loop_indices=[k], dtype=nl.float32)
    for q in nl.affine_range(Q):
        nl.store(out[0, q], sums[q])
        nl.store(out[1, q], maxes[q])
    return out


def test_loop_reduce_keeps_one_accumulator_per_outer_iteration(rng):
    """loop_reduce over k inside a loop over q: one accumulator per q, `dst = op(dst, x)` each k. The
    destination is op's other input (nki.language.loop_reduce, 2.2x API pages), so the max starts from the
    zeros the kernel filled it with."""
    x = rng.standard_normal((3, 4, 16, 8), np.float32)
    got = reduce_outer_loop(x)
    np.testing.assert_allclose(got[0], x.sum(0), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(got[1], np.maximum(x.max(0), 0.0))


@nki.jit
def reduce_banded(x, width):
    """x [K, Q, P, F]: q tile q sums the k tiles in [q - width + 1, q] only, the others skipped by a Python
    `if` on the loop indices (a sliding window's block skipping); rows whose first k tile is not k = 0 too."""
    K, Q, P, F = x.shape
    out = nl.ndarray((Q, P, F), nl.float32, buffer=nl.shared_hbm)
    sums = nl.zeros((Q, nl.par_dim(P), F), nl.float32)
    for k in nl.affine_range(K):
        for q in nl.affine_range(Q):
            if q - width < k <= q:
                sums[q, :, :] = nl.loop_reduce(nl.load(x[k, q]), op=np.add, loop_indices=(k,), dtype=nl.float32)
    for q in nl.affine_range(Q):
        nl.store(out[q], sums[q])
    return out


@pytest.mark.parametrize("width", [1, 2])
def test_loop_reduce_into_a_tile_with_skipped_iterations(rng, width):
    """Every q tile gets the sum of its own k tiles, whichever k its first one is."""
    x = rng.standard_normal((4, 4, 16, 8), np.float32)
    want = np.zeros((4, 16, 8), np.float32)
    for q in range(4):
        for k in range(4):
            if q - width < k <= q:
                want[q] += x[k, q]
    np.testing.assert_allclose(reduce_banded(x, width), want, rtol=1e-6, atol=1e-6)


@nki.jit
def masked_off_select(x, keep):
    """A causal select, then a banded select into the same tile whose mask is the Python bool `keep`."""
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    buf = nl.ndarray(x.shape, nl.float32)
    i_p, i_f = nl.mgrid[0:x.shape[0], 0:x.shape[1]]
    buf[:, :] = nisa.affine_select(pred=(i_p >= i_f), on_true_tile=nl.load(x), on_false_value=-9.0)
    buf[:, :] = nisa.affine_select(pred=(i_f > i_p - 3), on_true_tile=buf[:, :], on_false_value=-9.0, mask=keep)
    buf[:, :] = nl.add(buf, 100.0, mask=keep)
    nl.store(out, buf)
    return out


@pytest.mark.parametrize("keep", [True, False])
def test_a_masked_off_call_leaves_its_destination(rng, keep):
    """`buf[...] = op(..., mask=False)` issues nothing and buf keeps its values (the result is written
    straight into buf); with mask=True the op applies."""
    x = rng.standard_normal((8, 8), np.float32)
    p, f = np.arange(8)[:, None], np.arange(8)[None, :]
    want = np.where(p >= f, x, np.float32(-9))
    if keep:
        want = np.where(f > p - 3, want, np.float32(-9)) + np.float32(100)
    np.testing.assert_array_equal(masked_off_select(x, keep), want)
