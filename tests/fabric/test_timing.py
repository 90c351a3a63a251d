"""Collective time: calibration to the published nccom-test tables, the runtime's choices, and the models."""
import numpy as np
import pytest

import trnsim.fabric as tf
from trnsim import specs
from trnsim.specs import fabric as fs

KiB, MiB, GiB = 2**10, 2**20, 2**30
# reference/multichip-and-training.md 2.6, all-reduce fp32: (size, time us, busbw in 2^30 B/s)
TABLE_A = [(1 * KiB, 58, 0.02), (64 * KiB, 58, 1.05), (1 * MiB, 68, 14.36), (4 * MiB, 107, 36.51),
           (16 * MiB, 332, 47.06), (64 * MiB, 1214, 51.48), (256 * MiB, 4750, 52.63), (1 * GiB, 18930, 52.83)]
TABLE_E = [(8, 520, 0.0), (1 * KiB, 840, 0.0), (64 * KiB, 1315, 0.09), (1 * MiB, 1328, 1.45), (8 * MiB, 1419, 10.84),
           (16 * MiB, 2138, 14.39), (32 * MiB, 2711, 22.69), (64 * MiB, 3963, 31.05), (128 * MiB, 6279, 39.19),
           (256 * MiB, 11954, 41.17), (512 * MiB, 21803, 45.15), (1 * GiB, 41806, 47.09)]


def _busbw(op, size, n, t_ns):
    return size / (t_ns * 1e-9) / GiB * tf.bus_factor(op, n)


@pytest.mark.parametrize("table,system,nodes,n", [(TABLE_A, "trn1.32xlarge", 1, 2), (TABLE_E, "trn1.32xlarge", 2, 64)])
def test_all_reduce_sweeps_match_the_published_tables(table, system, nodes, n):
    """Simulated busbw is within 20% of table A / E from 16 MiB up and within 2x of the time below."""
    c = tf.cluster(system, nodes=nodes)
    for size, t_us, busbw in table:
        t, _, _ = tf.collective_time("all_reduce", size, n, c)
        if size >= 16 * MiB:
            assert abs(_busbw("all_reduce", size, n, t) / busbw - 1) < 0.2, (size, t)
        else:
            assert 0.5 < t / 1e3 / t_us < 2, (size, t)


def test_published_tables_are_in_gib_per_second():
    """Table A and E's busbw follow from size/time only with 2^30-byte GB, the unit the CLI prints."""
    for size, t_us, busbw in TABLE_A[-3:]:
        assert abs(_busbw("all_reduce", size, 2, t_us * 1e3) - busbw) < 0.01
    size, t_us, busbw = TABLE_E[-1]
    assert abs(_busbw("all_reduce", size, 64, t_us * 1e3) - busbw) < 0.01


def test_table_c_all_gather_on_two_trn2_chips():
    """8-rank all-gather (table C, newer runtime): 10, 11.31 and 14.83 us within 20%."""
    c = tf.cluster("trn2.48xlarge")
    for size, t_us in ((1 * KiB, 10.0), (64 * KiB, 11.31), (512 * KiB, 14.83)):
        t, alg, _ = tf.collective_time("all_gather", size, 8, c)
        assert alg == "mesh" and abs(t / 1e3 / t_us - 1) < 0.2


def test_two_ranks_on_one_chip_are_bound_by_hbm():
    """2 ranks on one Trainium: floor + 2 hops + 7 HBM passes of the buffer at the fitted HBM share."""
    k = fs.chip_constants("trainium")
    hbm = specs.chip("Trainium").hbm_bandwidth * k.hbm_efficiency
    size = 256 * MiB
    expect = k.launch_floor + 2 * k.chip_hop_latency + 7 * size / hbm * 1e9  # RS: 1+2x2 passes, AG: 2
    t, alg, steps = tf.collective_time("all_reduce", size, 2, tf.cluster("trn1.32xlarge"))
    assert (alg, steps) == ("ring", 2) and t == pytest.approx(expect, rel=1e-9)


def test_runtime_choices_by_size_and_topology():
    """Trn2: mesh only under 1 MB, RDH only under 56 MB, KangaRing at every size, the fastest of them
    run, KangaRing + RDH across nodes; Trn1 2 nodes: hierarchical rings then the flat ring; Trn3:
    one-shot, then mesh."""
    trn2 = tf.cluster("trn2.48xlarge")
    g = tf.runtime.group_of(trn2, None)
    assert tf.runtime.candidates("all_reduce", 4 * KiB, g) == [("mesh", None), ("rdh", None), ("kangaring", None)]
    assert tf.runtime.candidates("all_reduce", 8 * MiB, g) == [("rdh", None), ("kangaring", None)]
    assert tf.runtime.candidates("all_reduce", 64 * MiB, g) == [("kangaring", None)]
    for size in (4 * KiB, 8 * MiB, 64 * MiB):
        fastest = min(tf.collective_time("all_reduce", size, None, trn2, a)[0]
                      for a, _ in tf.runtime.candidates("all_reduce", size, g))
        assert tf.collective_time("all_reduce", size, None, trn2)[0] == fastest
    assert tf.choose("all_reduce", 4 * KiB, g) == "mesh" and tf.choose("all_reduce", 64 * MiB, g) == "kangaring"
    two = tf.cluster("trn1.32xlarge", nodes=2)
    assert [tf.collective_time("all_reduce", s, None, two)[1] for s in (1 * KiB, 1 * GiB)] == ["hier(ring+ring)", "ring"]
    big = tf.cluster("trn2.48xlarge", nodes=4)
    assert tf.collective_time("all_reduce", 256 * MiB, None, big)[1] == "hier(kangaring+rdh)"
    assert tf.collective_time("all_reduce", 64 * MiB, None, tf.cluster("Trn3 Gen2 UltraServer"))[1] == "mesh"
    assert tf.collective_time("all_reduce", 64, None, tf.cluster("Trn3 Gen2 UltraServer"))[1] == "oneshot"


