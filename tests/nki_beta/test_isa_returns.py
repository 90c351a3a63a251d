"""Beta ISA calls return tiles: dtype=, mask= (rectangles, non-rectangles, masked-off out-of-bounds
indices), engine= and the beta argument forms of memset, iota, affine_select and nc_stream_shuffle."""
import ml_dtypes
import numpy as np
import pytest

import trnsim.nki.beta as nki
import trnsim.nki.beta.isa as nisa
import trnsim.nki.beta.language as nl
from trnsim.core.errors import OutOfBoundsError

BF16 = ml_dtypes.bfloat16


@nki.jit
def add_cast(a, b):
    out = nl.ndarray(a.shape, nl.bfloat16, buffer=nl.shared_hbm)
    t = nisa.tensor_tensor(nl.load(a), nl.load(b), op=nl.add, dtype=nl.bfloat16)
    nl.store(out, t)
    return out


def test_tensor_tensor_returns_tile_with_dtype(rng):
    """tensor_tensor(a, b, op=nl.add, dtype=bf16) returns a bf16 tile equal to RNE(a + b)."""
    a, b = rng.standard_normal((128, 96), np.float32), rng.standard_normal((128, 96), np.float32)
    got = add_cast(a, b)
    assert got.dtype == BF16
    np.testing.assert_array_equal(got, (a + b).astype(BF16))


@nki.jit
def ragged_exp(x):
    """The SDK's masking example shape: a row count that 128 does not divide."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    sz_p, sz_f = x.shape
    i_f = nl.arange(sz_f)[None, :]
    for p in nl.affine_range((sz_p + 127) // 128):
        i_p = p * 128 + nl.arange(128)[:, None]
        t = nl.load(x[i_p, i_f], mask=(i_p < sz_p))
        nl.store(out[i_p, i_f], value=nl.exp(t), mask=(i_p < sz_p))
    return out


def test_masked_off_rows_may_lie_outside_the_tensor(rng):
    """Rows 300..383 of the last tile are masked off and never touched, so a 300-row input works."""
    x = rng.standard_normal((300, 40), np.float32)
    np.testing.assert_allclose(ragged_exp(x), np.exp(x), rtol=1e-6)


@nki.jit
def unmasked_overrun(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(x.shape[1])[None, :]
    nl.store(out[i_p, i_f], nl.load(x[i_p + 128, i_f]))
    return out


def test_bounds_are_checked_on_what_is_touched(rng):
    """Without a mask, rows 128..255 of a 200-row tensor are out of bounds: a named error, which code that
    catches Python's IndexError catches too."""
    with pytest.raises(OutOfBoundsError):
        unmasked_overrun(rng.standard_normal((200, 8), np.float32))
    with pytest.raises(IndexError, match=r"reaches elements .* holding 1600 float32 elements"):
        unmasked_overrun(rng.standard_normal((200, 8), np.float32))


