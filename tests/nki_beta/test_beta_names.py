"""Beta names: rand, the rounding ops, logical_not, gather_flattened, shared constants in HBM, finfo,
nki.trace, ncc.no_reorder, PSUM direct allocation by (bank, partition, address), and the import-only modules."""
import ml_dtypes
import numpy as np
import pytest

import trnsim.nki.beta as nki
import trnsim.nki.beta.compiler as ncc
import trnsim.nki.beta.isa as nisa
import trnsim.nki.beta.language as nl


def _out(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype, buffer=nl.shared_hbm)


def test_rounding_and_logical_not(rng):
    x = (rng.standard_normal((16, 40)) * 5).astype(np.float32)
    x[0, :6] = [2.0, -2.0, 0.5, -0.5, 7.999, -7.001]

    @nki.jit
    def k(a):
        t = nl.load(a)
        outs = [_out(a.shape) for _ in range(6)]
        for o, f in zip(outs, (nl.floor, nl.ceil, nl.trunc, nl.tan, nl.gelu_apprx_sigmoid)):
            nl.store(o, f(t))
        nl.store(outs[5], nl.logical_not(nl.greater(t, 0.0), dtype=nl.float32))
        return outs
    fl, ce, tr, ta, gs, ln = k(x)
    np.testing.assert_array_equal(fl, np.floor(x))
    np.testing.assert_array_equal(ce, np.ceil(x))
    np.testing.assert_array_equal(tr, np.trunc(x))
    np.testing.assert_allclose(ta, np.tan(x.astype(np.float64)), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gs, x / (1 + np.exp(-1.702 * x.astype(np.float64))), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(ln, (x <= 0).astype(np.float32))


@pytest.mark.parametrize("shape, ishape", [((8, 50), (8, 7)), ((8, 5, 6), (8, 2, 3))])
def test_gather_flattened(rng, shape, ishape):
    """Per partition, elements of the flattened free dims picked by uint32 index (2-d and 3-d)."""
    data = rng.standard_normal(shape).astype(np.float32)
    n = int(np.prod(shape[1:]))
    idx = rng.integers(0, n, ishape).astype(np.uint32)

    @nki.jit
    def k(d, i):
        out = _out(i.shape)
        nl.store(out, nl.gather_flattened(data=nl.load(d), indices=nl.load(i)))
        return out
    ref = np.take_along_axis(data.reshape(8, -1), idx.reshape(8, -1).astype(np.int64), axis=1).reshape(ishape)
    np.testing.assert_array_equal(k(data, idx), ref)


def test_rand_is_uniform_and_seeded():
    @nki.jit
    def k():
        out = _out((32, 64))
        nl.store(out, nl.rand((32, 64), dtype=nl.float32))
        return out
    a, b = k(), k()
    assert a.shape == (32, 64) and a.min() >= 0 and a.max() < 1 and 0.4 < a.mean() < 0.6
    np.testing.assert_array_equal(a, b)  # same seed, same values (determinism)


def test_shared_constants_live_in_hbm_and_load(rng):
    """shared_identity_matrix and shared_constant are HBM tensors; a kernel loads them like an input."""
    c = rng.standard_normal((4, 6)).astype(np.float32)

    @nki.jit
    def k():
        ident = nl.shared_identity_matrix(n=16, dtype=nl.bfloat16)
        const = nl.shared_constant(c)
        assert ident.buffer == "shared_hbm" and const.buffer == "shared_hbm"
        o1, o2 = _out((16, 16)), _out((4, 6))
        nl.store(o1, nl.load(ident, dtype=nl.float32))
        nl.store(o2, nl.load(const))
        return o1, o2
    i, cc = k()
    np.testing.assert_array_equal(i, np.eye(16, dtype=np.float32))
    np.testing.assert_array_equal(cc, c)


def test_finfo_knows_the_narrow_floats():
    assert nl.finfo(nl.bfloat16).max == ml_dtypes.finfo(ml_dtypes.bfloat16).max
    assert float(nl.finfo(nl.float8_e5m2).max) == 57344.0
    assert nl.finfo(np.float32).bits == 32


def test_trace_decorator_and_no_reorder(rng):
    """`nki.trace` makes a kernel that simulate_kernel runs; `ncc.no_reorder()` is a block that keeps order."""
    x = rng.standard_normal((8, 8)).astype(np.float32)

    @nki.trace
    def k(a, out):
        with ncc.no_reorder():
            nl.store(out, nl.exp(nl.load(a)))
    out = np.zeros_like(x)
    nki.simulate_kernel(k, x, out)
    np.testing.assert_allclose(out, np.exp(x), rtol=1e-6)
    assert not hasattr(k, "__wrapped__")  # a kernel is not collected as a test function


def test_psum_alloc_by_bank_partition_address(rng):
    """ncc.psum.alloc's function returns (bank, start_partition, byte_addr): two logical tiles in banks 2 and 5."""
    a = rng.standard_normal((128, 64)).astype(np.float32)
    placed = []

    def place(idx, pdim, fbytes):
        placed.append((idx, pdim, fbytes))
        return (2 + 3 * idx[0], 0, 0)

    @nki.jit
    def k(x):
        out = _out((2, 32, 32))
        ident = nl.load(nl.shared_identity_matrix(n=128, dtype=nl.float32))
        ps = nl.ndarray((2, nl.par_dim(32), 32), dtype=nl.float32, buffer=ncc.psum.alloc(place))
        t = nl.load(x)
        for j in nl.affine_range(2):
            ps[j] = nisa.nc_matmul(t[:, j * 32:j * 32 + 32], ident[:, 0:32])
            nl.store(out[j], nl.copy(ps[j]))
        return out
    out = k(a)
    assert placed[:2] == [((0,), 32, 128), ((1,), 32, 128)]  # this launch's calls (tests/replay launches again)
    for j in range(2):
        np.testing.assert_allclose(out[j], a[:32, j * 32:j * 32 + 32].T, rtol=1e-6)


def test_import_only_modules_resolve_through_the_shim():
    import trnsim.shim
    trnsim.shim.install()
    try:
        from neuronxcc.nki.compiler.backends.neuron.indexing import TileIndex
        from neuronxcc.nki.compiler.backends.neuron.tensor import local_tile
        from neuronxcc.nki.isa.constants import dge_mode
        from neuronxcc.nki.language.constants import sizeinbytes
        assert sizeinbytes(np.float32) == 4 and sizeinbytes(nl.bfloat16) == 2 and sizeinbytes(nl.float8_e5m2) == 1
        assert dge_mode is nisa.dge_mode
        assert isinstance(nl.arange(4)[:, None], TileIndex) and local_tile is nki.tensor
    finally:
        trnsim.shim.uninstall()


def test_var_all_rms_norm(rng):
    x = rng.standard_normal((16, 32)).astype(np.float32)
    x[3, 5] = 0.0
    w = rng.standard_normal((1, 32)).astype(np.float32)

    @nki.jit
    def k(a, g):
        t = nl.load(a)
        o1, o2, o3 = _out((16, 1)), _out((16, 1)), _out((16, 32))
        nl.store(o1, nl.var(t, axis=1))
        nl.store(o2, nl.all(t, axis=1, dtype=nl.float32))
        nl.store(o3, nl.rms_norm(t, nl.load(g), axis=1, n=32))
        return o1, o2, o3
    v, al, rn = k(x, w)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(v[:, 0], x64.var(1), rtol=1e-5)
    np.testing.assert_array_equal(al[:, 0], (x != 0).all(1).astype(np.float32))
    np.testing.assert_allclose(rn, x64 / np.sqrt((x64 * x64).mean(1, keepdims=True) + 1e-6) * w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("placed", [False, True])
def test_accumulating_into_a_fresh_psum_tile_starts_the_sum(rng, placed):
    """`ps[0] += nc_matmul(...)` into a new nl.ndarray PSUM tile starts its sum there (the first matmul
    overwrites), also when each iteration's tile is placed over the previous iteration's bytes."""
    a = rng.standard_normal((2, 4, 128, 64)).astype(np.float32)
    b = rng.standard_normal((2, 4, 128, 32)).astype(np.float32)

    @nki.jit
    def k(x, y):
        out = _out((2, 64, 32))
        for i in nl.affine_range(2):
            buf = ncc.psum.mod_alloc(base_bank=7, num_bank_tiles=(1,)) if placed else nl.psum
            ps = nl.ndarray((1, nl.par_dim(64), 32), nl.float32, buffer=buf)
            for m in nl.affine_range(4):
                ps[0] += nisa.nc_matmul(nl.load(x[i, m]), nl.load(y[i, m]))
            nl.store(out[i], nl.copy(ps[0]))
        return out
    ref = np.einsum("imkp,imkn->ipn", a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(k(a, b), ref, rtol=1e-4, atol=1e-4)


def test_accumulating_onto_a_filled_psum_tile_adds(rng):
    """A PSUM tile filled first (nl.full) is added onto, not overwritten."""
    a = rng.standard_normal((128, 16)).astype(np.float32)
    b = rng.standard_normal((128, 8)).astype(np.float32)

    @nki.jit
    def k(x, y):
        out = _out((16, 8))
        ps = nl.full((16, 8), 2.5, nl.float32, buffer=nl.psum)
        ps += nisa.nc_matmul(nl.load(x), nl.load(y))
        nl.store(out, nl.copy(ps))
        return out
    np.testing.assert_allclose(k(a, b), a.T.astype(np.float64) @ b + 2.5, rtol=1e-4, atol=1e-4)
