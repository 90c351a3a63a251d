"""The bytes a gathering kernel moves (resize_nearest's pattern: a computed row index per partition, a masked
last tile, a loop over the batch in every program of an SPMD grid): each valid row once per program, the
masked rows not at all, and a grid's programs in turn as the beta programming model documents them
(programming_model.rst, SPMD: the instances run serially on one NeuronCore), each moving its own bytes."""
import numpy as np

import trnsim
import trnsim.nki.beta as nki
import trnsim.nki.beta.isa as nisa
import trnsim.nki.beta.language as nl


@nki.jit
def stretch_rows(data, out_rows):
    """Output row i of each batch is input row floor(i / 2), 128 rows a tile; the program id is never read."""
    batch, _, cols = data.shape
    out = nl.ndarray((batch, out_rows, cols), dtype=data.dtype, buffer=nl.shared_hbm)
    for b in nl.affine_range(batch):
        for t in nl.affine_range((out_rows + 127) // 128):
            i_p, i_f = nl.arange(128)[:, None], nl.arange(cols)[None, :]
            pos = t * 128 + i_p
            src = nl.floor(nl.multiply(nisa.iota(pos, dtype=nl.int32), 0.5, dtype=nl.float32), dtype=nl.int32)
            tile = nl.load(data[b, src, i_f], mask=(pos < out_rows))
            nl.store(out[b, pos, i_f], value=tile, mask=(pos < out_rows))
    return out


def test_a_masked_gather_moves_each_valid_row_once_per_program(rng):
    x = rng.random((2, 75, 64), dtype=np.float32)
    np.testing.assert_array_equal(stretch_rows[3](x, 150), x[:, np.arange(150) // 2])
    row = 64 * 4
    one = trnsim.benchmark(stretch_rows[1], x, 150, target="trn1", timing_only=True)
    three = trnsim.benchmark(stretch_rows[3], x, 150, target="trn1", timing_only=True)
    # 150 rows a batch, not the 256 of its two tiles: the last tile's 106 masked rows move nothing
    assert one.hbm_read_bytes == one.hbm_write_bytes == 2 * 150 * row
    assert three.dma_bytes == 3 * one.dma_bytes == 3 * 2 * 2 * 150 * row