@nki.jit
def causal_square(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    i = nl.mgrid[0:x.shape[0], 0:x.shape[1]]
    nl.store(out, nl.zeros(x.shape, x.dtype))
    t = nl.load(x)
    sq = nisa.activation(op=nl.square, data=t, mask=(i.x <= i.p))  # a triangle: not a rectangle
    nl.store(out[i.p, i.x], sq, mask=(i.x <= i.p) & (i.p >= 2))
    return out


def test_triangular_mask_is_exact(rng):
    """A lower-triangular mask (combined with & on rows) squares exactly the kept elements."""
    x = rng.standard_normal((64, 64), np.float32)
    keep = np.tril(np.ones((64, 64), bool)) & (np.arange(64)[:, None] >= 2)
    np.testing.assert_array_equal(causal_square(x), np.where(keep, x * x, 0))


def test_mask_box_count_matches_shape():
    """A triangle of a [64, 64] grid is issued as at most 64 boxes; a rectangle as one."""
    from trnsim.nki.beta._grid import boxes
    i = nl.mgrid[0:64, 0:64]
    tri = boxes((i.x <= i.p).evaluate((64, 64)), (64, 64))
    covered = np.zeros((64, 64), int)
    for (a, b), (c, d) in tri:
        covered[a:b, c:d] += 1
    np.testing.assert_array_equal(covered, np.tril(np.ones((64, 64), int)))
    assert len(boxes(((i.p < 10) & (i.x >= 3)).evaluate((64, 64)), (64, 64))) == 1


@nki.jit
def engines(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    u = nisa.tensor_scalar(t, np.multiply, 3.0, op1=np.add, operand1=1.0, engine=nisa.gpsimd_engine)
    nl.store(out, nisa.tensor_copy(u, engine=nisa.scalar_engine))
    return out


def test_engine_argument_picks_the_engine(rng):
    """engine= sends tensor_scalar to GpSimd and tensor_copy to the scalar engine; values are 3x+1."""
    x = rng.standard_normal((32, 16), np.float32)
    np.testing.assert_allclose(engines(x), 3 * x + 1, rtol=1e-6)
    engs = [r.engine.value for r in engines.last_cores[0].stream if r.op.value in ("tensor_scalar", "tensor_copy")]
    assert engs == ["gpsimd", "scalar"]


@nki.jit
def beta_forms(x):
    out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    ids = nisa.iota(i_p * 64 + i_f, dtype=nl.float32)                # beta: an affine expression
    ones_ = nisa.memset((128, 64), 1.0, nl.float32)                    # beta: a shape, not a dst
    causal = nisa.affine_select(pred=(i_p - i_f >= 0), on_true_tile=ids, on_false_value=-1.0)
    nl.store(out, nl.add(causal, ones_))
    return out


def test_iota_memset_affine_select_beta_forms():
    """iota(expr), memset(shape, value, dtype) and affine_select(pred, ...) give p*64+f+1 below the diagonal, 0 above."""
    p, f = np.arange(128)[:, None], np.arange(64)[None, :]
    ref = np.where(p >= f, p * 64 + f, -1.0) + 1.0
    np.testing.assert_array_equal(beta_forms(np.zeros(1, np.float32)), ref.astype(np.float32))


@nki.jit
def shuffle(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    src = nl.load(x)
    dst = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.nc_stream_shuffle(src, dst, shuffle_mask=list(range(31, -1, -1)))  # beta order: (src, dst, mask)
    nl.store(out, dst)
    return out


def test_nc_stream_shuffle_beta_argument_order(rng):
    """nc_stream_shuffle(src, dst, mask) reverses the 32 partitions of a quadrant."""
    x = rng.standard_normal((32, 8), np.float32)
    np.testing.assert_array_equal(shuffle(x), x[::-1])


@nki.jit
def more_forms(x, w):
    out = nl.ndarray((4, 64, 64), nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)                                            # [64, 64]
    c = nl.load(w)                                            # [64, 1]
    nl.store(out[0], nisa.dma_transpose(t))
    nl.store(out[1], nisa.scalar_tensor_tensor(data=t, op0=np.multiply, operand0=c, op1=np.subtract, operand1=t))
    tmp = nl.ndarray((64, 64), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(t, tmp)                                     # beta positional order: (src, dst)
    nl.store(out[2], tmp)
    red = nisa.tensor_partition_reduce(np.add, t)             # [1, 64]
    nl.store(out[3][0:1, :], red)
    nl.store(out[3][1:64, :], nl.zeros((63, 64), nl.float32))
    return out


def test_dma_transpose_scalar_tensor_tensor_dma_copy_partition_reduce(rng):
    """dma_transpose(src) returns x.T; scalar_tensor_tensor gives x*w - x; dma_copy(src, dst); partition sums."""
    x, w = rng.standard_normal((64, 64), np.float32), rng.standard_normal((64, 1), np.float32)
    got = more_forms(x, w)
    np.testing.assert_array_equal(got[0], x.T)
    np.testing.assert_allclose(got[1], x * w - x, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(got[2], x)
    np.testing.assert_allclose(got[3][0], x.sum(0), rtol=1e-5, atol=1e-5)


@nki.jit
def registers(x):
    out = nl.ndarray((1, 2), nl.int32, buffer=nl.shared_hbm)
    r = nisa.register_alloc()
    nisa.register_move(r, imm=41)                            # beta: the value is `imm`
    t = nl.ndarray((1, 2), nl.int32, buffer=nl.sbuf)
    nisa.register_store(t[0:1, 0:1], r)
    q = nisa.register_alloc()
    nisa.register_load(q, nl.load(x))
    nisa.register_store(t[0:1, 1:2], q)
    nl.store(out, t)
    return out


def test_register_move_beta_argument_name():
    """register_move(dst, imm=41) and a load/store round trip through registers."""
    np.testing.assert_array_equal(registers(np.array([[7]], np.int32)), [[41, 7]])


@nki.jit
def act_tiles(x, s, b):
    out = nl.ndarray((3,) + x.shape, nl.float32, buffer=nl.shared_hbm)
    t, sc, bi = nl.load(x), nl.load(s), nl.load(b)
    total = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    y = nisa.activation(op=nl.tanh, data=t, bias=bi, scale=sc, reduce_op=np.add, reduce_res=total)
    nl.store(out[0], y)
    nl.store(out[1], nisa.tensor_scalar(t, np.subtract, bi, reverse0=True, op1=np.multiply, operand1=sc))
    neg_max = nisa.tensor_reduce(np.max, t, axis=[1], negate=True, keepdims=True)
    nl.store(out[2], nl.add(nl.broadcast_to(neg_max, x.shape), nl.broadcast_to(total, x.shape)))
    return out


def test_activation_with_tile_scale_bias_and_reduce(rng):
    """tanh(x*s + b) with [P,1] scale and bias tiles, its row sums, (b - x) * s, and -max(x) via tensor_reduce."""
    x = rng.standard_normal((32, 48), np.float32)
    s, b = rng.standard_normal((32, 1), np.float32), rng.standard_normal((32, 1), np.float32)
    got = act_tiles(x, s, b)
    y = np.tanh(x * s + b)
    np.testing.assert_allclose(got[0], y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], (b - x) * s, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got[2], np.broadcast_to(-x.max(1, keepdims=True) + y.sum(1, keepdims=True), x.shape),
                               rtol=1e-5, atol=1e-5)


def exp_row_sums(x):
    out = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
    total = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.activation_reduce(np.exp, data=nl.load(x), reduce_op=np.sum, reduce_res=total, scale=1.0)
    nl.store(out, total)
    return out


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_activation_reduce_with_np_sum(rng, target):
    """np.sum as reduce_op is the addition the scalar engine reduces with, on every generation (beta
    activation_reduce page: v2 reduces by addition only)."""
    x = rng.standard_normal((64, 96), np.float32)
    got = nki.jit(exp_row_sums, platform_target=target)(x)
    np.testing.assert_allclose(got, np.exp(x).sum(1, keepdims=True), rtol=1e-5)
