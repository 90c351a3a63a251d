"""Tensor Indirection (NeuronCore-v4): an operand that is an indirect view reads (gather) or writes (scatter)
columns of an on-chip tensor at the free offsets of an index tile, offset i at index[i % 16, i // 16] for the
Vector, Scalar and GpSimd engines. References from tests/core/reference.py (numpy, written apart)."""
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from tests.core import reference as ref
from trnsim.core import Op
from trnsim.core.errors import GenerationError, KernelError, OutOfBoundsError, PartitionStartError, ShapeError


def _snake(offsets, cols):
    """An index tile [128, cols] holding `offsets` down 16 partitions, column after column."""
    idx = np.zeros((128, cols), np.int32)
    for i, o in enumerate(offsets):
        idx[i % 16, i // 16] = o
    return idx


def _on_chip(a, buffer=nl.sbuf):
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(t, a)
    if buffer is nl.sbuf:
        return t
    p = nl.ndarray(a.shape, a.dtype, buffer=buffer)
    nisa.tensor_copy(p, t)
    return p


@nki.jit
def gather_ops(x, y, idx, n):
    """Indirect reads: a copy, one operand of tensor_tensor, an activation (Scalar) and a reduction."""
    t, u, i = _on_chip(x), _on_chip(y), _on_chip(idx)
    outs = [nl.ndarray((128, n), nl.float32, buffer=nl.shared_hbm) for _ in range(3)] + \
        [nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)]
    d = [nl.ndarray((128, n), nl.float32, buffer=nl.sbuf) for _ in range(3)] + \
        [nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)]
    nisa.tensor_copy(d[0], t.indirect(i, n))
    nisa.tensor_tensor(d[1], t.indirect(i, n), u, nl.multiply)
    nisa.activation(d[2], nl.exp, t.indirect(i, n))
    nisa.tensor_reduce(d[3], nl.add, t.indirect(i, n), axis=1)
    for o, s in zip(outs, d):
        nisa.dma_copy(o, s)
    return outs


def test_indirect_reads_gather_columns(rng, trn):
    trn("trn3")
    x = rng.standard_normal((128, 64)).astype(np.float32)
    off = rng.integers(0, 64, 40)
    idx = _snake(off, 3)
    y = rng.standard_normal((128, 40)).astype(np.float32)
    copy, prod, ex, total = gather_ops(x, y, idx, 40)
    g = ref.indirect_gather(x, idx, 40)
    np.testing.assert_array_equal(g, x[:, off])  # the reference agrees with plain fancy indexing
    np.testing.assert_array_equal(copy, g)
    np.testing.assert_array_equal(prod, g * y)
    np.testing.assert_allclose(ex, np.exp(g), rtol=1e-6)
    np.testing.assert_allclose(total[:, 0], g.sum(axis=1), rtol=1e-5)
    ops = [(r.op, r.engine.value) for r in gather_ops.last_cores[0].stream if r.op is Op.TI_GATHER]
    assert ops == [(Op.TI_GATHER, "vector")] * 2 + [(Op.TI_GATHER, "scalar"), (Op.TI_GATHER, "vector")]


@nki.jit
def scatter(x, base, idx, n, on_gpsimd):
    """An indirect write: dst of tensor_scalar scatters x * 2 + 1 into columns of a copy of base."""
    t, b, i = _on_chip(x), _on_chip(base), _on_chip(idx)
    out = nl.ndarray(base.shape, base.dtype, buffer=nl.shared_hbm)
    eng = nisa.engine.gpsimd if on_gpsimd else nisa.engine.unknown
    nisa.tensor_scalar(b.indirect(i, n), t, nl.multiply, 2.0, op1=nl.add, operand1=1.0, engine=eng)
    nisa.dma_copy(out, b)
    return out


