"""Clusters of hundreds of thousands of chips: hierarchical priced from one row and one column equals
the whole schedule priced, and the runtime's default is never slower than an algorithm trnsim can force."""
import pytest

import trnsim.fabric as tf
from trnsim.fabric import runtime, timing

KiB, MiB, GiB = 2**10, 2**20, 2**30


@pytest.mark.parametrize("system,nodes,ranks", [
    ("trn2.48xlarge", 12, None),  # KangaRing rows, RDH folded over 12 nodes
    ("trn2.48xlarge", 12, list(range(0, 12 * 64, 64))),  # one rank per node
    ("trn2.48xlarge", 6, [n * 64 + i for n in range(6) for i in range(8)]),  # 8 ranks per node
    ("trn1.32xlarge", 5, None),  # the 2023 runtime's rings
])
def test_hierarchical_from_one_row_and_column_equals_the_whole_schedule(system, nodes, ranks):
    """Every sub-algorithm pair the runtime may run, every two-level operation, sizes from 1 KiB to 2 GiB."""
    c = tf.cluster(system, nodes=nodes)
    g = runtime.group_of(c, ranks)
    for op in ("all_reduce", "reduce_scatter", "all_gather"):
        for size in (KiB, MiB, 8 * MiB, 256 * MiB, 2 * GiB):
            for subs in [None] + [s for a, s in runtime.candidates(op, size, g) if a == "hierarchical"]:
                fast = timing.profile(op, "hierarchical", g, "alpha-beta", size, subs)
                whole = timing.profile(op, "hierarchical", g, "alpha-beta", size, subs, detailed=True)
                assert (fast.algorithm, fast.steps) == (whole.algorithm, whole.steps)
                assert fast.time(size) == pytest.approx(whole.time(size), rel=1e-12), (op, size, subs)


def test_project_rainier_is_priced_without_a_per_rank_schedule(monkeypatch):
    """25,000 trn2.48xlarge (400,000 chips, 1.6 million ranks): the runtime's hierarchical all-reduce is
    priced from one row and one column; the whole schedule is never built."""
    built = []
    monkeypatch.setattr(runtime.A, "two_level", lambda *a, **k: built.append(a) or pytest.fail("whole schedule"))
    c = tf.cluster("trn2.48xlarge", nodes=25_000)
    t, alg, steps = tf.collective_time("all_reduce", GiB, None, c)
    assert alg.startswith("hier(") and built == []
    assert t > tf.collective_time("all_reduce", GiB, None, tf.cluster("trn2.48xlarge", nodes=2))[0]


def _default_and_forced(c, size):
    """The default's time and every algorithm trnsim can force on the whole cluster (those it refuses left out)."""
    default = tf.collective_time("all_reduce", size, None, c)
    forced = {}
    for a in tf.ALGORITHMS:
        try:
            forced[a] = tf.collective_time("all_reduce", size, None, c, a)[0]
        except tf.AlgorithmError:
            pass
    return default, forced


@pytest.mark.parametrize("size", [KiB, MiB, 32 * MiB, GiB])
def test_the_trn1_ultracluster_default_is_never_slower_than_a_forced_algorithm(size):
    """30,000 Trainium chips (1,875 trn1.32xlarge, 60,000 ranks): beyond the two nodes the 2023 tables
    measure, the runtime's choice is hierarchical, never the 120,000-step flat ring."""
    c = tf.cluster("trn1.32xlarge", nodes=1875)
    (t, alg, _), forced = _default_and_forced(c, size)
    assert {"ring", "rdh", "kangaring", "hierarchical"} <= set(forced)
    assert alg.startswith("hier(") and t <= min(forced.values()), (alg, t, forced)
    assert forced["ring"] > 10 * t


@pytest.mark.parametrize("size", [KiB, MiB, 32 * MiB, GiB])
def test_the_trn2_ultraserver_default_is_never_slower_than_a_forced_algorithm(size):
    """64 chips over four servers: whole-torus rings and the two-level schedule over the servers compete."""
    (t, alg, _), forced = _default_and_forced(tf.cluster("Trn2 UltraServer"), size)
    assert {"ring", "torus", "mesh", "rdh", "kangaring", "hierarchical", "oneshot"} <= set(forced)
    assert t <= min(forced.values()), (alg, t, forced)


@pytest.mark.parametrize("size", [MiB, 32 * MiB])
def test_an_ultraserver_is_no_slower_than_four_instances_over_efa(size):
    """Its servers are joined by NeuronLink, faster than the EFA that joins four separate trn2.48xlarge."""
    ultra = tf.collective_time("all_reduce", size, None, tf.cluster("Trn2 UltraServer"))[0]
    assert ultra <= tf.collective_time("all_reduce", size, None, tf.cluster("trn2.48xlarge", nodes=4))[0]


def test_the_trn2_ultraserver_efa_is_200_gbps_per_chip():
    """12.8 Tbps per UltraServer over 64 NICs: four trn2u.48xlarge of 3.2 Tbps, one 200 Gbps EFA per chip."""
    from trnsim import specs
    from trnsim.specs import fabric as fs

    s = specs.system("Trn2 UltraServer")
    assert s.efa_bandwidth * 8 == 4 * specs.system("trn2u.48xlarge").efa_bandwidth * 8 == 12_800e9
    assert fs.efa_nics(s.key) == s.chips and tf.cluster(s, nodes=2).network.nic_bandwidth * 8 == 200e9


def test_direct_writes_between_every_pair_are_refused_past_the_limit():
    """Mesh over 60,000 ranks would be 3.6 billion transfers a round: a named error, not gigabytes."""
    c = tf.cluster("trn1.32xlarge", nodes=1875)
    with pytest.raises(tf.AlgorithmError, match="mesh all_reduce over 60,000 ranks"):
        tf.collective_time("all_reduce", MiB, None, c, "mesh")


@pytest.mark.parametrize("system,nodes", [("trn1.32xlarge", 3), ("trn1.32xlarge", 1875), ("Trn2 UltraServer", 1)])
def test_the_default_time_never_falls_as_the_message_grows(system, nodes):
    """Where the policy changed (Trn1 beyond two nodes, the UltraServer), a larger message still never
    takes less time."""
    c = tf.cluster(system, nodes=nodes)
    times = [tf.collective_time("all_reduce", 2**k, None, c)[0] for k in range(6, 31, 2)]
    assert times == sorted(times)


def test_the_flow_model_refuses_project_rainier_by_name():
    """Its per-flow simulation would build 1.6 million ranks' flows: a named error instead of gigabytes."""
    from trnsim.errors import ConfigError

    with pytest.raises(ConfigError, match="at most 131,072 ranks; this group has 1,600,000"):
        tf.collective_time("all_reduce", GiB, None, tf.cluster("trn2.48xlarge", nodes=25_000), model="flow")
