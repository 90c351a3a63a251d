"""The value-based race check (`race_check="order"`): affine iterations run last to first, and interleaved,
must give the outputs bit for bit; an order-dependent kernel is caught, independent ones (PSUM accumulation
included) pass."""
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
import trnsim.nki.beta as beta
import trnsim.nki.beta.language as lnl
from trnsim.core.races import LoopCarriedError, LoopCarriedWarning, reorder

T = 64  # columns per tile


def _horner(**options):
    """acc = 2 * acc + x_j over affine j in one instruction that reads and writes acc: the result depends on
    the order of the j."""

    @nki.jit(**options)
    def horner(x):
        out = nl.ndarray((x.shape[0], T), dtype=x.dtype, buffer=nl.shared_hbm)
        acc = nl.ndarray((x.shape[0], T), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=acc, value=0.0)
        for j in nl.affine_range(x.shape[1] // T):
            t = nl.ndarray((x.shape[0], T), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[:, j * T:(j + 1) * T])
            nisa.scalar_tensor_tensor(dst=acc, data=acc, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=t)
        nisa.dma_copy(dst=out, src=acc)
        return out

    return horner


def _x(cols=4 * T):
    return np.random.default_rng(0).integers(-8, 8, (128, cols)).astype(np.float32)


def test_the_static_check_catches_the_recurrence():
    """An in-place scalar_tensor_tensor is an accumulation only when it folds acc with one order-free op;
    acc * 2 + t is a recurrence: refused with race check error, warned about (and run in order) with warn."""
    x = _x()
    ref = sum(2.0 ** (3 - j) * x[:, j * T:(j + 1) * T] for j in range(4))
    with pytest.raises(LoopCarriedError, match=r"iteration 0 writes \w+\[0:128, 0:64\] at .*test_race_order.py:29"):
        _horner(race_check="error")(x)
    with pytest.warns(LoopCarriedWarning, match="carries a dependency"):
        np.testing.assert_array_equal(_horner(race_check="warn")(x), ref)


def test_order_catches_the_recurrence_and_counts_the_elements():
    with pytest.raises(LoopCarriedError, match=r"returned tensor differs in \d+ of 8192 elements") as e:
        _horner(race_check="order")(_x())
    assert "test_race_order.py:" in str(e.value)
    assert "last to first" in str(e.value)


def test_order_from_the_environment(monkeypatch):
    monkeypatch.setenv("TRNSIM_RACE_CHECK", "order")
    with pytest.raises(LoopCarriedError):
        _horner()(_x())


@nki.jit(race_check="order")
def _matmul(lhsT, rhs):
    """PSUM accumulation over an affine K loop and independent output tiles: order-free."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for n in nl.affine_range(N // 256):
        acc = nl.ndarray((M, 256), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(K // 128):
            a = nl.ndarray((128, M), dtype=lhsT.dtype, buffer=nl.sbuf)
            b = nl.ndarray((128, 256), dtype=rhs.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a, src=lhsT[k * 128:(k + 1) * 128, :])
            nisa.dma_copy(dst=b, src=rhs[k * 128:(k + 1) * 128, n * 256:(n + 1) * 256])
            nisa.nc_matmul(dst=acc, stationary=a, moving=b)
        o = nl.ndarray((M, 256), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=o, src=acc)
        nisa.dma_copy(dst=out[:, n * 256:(n + 1) * 256], src=o)
    return out


def test_order_passes_an_independent_kernel_with_psum_accumulation():
    """Reversed, the K sums round differently in fp32 (no bit-for-bit match): that is no race."""
    rng = np.random.default_rng(1)
    lhsT = rng.standard_normal((512, 128)).astype(np.float32)
    rhs = rng.standard_normal((512, 512)).astype(np.float32)
    np.testing.assert_allclose(_matmul(lhsT, rhs), lhsT.T.astype(np.float64) @ rhs, rtol=1e-4, atol=1e-4)


def test_order_catches_an_hbm_round_trip_in_the_beta_api():
    """Block j reads the block j-1 stored in HBM (a prefix sum): reversed, the blocks read stale values."""

    @beta.jit(race_check="order")
    def prefix(x):
        out = lnl.ndarray(x.shape, x.dtype, buffer=lnl.shared_hbm)
        lnl.store(out[:, 0:T], value=lnl.load(x[:, 0:T]))
        for j in lnl.affine_range(1, x.shape[1] // T):
            prev = lnl.load(out[:, (j - 1) * T:j * T])
            lnl.store(out[:, j * T:(j + 1) * T], value=lnl.add(prev, lnl.load(x[:, j * T:(j + 1) * T])))
        return out

    with pytest.raises(LoopCarriedError, match="race check order"):
        prefix(_x())


def test_the_interleaved_run_catches_what_reversal_misses():
    """Blocks x0, x1, x0 read the same both ways, so the recurrence gives 5*x0 + 2*x1 in order and reversed;
    run even-numbered blocks first (0, 2, 1) it gives 6*x0 + x1."""
    x0, x1 = _x(T), _x(T) + 1
    x = np.concatenate([x0, x1, x0], axis=1)
    np.testing.assert_array_equal(_horner(race_check="off")(x), 5 * x0 + 2 * x1)
    with pytest.raises(LoopCarriedError, match=r"runs its iterations even-numbered first, then odd-numbered") as e:
        _horner(race_check="order")(x)
    assert "interleaved" in str(e.value)


def test_the_orders():
    assert reorder(range(5), "reversed") == [4, 3, 2, 1, 0]
    assert reorder(range(5), "interleaved") == [0, 2, 4, 1, 3]
