"""Index grids: nl.arange and nl.mgrid (.p/.x/.y), affine index arithmetic (offsets, strides,
transposes), tensor-valued (indirect) indices, nl.ds, and nl.par_dim block dims as logical tiles."""
import numpy as np
import pytest

import trnsim.nki.beta as nki
import trnsim.nki.beta.isa as nisa
import trnsim.nki.beta.language as nl
from trnsim.core.errors import KernelError


@nki.jit
def strided_rows(x):
    """Every second row, shifted by 3 columns, then a transposed read through swapped grids."""
    out = nl.ndarray((64, 32), x.dtype, buffer=nl.shared_hbm)
    out_t = nl.ndarray((32, 64), x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(64)[:, None], nl.arange(32)[None, :]
    t = nl.load(x[2 * i_p + 1, i_f + 3])
    nl.store(out[i_p, i_f], t)
    j_p, j_f = nl.arange(32)[:, None], nl.arange(64)[None, :]
    nl.store(out_t[j_p, j_f], nl.load(x[2 * j_f + 1, j_p + 3]))  # grid axes swapped: a transposed access
    return out, out_t


def test_affine_index_arithmetic(rng):
    """x[2*i_p+1, i_f+3] reads rows 1,3,5.. and columns 3..34; swapping the grids transposes the read."""
    x = rng.standard_normal((130, 40), np.float32)
    got, got_t = strided_rows(x)
    np.testing.assert_array_equal(got, x[1:129:2, 3:35])
    np.testing.assert_array_equal(got_t, x[1:129:2, 3:35].T)


@nki.jit
def mgrid_3d(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    i = nl.mgrid[0:x.shape[0], 0:x.shape[1], 0:x.shape[2]]
    t = nl.load(x[i.p, i.x, i.y])
    nl.store(out[i.p, i.x, i.y], nl.multiply(t, 2.0))
    return out


def test_mgrid_three_axes(rng):
    """nl.mgrid[0:P, 0:A, 0:B] gives .p, .x, .y grids for a 3-d tile."""
    x = rng.standard_normal((16, 4, 8), np.float32)
    np.testing.assert_array_equal(mgrid_3d(x), 2 * x)


@nki.jit
def ds_tiles(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[1] // 64):
        t = nl.load(x[:, nl.ds(i * 64, 64)])
        nl.store(out[:, nl.ds(i * 64, 64)], nl.subtract(t, float(i)))
    return out


def test_ds_slices(rng):
    """nl.ds(start, size) slices 64-column tiles; tile i has i subtracted."""
    x = rng.standard_normal((32, 256), np.float32)
    ref = x - np.repeat(np.arange(4, dtype=np.float32), 64)[None, :]
    np.testing.assert_array_equal(ds_tiles(x), ref)


@nki.jit
def gather_rows(table, idx):
    out = nl.ndarray((idx.shape[0], table.shape[1]), table.dtype, buffer=nl.shared_hbm)
    ids = nl.load(idx)                                    # [P, 1] int32 row numbers
    i_f = nl.arange(table.shape[1])[None, :]
    rows = nl.load(table[ids, i_f])                       # a tile of indices: a DMA gather
    nl.store(out, rows)
    scaled = nl.ndarray(table.shape, table.dtype, buffer=nl.shared_hbm)
    nl.store(scaled, nl.load(table))
    nl.store(scaled[ids, i_f], nl.multiply(rows, 10.0))   # and a DMA scatter
    return out, scaled


def test_indirect_gather_and_scatter(rng):
    """table[ids, i_f] with an SBUF tile of row numbers gathers rows; storing through it scatters them."""
    table = rng.standard_normal((50, 24), np.float32)
    idx = rng.permutation(50)[:16].astype(np.int32).reshape(16, 1)
    got, scaled = gather_rows(table, idx)
    np.testing.assert_array_equal(got, table[idx[:, 0]])
    ref = table.copy()
    ref[idx[:, 0]] *= np.float32(10)
    np.testing.assert_array_equal(scaled, ref)


@nki.jit
def blocked(x):
    """x: [B*128, F] loaded into a (B, par_dim(128), F) tensor, one logical tile per block."""
    B, F = x.shape[0] // 128, x.shape[1]
    out = nl.ndarray((128, F), nl.float32, buffer=nl.shared_hbm)
    buf = nl.ndarray((B, nl.par_dim(128), F), nl.float32, buffer=nl.sbuf)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(F)[None, :]
    for b in nl.affine_range(B):
        buf[b, i_p, i_f] = nl.load(x[b * 128 + i_p, i_f])
    acc = nl.zeros((128, F), nl.float32)
    for b in nl.affine_range(B):
        acc[...] = nl.add(acc, nl.exp(buf[b]))
    nl.store(out, acc)
    return out


def test_par_dim_block_tiles(rng):
    """Each block of a (4, par_dim(128), F) tensor is its own [128, F] tile; sum of exp over blocks matches."""
    x = rng.standard_normal((512, 48), np.float32)
    ref = np.exp(x.reshape(4, 128, 48)).sum(0)
    np.testing.assert_allclose(blocked(x), ref, rtol=1e-5)


def test_mixing_slices_and_grids_is_a_named_error(rng):
    """x[i_p, :] mixes a grid with a slice: err_unsupported_mixing_basic_advanced_tensor_indexing."""
    @nki.jit
    def bad(x):
        t = nl.load(x[nl.arange(8)[:, None], :])
        return t

    with pytest.raises(KernelError, match="mixing_basic_advanced"):
        bad(rng.standard_normal((8, 8), np.float32))


def test_grid_in_python_if_is_a_named_error():
    """An index grid cannot decide a Python `if` (use mask=)."""
    with pytest.raises(KernelError, match="control_flow_condition_depending_on_arange"):
        if nl.arange(4)[:, None] < 2:
            pass


def test_non_affine_mask_is_a_named_error():
    """A product of two grids is not affine: err_unsupported_expression_in_mask."""
    from trnsim.nki.beta._grid import MaskExpressionError
    i = nl.mgrid[0:8, 0:8]
    with pytest.raises(MaskExpressionError, match="not affine"):
        i.p * i.x < 3


def test_predicates_joined_with_and_keep_python_meaning_with_a_warning():
    """`p and q` in a mask expression is accepted (the beta API tests write it) and warns that `&` applies both."""
    from trnsim.nki.beta._grid import Cond, PredicateTruthWarning

    ix, iy = nl.mgrid[0:4, 0:8]
    with pytest.warns(PredicateTruthWarning, match="join predicates with `&`"):
        m = (ix < 2 and iy < 4)
    assert isinstance(m, Cond)
    np.testing.assert_array_equal(m.evaluate((4, 8)), np.arange(8)[None, :].repeat(4, 0) < 4)


@nki.jit
def window_positions(x):
    """iota of 3*g.y + g.z over a dense [P, 2, 3, 3] mgrid: every partition gets the 0..8 window positions."""
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    g = nl.mgrid[0:x.shape[0], 0:2, 0:3, 0:3]
    pos = nisa.iota(3 * g.y + g.z, dtype=nl.uint32)
    nl.store(out, nl.add(nl.load(x), pos, dtype=nl.float32))
    return out


def test_mgrid_components_are_dense():
    """nl.mgrid is dense as numpy's: an expression of some components keeps the whole grid's shape."""
    x = np.zeros((16, 2, 3, 3), np.float32)
    want = np.broadcast_to((3 * np.arange(3)[:, None] + np.arange(3)[None, :]).astype(np.float32), x.shape)
    np.testing.assert_array_equal(window_positions(x), want)


@nki.jit
def gather_per_batch(data, idx):
    """data[b, ids, i_f]: an int on the leading (batch) dim drops it, the index tile gathers along the next."""
    B, _, C = data.shape
    out = nl.ndarray((B, idx.shape[0], C), data.dtype, buffer=nl.shared_hbm)
    ids = nl.load(idx)
    i_p, i_f = nl.arange(idx.shape[0])[:, None], nl.arange(C)[None, :]
    for b in nl.affine_range(B):
        rows = nl.load(data[b, ids, i_f])
        nl.store(out[b, i_p, i_f], nl.add(rows, 1.0))
    return out


def test_indirect_gather_after_int_index(rng):
    """A gather whose index tile sits on dim 1 after an int batch index reads rows of that batch."""
    data = rng.standard_normal((3, 40, 8), np.float32)
    idx = rng.integers(0, 40, (16, 1)).astype(np.int32)
    got = gather_per_batch(data, idx)
    np.testing.assert_array_equal(got, data[:, idx[:, 0], :] + np.float32(1))


@nki.jit
def add_scalar_per_head(x, s):
    """nl.load(s[b, h]) indexes every dim of an HBM tensor with an int: a [1, 1] tile, broadcast over rows."""
    B, H, P, F = x.shape
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for b in nl.affine_range(B):
        for h in nl.affine_range(H):
            sig = nl.load(s[b, h])
            col = nl.add(nl.zeros((P, 1), dtype=nl.float32), sig)
            nl.store(out[b, h], nl.add(nl.load(x[b, h]), col))
    return out


def test_all_int_index_loads_one_element(rng):
    """Each (b, h) adds its own element of s to every entry of x[b, h]."""
    x = rng.standard_normal((2, 3, 8, 4), np.float32)
    s = rng.standard_normal((2, 3), np.float32)
    np.testing.assert_array_equal(add_scalar_per_head(x, s), x + s[:, :, None, None])
