"""Beta-API partition-only tiles ([P], one value per partition), partition-aligned broadcasting, reductions
over any free axes, scalar stores, nc_stream_shuffle across partition counts, and double-row matmuls."""
import ml_dtypes
import numpy as np
import pytest

import trnsim.nki.beta as nki
import trnsim.nki.beta.isa as nisa
import trnsim.nki.beta.language as nl
from trnsim.core.errors import ShapeError


@nki.jit
def column_operands(x, cols):
    """x [P, F], cols [P, 3] in HBM: each column loads as a [P] tile and serves where a [P, 1] fits."""
    out = nl.ndarray((3,) + x.shape, nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    scale, bias, shift = nl.load(cols[:, 0]), nl.load(cols[:, 1]), nl.load(cols[:, 2])
    assert scale.shape == (x.shape[0],)
    nl.store(out[0], nisa.activation(op=nl.exp, data=t, scale=scale, bias=bias))
    nl.store(out[1], nisa.tensor_scalar(t, np.multiply, scale, op1=np.subtract, operand1=shift))
    nl.store(out[2], t + shift)  # a [P] operand broadcasts along the free dim
    return out


def test_partition_only_tiles_as_scalar_operands(rng):
    """[P] tiles from an int-indexed column work as activation scale/bias, tensor_scalar operands and + operand."""
    x = rng.standard_normal((96, 40), np.float32)
    cols = rng.standard_normal((96, 3), np.float32) * 0.5
    got = column_operands(x, cols)
    s, b, c = (cols[:, i:i + 1] for i in range(3))
    np.testing.assert_allclose(got[0], np.exp(x * s + b), rtol=1e-5)
    np.testing.assert_allclose(got[1], x * s - c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[2], x + c, rtol=1e-6)


@nki.jit
def reduce_into_columns(x):
    """x [P, 4, F]: row sums written column by column, then sums over every free axis."""
    out = nl.ndarray((x.shape[0], 4), nl.float32, buffer=nl.shared_hbm)
    total = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
    both = nl.ndarray((x.shape[0], 1, 1), nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    acc = nl.ndarray((x.shape[0], 4), nl.float32)
    assert acc[:, 0].shape == (x.shape[0], 1)        # on-chip tiles stay 2-d; HBM cols drop the dim
    for i in range(4):
        acc[:, i] = nisa.tensor_reduce(np.add, data=t[:, i, :], axis=(1,))
    nl.store(out, acc)
    s = nl.sum(t, axis=[1, 2])                       # [P]
    k = nl.sum(t, axis=[1, 2], keepdims=True)        # [P, 1, 1]
    assert s.shape == (x.shape[0],) and k.shape == (x.shape[0], 1, 1)
    nl.store(total, s)                               # [P] into a [P, 1] HBM tensor
    nl.store(both, k + nl.max(t[:, 0, :], axis=1, keepdims=True))  # [P,1,1] + [P,1] stays [P,1,1]
    return out, total, both


def test_reductions_into_columns_and_partition_aligned_shapes(rng):
    """t[:, i] ([P, 1]) = tensor_reduce(...) fills one column; nl.sum over every free axis is [P] (keepdims:
    [P, 1, 1])."""
    x = rng.standard_normal((64, 4, 24), np.float32)
    out, total, both = reduce_into_columns(x)
    np.testing.assert_allclose(out, x.sum(axis=2), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(total[:, 0], x.sum(axis=(1, 2)), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(both[:, 0, 0], x.sum(axis=(1, 2)) + x[:, 0].max(axis=1), rtol=1e-5, atol=1e-4)


def test_partition_aligned_broadcast_shapes():
    """[P,1] with [P,1,1] is [P,1,1] (never numpy's [P,P,1]); [P] with [P, F] is [P, F]; a mismatch is refused."""
    a, b, c = nl.ndarray((8, 1), nl.float32), nl.ndarray((8, 1, 1), nl.float32), nl.ndarray((8,), nl.float32)
    assert nl._shape_of(a, b) == (8, 1, 1)
    assert nl._shape_of(c, nl.ndarray((8, 5), nl.float32)) == (8, 5)
    with pytest.raises(ShapeError, match="do not broadcast"):
        nl._shape_of(c, nl.ndarray((4, 5), nl.float32))


@nki.jit
def non_trailing_max(x):
    """x [P, A, B, C]: max over axes 1 and 3 (not trailing), then a mean over axes 1 and 2 of the result."""
    out = nl.ndarray((x.shape[0], x.shape[2]), nl.float32, buffer=nl.shared_hbm)
    out2 = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, nl.max(t, axis=[1, 3]))
    nl.store(out2, nisa.tensor_reduce(np.add, data=t, axis=(1, 3), keepdims=True)[:, 0, :, 0][:, 0])
    return out, out2


def test_reductions_over_non_trailing_axes(rng):
    """nl.max(axis=[1, 3]) and tensor_reduce(axis=(1, 3)) reduce the right axes (a strided view, one instruction)."""
    x = rng.standard_normal((32, 3, 5, 4), np.float32)
    got, got2 = non_trailing_max(x)
    np.testing.assert_array_equal(got, x.max(axis=(1, 3)))
    np.testing.assert_allclose(got2[:, 0], x.sum(axis=(1, 3))[:, 0], rtol=1e-5, atol=1e-5)
    cores = non_trailing_max.trace(x)
    reduces = [r for r in cores[0].stream if r.op.value == "tensor_reduce"]
    assert len(reduces) == 2


@nki.jit
def one_d_hbm(v):
    """v [N] in HBM <-> an [N, 1] tile by dma_copy."""
    out = nl.ndarray(v.shape, v.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((v.shape[0], 1), v.dtype)
    nisa.dma_copy(src=v, dst=t)
    nisa.dma_copy(src=nl.multiply(t, 2.0), dst=out)
    return out


def test_dma_copy_between_1d_hbm_and_column_tile(rng):
    """A 1-d HBM [N] copies into an [N, 1] tile and back."""
    v = rng.standard_normal(100, np.float32)
    np.testing.assert_array_equal(one_d_hbm(v), v * 2)


@nki.jit
def store_scalar(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.store(out, 7)
    return out


def test_store_of_a_scalar_fills_hbm():
    """nl.store(hbm, 7) fills the tensor (a memset tile moved by DMA), here over two blocks of 128 rows."""
    got = store_scalar(np.zeros((200, 16), np.int32))
    np.testing.assert_array_equal(got, np.full((200, 16), 7, np.int32))


@nki.jit
def broadcast_row(x):
    """x [1, F]: one partition shuffled to 32."""
    out = nl.ndarray((32, x.shape[1]), x.dtype, buffer=nl.shared_hbm)
    a = nl.load(x)
    b = nl.ndarray((32, x.shape[1]), x.dtype)
    nisa.nc_stream_shuffle(a, b, shuffle_mask=[0] * 32)
    nl.store(out, b)
    return out


def test_stream_shuffle_from_one_partition(rng):
    """A 1-partition src with a mask of zeros fills the 32 partitions of dst."""
    x = rng.standard_normal((1, 16), np.float32)
    np.testing.assert_array_equal(broadcast_row(x), np.repeat(x, 32, axis=0))


@nki.jit
def double_row(a, b):
    out = nl.ndarray((a.shape[2], b.shape[2]), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nisa.nc_matmul(nl.load(a), nl.load(b), perf_mode="double_row_gen3"))
    return out


def test_double_row_matmul_beta(rng):
    """perf_mode="double_row_gen3" on [K, 2, M] x [K, 2, N] FP8 gives [M, N], contracting K and the 2 rows."""
    a = rng.integers(-4, 4, (64, 2, 16)).astype(ml_dtypes.float8_e5m2)
    b = rng.integers(-4, 4, (64, 2, 96)).astype(ml_dtypes.float8_e5m2)
    got = double_row(a, b)
    np.testing.assert_array_equal(got, np.einsum("kli,klj->ij", a.astype(np.float32), b.astype(np.float32)))
    rec = next(r for r in double_row.last_cores[0].stream if r.op.value == "nc_matmul")
    assert rec.attrs["perf_mode"] == "double_row"


@nki.jit
def inv_row_sums(x):
    out = nl.ndarray((x.shape[0], 8), nl.float32, buffer=nl.shared_hbm)
    s = nisa.tensor_reduce(np.add, data=nl.load(x), axis=(1,))     # a [P] tile
    nl.store(out, nl.copy((1.0 / s).broadcast_to((x.shape[0], 8))))
    return out


def test_partition_only_tile_broadcasts_along_free_dims(rng):
    """Tile.broadcast_to of a [P] tile to [P, F]: the missing free axis counts as size 1."""
    x = rng.uniform(1, 2, (64, 30)).astype(np.float32)
    np.testing.assert_allclose(inv_row_sums(x), np.broadcast_to(1.0 / x.sum(1, keepdims=True), (64, 8)), rtol=1e-6)
