"""`trnsim collective` within bounded memory: a cluster or a size sweep beyond what it simulates is a named
option error, with the numbers, before anything is built."""
from click.testing import CliRunner

from trnsim.cli import cli
from trnsim.cli.collective import MAX_CHIPS, MAX_ROWS


def _run(*args):
    return CliRunner().invoke(cli, ["collective", "allr", *args])


def test_a_million_nodes_is_refused_with_the_chip_count():
    r = _run("-N", "1000000", "--instance", "trn1.32xlarge")
    assert r.exit_code == 2 and "internal error" not in r.output
    assert f"-N/--nnodes: 1,000,000 x trn1.32xlarge is 16,000,000 chips; trnsim simulates clusters of at most " \
           f"{MAX_CHIPS:,} chips" in r.output


def test_the_largest_cluster_allowed_is_not_refused_by_the_bound():
    """The bound counts chips, so it leaves every cluster up to MAX_CHIPS to the simulator."""
    r = _run("-N", str(MAX_CHIPS // 16 + 1), "--instance", "trn1.32xlarge")
    assert r.exit_code == 2 and "-N/--nnodes" in r.output
    r = _run("-N", "4", "--instance", "trn1.32xlarge", "-b", "1M", "-e", "1M", "--json")
    assert r.exit_code == 0, r.output


def test_one_byte_steps_over_a_gibibyte_are_refused_before_listing_them():
    r = _run("-b", "1", "-e", "1G", "-i", "1")
    assert r.exit_code == 2 and f"make 1,073,741,824 rows; at most {MAX_ROWS:,}" in r.output
    r = _run("-b", "1K", "-e", "1M", "-i", "1K", "--json")  # 1,024 rows: within the bound
    assert r.exit_code == 0, r.output
