"""NKI 0.7 (the default target): NkiScalar through scalar_load / scalar_store, fori_loop over scalars, tile and
block grids (tiles, blocks, alloc_tiles, alloc_blocks), nki.__version__; names 0.7 removed (nl.dynamic_range,
a bare `while reg:`) still run for 0.6 kernels with a warning naming the replacement; names 0.7 added are
refused when a kernel targets 0.6. Our kernels, numpy references."""
import warnings

import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core.errors import DTypeError, NkiDeprecationWarning, ShapeError
from trnsim.errors import ConfigError
from trnsim.nki.versions import VersionError


@pytest.fixture
def target(monkeypatch):
    def set_version(v):
        monkeypatch.setenv("TRNSIM_NKI_VERSION", v)
    monkeypatch.delenv("TRNSIM_NKI_VERSION", raising=False)
    return set_version


def test_version(target):
    assert nki.__version__ == "0.7.0"
    target("0.6")
    assert nki.__version__ == "0.6.0"
    target("0.5")
    with pytest.raises(ConfigError, match="NKI 0.6 and 0.7"):
        nki.__version__


# -- NkiScalar -----------------------------------------------------------------------------------------------------
def _scalar_kernel(expr, dtype=nl.int32):
    @nki.jit
    def k(v):
        t = nl.ndarray((1, 1), dtype)
        nisa.dma_copy(t, v)
        r = nl.ndarray((1, 1), dtype)
        nisa.scalar_store(r, expr(nisa.scalar_load(t)))
        out = nl.ndarray((1, 1), dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(out, r)
        return out
    return k


@pytest.mark.parametrize("expr, x, ref", [
    (lambda i: i * 4 + 1, 5, 21),
    (lambda i: 3 - i, 5, -2),
    (lambda i: -i * i, 7, -49),
    (lambda i: i * i, 100000, np.int64(100000 * 100000).astype(np.int32)),  # 32 bits wrap: 1410065408
    (lambda i: i + 1, 2**31 - 1, -2**31),
], ids=["affine", "rsub", "neg", "wraps", "max+1"])
def test_int32_scalar_arithmetic_wraps_at_32_bits(target, expr, x, ref):
    got = _scalar_kernel(expr)(np.array([[x]], np.int32))
    assert got.dtype == np.int32 and int(got[0, 0]) == int(ref)


def test_int64_scalar_keeps_64_bits(target):
    got = _scalar_kernel(lambda i: i * i - 1, nl.int64)(np.array([[100000]], np.int64))
    assert got.dtype == np.int64 and int(got[0, 0]) == 100000 * 100000 - 1


@pytest.mark.parametrize("expr, match", [
    (lambda i: (i < 3) + 1, "comparison of NkiScalars is traced"),
    (lambda i: i + 1.5, "a Python int or an NkiScalar"),
    (lambda i: 7, "a compile-time constant goes into a tile with nisa.memset"),
])
def test_scalar_misuse_is_named(target, expr, match):
    with pytest.raises(nisa.NkiValidationError, match=match):
        _scalar_kernel(expr)(np.array([[1]], np.int32))


def test_int64_scalars_neither_compare_nor_branch(target):
    with pytest.raises(nisa.NkiValidationError, match="int64 scalars have no comparison"):
        _scalar_kernel(lambda i: i < 3, nl.int64)(np.array([[1]], np.int64))

    @nki.jit
    def branch(v):
        t = nl.ndarray((1, 1), nl.int32)
        nisa.dma_copy(t, v)
        if nisa.scalar_load(t):
            pass
    with pytest.raises(nisa.NkiValidationError, match="cannot branch"):
        branch(np.array([[1]], np.int32))


def test_scalar_load_takes_signed_1x1_tiles(target):
    @nki.jit
    def k(v):
        t = nl.ndarray((1, 1), nl.uint32)
        nisa.dma_copy(t, v)
        nisa.scalar_load(t)
    with pytest.raises(ShapeError, match="unsigned dtypes: use the signed one"):
        k(np.array([[1]], np.uint32))


@nki.jit
def gather_rows(idx, x):
    """Row idx, then rows idx*2 .. idx*2 + idx - 1 summed by a fori_loop bounded by the scalar."""
    F = x.shape[1]
    t = nl.ndarray((1, 1), idx.dtype)
    nisa.dma_copy(t, idx)
    i = nisa.scalar_load(t)
    row = nl.ndarray((1, F), x.dtype)
    nisa.dma_copy(row, x.ap([[F, 1], [1, F]], scalar_offset=i, indirect_dim=0))
    first = nl.ndarray((1, F), x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(first, row)
    acc = nl.ndarray((1, F), x.dtype, buffer=nl.shared_hbm)
    zero = nl.ndarray((1, F), x.dtype)
    nisa.memset(zero, 0.0)
    nisa.dma_copy(acc, zero)
    base = i * 2

    def body(q):
        assert isinstance(q, nisa.NkiScalar)
        r = nl.ndarray((1, F), x.dtype)
        nisa.dma_copy(r, x.ap([[F, 1], [1, F]], scalar_offset=base + q, indirect_dim=0))
        nisa.dma_copy(acc, r, dst_rmw_op=nl.add)
    nl.fori_loop(0, i, body)
    return first, acc


def test_scalar_offsets_and_a_fori_loop_bounded_by_a_scalar(target, rng):
    x = rng.integers(-8, 8, (16, 32)).astype(np.float32)
    first, acc = gather_rows(np.array([[3]], np.int32), x)
    np.testing.assert_array_equal(first, x[3:4])
    np.testing.assert_array_equal(acc, x[6:9].sum(0, keepdims=True))


def test_int64_offsets_address_hbm_but_bound_no_loop(target, rng):
    x = rng.integers(-8, 8, (16, 32)).astype(np.float32)
    with pytest.raises(nisa.NkiValidationError, match="int64 scalar cannot be a loop bound"):
        gather_rows(np.array([[3]], np.int64), x)

    @nki.jit
    def row_at(idx, x):
        t = nl.ndarray((1, 1), nl.int64)
        nisa.dma_copy(t, idx)
        i = nisa.scalar_load(t) * 3 - 2 * 2**33  # past 32 bits in between: an int64 scalar does not wrap
        row = nl.ndarray((1, 32), x.dtype)
        nisa.dma_copy(row, x.ap([[32, 1], [1, 32]], scalar_offset=i + 2 * 2**33 - 3 * 2**32, indirect_dim=0))
        out = nl.ndarray((1, 32), x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(out, row)
        return out
    np.testing.assert_array_equal(row_at(np.array([[2**32 + 5]], np.int64), x), x[15:16])


def test_int64_offsets_are_refused_on_chip(target):
    @nki.jit
    def k(idx):
        t = nl.ndarray((1, 1), nl.int64)
        nisa.dma_copy(t, idx)
        s = nl.ndarray((4, 32), nl.float32)
        s.ap([[32, 1], [1, 32]], scalar_offset=nisa.scalar_load(t), indirect_dim=0)
    with pytest.raises(DTypeError, match="64-bit scalar_offset addresses HBM only"):
        k(np.array([[1]], np.int64))


def test_a_register_bound_gives_the_body_a_register(target):
    seen = []

    @nki.jit
    def k(n):
        t = nl.ndarray((1, 1), nl.int32)
        nisa.dma_copy(t, n)
        r = nisa.register_alloc()
        nisa.register_load(r, t)
        nl.fori_loop(0, r, lambda q: seen.append(type(q)))
    k(np.array([[2]], np.int32))
    assert len(seen) >= 2 and set(seen) == {nisa.VirtualRegister}  # 2 iterations (a replay runs the kernel again)


# -- what 0.7 removed and added ----------------------------------------------------------------------------------
@nki.jit
def count_down(n, x):
    """Adds x once per dynamic_range iteration, then once more per `while reg:` round (reg counts down)."""
    t = nl.ndarray((1, 1), nl.int32)
    nisa.dma_copy(t, n)
    r = nisa.register_alloc()
    nisa.register_load(r, t)
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    acc, xt = nl.ndarray(x.shape, x.dtype), nl.ndarray(x.shape, x.dtype)
    nisa.memset(acc, 0.0)
    nisa.dma_copy(xt, x)
    for _ in nl.dynamic_range(r):
        nisa.tensor_tensor(acc, acc, xt, nl.add)
    while r:  # the count lives in the tile t: decremented on device, reloaded into the register
        nisa.tensor_tensor(acc, acc, xt, nl.add)
        nisa.tensor_scalar(t, t, nl.add, -1)
        nisa.register_load(r, t)
    nisa.dma_copy(out, acc)
    return out


def test_removed_loops_run_for_06_kernels_with_a_warning_naming_the_replacement(target, rng):
    x = rng.standard_normal((4, 8)).astype(np.float32)
    with pytest.warns(NkiDeprecationWarning) as seen:
        got = count_down(np.array([[3]], np.int32), x)
    np.testing.assert_allclose(got, 6 * x, rtol=1e-6)
    text = [str(w.message) for w in seen]
    assert any("nl.dynamic_range is removed in NKI 0.7" in t and "nl.fori_loop" in t for t in text)
    assert any("while reg:" in t and "nl.while_loop" in t for t in text)


def test_a_06_target_keeps_them_deprecated_and_lacks_the_07_names(target):
    target("0.6")
    with pytest.warns(NkiDeprecationWarning, match="deprecated in NKI 0.6 and removed in 0.7: use nl.fori_loop"):
        count_down(np.array([[1]], np.int32), np.ones((4, 8), np.float32))
    with pytest.raises(VersionError, match="nisa.scalar_load is new in NKI 0.7"):
        _scalar_kernel(lambda i: i)(np.array([[1]], np.int32))
    with pytest.raises(VersionError, match="nl.tiles is new in NKI 0.7"):
        copy_by_tiles(np.ones((4, 8), np.float32))


# -- tile and block grids ----------------------------------------------------------------------------------------
@nki.jit
def copy_by_tiles(src):
    st = nl.tiles(src, tile_shape=(128, 256))
    dst = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.shared_hbm)
    dt = nl.tiles(dst, tile_shape=(128, 256))
    for i in range(st.shape[0]):
        for j in range(st.shape[1]):
            t = nl.ndarray(st[i, j].element_shape, dtype=src.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=st[i, j].data)
            nisa.tensor_scalar(t, t, nl.multiply, float(i * 10 + j))
            nisa.dma_copy(dst=dt[i, j].data, src=t)
    return dst


def test_tiles_cover_a_tensor_with_clamped_last_tiles(target, rng):
    x = rng.standard_normal((300, 600)).astype(np.float32)
    ref = x.copy()
    for i in range(3):
        for j in range(3):
            ref[i * 128:(i + 1) * 128, j * 256:(j + 1) * 256] *= i * 10 + j
    np.testing.assert_array_equal(copy_by_tiles(x), ref)


@nki.jit
def through_an_sbuf_tile_grid(src):
    P, F = src.shape
    g = nl.alloc_tiles(tile_shape=(128, 128), element_shape=(P, F), buffer=nl.sbuf, dtype=src.dtype)
    st = nl.tiles(src, tile_shape=(128, 128))
    facts = (g.shape, g[1, :].element_shape, g[:, 0].is_data_representable, g[1, :].is_data_representable,
             g.index_step_elements, g.is_remainder)
    for i in range(st.shape[0]):
        nisa.dma_copy(g[i, :].data, st[i, :].data)  # one tile row: one operand
    dst = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.shared_hbm)
    db = nl.blocks(dst, tile_shape=(128, 128), block_shape=(1, 2))
    gb = nl.blocks(g, block_shape=(1, 2))
    for i in range(db.shape[0]):
        for j in range(db.shape[1]):
            nisa.activation(gb[i, j].data, nl.exp, gb[i, j].data)
            nisa.dma_copy(db[i, j].data, gb[i, j].data)
    return dst, facts


def test_alloc_tiles_in_sbuf_and_blocks_over_it(target, rng):
    x = rng.standard_normal((256, 512)).astype(np.float32)
    got, facts = through_an_sbuf_tile_grid(x)
    np.testing.assert_allclose(got, np.exp(x), rtol=1e-5)
    assert facts == ((2, 4), (128, 512), False, True, (128, 128), False)


def test_an_on_chip_selection_across_tile_rows_is_no_operand(target):
    @nki.jit
    def k(src):
        g = nl.alloc_tiles(tile_shape=(128, 64), element_shape=(256, 64), buffer=nl.sbuf, dtype=src.dtype)
        nisa.dma_copy(g[:, 0].data, src)
    with pytest.raises(ShapeError, match="spanning tile rows"):
        k(np.zeros((256, 64), np.float32))


def test_alloc_blocks_in_hbm_counts_blocks(target):
    @nki.jit
    def k(src):
        b = nl.alloc_blocks(tile_shape=(128, 128), block_shape=(2, 2), element_shape=(384, 640),
                            buffer=nl.shared_hbm, dtype=src.dtype)
        last = b[1, 1]
        tl = nl.tiles(last)
        return b.shape, b.block_shape, last.element_shape, last.is_remainder, tl.shape, tl[0, 1].element_shape
    assert k(np.zeros((1, 1), np.float32)) == ((2, 3), (2, 2), (128, 256), True, (1, 2), (128, 128))


def test_grid_shapes_are_checked(target):
    @nki.jit
    def k(src):
        nl.tiles(src, tile_shape=(128,))
    with pytest.raises(ShapeError, match="at least 2 positive Python ints"):
        k(np.zeros((4, 4), np.float32))


def test_no_warning_from_07_forms(target, rng):
    x = rng.standard_normal((16, 32)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NkiDeprecationWarning)
        gather_rows(np.array([[2]], np.int32), x)
