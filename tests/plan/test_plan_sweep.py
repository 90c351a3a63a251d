"""Sweeps: ranking, the process pool and Ray backends, CSV, the frontier and its chart."""
import csv
import sys

import pytest

from trnsim.errors import ConfigError
from trnsim.plan import sweep as S

ARGS = ("llama2-7b", ["trn1.32xlarge", "trn2.48xlarge"], [1, 2])


@pytest.fixture(scope="module")
def local():
    return S.sweep(*ARGS, workers=1)


def test_ranked_by_tokens_then_by_cost(local):
    """Valid rows come best first by tokens/s, or cheapest first by $ per token; invalid ones keep a reason."""
    tok = [r["tokens_per_s"] for r in local.ranked]
    assert tok == sorted(tok, reverse=True) and len(tok) > 10
    assert all(r["reason"].startswith("layout field ") for r in local.unranked)
    cost = S.sweep(*ARGS, workers=1, by="cost")
    usd = [r["usd_per_million_tokens"] for r in cost.ranked]
    assert usd == sorted(usd)
    with pytest.raises(ConfigError, match="'by'"):
        S.sweep(*ARGS, by="speed")


def test_process_pool_gives_the_same_rows(local):
    """Two worker processes, with small chunks, give the same ranking as one process."""
    pooled = S.sweep(*ARGS, workers=2, chunk=7)
    assert pooled.ranked == local.ranked
    assert len(pooled.unranked) == len(local.unranked)


def test_ray_backend_on_a_real_local_cluster(one_ray_cluster):
    """`ray="local"` starts a real local Ray cluster (Ray is in the dev extras), runs the chunks as Ray tasks
    and ranks the same rows; the cluster it started is shut down afterwards."""
    import ray  # a dev dependency: CI runs this on the real thing

    small = ("llama2-7b", ["trn1.32xlarge"], [1])  # kept small: starting Ray is most of the time
    got = S.sweep(*small, ray="local", chunk=16)
    want = S.sweep(*small, workers=1)
    assert got.ranked == want.ranked and len(got.unranked) == len(want.unranked) and len(want.ranked) > 3
    assert not ray.is_initialized()


def test_ray_missing_says_how_to_install(monkeypatch):
    """Asking for Ray without Ray installed is a one-line ConfigError with the install command."""
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ConfigError, match=r"pip install 'trnsim\[ray\]'"):
        S.backend(ray="auto")


def test_frontier_is_the_pareto_set(local):
    """The frontier holds exactly the rows no other row beats on both $ per token and tokens/s."""
    rows = local.ranked
    front = S.frontier(rows)

    def dominated(r):
        return any(o["usd_per_million_tokens"] <= r["usd_per_million_tokens"] and o["tokens_per_s"] > r["tokens_per_s"]
                   for o in rows)

    assert {id(r) for r in front} == {id(r) for r in rows if not dominated(r)}


def test_csv_and_chart(local, tmp_path):
    """The CSV has every row with ranks for the valid ones; the chart is a PNG."""
    path = tmp_path / "sweep.csv"
    local.write_csv(str(path))
    rows = list(csv.DictReader(open(path)))
    assert len(rows) == len(local.ranked) + len(local.unranked)
    assert rows[0]["rank"] == "1" and rows[0]["system"] == local.ranked[0]["system"]
    png = tmp_path / "front.png"
    local.chart(str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_cluster_that_cannot_exist_is_one_row_with_its_reason():
    """LNC 2 on Trn1 leaves one unranked row naming the field; the Trn2 and GPU candidates still rank."""
    got = S.sweep("llama2-7b", ["trn1.32xlarge", "trn2.48xlarge", "p4d.24xlarge"], [1], workers=1, lnc=2)
    trn1 = [r for r in got.unranked if r["system"] == "trn1.32xlarge"]
    assert len(trn1) == 1 and "cluster field 'lnc'" in trn1[0]["reason"]
    assert {r["system"] for r in got.ranked} == {"trn2.48xlarge", "p4d.24xlarge"}
