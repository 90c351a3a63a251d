"""Collectives with values: every operation and algorithm against numpy, and bf16 rounding per ring hop."""
import ml_dtypes
import numpy as np
import pytest

import trnsim.fabric as tf
from trnsim.errors import UnknownNameError

NP_REDUCE = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod}

# (system, nodes, ranks, algorithm): every topology and every algorithm that runs on it
CASES = [
    ("trn1.32xlarge", 1, 2, None), ("trn1.32xlarge", 1, 8, "ring"), ("trn1.32xlarge", 1, 8, "rdh"),
    ("trn1.32xlarge", 1, 8, "mesh"), ("trn1.32xlarge", 1, 8, "kangaring"), ("trn1.32xlarge", 1, 32, "torus"),
    ("trn1.32xlarge", 2, 64, "ring"), ("trn1.32xlarge", 2, 64, "hierarchical"),
    ("trn2.48xlarge", 1, 16, "kangaring"), ("trn2.48xlarge", 1, 64, "torus"), ("trn2.48xlarge", 1, 8, "oneshot"),
    ("trn2.48xlarge", 2, 128, None), ("Trn2 UltraServer", 1, 256, "torus"), ("Trn2 UltraServer", 1, 32, None),
    ("Trn3 Gen1 UltraServer", 1, 16, "ring"), ("Trn3 Gen1 UltraServer", 1, 12, None),
    ("Trn3 Gen2 UltraServer", 1, 24, "oneshot"), ("Trn3 Gen2 UltraServer", 2, 16, "mesh"),
]


def _ints(n, rows, seed=0, dtype=np.int32):
    rng = np.random.default_rng(seed)
    return [rng.integers(-3, 4, size=(rows, 3)).astype(dtype) for _ in range(n)]


