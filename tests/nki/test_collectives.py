"""nki.collectives across the two ranks (cores) of an LNC 2 launch: values really move between the cores;
references computed here with numpy from each rank's input."""
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.collectives as cc
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core.errors import KernelError, OutOfBoundsError, ShapeError

G = cc.ReplicaGroup([[0, 1]])


def _per_rank_out(shape, dtype):
    return nl.ndarray((2,) + tuple(shape), dtype, buffer=nl.shared_hbm)


@nki.jit
def reduce_sbuf(x):
    """Each rank loads its slice x[rank]; all_reduce (add and max) on SBUF tiles."""
    r = cc.rank_id()
    out = _per_rank_out(x.shape[1:], x.dtype)
    out_max = _per_rank_out(x.shape[1:], x.dtype)
    t = nl.load(x[r])
    s = nl.ndarray(t.shape, t.dtype)
    m = nl.ndarray(t.shape, t.dtype)
    cc.all_reduce([t], [s], G, nl.add)
    cc.all_reduce(srcs=[t], dsts=[m], replica_group=G, op=nl.maximum)
    nl.store(out[r], s)
    nl.store(out_max[r], m)
    return out, out_max


def test_all_reduce_on_sbuf(rng, trn):
    x = rng.standard_normal((2, 64, 48)).astype(np.float32)
    s, m = reduce_sbuf[2](x)
    for r in range(2):
        np.testing.assert_array_equal(s[r], x[0] + x[1])
        np.testing.assert_array_equal(m[r], np.maximum(x[0], x[1]))


