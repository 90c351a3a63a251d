"""Beta-API calls the compiler legalises: a cast after a DMA transpose, a copy out of PSUM before GpSimd
or the PE array, enum ints, `if` on an optional tensor argument."""
import ml_dtypes
import numpy as np

import trnsim.nki.beta as nki
import trnsim.nki.beta.isa as nisa
import trnsim.nki.beta.language as nl

BF16 = ml_dtypes.bfloat16


def ops(kernel):
    return [r.op.value for r in kernel.last_cores[0].stream]


@nki.jit
def transposes(x):
    out = nl.ndarray((2, x.shape[1], x.shape[0]), nl.bfloat16, buffer=nl.shared_hbm)
    nl.store(out[0], nl.load_transpose2d(x, dtype=nl.bfloat16))
    nl.store(out[1], nisa.dma_transpose(nl.load(x), dtype=nl.bfloat16))
    return out


def test_transposes_with_a_cast(rng):
    """load_transpose2d and dma_transpose from fp32 to bf16: transpose in fp32, then a casting copy."""
    x = rng.standard_normal((32, 48), np.float32)
    got = transposes(x).astype(np.float32)
    want = x.T.astype(BF16).astype(np.float32)
    np.testing.assert_array_equal(got[0], want)
    np.testing.assert_array_equal(got[1], want)


@nki.jit
def masked_scores(q, k):
    """q, k [D, S]: q.T @ k as a PSUM tile, masked by affine_select straight from PSUM, then s @ (s.T).T."""
    s = q.shape[1]
    out = nl.ndarray((2, s, s), nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:s, 0:s]
    ps = nisa.nc_matmul(nl.load(q), nl.load(k))
    sel = nisa.affine_select(pred=(i_p - i_f >= 0), on_true_tile=ps, on_false_value=-1e9)
    nl.store(out[0], sel)
    m = nl.matmul(nl.copy(ps), nl.transpose(nl.copy(ps)))  # the transposed operand lands in PSUM
    nl.store(out[1], nl.copy(m))
    return out


def test_psum_operands_are_copied_out(rng):
    """affine_select(on_true_tile=<PSUM matmul>) and nl.matmul(s, nl.transpose(v)) run with copies out of PSUM."""
    q, k = rng.standard_normal((32, 16), np.float32), rng.standard_normal((32, 16), np.float32)
    got = masked_scores(q, k)
    sc = q.T @ k
    p, f = np.arange(16)[:, None], np.arange(16)[None, :]
    np.testing.assert_allclose(got[0], np.where(p >= f, sc, -1e9), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got[1], sc @ sc.T, rtol=1e-4, atol=1e-3)
    seq = ops(masked_scores)
    assert seq[seq.index("affine_select") - 1] == "tensor_copy"


@nki.jit
def optional_bias(x, bias=None):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype)
    nisa.dma_copy(src=x, dst=t, dge_mode=1)  # swdge, given as its int
    if bias:
        t = nl.add(t, nl.load(bias))
    nl.store(out, t)
    return out


def test_optional_tensor_argument_and_enum_ints(rng):
    """`if bias:` holds for a passed HBM tensor and not for None; dge_mode=1 is the swdge member."""
    x, b = rng.standard_normal((16, 8), np.float32), rng.standard_normal((16, 1), np.float32)
    np.testing.assert_array_equal(optional_bias(x), x)
    np.testing.assert_allclose(optional_bias(x, b), x + b, rtol=1e-6)
    rec = next(r for r in optional_bias.last_cores[0].stream if r.op.value == "dma_copy")
    assert rec.attrs["dge_mode"] == "swdge"


@nki.jit
def transposed_stationary(a, b):
    """a [M, K], b [K, N]: a.T lands in PSUM (nc_transpose on the PE array) and is the matmul's stationary."""
    out = nl.ndarray((a.shape[0], b.shape[1]), nl.float32, buffer=nl.shared_hbm)
    at = nisa.nc_transpose(nl.load(a))                       # [K, M] in PSUM
    acc = nl.zeros((a.shape[0], b.shape[1]), nl.float32, buffer=nl.psum)
    acc += nisa.nc_matmul(at, nl.load(b))
    nl.store(out, nl.copy(acc))
    return out


def test_nc_matmul_operand_in_psum_is_copied_out(rng):
    """nc_matmul(stationary=<PSUM transpose>) runs with a tensor_copy out of PSUM just before it."""
    a, b = rng.standard_normal((48, 64), np.float32), rng.standard_normal((64, 40), np.float32)
    np.testing.assert_allclose(transposed_stationary(a, b), a @ b, rtol=1e-4, atol=1e-4)
    seq = ops(transposed_stationary)
    assert seq[seq.index("nc_matmul") - 1] == "tensor_copy"


