"""What the compiler legalises runs, lowered to the instructions it inserts (a cast, a copy out of PSUM, a
ones-matmul, a strided view), in the current NKI API; rules it enforces keep their errors."""
import ml_dtypes
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core import DTypeError, DTypeWarning

BF16 = ml_dtypes.bfloat16


def ops(kernel):
    return [r.op.value for r in kernel.last_cores[0].stream]


@nki.jit
def transpose_cast(x):
    out = nl.ndarray((x.shape[1], x.shape[0]), nl.bfloat16, buffer=nl.shared_hbm)
    nl.store(out, nl.load_transpose2d(x, dtype=nl.bfloat16))
    return out


def test_load_transpose2d_with_a_cast(rng, trn):
    """fp32 [P, F] -> bf16 [F, P]: a DMA transpose in fp32, then a tensor_copy that casts (RNE)."""
    x = rng.standard_normal((64, 32), np.float32)
    got = transpose_cast(x)
    np.testing.assert_array_equal(got.astype(np.float32), x.T.astype(BF16).astype(np.float32))
    assert ops(transpose_cast)[:3] == ["dma_transpose", "tensor_copy", "dma_copy"]


@nki.jit
def transpose4(x):
    a, b, c, d = x.shape
    out = nl.ndarray((d, b, c, a), x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((d, b, c, a), x.dtype)
    nisa.dma_transpose(t, x)
    nl.store(out, t)
    return out


def test_dma_transpose_4d_default_axes(rng, trn):
    """A 4-d dma_transpose without axes permutes (3, 1, 2, 0), the documented default."""
    x = rng.standard_normal((4, 2, 3, 8)).astype(BF16)
    np.testing.assert_array_equal(transpose4(x), np.transpose(x, (3, 1, 2, 0)))


@nki.jit
def causal_scores(q, k):
    """q, k [D, S]: scores = q.T @ k in PSUM, masked below the diagonal straight from PSUM."""
    s = q.shape[1]
    out = nl.ndarray((s, s), nl.float32, buffer=nl.shared_hbm)
    ps = nl.ndarray((s, s), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(ps, nl.load(q), nl.load(k))
    res = nl.ndarray((s, s), nl.float32)
    nisa.affine_select(res, [[-1, s]], 1, ps, -1e9, cmp_op="greater_equal")
    nl.store(out, res)
    return out


def test_affine_select_reads_a_psum_tile_through_a_copy(rng, trn):
    """affine_select on a PSUM matmul result: the copy to SBUF is inserted before the GpSimd select."""
    q, k = rng.standard_normal((32, 16), np.float32), rng.standard_normal((32, 16), np.float32)
    got = causal_scores(q, k)
    p, f = np.arange(16)[:, None], np.arange(16)[None, :]
    np.testing.assert_allclose(got, np.where(p - f >= 0, q.T @ k, -1e9), rtol=1e-5, atol=1e-4)
    seq = ops(causal_scores)
    assert seq[seq.index("affine_select") - 1] == "tensor_copy"


@nki.jit
def attention_like(s, v):
    """s [M, K], v [N, K]: s @ v.T, whose transposed v lands in PSUM."""
    out = nl.ndarray((s.shape[0], v.shape[0]), nl.float32, buffer=nl.shared_hbm)
    r = nl.matmul(nl.load(s), nl.transpose(nl.load(v)))
    nl.store(out, nl.copy(r))
    return out


def test_matmul_with_a_transposed_operand_in_psum(rng, trn):
    """nl.matmul(s, nl.transpose(v)) copies the PSUM transpose to SBUF before the matmul."""
    s, v = rng.standard_normal((32, 64), np.float32), rng.standard_normal((48, 64), np.float32)
    np.testing.assert_allclose(attention_like(s, v), s @ v.T, rtol=1e-4, atol=1e-4)


@nki.jit
def mixed_matmul(s, v):
    """s [K, M] fp32 and v [K, N] bf16: nl.matmul of a mixed pair."""
    out = nl.ndarray((s.shape[1], v.shape[1]), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.copy(nl.matmul(nl.load(s), nl.load(v), transpose_x=True)))
    return out


def test_matmul_of_fp32_and_bf16_promotes_to_fp32(rng, trn):
    """The PE array multiplies fp32 only by fp32: the bf16 operand is cast to fp32 (a tensor_copy) first."""
    s, v = rng.standard_normal((64, 32), np.float32), rng.standard_normal((64, 48), np.float32).astype(ml_dtypes.bfloat16)
    np.testing.assert_allclose(mixed_matmul(s, v), s.T @ v.astype(np.float32), rtol=1e-4, atol=1e-4)
    mm = next(r for r in mixed_matmul.last_cores[0].stream if r.op.value == "nc_matmul")
    assert [str(mm.placed[k][1]) for k in ("stationary", "moving")] == ["float32", "float32"]


@nki.jit
def max_13(x):
    out = nl.ndarray((x.shape[0], x.shape[2]), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.max(nl.load(x), axis=[1, 3]))
    return out


def test_reduction_over_non_trailing_axes(rng, trn):
    """nl.max(t4d, axis=[1, 3]) reduces those axes in one tensor_reduce over a permuted view."""
    x = rng.standard_normal((16, 3, 5, 4), np.float32)
    np.testing.assert_array_equal(max_13(x), x.max(axis=(1, 3)))
    assert ops(max_13).count("tensor_reduce") == 1


@nki.jit
def int_enums(x, bias=None):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype)
    nisa.dma_copy(t, x, dge_mode=1)  # swdge, given as its int
    if bias:
        nisa.tensor_scalar(t, t, nl.add, 1.0, engine=5)  # the vector engine, as its int
    nisa.dma_copy(out, t)
    return out


def test_enum_ints_and_optional_tensor_arguments(rng, trn):
    """dge_mode=1 and engine=5 are their enum members; `if bias:` holds when a tensor is passed."""
    x = rng.standard_normal((8, 8), np.float32)
    np.testing.assert_array_equal(int_enums(x), x)
    np.testing.assert_array_equal(int_enums(x, np.zeros(1, np.float32)), x + 1)
    rec = next(r for r in int_enums.last_cores[0].stream if r.op.value == "tensor_scalar")
    assert rec.engine.value == "vector"


@nki.jit
def pe_transpose_v2(x):
    """On trn1 is_transpose=True is a plain matmul with the identity (FP32 result in PSUM)."""
    p, f = x.shape
    out = nl.ndarray((f, p), nl.float32, buffer=nl.shared_hbm)
    ident = nl.shared_identity_matrix(p, dtype=nl.float32)
    ps = nl.ndarray((f, p), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(ps, nl.load(x), ident, is_transpose=True)
    nl.store(out, nl.copy(ps))
    return out


def test_is_transpose_on_trn1_is_a_plain_matmul(rng, trn):
    """trn1 accepts is_transpose=True (a profiling mark, per the nc_matmul docs): x.T comes out in FP32."""
    trn("trn1")
    x = rng.standard_normal((32, 16), np.float32)
    np.testing.assert_allclose(pe_transpose_v2(x), x.T, rtol=1e-6)


@nki.jit
def transpose_widen(x):
    t = nl.ndarray((x.shape[1], x.shape[0]), nl.float32, buffer=nl.psum)
    nisa.nc_transpose(t, nl.load(x))
    return None


def test_nc_transpose_keeps_the_dtype(trn):
    """nc_transpose into an fp32 PSUM tile from bf16 data is refused (the docs require the same dtype)."""
    with pytest.raises(DTypeError, match="keeps the dtype"):
        transpose_widen(np.zeros((16, 16), BF16))


@nki.jit
def row_times(x, row):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    r = nl.load(row)  # [1, F]
    t = nl.load(x)
    y = nl.ndarray(x.shape, x.dtype)
    nisa.tensor_tensor(y, t, nl.broadcast_to(r, x.shape), nl.multiply)
    nl.store(out, y)
    return out


def test_broadcast_to_over_partitions(rng, trn):
    """nl.broadcast_to of a [1, F] tile to [P, F] spreads it with a ones-matmul (values exact)."""
    x, row = rng.standard_normal((64, 40), np.float32), rng.standard_normal((1, 40), np.float32)
    np.testing.assert_array_equal(row_times(x, row), x * row)
    assert "nc_matmul" in ops(row_times)


def test_broadcast_ones_operand_is_filled_off_the_vector_stream(rng, trn):
    """The ones operand of the broadcast matmul is a constant of the compiler's: its fill runs on GpSimd, so
    the Vector engine, which reads the broadcast, issues no memset for it."""
    x, row = rng.standard_normal((64, 40), np.float32), rng.standard_normal((1, 40), np.float32)
    row_times(x, row)
    stream = row_times.last_cores[0].stream
    matmul = next(r for r in stream if r.op.value == "nc_matmul")
    fill = [r for r in stream if r.op.value == "memset"]
    assert [r.engine.value for r in fill] == ["gpsimd"] and matmul.operands["stationary"].shape == (1, 64)


@nki.jit
def int_rows(row):
    out = nl.ndarray((100, row.shape[1]), row.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.broadcast_to(nl.load(row), (100, row.shape[1])))
    return out


def test_broadcast_to_of_an_integer_row(rng, trn):
    """An int32 [1, F] tile, which the tensor engine refuses, spreads over P partitions by DMA copies, bit-exact
    past 2**24 (what an FP32 matmul could not carry)."""
    row = rng.integers(-2**31, 2**31 - 1, (1, 24), dtype=np.int32)
    np.testing.assert_array_equal(int_rows(row), np.repeat(row, 100, axis=0))
    assert "nc_matmul" not in ops(int_rows) and ops(int_rows).count("dma_copy") == 1 + 1 + 7 + 1  # load, row 0, 7 doublings to 100, store


@nki.jit
def psum_out_with_dtype(a_t, b, cast):
    """A matmul whose PSUM result is copied out with `tensor_copy(..., dtype=)` (as the matmul tutorial writes)."""
    K, M = a_t.shape
    out = nl.ndarray((M, b.shape[1]), nl.bfloat16, buffer=nl.shared_hbm)
    lhs, rhs = nl.ndarray(a_t.shape, a_t.dtype), nl.ndarray(b.shape, b.dtype)
    nisa.dma_copy(dst=lhs, src=a_t)
    nisa.dma_copy(dst=rhs, src=b)
    acc = nl.ndarray(out.shape, nl.float32, buffer=nl.psum)
    nisa.nc_matmul(acc, lhs, rhs)
    res = nl.ndarray(out.shape, nl.bfloat16)
    nisa.tensor_copy(dst=res, src=acc, dtype=cast)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_tensor_copy_dtype_naming_dst_dtype(rng, trn):
    """`dtype=` equal to dst's dtype is accepted; the fp32 PSUM result is cast to bf16 (RNE)."""
    a, b = rng.standard_normal((64, 32), np.float32), rng.standard_normal((64, 48), np.float32)
    got = psum_out_with_dtype(a, b, nl.bfloat16)
    np.testing.assert_allclose(got.astype(np.float32), (a.T @ b).astype(BF16).astype(np.float32), rtol=1e-2,
                               atol=1e-2)


def test_tensor_copy_dtype_other_than_dst_is_ignored_with_a_warning(rng, trn):
    """A dtype other than dst's cannot be honoured: the copy is written in dst's dtype (bf16 here), and a
    DTypeWarning at the kernel's line says so."""
    a, b = rng.standard_normal((64, 32), np.float32), rng.standard_normal((64, 48), np.float32)
    with pytest.warns(DTypeWarning, match="tensor_copy dtype=float32 differs from dst dtype bfloat16") as w:
        got = psum_out_with_dtype(a, b, nl.float32)
    assert w[0].filename.endswith("test_legalised.py")
    assert got.dtype == BF16
    np.testing.assert_allclose(got.astype(np.float32), (a.T @ b).astype(BF16).astype(np.float32), rtol=1e-2,
                               atol=1e-2)
