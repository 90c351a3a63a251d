"""Forms the API references document that kernels written outside our corpus use, in both API generations:
iota of a scalar expression, nc_matmul over a moving operand with two free dims, isinstance against
nki.typing.tensor, nc_match_replace8 with dst_idx over never-written values, .ap on a reshaped HBM tensor,
an nl.hbm output handed back to a framework, and in-place recurrences in affine loops."""
import warnings

import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
import trnsim.nki.beta as bnki
import trnsim.nki.beta.isa as bisa
import trnsim.nki.beta.language as bnl
import trnsim.nki.beta.typing as bnt
import trnsim.nki.typing as nt
from trnsim.core.errors import MemorySpaceError, ShapeError, UninitializedError
from trnsim.core.races import LoopCarriedWarning


# -- iota of a scalar expression ---------------------------------------------------------------------------------
@bnki.jit
def iota_of_scalars(x):
    out = bnl.ndarray((1, 4), bnl.int32, buffer=bnl.shared_hbm)
    for i in bnl.affine_range(4):
        bnl.store(out[0:1, i:i + 1], bisa.iota(i * 3 + bnl.program_id(0) + 1, dtype=bnl.int32))
    return out


def test_beta_iota_of_program_id_and_loop_indices_is_a_one_element_tile():
    got = iota_of_scalars[2](np.zeros((1, 1), np.float32))  # the last program's output comes back
    np.testing.assert_array_equal(got, np.array([[3 * i + 1 + 1 for i in range(4)]], np.int32))


def test_beta_iota_of_a_1d_grid_stays_the_compilers_error():
    @bnki.jit
    def k(x):
        out = bnl.ndarray((1, 8), bnl.int32, buffer=bnl.shared_hbm)
        bnl.store(out, bisa.iota(bnl.arange(8), dtype=bnl.int32))
        return out
    with pytest.raises(ShapeError, match="err_1d_arange_not_supported"):
        k(np.zeros((1, 1), np.float32))


@nki.jit
def iota_offset_from_loop(x):
    out = nl.ndarray((1, 4), nl.int32, buffer=nl.shared_hbm)
    t = nl.ndarray((1, 4), nl.int32)
    for i in nl.affine_range(4):
        nisa.iota(t[0:1, i:i + 1], [[0, 1]], offset=i * 3 + 1)
    nisa.dma_copy(out, t)
    return out


def test_current_iota_takes_a_scalar_offset():
    np.testing.assert_array_equal(iota_offset_from_loop(np.zeros((1, 1), np.float32)), [[1, 4, 7, 10]])


