"""A load buffer declared once and overwritten in every iteration of a loop: the pattern of nki-samples'
adaptive_avg_pool2d (one block of `in_tile_sbuf` per channel tile, overwritten by each pooling window).

The compiler maps each logical tile (one block of a block-dimension tensor) to a physical tile; it never
gives two writes of one logical tile two buffers (the direct-allocation guide of the beta API, the
nki_direct_allocation_guide.rst of October 2025: one physical tile serialises the loop; the block-dimension
migration guide: a tensor allocated outside a loop and overwritten in each iteration carries a dependency).
So each window's load waits for the previous window's reduction, while other blocks stay independent."""
import numpy as np
import pytest

import trnsim.nki.beta as nki
import trnsim.nki.beta.isa as nisa
import trnsim.nki.beta.language as nl
from trnsim.core import Op
from trnsim.core.timing import simulate

DMA_FIXED = 1300.0  # ns: descriptor setup, synchronisation, semaphore to start (nki-dma-bandwidth-guide.rst)


@nki.jit
def _windows(x):
    """Per 128-row tile, the sums of two 2x2 windows, each loaded into the tile's one block of `buf`."""
    out = nl.ndarray((256, 2), dtype=x.dtype, buffer=nl.shared_hbm)
    buf = nl.zeros((2, nl.par_dim(128), 2, 2), dtype=x.dtype, buffer=nl.sbuf)
    res = nl.zeros((2, nl.par_dim(128), 2), dtype=x.dtype, buffer=nl.sbuf)
    for t in nl.affine_range(2):
        for w in nl.static_range(2):
            nisa.dma_copy(src=x[t * 128:(t + 1) * 128, :, 2 * w:2 * w + 2], dst=buf[t, :, :, :])
            res[t, :, w] = nl.sum(buf[t, :, :, :], axis=[-2, -1])
        nl.store(out[t * 128:(t + 1) * 128, :], value=res[t])
    return out


def test_each_window_load_waits_for_the_last_reduction_of_its_block():
    """Window 2's load into block t starts the DMA fixed latency after window 1's reduction of block t ends
    (write after read, no second buffer); block 1's loads wait for none of block 0's reductions."""
    x = np.random.default_rng(0).standard_normal((256, 2, 4)).astype(np.float32)
    got = np.asarray(_windows(x))
    np.testing.assert_allclose(got, x.reshape(256, 2, 2, 2).sum(axis=(1, 3)), rtol=1e-6, atol=1e-6)
    stream = _windows.last_cores[0].stream
    events = simulate(stream, "trn1").events
    loads = [i for i, r in enumerate(stream) if r.op is Op.DMA_COPY and r.operands["dst"].space == "sbuf"]
    sums = [i for i, r in enumerate(stream) if r.op is Op.TENSOR_REDUCE]
    assert len(loads) == len(sums) == 4  # (block 0, window 1), (0, 2), (1, 1), (1, 2), in program order
    for block in (0, 1):
        first_sum, second_load = sums[2 * block], loads[2 * block + 1]
        assert first_sum in events[second_load].deps
        assert events[second_load].start == pytest.approx(events[first_sum].end + DMA_FIXED)
    assert not set(sums[:2]) & set(events[loads[2]].deps + events[loads[3]].deps)
