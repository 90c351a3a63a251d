"""The demo's scheduling section: the same kernel in program order, as the compiler reorders it, and with a schedule
edge."""
import json
import re

from click.testing import CliRunner

from trnsim.cli import cli
from trnsim.cli.demo_reorder import STEPS, WIDTH


def test_the_scheduling_section_shows_the_chain_moved_into_the_gap():
    """In program order the Vector chain waits for the large tile's sum; reordered it runs while the tile loads:
    the reordered timeline is shorter, and its VectorE row is busy before the program-order one starts."""
    r = CliRunner().invoke(cli, ["demo", "--only", "Scheduling", "--json"])
    assert r.exit_code == 0, r.output
    (section,) = json.loads(r.stdout)["sections"]
    text = section["text"]
    assert f"runs {STEPS} steps" in " ".join(text.split())
    ordered, reordered, edged = (float(x) for x in re.findall(r": ([\d.]+) us timeline", text))
    assert reordered < ordered
    rows = re.findall(r"VectorE\s+([█·]+)", text)
    assert len(rows) == 3 and all(len(row) == WIDTH for row in rows)
    assert rows[1].index("█") < rows[0].index("█")
    # The schedule edge puts every step after the sum on VectorE again: the chain no longer fills the gap.
    assert edged > reordered and rows[2].index("█") > rows[1].index("█")
