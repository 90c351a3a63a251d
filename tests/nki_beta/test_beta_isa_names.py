"""Beta `nisa` instructions that return or fill tiles: top-8 search and replace, selections with reductions,
segment bounds, GpSimd gathers, predicated and dynamic copies, the cumulative scan, read-modify-write DMAs and
nl.atomic_rmw. numpy references are computed here."""
import numpy as np

import trnsim.nki.beta as nki
import trnsim.nki.beta.isa as nisa
import trnsim.nki.beta.language as nl


@nki.jit
def top8_kernel(x):
    P, F = x.shape
    vals = nl.ndarray((P, 8), nl.float32, buffer=nl.shared_hbm)
    idx = nl.ndarray((P, 8), nl.uint32, buffer=nl.shared_hbm)
    rest = nl.ndarray((P, F), nl.float32, buffer=nl.shared_hbm)
    replaced_idx = nl.ndarray((P, 8), nl.uint32, buffer=nl.shared_hbm)
    t = nl.load(x)
    m = nisa.max8(src=t)
    nl.store(vals, m)
    nl.store(idx, nisa.nc_find_index8(data=t, vals=m))
    di = nl.ndarray((P, 8), nl.uint32)
    nl.store(rest, nisa.nc_match_replace8(data=t, vals=m, imm=-1.0, dst_idx=di))
    nl.store(replaced_idx, di)
    return vals, idx, rest, replaced_idx


def test_max8_find_index8_match_replace8():
    """The 8 largest per partition (descending), where they are, and the tile with them replaced by imm."""
    x = np.random.default_rng(1).permuted(np.tile(np.arange(40, dtype=np.float32), (16, 1)), axis=1)
    vals, idx, rest, ridx = top8_kernel(x)
    order = np.argsort(-x, axis=1)[:, :8]
    np.testing.assert_array_equal(vals, np.take_along_axis(x, order, 1))
    np.testing.assert_array_equal(idx, order)
    np.testing.assert_array_equal(ridx, order)
    want = x.copy()
    np.put_along_axis(want, order, -1.0, 1)
    np.testing.assert_array_equal(rest, want)


