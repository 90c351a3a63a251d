"""Forms the compiler accepts that the lowering layer legalises as it does, checked against numpy in both API
generations where the form exists: integer transposes (no PE array), a (1,)-shaped HBM tensor loaded and
indexed [0, 0], and a beta `+=` of a matmul into an SBUF accumulator."""
import numpy as np
import pytest

import trnsim.nki as nki_cur
import trnsim.nki.language as nl_cur
import trnsim.nki.beta as nki_beta
import trnsim.nki.beta.language as nl_beta

GENERATIONS = {"current": (nki_cur, nl_cur), "beta": (nki_beta, nl_beta)}


def _transposed(nl):
    def transposed(a):
        r = nl.transpose(nl.load(a))
        out = nl.ndarray(r.shape, r.dtype, buffer=nl.shared_hbm)
        nl.store(out, r)
        return out
    return transposed


@pytest.mark.parametrize("gen", sorted(GENERATIONS))
@pytest.mark.parametrize("shape, dtype, how", [
    ((16, 24), np.int32, ["nc_transpose"]),  # fits one 32 x 32 Vector transpose
    ((128, 64), np.int32, ["dma_transpose"]),  # wider, 4-byte: a DMA transpose
    ((64, 100), np.int8, ["nc_transpose"] * 8),  # wider, 1-byte: 32 x 32 Vector blocks (2 x 4)
])
def test_integer_transposes_are_exact_and_off_the_pe_array(gen, shape, dtype, how):
    nki, nl = GENERATIONS[gen]
    a = (np.arange(np.prod(shape)) * 7919 - 2 ** 20).reshape(shape).astype(dtype)
    k = nki.jit(_transposed(nl))
    np.testing.assert_array_equal(k(a), a.T)
    stream = k.last_cores[0].stream
    assert [r.op.value for r in stream if r.op.value != "dma_copy"] == how
    assert all(r.engine.value != "tensor" for r in stream)


@pytest.mark.parametrize("gen", sorted(GENERATIONS))
def test_a_one_element_tensor_loads_and_indexes_as_a_1x1_tile(gen):
    nki, nl = GENERATIONS[gen]

    def doubled(s):
        t = nl.load(s)
        out = nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.multiply(t[0, 0], 2.0))
        return out
    s = np.array([3.25], np.float32)
    np.testing.assert_array_equal(nki.jit(doubled)(s), s.reshape(1, 1) * 2)


def test_beta_matmul_accumulates_into_an_sbuf_tile():
    """`acc += nl.matmul(a, b)` with acc in SBUF: each matmul goes to PSUM, then one add into acc."""
    nl = nl_beta

    @nki_beta.jit
    def summed(a, b):
        acc = nl.zeros((16, 24), nl.float32, buffer=nl.sbuf)
        for k in nl.affine_range(a.shape[0]):
            acc += nl.matmul(nl.load(a[k]), nl.load(b[k]), transpose_x=True)
        out = nl.ndarray((16, 24), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, acc)
        return out
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((3, 32, 16)).astype(np.float32), rng.standard_normal((3, 32, 24)).astype(np.float32)
    np.testing.assert_allclose(summed(a, b), np.einsum("kpm,kpn->mn", a, b), rtol=1e-5, atol=1e-5)
    ops = [r.op.value for r in summed.last_cores[0].stream if r.op.value in ("nc_matmul", "tensor_tensor")]
    assert ops == ["nc_matmul", "tensor_tensor"] * 3
