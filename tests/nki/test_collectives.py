"""nki.collectives across the two ranks (cores) of an LNC 2 launch: values really move between the cores;
references computed here with numpy from each rank's input."""
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.collectives as cc
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core.errors import KernelError

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