# -- nc_matmul: the moving operand's free dims flatten and the result keeps them ---------------------------------
@nki.jit
def matmul_3d_current(a, b):
    K, M = a.shape
    _, H, W = b.shape
    out = nl.ndarray((M, H, W), nl.float32, buffer=nl.shared_hbm)
    at, bt = nl.ndarray((K, M), a.dtype), nl.ndarray((K, H, W), b.dtype)
    nisa.dma_copy(at, a)
    nisa.dma_copy(bt, b)
    ps = nl.ndarray((M, H, W), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(ps, at, bt)
    sb = nl.ndarray((M, H, W), nl.float32)
    nisa.tensor_copy(sb, ps)
    nisa.dma_copy(out, sb)
    return out


@bnki.jit
def matmul_3d_beta(a, b):
    K, M = a.shape
    _, H, W = b.shape
    out = bnl.ndarray((M, H, W), bnl.float32, buffer=bnl.shared_hbm)
    p = bisa.nc_matmul(bnl.load(a), bnl.load(b))
    assert p.shape == (M, H, W)
    bnl.store(out, bnl.copy(p))
    return out


@pytest.mark.parametrize("kernel", [matmul_3d_current, matmul_3d_beta], ids=["current", "beta"])
def test_nc_matmul_moving_with_two_free_dims(kernel, rng):
    a = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal((64, 4, 8)).astype(np.float32)
    np.testing.assert_allclose(kernel(a, b), np.einsum("km,khw->mhw", a, b), rtol=1e-4, atol=1e-4)


@bnki.jit
def matmul_3d_beta_accumulated(a, b):
    K, M = a.shape
    _, H, W = b.shape
    out = bnl.ndarray((M, H, W), bnl.float32, buffer=bnl.shared_hbm)
    acc = bnl.zeros((M, H, W), bnl.float32, buffer=bnl.psum)
    for k in bnl.affine_range(K // 32):
        acc += bisa.nc_matmul(bnl.load(a[k * 32:(k + 1) * 32]), bnl.load(b[k * 32:(k + 1) * 32]))
    bnl.store(out, bnl.copy(acc))
    return out


def test_beta_nc_matmul_with_two_free_dims_accumulates_into_psum(rng):
    a = rng.standard_normal((64, 16)).astype(np.float32)
    b = rng.standard_normal((64, 2, 8)).astype(np.float32)
    np.testing.assert_allclose(matmul_3d_beta_accumulated(a, b), np.einsum("km,khw->mhw", a, b), rtol=1e-4, atol=1e-4)


# -- nki.typing.tensor -----------------------------------------------------------------------------------------
@bnki.jit
def branch_on_type_beta(x, s):
    out = bnl.ndarray(x.shape, x.dtype, buffer=bnl.shared_hbm)
    t = bnl.load(x)
    assert isinstance(t, bnt.tensor) and isinstance(x, bnt.mutable_tensor)
    y = bnl.multiply(t, s) if not isinstance(s, bnt.tensor) else bnl.multiply(t, bnl.load(s))
    bnl.store(out, y)
    return out


@nki.jit
def branch_on_type_current(x, s):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype)
    nisa.dma_copy(t, x)
    if isinstance(s, nt.tensor):
        u = nl.ndarray(x.shape, x.dtype)
        nisa.dma_copy(u, s)
        nisa.tensor_tensor(t, t, u, nl.multiply)
    else:
        nisa.tensor_scalar(t, t, nl.multiply, s)
    nisa.dma_copy(out, t)
    return out


@pytest.mark.parametrize("kernel", [branch_on_type_current, branch_on_type_beta], ids=["current", "beta"])
def test_isinstance_tells_a_tensor_from_a_number(kernel, rng):
    x = rng.standard_normal((8, 16)).astype(np.float32)
    s = rng.standard_normal((8, 16)).astype(np.float32)
    np.testing.assert_allclose(kernel(x, 3.0), x * 3.0, rtol=1e-6)
    np.testing.assert_allclose(kernel(x, s), x * s, rtol=1e-6)


def test_typing_annotations_still_subscript():
    assert nt.tensor[128, 512] == ("tensor", (128, 512)) and bnt.mutable_tensor[4] == ("tensor", (4,))
    assert not isinstance(np.zeros(3), nt.tensor) and not isinstance(2.0, bnt.tensor)


# -- nc_match_replace8 with dst_idx ----------------------------------------------------------------------------
def _replace8(x, imm):
    """numpy: per row, the 8 largest values (walked from the 8th) replaced by imm at their first unused match."""
    out, idx = x.copy(), np.zeros((x.shape[0], 8), np.uint32)
    for r in range(x.shape[0]):
        top = -np.sort(-x[r])[:8]
        used = set()
        for j in range(7, -1, -1):
            hit = next(h for h in np.flatnonzero(x[r] == top[j]) if h not in used)
            used.add(hit)
            idx[r, j] = hit
            out[r, hit] = imm
    return out, idx


@bnki.jit
def replace8_beta(x):
    out = bnl.ndarray(x.shape, x.dtype, buffer=bnl.shared_hbm)
    idx = bnl.ndarray((x.shape[0], 8), bnl.uint32, buffer=bnl.shared_hbm)
    t = bnl.load(x)
    di = bnl.ndarray((x.shape[0], 8), dtype=bnl.uint32, buffer=bnl.sbuf)
    bnl.store(out, bisa.nc_match_replace8(data=t, vals=bisa.max8(src=t), imm=-1.0, dst_idx=di))
    bnl.store(idx, di)
    return out, idx


@nki.jit
def replace8_current(x, written):
    P, F = x.shape
    out = nl.ndarray((P, F), x.dtype, buffer=nl.shared_hbm)
    idx = nl.ndarray((P, 8), nl.uint32, buffer=nl.shared_hbm)
    t = nl.ndarray((P, F), x.dtype)
    nisa.dma_copy(t[:, 0:written], x[:, 0:written])  # columns past `written` are never written
    m, r, di = nl.ndarray((P, 8), x.dtype), nl.ndarray((P, F), x.dtype), nl.ndarray((P, 8), nl.uint32)
    nisa.max8(m, t)
    nisa.nc_match_replace8(r, t, m, -1.0, dst_idx=di)
    nisa.dma_copy(out, r)
    nisa.dma_copy(idx, di)
    return out, idx


def test_match_replace8_dst_idx_in_both_generations(rng):
    x = rng.permutation(16 * 32).reshape(16, 32).astype(np.float32)
    ref, ref_idx = _replace8(x, -1.0)
    for got, idx in (replace8_beta(x), replace8_current(x, 32)):
        np.testing.assert_array_equal(got, ref)
        np.testing.assert_array_equal(idx, ref_idx)


def test_match_replace8_over_never_written_values_is_reported_not_a_numpy_error(rng):
    """vals drawn from a row holding never-written elements are unknown, so is every element of that row
    and its 8 indices: the store to HBM is refused by name (strict mode), never a numpy broadcast error."""
    x = rng.permutation(16 * 32).reshape(16, 32).astype(np.float32)
    with pytest.raises(UninitializedError, match="never"):
        replace8_current(x, 24)


# -- .ap on a reshaped HBM tensor ------------------------------------------------------------------------------
@nki.jit
def row_of_reshaped(x, row):
    v = x.reshape((8, 16))
    out = nl.ndarray((1, 16), x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((1, 16), x.dtype)
    nisa.dma_copy(t, v.ap([[16, 1], [1, 16]], scalar_offset=row, indirect_dim=0))
    nisa.dma_copy(out, t)
    return out


@nki.jit
def rows_of_reshaped(x, idx):
    v = x.reshape((8, 16))
    P = idx.shape[0]
    out = nl.ndarray((P, 16), x.dtype, buffer=nl.shared_hbm)
    i = nl.ndarray((P, 1), nl.uint32)
    nisa.dma_copy(i, idx)
    t = nl.ndarray((P, 16), x.dtype)
    nisa.dma_copy(t, v.ap([[16, P], [1, 16]], vector_offset=i, indirect_dim=0))
    nisa.dma_copy(out, t)
    return out


def test_ap_offsets_count_in_the_reshaped_views_rows():
    x = np.arange(128, dtype=np.float32).reshape(4, 32)
    rows = x.reshape(8, 16)
    np.testing.assert_array_equal(row_of_reshaped(x, 5), rows[5:6])
    idx = np.array([[7], [0], [3]], np.uint32)
    np.testing.assert_array_equal(rows_of_reshaped(x, idx), rows[[7, 0, 3]])


def test_ap_indirect_dim_past_the_tensor_is_a_shape_error():
    @nki.jit
    def k(x):
        out = nl.ndarray((1, 16), x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((1, 16), x.dtype)
        nisa.dma_copy(t, x.ap([[16, 1], [1, 16]], scalar_offset=1, indirect_dim=3))
        nisa.dma_copy(out, t)
        return out
    with pytest.raises(ShapeError, match="indirect_dim=3 of a 2-d tensor"):
        k(np.zeros((4, 32), np.float32))


# -- where a framework launch's outputs may live ---------------------------------------------------------------
@nki.jit
def copy_into_hbm(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    t = nl.ndarray(x.shape, x.dtype)
    nisa.dma_copy(t, x)
    nisa.dma_copy(out, t)
    return out


def test_a_framework_launch_may_return_an_hbm_tensor():
    torch = pytest.importorskip("torch")
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    got = copy_into_hbm(torch.from_numpy(x))
    assert isinstance(got, torch.Tensor)
    np.testing.assert_array_equal(got.numpy(), x)


def test_a_numpy_launch_still_wants_shared_hbm():
    with pytest.raises(MemorySpaceError, match="shared_hbm"):
        copy_into_hbm(np.zeros((4, 8), np.float32))


# -- in-place recurrences and accumulations in affine loops (beta API: watched by default) ----------------------
def _inplace(update):
    @bnki.jit
    def k(x):
        P, F = x.shape
        out = bnl.ndarray((P, 64), bnl.float32, buffer=bnl.shared_hbm)
        acc = bnl.zeros((P, 64), bnl.float32, buffer=bnl.sbuf)
        for j in bnl.affine_range(F // 64):
            update(acc, bnl.load(x[:, j * 64:(j + 1) * 64]))
        bnl.store(out, acc)
        return out
    return k


def _horner_stt(acc, t):
    acc[...] = bisa.scalar_tensor_tensor(data=acc, op0=np.multiply, operand0=2.0, op1=np.add, operand1=t)


def _sum_add(acc, t):
    acc[...] = bnl.add(acc, t)


def _max_stt(acc, t):
    acc[...] = bisa.scalar_tensor_tensor(data=t, op0=np.multiply, operand0=1.0, op1=np.maximum, operand1=acc)


def test_beta_recurrence_in_place_is_reported(rng):
    x = rng.integers(-4, 4, (128, 256)).astype(np.float32)
    ref = sum(2.0 ** (3 - j) * x[:, j * 64:(j + 1) * 64] for j in range(4))
    with pytest.warns(LoopCarriedWarning, match="carries a dependency"):
        np.testing.assert_array_equal(_inplace(_horner_stt)(x), ref)


@pytest.mark.parametrize("update, reduce", [(_sum_add, np.add), (_max_stt, np.maximum)], ids=["add", "max"])
def test_beta_order_free_accumulations_pass_in_silence(update, reduce, rng):
    x = rng.integers(-4, 4, (128, 256)).astype(np.float32)
    parts = [x[:, j * 64:(j + 1) * 64] for j in range(4)]
    ref = reduce.reduce([np.zeros_like(parts[0])] + parts)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LoopCarriedWarning)
        np.testing.assert_array_equal(_inplace(update)(x), ref)

