"""Clusters: rank placement as the Neuron runtime does it, sizes, the resource graph, and bad input."""
import numpy as np
import pytest

import trnsim.fabric as tf
from trnsim import specs
from trnsim.errors import ConfigError, UnknownNameError


def test_trn1_places_two_cores_per_device_and_ranks_per_instance():
    """trn1: device d holds NCs 2d, 2d+1; instance k owns ranks [32k, 32k+32)."""
    c = tf.cluster("trn1.32xlarge", nodes=2)
    assert c.ranks == 64 and c.lnc == 1
    for r in (0, 1, 2, 31, 32, 63):
        p = c.place(r)
        assert (p.node, p.chip, p.core) == (r // 32, r // 2, r % 2)


def test_trn2_lnc2_places_four_logical_cores_per_device():
    """trn2 at LNC 2: device d holds logical cores 4d..4d+3, 64 per instance; LNC 1 gives 128."""
    c = tf.cluster("trn2.48xlarge")
    assert c.ranks == 64 and [c.place(r).chip for r in (0, 3, 4, 63)] == [0, 0, 1, 15]
    assert tf.cluster("trn2.48xlarge", lnc=1).ranks == 128


def test_ultracluster_of_thirty_thousand_chips():
    """1,875 trn2.48xlarge make a 30,000-chip cluster whose last rank sits on its last chip."""
    c = tf.cluster("trn2.48xlarge", nodes=1875)
    assert c.chips == 30_000 and c.place(c.ranks - 1).chip == 29_999


def test_systems_of_the_issue_build():
    """Every system of the issue has a cluster whose chip count is the catalog's."""
    for name in ("trn1.32xlarge", "trn2.48xlarge", "Trn2 UltraServer", "Trn3 Gen1 UltraServer", "Trn3 Gen2 UltraServer"):
        c = tf.cluster(name, nodes=2)
        assert c.chips == 2 * specs.system(name).chips
        assert name in c.describe() and "EFA" in c.describe()


def test_bad_cluster_settings_are_named_errors():
    """LNC 2 on Trn1, LNC 3, zero nodes and an unknown system are refused with the rule in the message."""
    with pytest.raises(ConfigError, match="LNC 2 is not available on Trainium .it supports LNC 1"):
        tf.cluster("trn1.32xlarge", lnc=2)
    with pytest.raises(ConfigError, match="LNC must be 1 or 2"):
        tf.cluster("trn2.48xlarge", lnc=3)
    with pytest.raises(ConfigError, match="positive integer"):
        tf.cluster("trn2.48xlarge", nodes=0)
    with pytest.raises(UnknownNameError, match="did you mean"):
        tf.cluster("trn2.48xlarg")


def test_rank_outside_the_cluster_names_the_limit_and_the_caller():
    """Asking for rank 64 of a trn2.48xlarge says it holds 0..63, and where the call came from."""
    with pytest.raises(tf.RankError, match=r"0\.\.63.*test_cluster\.py:\d+"):
        tf.cluster("trn2.48xlarge").place(64)


def test_routes_follow_the_torus():
    """Inside a 4x4 torus, neighbours are one link apart and the farthest chip (2, 2 away) four."""
    net = tf.cluster("trn1.32xlarge").network
    hops = (net.route_res >= 0).sum(axis=2)
    topo = specs.system("trn1.32xlarge").topology
    for b in topo.neighbors(0):
        assert hops[0, b] == 1
    assert hops[0, 10] == 4 and hops.max() == 4


def test_capacities_come_from_the_catalog():
    """Link, memory-path and NIC capacities are the catalog figures times the fitted efficiencies."""
    from trnsim.specs import fabric as fs

    s = specs.system("trn1.32xlarge")
    k, netk = fs.chip_constants("trainium"), fs.constants().network
    net = tf.cluster(s.name, nodes=2).network
    links = len(s.topology.links)
    assert np.allclose(net.capacity[:2 * links], s.intra_link_bandwidth / 4 * k.link_efficiency)
    assert np.allclose(net.capacity[net.mem0:net.nic_out0], s.chip.hbm_bandwidth * k.hbm_efficiency)
    assert np.allclose(net.capacity[net.nic_out0:net.per_node], 800e9 / 8 / 8 * netk.efa_efficiency)
    assert net.nics == 8 and [int(net.nic_of(d)) for d in (0, 1, 2, 15)] == [0, 0, 1, 7]


def test_fabric_catalog_has_a_source_for_every_figure():
    """Every constant in fabric.toml carries a source (the loader refuses one without)."""
    from trnsim.specs import fabric as fs

    c = fs.constants()
    for rec in (c.network, c.thresholds, *c.chips.values()):
        fields = [f for f in rec.__dataclass_fields__ if f not in ("sources", "notes")]
        assert set(fields) == set(rec.sources), rec
        assert all(v.strip() for v in rec.sources.values())
    assert set(c.efa_nics) == set(c.efa_nics_sources)


def test_one_hashable_cluster_for_the_fabric_and_the_planner():
    from trnsim import plan

    a, b = plan.Cluster("trn2.48xlarge", 2), tf.cluster("trn2.48xlarge", nodes=2)
    assert plan.Cluster is tf.Cluster and a == b and hash(a) == hash(b)
    assert len({a, b, tf.cluster("trn2.48xlarge", nodes=2, lnc=1)}) == 2
    assert (a.ranks, a.ranks_per_chip, a.lnc) == (2 * 16 * 4, 4, 2)  # 16 Trainium2 chips of 8 cores, LNC 2
