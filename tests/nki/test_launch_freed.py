"""A finished launch holds no reference cycle: once its cores are dropped, reference counting frees them and
their memories at once, with the cyclic collector off (a sweep of many launches needs no collector pass to
get its memory back)."""
import gc
import weakref

import numpy as np
import pytest

import trnsim
import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.nki import _frontend

COLS = 4096  # fp32 per partition: 16 KiB


@nki.jit
def scaled_sum(x):
    """out = sum_i (i + 1) * x[i], every tile live until the sum: with 80 KiB of SBUF the tiles spill."""
    out = nl.ndarray(x.shape[1:], nl.float32, buffer=nl.shared_hbm)
    tiles = []
    for i in range(x.shape[0]):  # a Python loop: the tiles outlive their iteration
        t = nl.ndarray(x.shape[1:], nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=float(i + 1))
        tiles.append(t)
    acc = nl.ndarray(x.shape[1:], nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for t in tiles:
        nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out


@nki.jit
def halves(x):
    """Each core of an LNC 2 pair negates its half of the rows."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    half = x.shape[0] // 2
    rows = slice(nl.program_id(0) * half, (nl.program_id(0) + 1) * half)
    t = nl.ndarray((half, x.shape[1]), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[rows])
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=-1.0)
    nisa.dma_copy(dst=out[rows], src=t)
    return out


def _freed_without_collector(launch) -> list:
    """Run `launch` with the collector off, drop every reference to its cores, and return the weak references
    to the cores and their memories (all dead if nothing was left in a cycle)."""
    gc.collect()
    gc.disable()
    try:
        kernel, out = launch()
        refs = [weakref.ref(o) for nc in kernel.last_cores for o in (nc, nc.sbuf, nc.psum)]
        assert len(refs) == 3 * len(kernel.last_cores) > 0
        kernel.last_cores = None
        _frontend.LAST.clear()
        return out, [r for r in refs if r() is not None]
    finally:
        gc.enable()


def test_a_spilling_launch_is_freed_by_reference_counting(tmp_path):
    x = np.random.default_rng(0).standard_normal((5, 128, COLS)).astype(np.float32)
    with trnsim.hardware(base="trn2", core={"sbuf_partition_bytes": "80 KiB"}):
        with pytest.warns(trnsim.core.SpillWarning):
            out, alive = _freed_without_collector(lambda: (scaled_sum, scaled_sum(x)))
    np.testing.assert_allclose(out, sum((i + 1) * x[i] for i in range(5)), rtol=1e-6)
    assert alive == []


def test_an_lnc2_pair_is_freed_by_reference_counting():
    x = np.arange(256 * 64, dtype=np.float32).reshape(256, 64)
    pair = halves[2]  # a kernel of its own, with its own last_cores
    out, alive = _freed_without_collector(lambda: (pair, pair(x)))
    np.testing.assert_array_equal(out, -x)
    assert alive == []


def test_a_timing_only_launch_is_freed_by_reference_counting():
    x = np.ones((3, 128, COLS), np.float32)
    _, alive = _freed_without_collector(lambda: (scaled_sum, scaled_sum.trace(x, values=False) and None))
    assert alive == []


@nki.jit
def fails_midway(x):
    """A kernel with tiles in SBUF when it breaks a rule (a copy between tiles of different shapes)."""
    t = nl.ndarray((128, COLS), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    u = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=u, src=t)


def _fail(kernel, x):
    with pytest.raises(trnsim.errors.TrnsimError):
        kernel(x)
    return kernel, None


def test_a_failed_launch_is_freed_by_reference_counting():
    """The error a launch re-raises holds no cycle through the launch: its cores go with the exception."""
    x = np.ones((128, COLS), np.float32)
    _, alive = _freed_without_collector(lambda: _fail(fails_midway, x))
    assert alive == []


def test_an_lnc2_failed_launch_is_freed_by_reference_counting():
    x = np.ones((128, COLS), np.float32)
    pair = fails_midway[2]
    _, alive = _freed_without_collector(lambda: _fail(pair, x))
    assert alive == []


def test_a_failed_beta_launch_is_freed_by_reference_counting():
    import trnsim.nki.beta as bnki
    import trnsim.nki.beta.language as bnl

    @bnki.jit
    def bad(x):
        t = bnl.load(x)
        bnl.store(x[0:8, :], t)  # shapes differ

    x = np.ones((128, 64), np.float32)
    for grid in (bad, bad[2]):
        _, alive = _freed_without_collector(lambda: _fail(grid, x))
        assert alive == []
