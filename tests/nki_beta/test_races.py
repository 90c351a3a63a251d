"""The race detector: an affine_range loop whose iterations depend on each other is reported as a warning naming
both lines (beta API, whose compiler reorders affine iterations; the current API, which compiles affine_range
as range, only when a race check is asked for), refused with race check `error` or in strict mode; the same
loop as sequential_range, and accumulations the compiler recognises, pass in silence."""
import re
import warnings

import numpy as np
import pytest

import trnsim.nki as nki6
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl6
import trnsim.nki.beta as nki
import trnsim.nki.beta.language as nl
from trnsim.core.races import LoopCarriedError, LoopCarriedWarning

# a kernel that passes passes in silence: a LoopCarriedWarning outside pytest.warns fails the test
pytestmark = pytest.mark.filterwarnings("error::trnsim.core.races.LoopCarriedWarning")


def _prefix_sum(loop):
    """Each column block adds the previous block's result: block j reads what block j-1 wrote."""

    def kernel(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out[:, 0:64], value=nl.load(x[:, 0:64]))
        for j in loop(1, x.shape[1] // 64):
            prev = nl.load(out[:, (j - 1) * 64:j * 64])  # reads the block the previous iteration stored
            cur = nl.load(x[:, j * 64:(j + 1) * 64])
            nl.store(out[:, j * 64:(j + 1) * 64], value=nl.add(prev, cur))  # writes this iteration's block
        return out

    return nki.jit(kernel)


def _cumsum(x):
    return np.cumsum(x.reshape(x.shape[0], -1, 64), axis=1).reshape(x.shape)


def _line(text):
    src = open(__file__).read().splitlines()
    return next(i + 1 for i, s in enumerate(src) if text in s)


def test_loop_carried_dependency_in_affine_range_is_refused_with_race_check_error(monkeypatch):
    monkeypatch.setenv("TRNSIM_RACE_CHECK", "error")
    x = np.random.default_rng(0).standard_normal((128, 256)).astype(np.float32)
    with pytest.raises(LoopCarriedError) as e:
        _prefix_sum(nl.affine_range)(x)
    _names_both_lines(str(e.value))


def test_loop_carried_dependency_is_a_warning_naming_both_lines_by_default():
    """The compiler compiles the loop and the hardware runs it: by default the kernel runs (in order here) and
    the dependency is reported as a warning."""
    x = np.random.default_rng(0).standard_normal((128, 256)).astype(np.float32)
    with pytest.warns(LoopCarriedWarning) as seen:
        out = _prefix_sum(nl.affine_range)(x)
    _names_both_lines(str(seen[0].message))
    np.testing.assert_allclose(out, _cumsum(x), rtol=1e-5)


def test_strict_mode_refuses_it(monkeypatch):
    monkeypatch.setenv("TRNSIM_STRICT", "1")
    with pytest.raises(LoopCarriedError, match="carries a dependency"):
        _prefix_sum(nl.affine_range)(np.ones((128, 256), np.float32))


def _names_both_lines(msg):
    read, write = _line("reads the block the previous"), _line("writes this iteration's block")
    assert f"test_races.py:{read}" in msg and f"test_races.py:{write}" in msg
    assert re.search(r"iteration 0 writes \w+\[0:128, 64:128\].*iteration 1 reads \w+\[0:128, 64:128\]", msg)
    assert re.search(r"affine_range loop at .*test_races.py:\d+", msg)


def test_same_kernel_with_sequential_range_passes():
    x = np.random.default_rng(0).standard_normal((128, 256)).astype(np.float32)
    np.testing.assert_allclose(_prefix_sum(nl.sequential_range)(x), _cumsum(x), rtol=1e-6)


def test_warn_option_reports_and_runs_on(monkeypatch):
    monkeypatch.setenv("TRNSIM_RACE_CHECK", "warn")
    x = np.ones((128, 256), np.float32)
    with pytest.warns(LoopCarriedWarning, match="carries a dependency"):
        out = _prefix_sum(nl.affine_range)(x)
    np.testing.assert_allclose(out, _cumsum(x))


def test_off_option_runs_sequentially():
    x = np.ones((128, 256), np.float32)
    k = nki.jit(_prefix_sum(nl.affine_range).fn, race_check=False)
    np.testing.assert_allclose(k(x), _cumsum(x))


@nki.jit
def matmul_k_loop(a_t, b):
    """PSUM accumulation over an affine K loop: the compiler's recognised reduction."""
    K, M = a_t.shape
    N = b.shape[1]
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((M, N), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(K // 128):
        at = nl.load(a_t[k * 128:(k + 1) * 128, :])
        bt = nl.load(b[k * 128:(k + 1) * 128, :])
        acc += nl.matmul(at, bt, transpose_x=True)
    nl.store(out, value=acc)
    return out


def test_psum_accumulation_over_affine_k_loop_passes():
    rng = np.random.default_rng(1)
    a_t, b = rng.standard_normal((512, 128)).astype(np.float32), rng.standard_normal((512, 256)).astype(np.float32)
    np.testing.assert_allclose(matmul_k_loop(a_t, b), a_t.T @ b, rtol=2e-2, atol=2e-1)


@nki.jit
def sbuf_sum_and_column_tiles(x):
    """`acc += tile` into SBUF across iterations, and each iteration storing its own column tile."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    total = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 64), nl.float32, buffer=nl.sbuf)
    for j in nl.affine_range(x.shape[1] // 64):
        t = nl.load(x[:, j * 64:(j + 1) * 64])
        acc += t
        nl.store(out[:, j * 64:(j + 1) * 64], value=nl.multiply(t, 2.0))
    nl.store(total, value=acc)
    return out, total


def test_accumulation_and_disjoint_column_tiles_pass():
    x = np.random.default_rng(2).standard_normal((128, 256)).astype(np.float32)
    out, total = sbuf_sum_and_column_tiles(x)
    np.testing.assert_allclose(out, 2 * x)
    np.testing.assert_allclose(total, x.reshape(128, 4, 64).sum(1), rtol=1e-5, atol=1e-5)


@nki6.jit
def shift_left(x, sequential=False):
    """Iteration j overwrites the block iteration j+1 reads (a write-after-read across iterations)."""
    buf = nl6.ndarray((128, 256), nl6.float32, buffer=nl6.sbuf)
    nisa.dma_copy(dst=buf, src=x)
    for j in (nl6.sequential_range if sequential else nl6.affine_range)(3):
        nisa.tensor_copy(dst=buf[:, j * 64:(j + 1) * 64], src=buf[:, (j + 1) * 64:(j + 2) * 64])
    out = nl6.ndarray((128, 256), nl6.float32, buffer=nl6.shared_hbm)
    nisa.dma_copy(dst=out, src=buf)
    return out


def test_current_api_warns_since_it_compiles_affine_range_as_range(monkeypatch):
    monkeypatch.setenv("TRNSIM_RACE_CHECK", "warn")
    x = np.arange(128 * 256, dtype=np.float32).reshape(128, 256)
    with pytest.warns(LoopCarriedWarning, match=r"iteration 0 reads \w+\[0:128, 64:128\].*iteration 1 writes \w+\[0:128, 64:128\]"):
        out = shift_left(x)
    np.testing.assert_array_equal(out[:, :192], x[:, 64:])


def test_current_api_sequential_range_is_quiet(monkeypatch):
    monkeypatch.setenv("TRNSIM_RACE_CHECK", "warn")  # the check that finds the affine_range loop's race
    x = np.arange(128 * 256, dtype=np.float32).reshape(128, 256)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LoopCarriedWarning)
        out = shift_left(x, sequential=True)
    np.testing.assert_array_equal(out[:, :192], x[:, 64:])


@nki.jit
def loop_reduce_over_affine(x):
    """nl.loop_reduce across an affine loop, assigned into a tile made before it: the documented reduction."""
    K, P, F = x.shape
    out = nl.ndarray((P, F), nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((nl.par_dim(P), F), nl.float32)
    for i in nl.affine_range(K):
        acc[...] = nl.loop_reduce(nl.load(x[i]), op=np.add, loop_indices=[i], dtype=nl.float32)
    nl.store(out, acc)
    return out


def test_loop_reduce_over_an_affine_loop_is_no_race(rng):
    x = rng.standard_normal((4, 16, 8)).astype(np.float32)
    np.testing.assert_allclose(loop_reduce_over_affine(x), x.sum(0), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("outside", [True, False], ids=["over-jit", "under-jit"])
def test_a_kernel_that_skips_the_middle_end_keeps_its_affine_loops_in_order(outside, monkeypatch):
    """Skipping the compiler's middle-end transformations leaves no pass that reorders affine iterations: the
    prefix sum in an affine_range loop runs in order (either decorator order), and the race check reports it
    only when asked for, as a warning."""
    import trnsim.nki.beta.compiler as ncc
    fn = _prefix_sum(nl.affine_range).fn
    k = ncc.skip_middle_end_transformations(nki.jit(fn)) if outside else nki.jit(
        ncc.skip_middle_end_transformations(fn))
    x = np.random.default_rng(1).standard_normal((128, 256)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(k(x), _cumsum(x), rtol=1e-5)
    monkeypatch.setenv("TRNSIM_RACE_CHECK", "warn")
    with pytest.warns(LoopCarriedWarning):
        k(x)