def test_simulated_max_min_rounds_of_equal_flows_end_at_the_bound():
    """Simulating max-min fair sharing round by round ends exactly at the busiest-resource bound
    when a round's flows are equal in size (the flow model's shortcut), for every algorithm."""
    from trnsim.fabric import runtime, timing

    for system in ("trn2.48xlarge", "Trn3 Gen1 UltraServer"):
        g = runtime.group_of(tf.cluster(system), 32)
        for alg in ("ring", "mesh", "rdh", "kangaring"):
            for ph in runtime.schedule("all_reduce", alg, g).phases:
                lat, bound = timing._alpha_beta(g, ph, False)
                assert timing._flow(g, ph, simulate=True) == (lat, pytest.approx(bound, rel=1e-6)), (system, alg)


def test_ragged_all_to_allv_is_simulated_and_never_beats_the_bound():
    """A ragged all_to_allv (one big piece among small ones) is simulated flow by flow, and max-min
    sharing never finishes before the busiest-resource bound."""
    c = tf.cluster("trn2.48xlarge")
    n = 16
    pieces = [[np.zeros(2**20 if (j, i) == (0, 5) else 2**12, np.float32) for i in range(n)] for j in range(n)]
    ab = tf.all_to_allv(pieces, cluster=c).time_ns
    flow = tf.all_to_allv(pieces, cluster=c, model="flow").time_ns
    assert flow >= ab


def test_time_grows_with_size_and_bus_factors_follow_nccom_test():
    """Bigger messages take longer on every system; bus factors are nccom-test's."""
    for name in ("trn1.32xlarge", "trn2.48xlarge", "Trn2 UltraServer", "Trn3 Gen1 UltraServer", "Trn3 Gen2 UltraServer"):
        c = tf.cluster(name)
        times = [tf.collective_time("all_reduce", s, None, c, "ring")[0] for s in (MiB, 16 * MiB, 256 * MiB)]
        assert times == sorted(times) and times[0] < times[-1]
    assert tf.bus_factor("all_reduce", 64) == 2 * 63 / 64 and tf.bus_factor("all_gather", 8) == 7 / 8
    assert tf.bus_factor("permute", 8) == 1.0


def test_bad_timing_requests():
    """Unknown operation, algorithm or model, and an algorithm that cannot serve the group, are named errors."""
    from trnsim.errors import UnknownNameError

    c = tf.cluster("trn2.48xlarge")
    with pytest.raises(UnknownNameError, match="collective operation 'allreduce'"):
        tf.collective_time("allreduce", 1024, None, c)
    with pytest.raises(UnknownNameError, match="collective algorithm 'tree'"):
        tf.collective_time("all_reduce", 1024, None, c, "tree")
    with pytest.raises(UnknownNameError, match="timing model"):
        tf.collective_time("all_reduce", 1024, None, c, "ring", model="packet")
    with pytest.raises(tf.AlgorithmError, match="hierarchical needs"):
        tf.collective_time("all_reduce", 1024, None, c, "hierarchical")
    with pytest.raises(tf.RankError, match="rank 64 is outside"):
        tf.collective_time("all_reduce", 1024, [0, 64], c)


def test_pricing_one_node_matches_pricing_every_node():
    """On a uniform multi-node group, pricing the first node's traffic gives the time that pricing
    every node gives (rings, KangaRing, and RDH folded over 12 nodes)."""
    from trnsim.fabric import runtime, timing

    c = tf.cluster("trn2.48xlarge", nodes=12)
    for ranks, size in ((list(range(0, 12 * 64, 64)), 8 * MiB), (None, 256 * MiB), (None, 2 * GiB)):
        g = runtime.group_of(c, ranks)
        t, alg, _ = tf.collective_time("all_reduce", size, ranks, c)
        sch = runtime.schedule("all_reduce", "hierarchical", g, size, timing.pick("all_reduce", size, g)[1])
        full = c.constants.launch_floor
        for ph in sch.phases:
            lat, per_chunk = timing._alpha_beta(g, ph, False)
            full += ph.repeat * (lat + per_chunk * size / sch.nchunks)
        assert t == pytest.approx(full, rel=1e-9), alg


def test_collective_time_takes_a_system_name():
    """A system name stands for one node of it: the same answer as the explicit cluster."""
    explicit = tf.collective_time("all_reduce", 16 * MiB, 16, tf.cluster("trn2.48xlarge"))
    assert tf.collective_time("all_reduce", 16 * MiB, 16, "trn2.48xlarge") == explicit
