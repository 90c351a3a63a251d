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
