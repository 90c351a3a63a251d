"""The 70B comparison of docs/planning.md: its arithmetic recomputed from the catalog, and the table in sync."""
import pathlib
import re

import pytest

from trnsim import specs
from trnsim.plan import aws_flops_per_sequence, model
from trnsim.plan.compare import compare, markdown
from trnsim.specs import training

DOC = pathlib.Path(__file__).parents[2] / "docs" / "planning.md"
BLOCK = re.compile(r"<!-- compare (\S+) (\S+) (.+?) -->\n(.*?)\n<!-- /compare -->", re.S)


@pytest.fixture(scope="module")
def documented():
    name, tokens, entries, table = BLOCK.search(DOC.read_text()).groups()
    pairs = [(e.rpartition(":")[0], int(e.rpartition(":")[2])) for e in entries.split(",")]
    return model(name), float(tokens), pairs, table, compare(model(name), pairs, float(tokens))


def test_docs_table_is_what_the_planner_computes(documented):
    """The table in docs/planning.md is the planner's current output for the documented systems."""
    *_, table, rows = documented
    assert markdown(rows) == table


def test_time_and_cost_follow_from_catalog_figures(documented):
    """Hours = tokens / tokens/s; cost = hours x nodes x the catalog's price; MFU from the catalog peak."""
    m, tokens, pairs, _, rows = documented
    assert [r["system"] for r in rows] == [specs.system(n).name for n, _ in pairs]
    planned = 0
    for (name, nodes), r in zip(pairs, rows):
        system = specs.system(name)
        assert r["chips"] == nodes * system.chips
        assert r["chip_bf16_tflops"] == system.chip.peak_flops("bf16") / 1e12
        assert r["matmul_efficiency"] == training.matmul_efficiency(system.chip)
        if r["layout"] is None:
            assert r["reason"]
            continue
        planned += 1
        hours = tokens / r["tokens_per_s"] / 3600
        assert r["hours"] == pytest.approx(hours) and r["days"] == pytest.approx(hours / 24)
        if system.price_usd_per_hour:
            assert r["usd"] == pytest.approx(hours * nodes * system.price_usd_per_hour)
        else:
            assert r["usd"] is None
        rating = "aws-mfu" if "aws-mfu" in system.chip.ratings else None
        peak = nodes * system.chips * system.chip.peak_flops("bf16", rating)
        assert r["mfu"] == pytest.approx(aws_flops_per_sequence(m) * r["tokens_per_s"] / m.seq / peak)
    assert planned >= 4
