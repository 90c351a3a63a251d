"""A reduction into one column of a wider tile writes that column itself: no temporary, no copy."""
import numpy as np

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl


@nki.jit
def column_max(a):
    out = nl.ndarray((128, 8), a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    m = nl.ndarray((128, 8), a.dtype, buffer=nl.sbuf)
    for j in nl.affine_range(4):
        nisa.tensor_reduce(dst=m[:, j:j + 1], op=nl.maximum, data=x[:, j * 32:(j + 1) * 32], axis=1, negate=True)
        nisa.tensor_reduce(dst=m[:, 4 + j:5 + j], op=nl.minimum, data=x[:, j * 32:(j + 1) * 32], axis=1,
                           keepdims=True)
    nl.store(out, m)
    return out


def test_a_reduction_writes_its_column_directly(rng, trn):
    a = rng.standard_normal((128, 128)).astype(np.float32)
    blocks = a.reshape(128, 4, 32)
    assert np.array_equal(column_max(a), np.concatenate([-blocks.max(axis=2), blocks.min(axis=2)], axis=1))
    assert [r.op.value for r in column_max.last_cores[0].stream] == ["dma_copy"] + ["tensor_reduce"] * 8 + ["dma_copy"]