@nki.jit
def hbm_collectives(x):
    """all_gather, reduce_scatter and all_to_all on HBM tensors (dim 0), and a one-way permute 0 -> 1."""
    r = cc.rank_id()
    n, f = x.shape[1], x.shape[2]
    gathered = nl.ndarray((2 * n, f), x.dtype, buffer=nl.hbm)
    scattered = nl.ndarray((n // 2, f), x.dtype, buffer=nl.hbm)
    swapped = nl.ndarray((n, f), x.dtype, buffer=nl.hbm)
    permuted = nl.ndarray((n, f), x.dtype, buffer=nl.hbm)
    cc.all_gather([x[r]], [gathered], G, collective_dim=0)
    cc.reduce_scatter([x[r]], [scattered], G, collective_dim=0, op=nl.add)
    cc.all_to_all([x[r]], [swapped], G, collective_dim=0)
    nisa.dma_copy(permuted, x[r])  # rank 0 is no target: it keeps its own values
    cc.collective_permute([x[r]], [permuted], source_target_pairs=[(0, 1)])
    outs = [_per_rank_out(v.shape, x.dtype) for v in (gathered, scattered, swapped, permuted)]
    for o, v in zip(outs, (gathered, scattered, swapped, permuted)):
        nisa.dma_copy(o[r], v)
    return outs


def test_hbm_gather_scatter_all_to_all_permute(rng, trn):
    x = rng.standard_normal((2, 256, 16)).astype(np.float32)
    g, s, a, p = hbm_collectives[2](x)
    total = x[0] + x[1]
    for r in range(2):
        np.testing.assert_array_equal(g[r], np.concatenate([x[0], x[1]]))
        np.testing.assert_array_equal(s[r], total[r * 128:(r + 1) * 128])
        np.testing.assert_array_equal(a[r], np.concatenate([x[0][r * 128:(r + 1) * 128], x[1][r * 128:(r + 1) * 128]]))
    np.testing.assert_array_equal(p[0], x[0])
    np.testing.assert_array_equal(p[1], x[0])


def test_one_rank_launch_and_bad_groups(rng, trn):
    """On one core the rank-list [0] copies; a rank-list naming a rank outside the launch is refused."""
    x = rng.standard_normal((1, 8, 8)).astype(np.float32)

    @nki.jit
    def solo(a):
        out = _per_rank_out(a.shape[1:], a.dtype)[0]
        t = nl.load(a[0])
        s = nl.ndarray(t.shape, t.dtype)
        cc.all_reduce([t], [s], cc.ReplicaGroup([[0]]), nl.add)
        nl.store(out, s)
        return out
    np.testing.assert_array_equal(solo(x), x[0])

    @nki.jit
    def bad(a):
        t = nl.load(a[0])
        cc.all_reduce([t], [nl.ndarray(t.shape, t.dtype)], G, nl.add)
    with pytest.raises(KernelError, match=r"ranks \[1\] are not in this launch of 1 rank"):
        bad(x)


def test_replica_group_from_partition_op():
    op = cc.rg_partition_op
    assert cc.ReplicaGroup.from_partition_op(8, op.bitwise_and, 0).groups == [list(range(8))]
    assert cc.ReplicaGroup.from_partition_op(8, op.div, 4).groups == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert cc.ReplicaGroup.from_partition_op(8, op.mod, 4).groups == [[0, 4], [1, 5], [2, 6], [3, 7]]


@nki.jit
def ring(x):
    """One ring step with and without a reduction, and the rank whose data each step holds."""
    r = cc.rank_id()
    n, f = x.shape[1], x.shape[2]
    got = nl.ndarray((n, f), x.dtype, buffer=nl.hbm)
    red = nl.ndarray((n, f), x.dtype, buffer=nl.hbm)
    cc.collective_permute_implicit([[x[r]]], [[got]], G)
    cc.collective_permute_implicit_reduce([[x[r]]], [[got]], [[red]], G, nl.add)
    outs = [_per_rank_out((n, f), x.dtype) for _ in range(2)]
    nisa.dma_copy(outs[0][r], got)
    nisa.dma_copy(outs[1][r], red)
    ids = [cc.collective_permute_implicit_current_processing_rank_id(i, G).value for i in range(3)]
    assert ids == [r, 1 - r, r]
    return outs


def test_ring_permutes(rng, trn):
    x = rng.standard_normal((2, 128, 8)).astype(np.float32)
    got, red = ring[2](x)
    np.testing.assert_array_equal(got[0], x[1])
    np.testing.assert_array_equal(got[1], x[0])
    np.testing.assert_array_equal(red[0], x[1] + x[0])  # rank 1 sent x1 + (x0 it had received)
    np.testing.assert_array_equal(red[1], x[0] + x[1])


# -- variable-size collectives: flat element buffers sized by a uint32 metadata tensor ---------------------------
def _gather_v_reference(x, md, slot):
    """Each rank's dst: sender s's chunk x[s][displ:displ+count] (column 0 of its rows 0/1) in slot s."""
    out = np.full((2, 2 * slot), -1.0, np.float32)
    for s in range(2):
        c, d = md[s][0, 0], md[s][1, 0]
        for r in range(2):
            out[r, s * slot:s * slot + c] = x[s][d:d + c]
    return out


def _to_all_v_reference(x, md, slot, rdispls=False):
    """Rank j's dst: rank i's chunk for j (row 0/1 column j of i's metadata) in slot i or at j's recv_displs[i]."""
    out = np.full((2, 2 * slot), -1.0, np.float32)
    for i in range(2):
        for j in range(2):
            c, d = md[i][0, j], md[i][1, j]
            at = md[j][3, i] if rdispls else i * slot
            out[j, at:at + c] = x[i][d:d + c]
    return out


def _v_kernel(kind, slot, split=False, rdispls=False, sbuf_metadata=False):
    @nki.jit
    def kernel(x, md):
        r = cc.rank_id()
        dst = nl.ndarray((2 * slot,), x.dtype, buffer=nl.hbm)
        nisa.dma_copy(dst, x[r][0:2 * slot])  # filled, to see what the collective leaves alone
        nisa.memset(dst_fill := nl.ndarray((1, 2 * slot), x.dtype, buffer=nl.sbuf), -1.0)
        nisa.dma_copy(dst.reshape((1, 2 * slot)), dst_fill)
        if sbuf_metadata:
            meta = nl.ndarray((1,) + md.shape[1:], md.dtype, buffer=nl.sbuf)
            nisa.dma_copy(meta, md[r:r + 1])
        else:
            meta = nl.ndarray(md.shape[1:], md.dtype, buffer=nl.hbm)
            nisa.dma_copy(meta, md[r])
        args = ([x[r]], [dst], G, meta)
        if split:
            prep = getattr(cc, f"{kind}_prepare")(*args, has_rdispls=rdispls)
            getattr(cc, f"{kind}_trigger")(prep)
        else:
            getattr(cc, kind)(*args, has_rdispls=rdispls)
        out = _per_rank_out((2 * slot,), x.dtype)
        counts = _per_rank_out(md.shape[1:], md.dtype)
        nisa.dma_copy(out[r], dst)
        nisa.dma_copy(counts[r].reshape((1, meta.size)), meta.reshape((1, meta.size)))
        return out, counts
    return kernel


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("sbuf_metadata", [False, True])
def test_all_gather_v(rng, trn, split, sbuf_metadata):
    x = rng.standard_normal((2, 64)).astype(np.float32)
    md = np.zeros((2, 3, 2), np.uint32)
    md[0, :2] = [[5, 99], [3, 99]]  # rank 0 broadcasts x0[3:8]; the second column is never read
    md[1, :2] = [[9, 0], [20, 0]]  # rank 1 broadcasts x1[20:29]
    out, counts = _v_kernel("all_gather_v", 12, split, sbuf_metadata=sbuf_metadata)[2](x, md)
    np.testing.assert_array_equal(out, _gather_v_reference(x, md, 12))
    for r in range(2):  # row 2: what arrived from each rank
        np.testing.assert_array_equal(counts[r][2].reshape(-1), [5, 9])


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("rdispls", [False, True])
def test_all_to_all_v(rng, trn, split, rdispls):
    x = rng.standard_normal((2, 64)).astype(np.float32)
    md = np.zeros((2, 4 if rdispls else 3, 2), np.uint32)
    md[0, :2] = [[4, 7], [0, 10]]  # rank 0: x0[0:4] to itself, x0[10:17] to rank 1
    md[1, :2] = [[2, 0], [30, 0]]  # rank 1: x1[30:32] to rank 0, nothing to itself
    if rdispls:
        md[0, 3] = [1, 13]  # where rank 0 puts what rank 0 and rank 1 send it
        md[1, 3] = [5, 0]
    out, counts = _v_kernel("all_to_all_v", 10, split, rdispls)[2](x, md)
    np.testing.assert_array_equal(out, _to_all_v_reference(x, md, 10, rdispls))
    np.testing.assert_array_equal(counts[0][2].reshape(-1), [4, 2])
    np.testing.assert_array_equal(counts[1][2].reshape(-1), [7, 0])


def test_variable_size_collectives_refuse_what_the_reference_refuses(rng, trn):
    x = rng.standard_normal((2, 64)).astype(np.float32)
    md = np.zeros((2, 3, 2), np.uint32)
    md[:, 0, 0] = 40  # a chunk of 40 into slots of 12
    with pytest.raises(OutOfBoundsError, match="40 elements from rank [01] do not fit"):
        _v_kernel("all_gather_v", 12)[2](x, md)
    md[:, 0, 0], md[:, 1, 0] = 8, 60  # a chunk running past src
    with pytest.raises(OutOfBoundsError, match="runs past src"):
        _v_kernel("all_gather_v", 12)[2](x, md)
    with pytest.raises(ShapeError, match=r"metadata_tensor \[2, 2\] must be \[3, 2\]"):
        _v_kernel("all_to_all_v", 12)[2](x, np.zeros((2, 2, 2), np.uint32))
    with pytest.raises(KernelError, match="has_rdispls=True is not supported for all_gather_v"):
        _v_kernel("all_gather_v", 12, rdispls=True)[2](x, np.zeros((2, 4, 2), np.uint32))


def test_prepare_and_trigger_are_nki_07_names(rng, trn, monkeypatch):
    monkeypatch.setenv("TRNSIM_NKI_VERSION", "0.6")
    x = rng.standard_normal((2, 64)).astype(np.float32)
    with pytest.raises(KernelError, match="all_gather_v_prepare is new in NKI 0.7"):
        _v_kernel("all_gather_v", 12, split=True)[2](x, np.zeros((2, 3, 2), np.uint32))
    out, _ = _v_kernel("all_gather_v", 12)[2](x, np.zeros((2, 3, 2), np.uint32))  # the plain form is 0.6's too
    np.testing.assert_array_equal(out, np.full((2, 24), -1.0, np.float32))


def test_a_timing_only_run_cannot_size_a_variable_collective(rng, trn):
    """The counts are values in memory, which a timing-only run does not compute: refused by name."""
    from trnsim.core.errors import ValueUnknownError
    x = rng.standard_normal((2, 64)).astype(np.float32)
    with pytest.raises(ValueUnknownError, match="decides a variable-size collective's element count"):
        _v_kernel("all_to_all_v", 12)[2].trace(x, np.zeros((2, 3, 2), np.uint32), values=False)


def test_each_prepare_has_exactly_one_trigger(rng, trn):
    x = rng.standard_normal((2, 64)).astype(np.float32)
    md = np.zeros((2, 3, 2), np.uint32)

    def kernel(triggers, first=None):
        @nki.jit
        def k(a, m):
            r = cc.rank_id()
            meta = nl.ndarray(m.shape[1:], m.dtype, buffer=nl.hbm)
            nisa.dma_copy(meta, m[r])
            d = nl.ndarray((24,), a.dtype, buffer=nl.hbm)
            if first:
                first([a[r]], [d], G, meta)
            p = cc.all_gather_v_prepare([a[r]], [d], G, meta)  # the prepare's line
            for _ in range(triggers):
                cc.all_gather_v_trigger(p)
        return k
    with pytest.raises(KernelError, match="all_to_all_v_prepare before it has not been triggered; prepares share "
                                          "one slot"):
        kernel(1, cc.all_to_all_v_prepare)[2](x, md)
    line = next(i for i, t in enumerate(open(__file__).read().splitlines(), 1) if "# the prepare's line" in t)
    with pytest.raises(KernelError, match=rf"all_gather_v_prepare was never triggered.* at .*_collectives.py:{line}$"):
        kernel(0)[2](x, md)
    with pytest.raises(KernelError, match="its prepare was already triggered"):
        kernel(2)[2](x, md)
    kernel(1)[2](x, md)