@pytest.mark.parametrize("system,nodes,n,alg", CASES)
def test_reductions_match_numpy_exactly_for_integers(system, nodes, n, alg):
    """all_reduce, reduce_scatter and all_gather equal numpy on int32 (exact) for this topology and algorithm."""
    c = tf.cluster(system, nodes=nodes)
    ranks = None if nodes == 1 else list(range(n // 2)) + list(range(c.ranks_per_node, c.ranks_per_node + n // 2))
    xs = _ints(n, 2 * n)
    total = np.sum(np.stack(xs), axis=0)
    out = tf.all_reduce(xs, cluster=c, ranks=ranks, algorithm=alg)
    assert all(np.array_equal(o, total) for o in out)
    if alg != "oneshot":
        rs = tf.reduce_scatter(xs, cluster=c, ranks=ranks, algorithm=alg)
        assert all(np.array_equal(o, total[2 * i:2 * i + 2]) for i, o in enumerate(rs))
        ag = tf.all_gather([x[:1] for x in xs], cluster=c, ranks=ranks, algorithm=alg)
        assert all(np.array_equal(o, np.concatenate([x[:1] for x in xs])) for o in ag)


@pytest.mark.parametrize("op", ["sum", "max", "min", "prod"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.float32])
def test_every_reduction_and_dtype(op, dtype):
    """sum, max, min and prod over small integers are exact in int8, uint8, int32 and float32."""
    xs = [(x % 2 + 1).astype(dtype) for x in _ints(4, 9, seed=1)]  # 1s and 2s over 4 ranks: products fit int8
    ref = NP_REDUCE[op](np.stack(xs), axis=0).astype(dtype)
    out = tf.all_reduce(xs, op, cluster=tf.cluster("trn1.32xlarge"), algorithm="ring")
    assert all(o.dtype == dtype and np.array_equal(o, ref) for o in out)


def _ring_allreduce_emulation(xs, order, channels):
    """Ring all-reduce written out step by step: blocks split in channel parts, one ring per channel."""
    n = len(xs)
    B = -(-xs[0].size // n)
    L = -(-B // channels)
    buf = np.zeros((n, n, channels, L), dtype=np.float32)  # rank, block, part, element
    for r, x in enumerate(xs):
        padded = np.zeros(n * B, np.float32)
        padded[:x.size] = x.astype(np.float32)
        blocks = np.zeros((n, channels * L), np.float32)
        blocks[:, :B] = padded.reshape(n, B)
        buf[r] = blocks.reshape(n, channels, L)
    for c in range(channels):
        ring = order if c % 2 == 0 else order[::-1]
        for s in range(n - 1):  # reduce-scatter: each hop adds and rounds to bf16
            sent = [(ring[(p + 1) % n], ring[(p - s - 1) % n], buf[ring[p], ring[(p - s - 1) % n], c].copy())
                    for p in range(n)]
            for dst, blk, v in sent:
                buf[dst, blk, c] = (buf[dst, blk, c] + v).astype(ml_dtypes.bfloat16).astype(np.float32)
        for s in range(n - 1):  # all-gather: copies
            sent = [(ring[(p + 1) % n], ring[(p - s) % n], buf[ring[p], ring[(p - s) % n], c].copy())
                    for p in range(n)]
            for dst, blk, v in sent:
                buf[dst, blk, c] = v
    return [buf[r].reshape(n, channels * L)[:, :B].ravel()[:xs[0].size] for r in range(n)]


def test_bf16_ring_all_reduce_rounds_at_every_hop():
    """A bf16 ring all-reduce equals a step-by-step numpy emulation of that ring, bit for bit."""
    rng = np.random.default_rng(7)
    n = 4  # ranks 0..3 on chips 0 and 1 of a trn1.32xlarge: the ring visits them in rank order
    xs = [rng.standard_normal(1000).astype(ml_dtypes.bfloat16) for _ in range(n)]
    out = tf.all_reduce(xs, cluster=tf.cluster("trn1.32xlarge"), algorithm="ring")
    ref = _ring_allreduce_emulation(xs, [0, 1, 2, 3], channels=2)
    for o, e in zip(out, ref):
        assert o.dtype == ml_dtypes.bfloat16
        assert np.array_equal(o.view(np.uint16), e.astype(ml_dtypes.bfloat16).view(np.uint16))
    once = np.sum(np.stack(xs).astype(np.float32), axis=0).astype(ml_dtypes.bfloat16)
    assert not np.array_equal(out[0].view(np.uint16), once.view(np.uint16))  # one rounding at the end differs


def test_all_to_all_and_all_to_allv_move_blocks():
    """all_to_all sends block i of rank j to rank i; all_to_allv does it with ragged pieces."""
    n = 4
    xs = [np.arange(8, dtype=np.int16) + 100 * j for j in range(n)]
    out = tf.all_to_all(xs, cluster=tf.cluster("trn2.48xlarge"))
    for i in range(n):
        assert np.array_equal(out[i], np.concatenate([xs[j][2 * i:2 * i + 2] for j in range(n)]))
    pieces = [[np.full(i + j, 10 * j + i, np.float32) for i in range(n)] for j in range(n)]
    v = tf.all_to_allv(pieces, cluster=tf.cluster("trn2.48xlarge"))
    assert all(np.array_equal(v[i][j], pieces[j][i]) for i in range(n) for j in range(n))
    assert v.time_ns > 0


def test_permute_send_recv_and_broadcast():
    """permute follows its pairs (zeros where nothing arrives), send_recv copies, broadcast copies the root."""
    xs = [np.full(5, r, np.float32) for r in range(4)]
    c = tf.cluster("trn1.32xlarge")
    p = tf.permute(xs, cluster=c)
    assert [int(o[0]) for o in p] == [3, 0, 1, 2]
    p = tf.permute(xs, [(0, 2)], cluster=c)
    assert [int(o[0]) for o in p] == [0, 0, 0, 0] and np.array_equal(p[2], xs[0])
    s = tf.send_recv(np.arange(3, dtype=np.float32), 0, 3, cluster=c)
    assert np.array_equal(s[3], np.arange(3.0))
    b = tf.broadcast(xs, root=2, cluster=c)
    assert all(np.array_equal(o, xs[2]) for o in b) and b.time_ns > 0


def test_bad_input_gets_clear_errors():
    """Disagreeing shapes, an unknown reduction or dtype, too many ranks and unsplittable arrays are refused."""
    c = tf.cluster("trn2.48xlarge")
    with pytest.raises(tf.CollectiveShapeError, match=r"rank 1 has shape \(3,\), rank 0 has \(4,\).*test_values\.py"):
        tf.all_reduce([np.zeros(4, np.float32), np.zeros(3, np.float32)], cluster=c)
    with pytest.raises(UnknownNameError, match="reduction 'avg'"):
        tf.all_reduce([np.zeros(4, np.float32)] * 2, "avg", cluster=c)
    with pytest.raises(UnknownNameError, match="collective dtype 'complex64'"):
        tf.all_reduce([np.zeros(4, np.complex64)] * 2, cluster=c)
    with pytest.raises(tf.RankError, match="65 ranks do not fit trn2.48xlarge: it holds 64"):
        tf.all_reduce([np.zeros(4, np.float32)] * 65, cluster=c)
    with pytest.raises(tf.CollectiveShapeError, match="must split into 3 equal blocks"):
        tf.reduce_scatter([np.zeros(4, np.float32)] * 3, cluster=c)
    with pytest.raises(tf.AlgorithmError, match="power-of-two"):
        tf.reduce_scatter([np.zeros(6, np.float32)] * 6, cluster=c, algorithm="rdh")


def test_stochastic_rounding_is_seeded_and_keeps_small_addends():
    """With rounding='stochastic' a seeded run repeats, and halves added to 256 in bf16 survive on
    average where round-to-nearest-even drops them at each hop."""
    xs = [np.full(4000, 256.0 if r == 0 else 0.5, np.float32).astype(ml_dtypes.bfloat16) for r in range(8)]
    c = tf.cluster("trn1.32xlarge")
    a = tf.all_reduce(xs, cluster=c, algorithm="ring", rounding="stochastic", rng=5)[0]
    b = tf.all_reduce(xs, cluster=c, algorithm="ring", rounding="stochastic", rng=5)[0]
    rne = tf.all_reduce(xs, cluster=c, algorithm="ring")[0]
    assert np.array_equal(a.view(np.uint16), b.view(np.uint16))
    exact = 256 + 7 * 0.5
    assert abs(a.astype(np.float64).mean() - exact) < 0.25 < abs(rne.astype(np.float64).mean() - exact)


def test_devices_hold_their_ranks():
    """Device d of a trn2 cluster at LNC 2 is a Trainium2 holding ranks 4d..4d+3 and its HBM."""
    c = tf.cluster("trn2.48xlarge", nodes=2)
    d = c.device(17)
    assert (d.node, list(d.ranks), d.spec.name) == (1, [68, 69, 70, 71], "Trainium2")
    assert d.hbm_bytes == 96 * 2**30
    assert all(c.place(r).chip == 17 for r in d.ranks)


@pytest.mark.parametrize("n", [3, 6, 12])
def test_rdh_all_reduce_folds_groups_that_are_not_powers_of_two(n):
    """RDH all-reduce on 3, 6 and 12 ranks (extra ranks folded in, uneven halves) equals numpy."""
    xs = _ints(n, 2 * n + 1, seed=n)
    out = tf.all_reduce(xs, cluster=tf.cluster("trn2.48xlarge"), algorithm="rdh")
    assert all(np.array_equal(o, np.sum(np.stack(xs), axis=0)) for o in out)
