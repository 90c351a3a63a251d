"""Never-written memory: computing on it is legal; it must not reach HBM or decide control flow."""
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core import UninitializedError, UninitializedWarning
from tests.core.conftest import source_at


def partial_exp(x, store_all):
    n, d = x.shape
    out = nl.ndarray((128 if store_all else n, d), nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, d), nl.float32)
    nisa.dma_copy(t[:n], x)  # only the first n partitions are loaded
    y = nl.ndarray((128, d), nl.float32)
    nisa.activation(y, nl.exp, t)  # computes on the whole tile, as kernels do
    if store_all:
        nl.store(out, y)
    else:
        nl.store(out, y[:n])
    return out


def test_partial_tile_storing_loaded_rows_runs_clean():
    """Computing on a tile of which 100 rows were loaded, then storing those rows, is clean and correct."""
    x = np.random.default_rng(0).standard_normal((100, 32), np.float32)
    np.testing.assert_allclose(nki.jit(partial_exp)(x, False), np.exp(x), rtol=1e-6)


def test_storing_never_written_rows_names_them():
    """Storing every row names the 28 never-written partitions 100..127 and the store's line."""
    x = np.ones((100, 32), np.float32)
    with pytest.raises(UninitializedError, match=r"896 of 4096 elements, partitions 100..127") as e:
        nki.jit(partial_exp)(x, True)
    assert "nl.store(out, y)" in source_at(e.value)


def test_non_strict_mode_warns(monkeypatch):
    """With TRNSIM_STRICT=0 the same store warns instead of raising, and so does returning what it wrote."""
    monkeypatch.setenv("TRNSIM_STRICT", "0")
    with pytest.warns(UninitializedWarning) as ws:
        nki.jit(partial_exp)(np.ones((100, 32), np.float32), True)
    msgs = [str(w.message) for w in ws]
    assert any("partitions 100..127" in m for m in msgs)
    assert any("returned tensor" in m and "rows [100, 101" in m for m in msgs)


def test_marks_flow_through_matmul():
    """A matmul whose stationary has never-written columns marks exactly those output rows."""
    def k(a, b):
        out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        st = nl.ndarray((128, 128), nl.float32)
        nisa.dma_copy(st[:, :100], a)  # stationary columns 100..127 never written
        ps = nl.ndarray((128, 64), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, st, nl.load(b))
        nl.store(out, nl.copy(ps))
        return out
    with pytest.raises(UninitializedError, match=r"partitions 100..127"):
        nki.jit(k)(np.ones((128, 100), np.float32), np.ones((128, 64), np.float32))


def test_never_written_value_deciding_a_loop_bound():
    """A loop bound loaded into a register from never-written SBUF is an error at the loop."""
    def k(x):
        t = nl.ndarray((1, 1), nl.int32)
        r = nisa.register_alloc()
        nisa.register_load(r, t)
        nl.fori_loop(0, r, lambda i: None)
    with pytest.raises(UninitializedError, match=r"never-written value and decides a loop bound") as e:
        nki.jit(k)(np.ones(1, np.float32))
    assert "nl.fori_loop(0, r" in source_at(e.value)


def test_address_placement_aliases_storage():
    """Two SBUF tensors placed at the same address share bytes: a write to one is read through the other."""
    def k(x):
        out = nl.ndarray((128, 16), nl.int32, buffer=nl.shared_hbm)
        a = nl.ndarray((128, 16), nl.float32, address=(0, 4096))
        b = nl.ndarray((128, 16), nl.int32, address=(0, 4096))
        nisa.dma_copy(a, x)
        nl.store(out, b)
        return out
    x = np.random.default_rng(1).standard_normal((128, 16), np.float32)
    np.testing.assert_array_equal(nki.jit(k)(x), x.view(np.int32))


def test_partly_shared_placement_is_never_written_outside_the_live_tensor():
    """A tensor placed half over a live one shares its written half; the other half is fresh, even where a
    dropped tensor once wrote, and storing it names those never-written columns."""
    def k(x):
        out = nl.ndarray((128, 16), nl.float32, buffer=nl.shared_hbm)
        old = nl.ndarray((128, 16), nl.float32, address=(0, 4096 + 64))
        nisa.dma_copy(old, x)
        del old
        a = nl.ndarray((128, 16), nl.float32, address=(0, 4096))
        nisa.dma_copy(a, x)
        b = nl.ndarray((128, 16), nl.float32, address=(0, 4096 + 32))  # columns 0..7 are a's columns 8..15
        nl.store(out[:, :8], b[:, :8])
        nl.store(out[:, 8:], b[:, 8:])
        return out
    x = np.random.default_rng(2).standard_normal((128, 16), np.float32)
    with pytest.raises(UninitializedError, match=r"1024 of 1024 elements") as e:
        nki.jit(k)(x)
    assert "nl.store(out[:, 8:], b[:, 8:])" in source_at(e.value)


def test_rewriting_a_tile_keeps_its_never_written_marks_exact():
    """A tile's marks follow its last writes: a whole-tile write over a pending load, a write over rows a
    partial copy left never-written, and rows never written since remain so."""
    from trnsim.core import NeuronCore, Op
    nc = NeuronCore("trn2")
    x = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    src = nc.hbm_tensor(x)
    t = nc.tensor((128, 8), "float32")
    nc.issue(Op.DMA_COPY, dst=t, src=src)  # a whole-tile load, made when first touched
    nc.issue(Op.MEMSET, dst=t, value=2.0)  # overwrites the pending load
    assert not t.mask().any() and (t.array() == 2.0).all()
    u = nc.tensor((128, 8), "float32")
    nc.issue(Op.TENSOR_COPY, dst=u[:64], src=t[:64])  # rows 64.. stay never-written
    nc.issue(Op.TENSOR_COPY, dst=t, src=u)  # the copy carries u's marks into a clean tile
    expect = np.zeros((128, 8), bool)
    expect[64:] = True
    np.testing.assert_array_equal(t.mask(), expect)
    nc.issue(Op.TENSOR_COPY, dst=t[64:96], src=u[:32])  # rewriting some marked rows clears just those
    expect[64:96] = False
    np.testing.assert_array_equal(t.mask(), expect)
    np.testing.assert_array_equal(t.array()[:96], 2.0)