@pytest.mark.parametrize("on_gpsimd", [False, True])
def test_an_indirect_dst_scatters(rng, trn, on_gpsimd):
    trn("trn3")
    base = rng.standard_normal((128, 48)).astype(np.float32)
    x = rng.standard_normal((128, 20)).astype(np.float32)
    off = rng.permutation(48)[:20]
    idx = _snake(off, 2)
    got = scatter(x, base, idx, 20, on_gpsimd)
    np.testing.assert_array_equal(got, ref.indirect_scatter(base, idx, x * 2 + 1))
    rec = [r for r in scatter.last_cores[0].stream if r.op is Op.TI_SCATTER]
    assert [r.engine.value for r in rec] == ["gpsimd" if on_gpsimd else "vector"]


def _refused(trn, target, body, x=None):
    trn(target)

    @nki.jit
    def kernel(a):
        body(a)
    kernel(np.zeros((128, 8), np.float32) if x is None else x)


def test_what_tensor_indirection_refuses(rng, trn):
    def tiles(index_partition=0, data_partition=0, cols=1, dtype=nl.int32):
        big = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.memset(big, 1.0)
        i = nl.ndarray((128, cols), dtype, buffer=nl.sbuf)
        nisa.memset(i, 3)
        d = nl.ndarray((64, 16), nl.float32, buffer=nl.sbuf)
        return big, i, d

    def on_trn2(a):
        big, i, d = tiles()
        nisa.tensor_copy(nl.ndarray((128, 16), nl.float32, buffer=nl.sbuf), big.indirect(i, 16))
    with pytest.raises(GenerationError, match="tensor_indirection_gather needs"):
        _refused(trn, "trn2", on_trn2)

    def too_many(a):
        big, i, d = tiles(cols=1)
        nisa.tensor_copy(nl.ndarray((128, 20), nl.float32, buffer=nl.sbuf), big.indirect(i, 20))
    with pytest.raises(ShapeError, match=r"20 offsets read index\[i % 16, i // 16\]: they need 2 index columns"):
        _refused(trn, "trn3", too_many)

    def off_quadrant(a):
        big, i, d = tiles(cols=1)
        nisa.tensor_copy(d, big[16:80].indirect(i[16:80], 16))
    with pytest.raises(PartitionStartError, match="starts at partition 16; an indirect view's index starts on a "
                                                  "quadrant boundary"):
        _refused(trn, "trn3", off_quadrant)

    def elsewhere(a):
        big, i, d = tiles(cols=1)
        nisa.tensor_copy(d, big[64:128].indirect(i[0:64], 16))
    with pytest.raises(PartitionStartError, match="starts at partition 64 and its index at 0"):
        _refused(trn, "trn3", elsewhere)

    def outside(a):
        big, i, d = tiles(cols=1)
        nisa.memset(i, 64)  # one past the last column
        nisa.tensor_copy(nl.ndarray((128, 16), nl.float32, buffer=nl.sbuf), big.indirect(i, 16))
    with pytest.raises(OutOfBoundsError, match="offset 64 .* outside the 64 columns"):
        _refused(trn, "trn3", outside)

    def float_index(a):
        big, i, d = tiles(cols=1, dtype=nl.float32)
        nisa.tensor_copy(nl.ndarray((128, 16), nl.float32, buffer=nl.sbuf), big.indirect(i, 16))
    with pytest.raises(KernelError, match="free offsets are integers in SBUF"):
        _refused(trn, "trn3", float_index)

    def on_the_pe(a):
        big, i, d = tiles(cols=1)
        nisa.nc_matmul(nl.ndarray((16, 16), nl.float32, buffer=nl.psum), big.indirect(i, 16), big[:, 0:16])
    with pytest.raises(KernelError, match="nc_matmul: Tensor Indirection .* on Tensor engine operands is not emulated"):
        _refused(trn, "trn3", on_the_pe)

    def hbm(a):
        a.indirect(nl.ndarray((128, 1), nl.int32, buffer=nl.sbuf))
    with pytest.raises(ShapeError, match="Tensor Indirection addresses SBUF or PSUM"):
        _refused(trn, "trn3", hbm)
