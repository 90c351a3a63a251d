"""Current-API kernels for the instructions added last to `nki.isa`: read-modify-write DMAs, per-partition and
segment instructions, top-k, the cumulative scan and the generator state. numpy references are computed here."""
import inspect

import ml_dtypes
import numpy as np

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl

BF16 = ml_dtypes.bfloat16


def test_every_isa_function_runs_something():
    """No nki.isa function is a placeholder that refuses every call."""
    for name, fn in inspect.getmembers(nisa, inspect.isfunction):
        if fn.__module__ == nisa.__name__:
            assert "not supported" not in inspect.getsource(fn), name


@nki.jit
def scatter_add(table, ids, rows):
    """table[ids[i]] += rows[i], once with dma_copy(dst_rmw_op) and once more with dma_compute."""
    n, D = rows.shape
    idx, r = nl.load(ids), nl.load(rows)
    target = table.ap(pattern=[[D, n], [1, D]], vector_offset=idx, indirect_dim=0)
    nisa.dma_copy(target, r, dst_rmw_op=nl.add, dge_mode=nisa.dge_mode.swdge)
    nisa.dma_compute(target, [target, r], nl.add)
    return table


def test_scatter_add_by_rmw_dma(rng, trn):
    """Both read-modify-write DMAs add the rows into the named table rows (in place on the input)."""
    table = rng.standard_normal((64, 32), np.float32)
    ids = rng.permutation(64)[:16].reshape(16, 1).astype(np.int32)
    rows = rng.standard_normal((16, 32), np.float32)
    want = table.copy()
    want[ids[:, 0]] += 2 * rows
    np.testing.assert_allclose(scatter_add(table.copy(), ids, rows), want, rtol=1e-6, atol=1e-6)


@nki.jit
def segments_and_gathers(ids, data, picks):
    n = ids.shape[1]
    bounds = nl.ndarray((1, 2, n), nl.int32, buffer=nl.shared_hbm)
    b = nl.ndarray((1, 2, n), nl.int32)
    nisa.sequence_bounds(b, nl.load(ids))
    nl.store(bounds, b)
    gathered = nl.ndarray(picks.shape, data.dtype, buffer=nl.shared_hbm)
    g = nl.ndarray(picks.shape, data.dtype)
    nisa.nc_n_gather(g, nl.load(data), nl.load(picks))
    nl.store(gathered, g)
    nz = nl.ndarray((data.shape[0], data.shape[1] + 1), nl.int32, buffer=nl.shared_hbm)
    z = nl.ndarray((data.shape[0], data.shape[1] + 1), nl.int32)
    nisa.memset(z, 0)
    nisa.nonzero_with_count(z, nl.load(data), index_offset=100, padding_val=-1)
    nl.store(nz, z)
    return bounds, gathered, nz


def test_sequence_bounds_gather_and_nonzero(rng, trn):
    """Segment bounds of packed sequences, a per-partition gather and the non-zero list of each GpSimd core."""
    ids = np.array([[1, 1, 1, 2, 2, 3, 0, 0]], np.int32)
    data = np.where(rng.random((32, 20)) < 0.3, rng.integers(1, 9, (32, 20)), 0).astype(np.int32)
    picks = rng.integers(0, 20, (32, 7)).astype(np.uint32)
    bounds, gathered, nz = segments_and_gathers(ids, data, picks)
    np.testing.assert_array_equal(bounds[0], [[0, 0, 0, 3, 3, 5, 8, 8], [3, 3, 3, 5, 5, 6, -1, -1]])
    np.testing.assert_array_equal(gathered, np.take_along_axis(data, picks.astype(np.int64), 1))
    for p in (0, 16):
        hits = np.flatnonzero(data[p]) + 100
        np.testing.assert_array_equal(nz[p], np.r_[hits, [-1] * (20 - hits.size), hits.size])
    assert (nz[1:16] == 0).all()


@nki.jit
def top5(x):
    P = x.shape[0]
    vals = nl.ndarray((P, 5), nl.bfloat16, buffer=nl.shared_hbm)
    idx = nl.ndarray((P, 5), nl.uint32, buffer=nl.shared_hbm)
    v, i = nl.ndarray((P, 5), nl.bfloat16), nl.ndarray((P, 5), nl.uint32)
    nisa.topk(v, i, nl.load(x), n=40)
    nl.store(vals, v)
    nl.store(idx, i)
    return vals, idx


def test_topk_of_a_snake(rng, trn):
    """topk reads 40 elements snaking down 16 partitions and returns the 5 largest ascending with positions."""
    x = rng.standard_normal((16, 3)).astype(BF16)
    vals, idx = top5(x)
    snake = x.astype(np.float32).T.reshape(-1)[:40]
    order = np.argsort(snake)[-5:]
    np.testing.assert_array_equal(idx[0], order)
    np.testing.assert_array_equal(vals[0].astype(np.float32), snake[order])


@nki.jit
def running_sums(x, state_out):
    P, F = x.shape
    out = nl.ndarray((P, 2 * F), nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    y = nl.ndarray((P, 2 * F), nl.float32)
    nisa.tensor_scalar_cumulative(y[:, 0:F], t, nl.multiply, nl.add, imm0=0.5, imm1=10.0,
                                  reduce_cmd=nisa.reduce_cmd.load_reduce)
    nisa.tensor_scalar_cumulative(y[:, F:2 * F], t, nl.multiply, nl.add, imm0=0.5, reduce_cmd=nisa.reduce_cmd.reduce)
    nl.store(out, y)
    st = nl.ndarray((P, 6), nl.uint32)
    nisa.rand_get_state(st)
    a, b = nl.ndarray((P, F), nl.float32), nl.ndarray((P, F), nl.float32)
    nisa.rand2(a, 0.0, 1.0)
    nisa.rand_set_state(st)
    nisa.rand2(b, 0.0, 1.0)
    nisa.tensor_tensor(a, a, b, nl.subtract)
    nl.store(state_out, a)
    return out


def test_cumulative_scan_continues_and_rng_state_resumes(rng, trn):
    """A second reduce_cmd=reduce scan carries on from the first; saving and restoring the generator state
    makes the next draws repeat (their difference is zero)."""
    x = rng.standard_normal((8, 6), np.float32)
    diff = np.ones((8, 6), np.float32)
    got = running_sums(x, diff)
    first = 10 + np.cumsum(0.5 * x, axis=1)
    np.testing.assert_allclose(got[:, :6], first, rtol=1e-5)
    np.testing.assert_allclose(got[:, 6:], first[:, -1:] + np.cumsum(0.5 * x, axis=1), rtol=1e-5)
    np.testing.assert_array_equal(diff, 0)
