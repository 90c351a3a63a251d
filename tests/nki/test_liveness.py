"""Tile lifetimes follow the compiler's (current API): a tile dies with the loop iteration that made it,
consecutive iterations get separate buffers only where they fit, and only live data can overflow."""
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core import CapacityError, Op

SBUF_USABLE = 212984  # trn2 bytes per partition the allocator may use
BIG = 120 * 1024  # more than half of SBUF: two at once cannot fit


def _dst_offsets(kernel, op=Op.DMA_COPY):
    """Byte offset of the SBUF tile each DMA load of the last run wrote."""
    return [r.operands["dst"].byte_lo for r in kernel.last_cores[0].stream
            if r.op is op and r.operands["dst"].space == "sbuf"]


@nki.jit
def rebound_each_iteration(x):
    """(a)/(c): a tile over half of SBUF made (and zero-filled) in every iteration, its name rebound."""
    out = nl.ndarray((128, 4), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for i in nl.affine_range(3):
        for j in nl.sequential_range(2):
            big = nl.zeros((128, BIG // 4), nl.float32, buffer=nl.sbuf)
            t = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x)
            nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
            nisa.tensor_tensor(dst=acc, data1=acc, data2=big[:, 0:4], op=nl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out


def test_tile_made_in_an_iteration_dies_with_it():
    x = np.arange(512, dtype=np.float32).reshape(128, 4)
    np.testing.assert_array_equal(rebound_each_iteration(x), 6 * x)


@nki.jit
def two_big_at_once(x):
    """Two tiles over half of SBUF each, both live in one iteration: no liveness rule can fit them."""
    out = nl.ndarray((128, 4), nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        a = nl.zeros((128, BIG // 4), nl.float32, buffer=nl.sbuf)
        b = nl.zeros((128, BIG // 4), nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=a[:, 0:4], data1=a[:, 0:4], data2=b[:, 0:4], op=nl.add)
        nisa.dma_copy(dst=out, src=a[:, 0:4])
    return out


def test_live_data_that_cannot_fit_is_refused_compactly():
    """a and b cannot both be in SBUF for the add that reads them, whatever is spilled."""
    with pytest.raises(CapacityError, match=r"SBUF overflow: the operands of tensor_tensor .* need 245760 B") as e:
        two_big_at_once(np.zeros((128, 4), np.float32))
    msg = str(e.value)
    assert "1 x 'sbuf" in msg and "(128 partitions x 122880 B; 122880 B per partition)" in msg
    assert "test_liveness.py:" in msg and len(msg) < 600


@nki.jit
def many_loads(x, n):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("cols, distinct", [(16 * 1024, True), (BIG // 4, False)])
def test_buffers_per_loop_are_what_fits(cols, distinct):
    """(b): consecutive iterations use separate buffers where two fit, and one buffer where they do not."""
    x = np.ones((128, cols), np.float32)
    many_loads.trace(x, 4, values=False)
    offsets = _dst_offsets(many_loads)
    assert len(offsets) == 4
    assert all((a != b) == distinct for a, b in zip(offsets, offsets[1:]))


@nki.jit
def tiles_kept_in_a_list(x):
    """Tiles made in a loop and kept in a list for a later loop stay live (the matmul tutorial's pattern)."""
    out = nl.ndarray((128, 4 * 8), x.dtype, buffer=nl.shared_hbm)
    tiles = []
    for i in nl.affine_range(4):
        t = nl.ndarray((128, 8), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, i * 8:(i + 1) * 8])
        tiles.append(t)
    for i in nl.affine_range(4):
        nisa.dma_copy(dst=out[:, i * 8:(i + 1) * 8], src=tiles[3 - i])
    return out


def test_tiles_used_after_their_loop_keep_their_values():
    x = np.arange(128 * 32, dtype=np.float32).reshape(128, 32)
    ref = np.concatenate([x[:, (3 - i) * 8:(4 - i) * 8] for i in range(4)], axis=1)
    np.testing.assert_array_equal(tiles_kept_in_a_list(x), ref)
