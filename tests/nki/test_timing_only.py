"""Timing-only runs (values=False) walk the same instructions as runs with values; where only values could
decide, a named error."""
import numpy as np
import pytest

from trnsim import nki
from trnsim.core.errors import ValueUnknownError
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl


@nki.jit
def counted(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.fori_loop(0, nisa.register_alloc(4), lambda i: nisa.tensor_scalar(t, t, nl.add, 1.0))
    nl.store(out, t)
    return out


def test_register_loop_runs_its_body_in_timing_only_mode(trn):
    """fori_loop(0, register_alloc(4)) issues its 4 body instructions with values off as with values on."""
    ops = lambda cores: [r.op.value for r in cores[0].stream]  # noqa: E731
    on, off = ops(counted.trace(np.ones((128, 8), np.float32))), ops(counted.trace(np.ones((128, 8), np.float32),
                                                                                   values=False))
    assert on == off and off.count("tensor_scalar") == 4


@nki.jit
def gather(table, ids):
    n, d = ids.shape[0], table.shape[1]
    out = nl.ndarray((n, d), table.dtype, buffer=nl.shared_hbm)
    idx = nl.load(ids)
    rows = nl.ndarray((n, d), table.dtype)
    nisa.dma_copy(rows, table.ap(pattern=[[d, n], [1, d]], offset=0, vector_offset=idx, indirect_dim=0),
                  dge_mode=nisa.dge_mode.swdge)
    nl.store(out, rows)
    return out


def test_indirect_gather_reads_its_offsets_when_the_dma_runs(trn):
    """The offsets tile is read by the DMA, not when the view is built: a timing-only run needs no values."""
    table = np.arange(64 * 16, dtype=np.float32).reshape(64, 16)
    ids = np.array([[5], [0], [63], [5]], np.int32)
    np.testing.assert_array_equal(gather(table, ids), table[ids[:, 0]])
    off = [(r.op, r.engine) for r in gather.trace(table, ids, values=False)[0].stream]
    on = [(r.op, r.engine) for r in gather.trace(table, ids)[0].stream]
    assert off == on


@nki.jit
def matmul_print(a, b):
    at, bt = nl.load(a), nl.load(b)
    acc = nl.ndarray((a.shape[1], b.shape[1]), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(acc, at, bt)
    nl.device_print("acc", acc)


def test_device_print_of_psum_sees_the_matmul_just_issued(trn, capsys):
    """device_print right after nc_matmul prints the product, not the never-written fill (NaN)."""
    a = (np.arange(128 * 2) % 7).astype(np.float32).reshape(128, 2)  # small integers: every sum is exact
    b = np.ones((128, 3), np.float32)
    matmul_print(a, b)
    assert capsys.readouterr().out.startswith(f"acc {a.T @ b}\n")


@nki.jit
def loop_on_loaded(x, n):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    r = nisa.register_alloc()
    nisa.register_load(r, nl.load(n))
    nl.fori_loop(0, r, lambda i: nisa.tensor_scalar(t, t, nl.add, 1.0))
    nl.store(out, t)
    return out


def test_register_loaded_from_memory_cannot_decide_a_timing_only_loop(trn):
    """With values, the loaded count drives the loop; timing-only cannot know it and says so by name."""
    x, n = np.zeros((128, 8), np.float32), np.array([[3]], np.int32)
    np.testing.assert_array_equal(loop_on_loaded(x, n), x + 3)
    with pytest.raises(ValueUnknownError, match="timing-only run .* decides a loop bound"):
        loop_on_loaded.trace(x, n, values=False)


@nki.jit
def gather_unwritten(table):
    idx = nl.ndarray((4, 1), nl.int32, buffer=nl.sbuf)  # never written
    rows = nl.ndarray((4, table.shape[1]), table.dtype)
    nisa.dma_copy(rows, table.ap(pattern=[[table.shape[1], 4], [1, table.shape[1]]], offset=0, vector_offset=idx,
                                 indirect_dim=0), dge_mode=nisa.dge_mode.swdge)


def test_never_written_offsets_are_reported_when_the_dma_runs(trn):
    """Offsets read by the DMA that were never written: UninitializedError at the dma_copy line."""
    from trnsim.core.errors import UninitializedError
    with pytest.raises(UninitializedError, match="index the rows of .*vector_offset") as e:
        gather_unwritten(np.zeros((16, 8), np.float32))
    assert e.value.location.endswith(f":{gather_unwritten.fn.__code__.co_firstlineno + 4}")
