"""Tiles loaded whole from HBM are copied when first read, and matmuls read them from one FP32 conversion
of the HBM tensor: every reader must see the tile's bytes as the load left them, whatever is written to
the tile, to tensors placed over it, or to the HBM source around it."""
import ml_dtypes
import numpy as np

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl

BF16 = ml_dtypes.bfloat16
R = np.random.default_rng(7)


def bf16(*shape):
    return R.standard_normal(shape).astype(BF16)


def f32(x):
    return np.asarray(x).astype(np.float32)


@nki.jit
def streamed(a_t, b):
    """Every 128-row block of A meets all of B, loaded again per block as [128, 512] tiles of B's rows."""
    K, M = a_t.shape
    N = b.shape[1]
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    accs = [nl.ndarray((128, 512), nl.float32, buffer=nl.psum) for _ in range(N // 512)]
    for m in range(M // 128):
        for k in range(K // 128):
            at = nl.ndarray((128, 128), a_t.dtype)
            nisa.dma_copy(at, a_t[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
            for n in range(N // 512):
                bt = nl.ndarray((128, 512), b.dtype)
                nisa.dma_copy(bt, b[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                nisa.nc_matmul(accs[n], at, bt)
        for n in range(N // 512):
            res = nl.ndarray((128, 512), nl.float32)
            nisa.tensor_copy(res, accs[n])
            nisa.dma_copy(out[m * 128:(m + 1) * 128, n * 512:(n + 1) * 512], res)
    return out


def test_streamed_tiles_of_one_source_match_numpy():
    """A [256x384]^T x [384x1024] bf16 matmul streaming B's tiles per row block matches fp32 numpy."""
    a_t, b = bf16(384, 256), bf16(384, 1024)
    np.testing.assert_allclose(streamed(a_t, b), f32(a_t).T @ f32(b), rtol=1e-5, atol=1e-3)


def test_a_write_over_the_tile_between_matmuls_is_seen():
    """Rows of a loaded tile doubled in SBUF between two accumulating matmuls feed the second one doubled."""
    @nki.jit
    def k(a_t, b):
        out = nl.ndarray((128, 256), nl.float32, buffer=nl.shared_hbm)
        at, bt = nl.load(a_t), nl.ndarray((128, 256), b.dtype)
        nisa.dma_copy(bt, b)
        acc = nl.ndarray((128, 256), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(acc, at, bt)
        nisa.tensor_scalar(bt[0:32], bt[0:32], nl.multiply, 2.0)  # exact in bf16
        nisa.nc_matmul(acc, at, bt)
        nl.store(out, nl.copy(acc))
        return out
    a_t, b = bf16(128, 128), bf16(128, 256)
    b2 = f32(b)
    b2[:32] *= 2
    np.testing.assert_allclose(k(a_t, b), f32(a_t).T @ (f32(b) + b2), rtol=1e-5, atol=1e-3)


def test_writes_to_the_hbm_source_around_loads_and_matmuls():
    """Tiles keep the bytes they loaded when HBM changes later: old tile, old tile after the write, new load."""
    @nki.jit
    def k(a_t, b, c):
        out = nl.ndarray((128, 256), nl.float32, buffer=nl.shared_hbm)
        at, old = nl.load(a_t), nl.ndarray((128, 256), b.dtype)
        nisa.dma_copy(old, b)
        acc = nl.ndarray((128, 256), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(acc, at, old)  # still pending when b changes
        nisa.dma_copy(b, nl.load(c))  # overwrite the source in HBM
        nisa.nc_matmul(acc, at, old)  # the tile still holds the old bytes
        new = nl.ndarray((128, 256), b.dtype)
        nisa.dma_copy(new, b)
        nisa.nc_matmul(acc, at, new)
        nl.store(out, nl.copy(acc))
        return out
    a_t, b, c = bf16(128, 128), bf16(128, 256), bf16(128, 256)
    ref = f32(a_t).T @ (2 * f32(b) + f32(c))
    np.testing.assert_allclose(k(a_t, b.copy(), c), ref, rtol=1e-5, atol=1e-3)


def test_a_write_through_an_aliased_tile_is_seen():
    """A tensor placed over a loaded tile and written through its own view changes what the matmul reads."""
    @nki.jit
    def k(a_t, b, c):
        out = nl.ndarray((128, 256), nl.float32, buffer=nl.shared_hbm)
        at = nl.load(a_t)
        bt = nl.ndarray((128, 256), b.dtype, address=(0, 8192))
        alias = nl.ndarray((128, 128), c.dtype, address=(0, 8192 + 256))  # columns 128..255 of bt
        nisa.dma_copy(bt, b)
        nisa.dma_copy(alias, c)
        acc = nl.ndarray((128, 256), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(acc, at, bt)
        nl.store(out, nl.copy(acc))
        return out
    a_t, b, c = bf16(128, 128), bf16(128, 256), bf16(128, 128)
    b2 = f32(b)
    b2[:, 128:] = f32(c)
    np.testing.assert_allclose(k(a_t, b, c), f32(a_t).T @ b2, rtol=1e-5, atol=1e-3)


def test_casting_and_partial_loads_still_match_numpy():
    """A load that casts fp32 to bf16 and a tile loaded in two halves from two sources multiply correctly."""
    @nki.jit
    def k(a_t, b, c):
        out = nl.ndarray((128, 256), nl.float32, buffer=nl.shared_hbm)
        at = nl.ndarray((128, 128), nl.bfloat16)
        nisa.dma_copy(at, a_t)  # fp32 -> bf16
        bt = nl.ndarray((128, 256), b.dtype)
        nisa.dma_copy(bt[:, :128], b)
        nisa.dma_copy(bt[:, 128:], c)
        acc = nl.ndarray((128, 256), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(acc, at, bt)
        nl.store(out, nl.copy(acc))
        return out
    a_t, b, c = R.standard_normal((128, 128)).astype(np.float32), bf16(128, 128), bf16(128, 128)
    ref = f32(a_t.astype(BF16)).T @ np.concatenate([f32(b), f32(c)], axis=1)
    np.testing.assert_allclose(k(a_t, b, c), ref, rtol=1e-5, atol=1e-3)


def test_a_load_reads_the_source_as_it_was_at_the_load():
    """A tile loaded, then its HBM source overwritten, then the tile copied out, holds the old values."""
    @nki.jit
    def k(x, y):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, x.dtype)
        nisa.dma_copy(t, x)
        nisa.dma_copy(x, nl.load(y))  # overwrite the source in HBM
        nl.store(out, nl.add(t, 1.0))
        return out
    x, y = R.standard_normal((128, 64)).astype(np.float32), R.standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_array_equal(k(x.copy(), y), x + np.float32(1))


def test_a_partial_write_keeps_the_rest_of_the_load():
    """Rows written over a loaded tile replace only those rows; the rest keeps the loaded values."""
    @nki.jit
    def k(x, y):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, x.dtype)
        nisa.dma_copy(t, x)
        nisa.dma_copy(t[0:16], y[0:16])
        nl.store(out, t)
        return out
    x, y = R.standard_normal((128, 64)).astype(np.float32), R.standard_normal((128, 64)).astype(np.float32)
    want = x.copy()
    want[:16] = y[:16]
    np.testing.assert_array_equal(k(x, y), want)


def test_a_tensor_placed_over_a_loaded_tile_reads_its_bytes():
    """A tensor placed after the load at the tile's address reads the loaded values as its own."""
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 32), x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 64), x.dtype, address=(0, 4096))
        nisa.dma_copy(t, x)
        alias = nl.ndarray((128, 32), x.dtype, address=(0, 4096 + 128))  # columns 32..63 of t
        nl.store(out, alias)
        return out
    x = R.standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_array_equal(k(x), x[:, 32:])


def test_a_wide_source_of_odd_width_converts_in_parts():
    """Tiles of an HBM tensor 600 columns wide (a conversion shared out between threads, in parts that are
    not all whole blocks), two 300-column tiles from 2 row blocks each, match numpy."""
    @nki.jit
    def k(a_t, b):
        out = nl.ndarray((128, 600), nl.float32, buffer=nl.shared_hbm)
        for n in range(2):
            acc = nl.ndarray((128, 300), nl.float32, buffer=nl.psum)
            for kk in range(2):
                at = nl.ndarray((128, 128), a_t.dtype)
                nisa.dma_copy(at, a_t[kk * 128:(kk + 1) * 128, :])
                bt = nl.ndarray((128, 300), b.dtype)
                nisa.dma_copy(bt, b[kk * 128:(kk + 1) * 128, n * 300:(n + 1) * 300])
                nisa.nc_matmul(acc, at, bt)
            nl.store(out[:, n * 300:(n + 1) * 300], nl.copy(acc))
        return out
    a_t, b = bf16(256, 128), bf16(256, 600)
    np.testing.assert_allclose(k(a_t, b), f32(a_t).T @ f32(b), rtol=1e-5, atol=1e-3)
