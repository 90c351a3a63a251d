"""More kernels in the current NKI API: norms, transposes, attention, scans, top-8, gathers, FP8, MX, LNC 2."""
import ml_dtypes
import numpy as np

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl

BF16 = ml_dtypes.bfloat16


@nki.jit
def layernorm(x, gamma, beta):
    P, D = x.shape
    out = nl.ndarray((P, D), nl.float32, buffer=nl.shared_hbm)
    xt = nl.load(x)
    g = nl.load(gamma.broadcast(0, P))  # one row, read by every partition
    b = nl.load(beta.broadcast(0, P))
    chunks = D // 512
    stats = nl.ndarray((P, 6 * chunks), nl.float32)
    for c in range(chunks):
        nisa.bn_stats(stats[:, c * 6:(c + 1) * 6], xt[:, c * 512:(c + 1) * 512])
    mv = nl.ndarray((P, 2), nl.float32)
    nisa.bn_aggr(mv, stats)
    rstd = nl.ndarray((P, 1), nl.float32)
    nisa.tensor_scalar(rstd, mv[:, 1:2], nl.add, 1e-5, op1=nl.power, operand1=-0.5)
    y = nl.ndarray((P, D), nl.float32)
    nisa.tensor_scalar(y, xt, nl.subtract, mv[:, 0:1], op1=nl.multiply, operand1=rstd)
    nisa.tensor_tensor(y, y, g, nl.multiply)
    nisa.tensor_tensor(y, y, b, nl.add)
    nl.store(out, y)
    return out


def test_layernorm_bn_stats(rng, trn):
    """layernorm over 1024 features via bn_stats/bn_aggr matches numpy mean/var normalisation."""
    x = rng.standard_normal((128, 1024), np.float32) * 3 + 1
    gamma, beta = rng.standard_normal((1, 1024), np.float32), rng.standard_normal((1, 1024), np.float32)
    mu, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
    ref = (x - mu) / np.sqrt(var + 1e-5) * gamma + beta
    np.testing.assert_allclose(layernorm(x, gamma, beta), ref, rtol=1e-4, atol=1e-4)


@nki.jit
def rmsnorm(x, w):
    P, D = x.shape
    out = nl.ndarray((P, D), x.dtype, buffer=nl.shared_hbm)
    xt, wt = nl.load(x), nl.load(w.broadcast(0, P))
    sq = nl.ndarray((P, D), nl.float32)
    ss = nl.ndarray((P, 1), nl.float32)
    nisa.activation(sq, nl.square, xt, reduce_op=nl.add, reduce_res=ss)
    r = nl.ndarray((P, 1), nl.float32)
    nisa.tensor_scalar(r, ss, nl.multiply, 1.0 / D, op1=nl.add, operand1=1e-6)
    nisa.activation(r, nl.rsqrt, r)
    y = nl.ndarray((P, D), x.dtype)
    nisa.scalar_tensor_tensor(y, xt, nl.multiply, r, nl.multiply, wt)
    nl.store(out, y)
    return out


def test_rmsnorm(rng, trn):
    """rmsnorm of bf16 rows (square+sum on ACT, rsqrt, two multiplies) matches numpy within bf16 rounding."""
    x = rng.standard_normal((128, 768)).astype(BF16)
    w = rng.standard_normal((1, 768)).astype(BF16)
    xf = x.astype(np.float32)
    ref = xf / np.sqrt((xf * xf).mean(1, keepdims=True) + 1e-6) * w.astype(np.float32)
    np.testing.assert_allclose(rmsnorm(x, w).astype(np.float32), ref, rtol=1e-2, atol=1e-2)


@nki.jit
def transpose_pe(x):
    out = nl.ndarray((x.shape[1], x.shape[0]), x.dtype, buffer=nl.shared_hbm)
    t = nl.transpose(nl.load(x))  # TensorE transpose into PSUM
    nl.store(out, nl.copy(t))
    return out