@nki.jit
def selections(pred, x, fill, lo, hi):
    P, F = x.shape
    sel = nl.ndarray((P, F), nl.float32, buffer=nl.shared_hbm)
    best = nl.ndarray((P, 1), nl.float32, buffer=nl.shared_hbm)
    ranged = nl.ndarray((P, F), nl.float32, buffer=nl.shared_hbm)
    ranged_best = nl.ndarray((P, 1), nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    d = nl.ndarray((P, F), nl.float32)
    r = nl.ndarray((P, 1), nl.float32)
    nisa.select_reduce(dst=d, predicate=nl.load(pred), on_true=t, on_false=nl.load(fill), reduce_res=r,
                       reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_op=nl.max)
    nl.store(sel, d)
    nl.store(best, r)
    b0, b1 = nl.load(lo), nl.load(hi)
    nisa.range_select(on_true_tile=t, comp_op0=np.greater_equal, comp_op1=np.less, bound0=b0, bound1=b1,
                      reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_op=np.max, range_start=0,
                      on_false_value=nl.fp32.min)
    rr = nl.ndarray((P, 1), nl.float32)
    out = nisa.range_select(on_true_tile=t, comp_op0=np.greater_equal, comp_op1=np.less, bound0=b0, bound1=b1,
                            reduce_cmd=nisa.reduce_cmd.reduce, reduce_res=rr, reduce_op=np.max, range_start=F,
                            on_false_value=nl.fp32.min)
    nl.store(ranged, out)
    nl.store(ranged_best, rr)
    return sel, best, ranged, ranged_best


def test_select_reduce_and_chained_range_select(rng):
    """select_reduce fills dst and its max; a second range_select (reduce) keeps the first one's maximum."""
    P, F = 32, 24
    x = rng.standard_normal((P, F), np.float32)
    pred = (rng.random((P, F)) < 0.5).astype(np.uint8)
    fill = rng.standard_normal((P, 1), np.float32)
    lo, hi = np.full((P, 1), 4, np.float32), np.full((P, 1), F + 10, np.float32)
    sel, best, ranged, ranged_best = selections(pred, x, fill, lo, hi)
    want = np.where(pred != 0, x, fill)
    np.testing.assert_array_equal(sel, want)
    np.testing.assert_array_equal(best[:, 0], want.max(1))
    i = np.arange(F)
    fmin = np.finfo(np.float32).min
    first = np.where((i >= 4) & (i < F + 10), x, fmin)
    second = np.where((i + F >= 4) & (i + F < F + 10), x, fmin)
    np.testing.assert_array_equal(ranged, second)
    np.testing.assert_array_equal(ranged_best[:, 0], np.maximum(first.max(1), second.max(1)))


@nki.jit
def segment_and_gather(ids, src, index):
    bounds = nl.ndarray((1, 2, ids.shape[1]), nl.float32, buffer=nl.shared_hbm)
    ix, iy, iz = nl.mgrid[0:1, 0:2, 0:ids.shape[1]]
    b = nl.ndarray((1, 2, ids.shape[1]), nl.float32)
    b[ix, iy, iz] = nisa.sequence_bounds(segment_ids=nl.load(ids))
    nl.store(bounds, b)
    P = src.shape[0]
    g = nisa.local_gather(nl.load(src), nl.load(index), 2, 20)
    gathered = nl.ndarray((P, 20, 2), src.dtype, buffer=nl.shared_hbm)
    nl.store(gathered, g)
    return bounds, gathered


def test_sequence_bounds_and_local_gather(rng):
    """Segment bounds as the beta call returns them; local_gather picks 2 elements per index for every
    partition of a GpSimd core, from that core's indices read partition by partition."""
    ids = np.array([[3, 3, 0, 5, 5, 5, 1, 0]], np.float32)
    src = rng.standard_normal((32, 30), np.float32)
    index = rng.integers(0, 28, (32, 2)).astype(np.uint16)
    bounds, gathered = segment_and_gather(ids, src, index)
    np.testing.assert_array_equal(bounds[0], [[0, 0, 8, 3, 3, 3, 6, 8], [2, 2, -1, 6, 6, 6, 7, -1]])
    for core in range(2):
        rows = slice(16 * core, 16 * core + 16)
        order = [index[rows][p, j] for j in range(2) for p in range(16)][:20]
        want = np.stack([src[rows][:, i:i + 2] for i in order], axis=1)
        np.testing.assert_array_equal(gathered[rows], want)


@nki.jit
def copies(pred, x, y):
    P, F = x.shape
    out = nl.ndarray((P, F), nl.float32, buffer=nl.shared_hbm)
    scanned = nl.ndarray((P, F), nl.float32, buffer=nl.shared_hbm)
    moved = nl.ndarray((P, F), nl.float32, buffer=nl.shared_hbm)
    d = nl.load(y)
    t = nl.load(x)
    nisa.tensor_copy_predicated(src=t, dst=d, predicate=nl.load(pred))
    nl.store(out, d)
    s = nl.ndarray((P, F), nl.float32)
    nisa.tensor_scalar_cumulative(src=t, dst=s, op0=nl.add, op1=nl.max, imm0=1.0)
    nl.store(scanned, s)
    m = nl.zeros((P, F), nl.float32)
    nisa.tensor_copy_dynamic_dst(dst=m[:, 0:F // 2], src=nisa.tensor_copy_dynamic_src(t[:, F // 2:F]))
    nl.store(moved, m)
    return out, scanned, moved


def test_predicated_cumulative_and_dynamic_copies(rng):
    """A bool predicate picks src over dst; the running max of x + 1; a half-tile moved by the dynamic copies."""
    x, y = rng.standard_normal((16, 10), np.float32), rng.standard_normal((16, 10), np.float32)
    pred = x > 0
    out, scanned, moved = copies(pred, x, y)
    np.testing.assert_array_equal(out, np.where(pred, x, y))
    np.testing.assert_array_equal(scanned, np.maximum.accumulate(x + 1, axis=1))
    np.testing.assert_array_equal(moved, np.c_[x[:, 5:], np.zeros((16, 5), np.float32)])


@nki.jit
def rmw(table, ids, rows):
    n, D = rows.shape
    out = nl.ndarray(table.shape, table.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(table))
    idx = nl.load(ids)
    r = nl.load(rows)
    iy = nl.arange(D)[None, :]
    nisa.dma_copy(dst=out[idx, iy], src=r, dst_rmw_op=np.add)
    nl.atomic_rmw(out[idx, iy], value=r, op=np.add)
    return out


def test_rmw_dma_and_atomic_rmw_with_repeated_rows(rng):
    """Both the rmw dma_copy and nl.atomic_rmw add every row, also into a table row named twice."""
    table = rng.standard_normal((12, 8), np.float32)
    ids = np.array([[3], [7], [3], [0]], np.int32)
    rows = rng.standard_normal((4, 8), np.float32)
    want = table.copy()
    np.add.at(want, ids[:, 0], 2 * rows)
    np.testing.assert_allclose(rmw(table, ids, rows), want, rtol=1e-6, atol=1e-6)
