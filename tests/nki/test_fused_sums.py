"""The speed layer adds each matmul's product into its PSUM running sum by the SGEMM call that computes it
(core/fast/blas.py). The bits stay those of each product rounded on its own and then added in issue order,
computed here by numpy."""
import ml_dtypes
import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from trnsim import nki
from trnsim.core.fast import blas, psum
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from tests.core.test_loaded_tiles import streamed


@nki.jit
def onto_prior(a_t, b, prior, copied=False):
    """Two PSUM banks start from `prior` (written by VectorE) and accumulate every K tile onto it; with
    `copied`, B's tiles are copied on chip first (matmuls then read their own bytes, not B's conversion)."""
    K, M = a_t.shape
    N = b.shape[1] // 2
    out = nl.ndarray((M, 2 * N), nl.float32, buffer=nl.shared_hbm)
    accs = [nl.ndarray((M, N), nl.float32, buffer=nl.psum) for _ in range(2)]
    for j in range(2):
        nisa.tensor_copy(accs[j], nl.load(prior[:, j * N:(j + 1) * N]))
    for k in range(K // 128):
        at = nl.load(a_t[k * 128:(k + 1) * 128])
        bt = nl.load(b[k * 128:(k + 1) * 128])
        if copied:
            own = nl.ndarray(bt.shape, bt.dtype)
            nisa.tensor_copy(own, bt)
            bt = own
        for j in range(2):
            nisa.nc_matmul(accs[j], at, bt[:, j * N:(j + 1) * N], accumulate=True)
    for j in range(2):
        res = nl.ndarray((M, N), nl.float32)
        nisa.tensor_copy(res, accs[j])
        nl.store(out[:, j * N:(j + 1) * N], res)
    return out


def _operands(seed):
    """Random bf16 tiles and a prior holding -0.0 where output row 0's products are all zeros (A's column 0
    is -0.0): a zero's sign then depends on how the product is added."""
    rng = np.random.default_rng(seed)
    a_t = rng.standard_normal((6 * 128, 128)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((6 * 128, 1024)).astype(ml_dtypes.bfloat16)
    prior = rng.standard_normal((128, 1024)).astype(np.float32)
    a_t[:, 0], prior[0] = -0.0, -0.0
    return a_t, b, prior


def _issue_order(a_t, b, prior):
    """prior + P1 + P2 + ... in FP32, each Pk one K tile's product [N, M] by single-threaded BLAS."""
    acc = prior.copy()
    n = b.shape[1] // 2
    with threadpool_limits(1, "blas"):
        for k in range(0, a_t.shape[0], 128):
            a = a_t[k:k + 128].astype(np.float32)
            for j in range(2):
                bt = np.ascontiguousarray(b[k:k + 128, j * n:(j + 1) * n].astype(np.float32).T)
                acc[:, j * n:(j + 1) * n] += (bt @ a).T
    return acc


# the SGEMM call each layout of the moving tiles goes through: copied on chip ([N, K] rows), or read in place
# from B's conversion ([K, N] rows), and the impostor of each, which adds C before rounding the product
CALLS = {True: ("accumulate", lambda a, b: a @ b), False: ("accumulate_tn", lambda a, b: a.T @ b)}


@pytest.mark.parametrize("copied", [True, False])
def test_products_added_by_sgemm_keep_the_issue_order_bits(copied, monkeypatch, trn):
    calls = []
    name = CALLS[copied][0]
    accumulate = getattr(blas, name)
    monkeypatch.setattr(blas, name, lambda *args: calls.append(1) or accumulate(*args))
    a_t, b, prior = _operands(1)
    got = onto_prior(a_t, b, prior, copied)
    want = _issue_order(a_t, b, prior)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert not want[0].any() and np.signbit(prior[0]).all()  # row 0: zero products onto -0.0
    if blas.usable(np.zeros((1, 1), np.float32)):  # an OpenBLAS is loaded: the sums went through it
        assert calls


@pytest.mark.parametrize("copied", [True, False])
def test_a_blas_whose_sums_round_otherwise_is_not_used(copied, monkeypatch, trn):
    """An SGEMM that adds C before rounding its product (one rounding fewer) fails the check; numpy's
    product-then-add runs instead and the bits hold."""
    calls = []
    name, product = CALLS[copied]

    def wider(c, a, b, add):
        calls.append(1)
        c[...] = (product(a.astype(np.float64), b.astype(np.float64)) + (c if add else 0)).astype(np.float32)

    monkeypatch.setattr(blas, name, wider)
    blas.exact.cache_clear()
    try:
        a_t, b, prior = _operands(2)
        got = onto_prior(a_t, b, prior, copied)
    finally:
        blas.exact.cache_clear()
    np.testing.assert_array_equal(got.view(np.uint32), _issue_order(a_t, b, prior).view(np.uint32))
    if blas.usable(np.zeros((1, 1), np.float32)):
        assert calls  # the check ran the impostor, and turned it down


@pytest.mark.parametrize("k_major", [False, True])
@pytest.mark.parametrize("cuts", [(0, 512), (0, 256, 512), (0, 96, 512)])
def test_the_check_accepts_this_blas_for_row_blocks(cuts, k_major):
    """OpenBLAS's kernel sums each element alone, so row blocks of a call give its bits, whichever layout its
    operand comes in (the check is not a formality: the test above shows it refusing)."""
    if not blas.usable(np.zeros((1, 1), np.float32)):
        pytest.skip("no OpenBLAS with a known integer width is loaded")
    assert blas.exact(1, 512, 128, 128, cuts, k_major=k_major)


def _blocks_in_order(a_t, b):
    """Each [128, 512] block of a_t.T @ b (a PSUM bank of `streamed`) as the sum in issue order of its K
    tiles' products [N, M], each by single-threaded BLAS on FP32."""
    out = np.empty((a_t.shape[1], b.shape[1]), np.float32)
    with threadpool_limits(1, "blas"):
        for m in range(0, a_t.shape[1], 128):
            for n in range(0, b.shape[1], 512):
                acc = None
                for k in range(0, a_t.shape[0], 128):
                    bt = np.ascontiguousarray(b[k:k + 128, n:n + 512].astype(np.float32).T)
                    p = bt @ np.ascontiguousarray(a_t[k:k + 128, m:m + 128].astype(np.float32))
                    acc = p if acc is None else acc + p
                out[m:m + 128, n:n + 512] = acc.T
    return out


def _row_block_operands(seed):
    rng = np.random.default_rng(seed)
    a_t = rng.standard_normal((3 * 128, 5 * 128)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((3 * 128, 1024)).astype(ml_dtypes.bfloat16)
    a_t[:, 0] = -0.0  # output row 0: sums of zero products, whose signs are compared too
    return a_t, b


def test_stacked_row_blocks_summed_in_the_output_layout_keep_the_issue_order_bits(monkeypatch, trn):
    """The owed groups of `streamed`'s five row blocks share their moving tiles: row blocks are summed side by
    side."""
    made = []
    stacked = psum._stacked
    monkeypatch.setattr(psum, "_stacked", lambda *args: made.append(stacked(*args)) or made[-1])
    a_t, b = _row_block_operands(3)
    got = streamed(a_t, b)
    np.testing.assert_array_equal(got.view(np.uint32), _blocks_in_order(a_t, b).view(np.uint32))
    if blas.usable(np.zeros((1, 1), np.float32)):  # row blocks' sums were made side by side
        shapes = [x.shape for x in made if x is not None]
        assert shapes and all(s[2] >= 2 * 128 for s in shapes)


def test_a_blas_whose_transposed_sums_round_otherwise_is_not_used(monkeypatch, trn):
    """The output-layout calls are checked on their own: an impostor there is turned down, and the bits hold."""
    calls = []

    def wider(c, a, b, add):
        calls.append(1)
        c[...] = (a.T.astype(np.float64) @ b.astype(np.float64) + (c if add else 0)).astype(np.float32)

    monkeypatch.setattr(blas, "accumulate_tn", wider)
    blas.exact.cache_clear()
    try:
        a_t, b = _row_block_operands(4)
        got = streamed(a_t, b)
    finally:
        blas.exact.cache_clear()
    np.testing.assert_array_equal(got.view(np.uint32), _blocks_in_order(a_t, b).view(np.uint32))
    if blas.usable(np.zeros((1, 1), np.float32)):
        assert calls


@pytest.mark.parametrize("cuts", [(0, 1024), (0, 512, 1024), (0, 96, 1024)])
def test_the_check_accepts_this_blas_for_stacked_row_blocks_in_the_output_layout(cuts):
    if not blas.usable(np.zeros((1, 1), np.float32)):
        pytest.skip("no OpenBLAS with a known integer width is loaded")
    assert blas.exact(4, 256, 128, 128, cuts, 4, transposed=True, k_major=True)


@nki.jit
def mixed_stationary(a0, a1, b):
    """One PSUM group over two K tiles whose stationary tiles differ in dtype (bf16, then fp16)."""
    out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    for k, a in enumerate((a0, a1)):
        nisa.nc_matmul(acc, nl.load(a), nl.load(b[k * 128:(k + 1) * 128]))
    res = nl.ndarray((128, 512), nl.float32)
    nisa.tensor_copy(res, acc)
    nl.store(out, res)
    return out


def test_stationary_tiles_of_two_dtypes_in_one_group_keep_the_issue_order_bits(trn):
    rng = np.random.default_rng(5)
    a0 = rng.standard_normal((128, 128)).astype(ml_dtypes.bfloat16)
    a1 = rng.standard_normal((128, 128)).astype(np.float16)
    b = rng.standard_normal((256, 512)).astype(ml_dtypes.bfloat16)
    with threadpool_limits(1, "blas"):
        parts = [np.ascontiguousarray(b[k * 128:(k + 1) * 128].astype(np.float32).T) @ a.astype(np.float32)
                 for k, a in enumerate((a0, a1))]
    want = (parts[0] + parts[1]).T
    np.testing.assert_array_equal(mixed_stationary(a0, a1, b).view(np.uint32), want.view(np.uint32))


@nki.jit
def strided_moving(a_t, b):
    """One PSUM bank accumulating two K tiles whose moving tiles are every other column of B's rows."""
    out = nl.ndarray((128, 256), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 256), nl.float32, buffer=nl.psum)
    for k in range(2):
        bt = nl.ndarray((128, 256), b.dtype)
        nisa.dma_copy(bt, b[k * 128:(k + 1) * 128, 0:512:2])
        nisa.nc_matmul(acc, nl.load(a_t[k * 128:(k + 1) * 128]), bt)
    res = nl.ndarray((128, 256), nl.float32)
    nisa.tensor_copy(res, acc)
    nl.store(out, res)
    return out


def test_strided_moving_tiles_read_from_their_tensor_keep_the_issue_order_bits(monkeypatch, trn):
    """Moving tiles that are every other column of B (unit stride neither along K nor along N in B's
    conversion) are summed by SGEMM from a copy laid out [N, K]."""
    calls = []
    accumulate = blas.accumulate
    monkeypatch.setattr(blas, "accumulate", lambda *args: calls.append(1) or accumulate(*args))
    rng = np.random.default_rng(6)
    a_t = rng.standard_normal((256, 128)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((256, 512)).astype(ml_dtypes.bfloat16)
    with threadpool_limits(1, "blas"):
        parts = [np.ascontiguousarray(b[k * 128:(k + 1) * 128, ::2].astype(np.float32).T)
                 @ a_t[k * 128:(k + 1) * 128].astype(np.float32) for k in range(2)]
    want = (parts[0] + parts[1]).T
    np.testing.assert_array_equal(strided_moving(a_t, b).view(np.uint32), want.view(np.uint32))
    if blas.usable(np.zeros((1, 1), np.float32)):
        assert calls