@nki.jit
def transpose_dma(x):
    out = nl.ndarray((x.shape[1], x.shape[0]), x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((x.shape[1], x.shape[0]), x.dtype)
    nisa.dma_transpose(t, x)
    nl.store(out, t)
    return out


def test_transpose_nc_and_dma(rng, trn):
    """A bf16 [96, 128] array transposed on the PE array and by DMA equals numpy's transpose bit for bit."""
    x = rng.standard_normal((96, 128)).astype(BF16)
    x[3, 5] = np.inf  # v3 transpose mode is bit-exact even for Inf/NaN
    np.testing.assert_array_equal(transpose_pe(x).view(np.uint16), x.T.view(np.uint16))
    np.testing.assert_array_equal(transpose_dma(x).view(np.uint16), x.T.view(np.uint16))


@nki.jit
def attention(q, k, v):
    S, d = q.shape
    Sk = k.shape[0]
    scale = 1.0 / np.sqrt(d)
    out = nl.ndarray((S, d), nl.float32, buffer=nl.shared_hbm)
    qT = nl.load(q.permute((1, 0)))  # [d, S]: d on partitions for the contraction
    m = nl.full((S, 1), -1e30, nl.float32)
    l = nl.zeros((S, 1), nl.float32)
    acc = nl.zeros((S, d), nl.float32)
    for j in range(Sk // 128):
        kT = nl.load(k[j * 128:(j + 1) * 128].permute((1, 0)))
        vt = nl.load(v[j * 128:(j + 1) * 128])
        s = nl.ndarray((S, 128), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(s, qT, kT)
        tile_max = nl.ndarray((S, 1), nl.float32)
        nisa.tensor_reduce(tile_max, nl.maximum, s, axis=1, keepdims=True)
        m_new = nl.ndarray((S, 1), nl.float32)
        nisa.tensor_scalar(m_new, tile_max, nl.multiply, scale, op1=nl.maximum, operand1=m)
        neg = nl.ndarray((S, 1), nl.float32)
        nisa.tensor_scalar(neg, m_new, nl.multiply, -1.0)
        p = nl.ndarray((S, 128), nl.float32)
        rowsum = nl.ndarray((S, 1), nl.float32)
        nisa.activation(p, nl.exp, s, bias=neg, scale=scale, reduce_op=nl.add, reduce_res=rowsum)
        corr = nl.ndarray((S, 1), nl.float32)
        nisa.activation(corr, nl.exp, m, bias=neg)
        nisa.scalar_tensor_tensor(l, l, nl.multiply, corr, nl.add, rowsum)
        pT_ps = nl.ndarray((128, S), nl.float32, buffer=nl.psum)
        nisa.nc_transpose(pT_ps, p)
        pT = nl.copy(pT_ps)
        pv = nl.ndarray((S, d), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(pv, pT, vt)
        nisa.scalar_tensor_tensor(acc, acc, nl.multiply, corr, nl.add, pv)
        nisa.tensor_copy(m, m_new)
    inv = nl.ndarray((S, 1), nl.float32)
    nisa.reciprocal(inv, l)
    res = nl.ndarray((S, d), nl.float32)
    nisa.tensor_scalar(res, acc, nl.multiply, inv)
    nl.store(out, res)
    return out


def test_attention_running_max(rng, trn):
    """Single-head attention over 4 key tiles with an online softmax matches numpy softmax(QK^T/sqrt(d))V."""
    q, k, v = (rng.standard_normal((n, 64), np.float32) for n in (128, 512, 512))
    s = q @ k.T / 8.0
    e = np.exp(s - s.max(1, keepdims=True))
    ref = (e / e.sum(1, keepdims=True)) @ v
    np.testing.assert_allclose(attention(q, k, v), ref, rtol=1e-4, atol=1e-5)


@nki.jit
def cumsum(x):
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    xt = nl.load(x)
    ones = nl.ones(x.shape, nl.float32)
    r = nl.ndarray(x.shape, nl.float32)
    nisa.tensor_tensor_scan(r, ones, xt, 0.0, nl.multiply, nl.add)  # r[i] = 1 * r[i-1] + x[i]
    nl.store(out, r)
    return out


def test_cumsum_scan(rng, trn):
    """A running sum along rows with tensor_tensor_scan matches numpy.cumsum in float32."""
    x = rng.standard_normal((128, 200), np.float32)
    np.testing.assert_allclose(cumsum(x), np.cumsum(x, axis=1, dtype=np.float32), rtol=1e-5, atol=1e-5)


@nki.jit
def top8(x):
    P = x.shape[0]
    vals_out = nl.ndarray((P, 8), nl.float32, buffer=nl.shared_hbm)
    idx_out = nl.ndarray((P, 8), nl.uint32, buffer=nl.shared_hbm)
    xt = nl.load(x)
    vals = nl.ndarray((P, 8), nl.float32)
    nisa.max8(vals, xt)
    idx = nl.ndarray((P, 8), nl.uint32)
    nisa.nc_find_index8(idx, xt, vals)
    nl.store(vals_out, vals)
    nl.store(idx_out, idx)
    return vals_out, idx_out


def test_top8(rng, trn):
    """max8 + nc_find_index8 give each row's 8 largest values (descending) and their positions."""
    x = rng.permuted(np.tile(np.arange(300, dtype=np.float32), (64, 1)), axis=1)
    vals, idx = top8(x)
    order = np.argsort(-x, axis=1, kind="stable")[:, :8]
    np.testing.assert_array_equal(vals, np.take_along_axis(x, order, 1))
    np.testing.assert_array_equal(idx, order)


@nki.jit
def gather_rows(table, ids):
    n, D = ids.shape[0], table.shape[1]
    out = nl.ndarray((n, D), table.dtype, buffer=nl.shared_hbm)
    idx = nl.load(ids)  # [n, 1] int32 in SBUF
    rows = nl.ndarray((n, D), table.dtype)
    nisa.dma_copy(rows, table.ap(pattern=[[D, n], [1, D]], offset=0, vector_offset=idx, indirect_dim=0),
                  dge_mode=nisa.dge_mode.swdge)
    nl.store(out, rows)
    return out


def test_indirect_dma_gather(rng, trn):
    """An indirect DMA with vector_offset gathers table rows by index, like numpy fancy indexing."""
    table = rng.standard_normal((1000, 96), np.float32)
    ids = rng.integers(0, 1000, (128, 1)).astype(np.int32)
    np.testing.assert_array_equal(gather_rows(table, ids), table[ids[:, 0]])


@nki.jit
def fp8_double_row(a, b):
    M, N = a.shape[2], b.shape[2]
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    sa, sb = nl.load(a), nl.load(b)
    ps = nl.ndarray((M, N), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(ps, sa, sb, perf_mode=nisa.matmul_perf_mode.double_row)
    nl.store(out, nl.copy(ps))
    return out


def test_fp8_double_row_trn2(rng, trn):
    """An FP8 e4m3 double-row matmul (K = 128 x 2) on trn2 equals the fp32 sum of the exact fp8 products."""
    a = rng.standard_normal((128, 2, 128)).astype(ml_dtypes.float8_e4m3)
    b = rng.standard_normal((128, 2, 512)).astype(ml_dtypes.float8_e4m3)
    ref = np.einsum("pjm,pjn->mn", a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(fp8_double_row(a, b), ref, rtol=1e-5, atol=1e-4)


@nki.jit
def mxfp8_matmul(a, b):
    K, M = a.shape
    N = b.shape[1]
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    qs = []
    for x, F in ((a, M), (b, N)):
        src = nl.ndarray((128, F, 4), x.dtype)
        nisa.dma_copy(src, x.reshape((128, 4, F)).permute((0, 2, 1)))  # src[p, f, j] = x[4p + j, f]
        q = nl.ndarray((128, F), nl.float8_e4m3fn_x4)
        s = nl.ndarray((128, F), nl.uint8)
        nisa.quantize_mx(q, src.reshape((128, 4 * F)), s)
        qs.append((q, s))
    ps = nl.ndarray((M, N), nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(ps, qs[0][0], qs[1][0], qs[0][1], qs[1][1])
    nl.store(out, nl.copy(ps))
    return out


def _mx_reference(x):
    """MXFP8 (e4m3fn) values of x [K, F], blocks of 32 along K, scale 2^(floor(log2 amax) - 7)."""
    blocks = x.astype(np.float32).reshape(-1, 32, x.shape[1])
    amax = np.abs(blocks).max(1, keepdims=True)
    scale = np.exp2(np.floor(np.log2(amax)) - 7)
    q = np.clip(blocks / scale, -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    return (q * scale).reshape(x.shape)


def test_mxfp8_matmul_trn3(rng, trn):
    """On trn3, quantize_mx + nc_matmul_mx equal a numpy MXFP8 quantize-dequantize-matmul."""
    trn("trn3")
    a = rng.standard_normal((512, 128)).astype(BF16)
    b = rng.standard_normal((512, 256)).astype(BF16)
    ref = _mx_reference(a).T @ _mx_reference(b)
    np.testing.assert_allclose(mxfp8_matmul(a, b), ref, rtol=1e-5, atol=1e-3)


@nki.jit
def lnc2_scale(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    half = x.shape[0] // nl.num_programs()
    lo = nl.program_id(0) * half
    for i in range(lo, lo + half, 128):
        t = nl.load(x[i:i + 128])
        y = nl.ndarray(t.shape, t.dtype)
        nisa.tensor_scalar(y, t, nl.multiply, float(nl.program_id(0) + 2))
        nl.store(out[i:i + 128], y)
    return out


def test_lnc2_split_by_program_id(rng, trn):
    """kernel[2] runs two programs that each scale half the rows, by 2 and by 3, into one shared output."""
    x = rng.standard_normal((512, 64), np.float32)
    got = lnc2_scale[2](x)
    np.testing.assert_array_equal(got[:256], x[:256] * 2)
    np.testing.assert_array_equal(got[256:], x[256:] * 3)