@nki.jit
def scaled_rows(x, row):
    """x * row for each of 4 row blocks: a [1, F] tile broadcast over the partitions in a loop, as the fused
    Mamba tutorial's kernels do with B and C."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    r = nl.load(row)
    for i in nl.affine_range(x.shape[0] // 32):
        t = nl.load(x[i * 32:(i + 1) * 32, :])
        nl.store(out[i * 32:(i + 1) * 32, :], nisa.tensor_tensor(t, r.broadcast_to((32, x.shape[1])), op=nl.multiply))
    return out


def test_broadcast_ones_operand_is_filled_off_the_vector_stream(rng):
    """Each broadcast is a ones-matmul into PSUM read by the Vector engine; the ones operand's fill, a constant
    of the compiler's, runs on GpSimd, so Vector runs only the multiplies."""
    x, row = rng.standard_normal((128, 48), np.float32), rng.standard_normal((1, 48), np.float32)
    np.testing.assert_allclose(scaled_rows(x, row), x * row, rtol=1e-6)
    stream = scaled_rows.last_cores[0].stream
    assert [r.op.value for r in stream if r.engine.value == "vector"] == ["tensor_tensor"] * 4
    assert [r.engine.value for r in stream if r.op.value == "memset"] == ["gpsimd"] * 4


@nki.jit
def mixed_matmul(s, v):
    out = nl.ndarray((s.shape[1], v.shape[1]), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.matmul(nl.load(s), nl.load(v), transpose_x=True))
    return out


def test_matmul_of_fp32_and_bf16_promotes_to_fp32(rng):
    """nl.matmul of an fp32 and a bf16 tile (an attention kernel's fp32 scores times bf16 values) runs in fp32: the
    compiler casts the bf16 operand (mixed float types promote to the wider), since the PE array multiplies fp32
    only by fp32."""
    s, v = rng.standard_normal((64, 32), np.float32), rng.standard_normal((64, 48), np.float32).astype(BF16)
    np.testing.assert_allclose(mixed_matmul(s, v), s.T @ v.astype(np.float32), rtol=1e-4, atol=1e-4)
    mm = next(r for r in mixed_matmul.last_cores[0].stream if r.op.value == "nc_matmul")
    assert [str(mm.placed[k][1]) for k in ("stationary", "moving")] == ["float32", "float32"]


@nki.jit
def transpose_into_fp32(x, eye):
    out = nl.ndarray(x.shape[::-1], nl.float32, buffer=nl.shared_hbm)
    ps = nl.ndarray((nl.par_dim(x.shape[1]), x.shape[0]), nl.float32, buffer=nl.psum)
    ps[...] = nisa.nc_matmul(nl.load(x), nl.load(eye), is_transpose=True, is_moving_onezero=True)
    nl.store(out, nl.copy(ps))
    return out


def test_transpose_mode_matmul_assigned_to_an_fp32_tile(rng):
    """On trn2 a transpose-mode nc_matmul writes its input's dtype (bf16): assigned to an fp32 PSUM tile, it goes
    through a bf16 PSUM tile and a casting copy, bit-exact."""
    x = rng.standard_normal((128, 96), np.float32).astype(BF16)
    got = transpose_into_fp32(x, np.eye(128, dtype=BF16))
    np.testing.assert_array_equal(got, x.T.astype(np.float32))
    stream = transpose_into_fp32.last_cores[0].stream
    at = next(i for i, r in enumerate(stream) if r.op.value == "nc_matmul")
    cast = stream[at + 1]
    assert str(stream[at].placed["dst"][1]) == "bfloat16" and cast.op.value == "tensor_copy"
    assert (cast.placed["dst"][0][0], str(cast.placed["dst"][1])) == ("psum", "float32")


@nki.jit
def gated_products(a, b):
    """`acc = nl.zeros(PSUM)` then `acc += nc_matmul(..., mask=<python bool>)`, as attention backward gates each
    tile pair on causality: a True mask keeps every cell, a False one issues nothing."""
    out = nl.ndarray((2, 128, 128), nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        acc = nl.zeros((128, 128), nl.float32, buffer=nl.psum)
        acc += nisa.nc_matmul(nl.load(a), nl.load(b), mask=(i == 0))
        nl.store(out[i], nl.copy(acc))
    return out


def test_a_true_mask_lets_the_first_matmul_overwrite_the_zeroed_psum_tile(rng):
    a, b = rng.standard_normal((128, 128), np.float32), rng.standard_normal((128, 128), np.float32)
    got = gated_products(a, b)
    np.testing.assert_allclose(got[0], a.T @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(got[1], 0.0)
    seq = ops(gated_products)
    # the gated-off iteration still needs its zeros (a memset); the gated-on one overwrites with its matmul
    assert seq.count("memset") == 1 and seq.count("nc_matmul") == 1, seq
