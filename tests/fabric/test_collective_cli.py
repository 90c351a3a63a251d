"""`trnsim collective`: the nccom-test table, JSON, every system of the issue, and one-line errors."""
import json

import pytest
from click.testing import CliRunner

from trnsim.cli import cli
from trnsim.cli.collective import parse_size


def _run(*args):
    return CliRunner().invoke(cli, ["collective", *args])


def test_table_has_nccom_test_columns_and_footer():
    """The sweep prints size, count, type, time, algbw, busbw, algorithm rows and an average busbw."""
    r = _run("allr", "--instance", "trn1.32xlarge", "-N", "2", "-r", "64", "-b", "8", "-e", "1G", "-f", "8",
             "-d", "fp32", "--show-algorithm")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[1].split() == ["size(B)", "count(elems)", "type", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "algorithm"]
    rows = [ln.split() for ln in lines[2:-1]]
    assert [int(x[0]) for x in rows] == [8 * 8**i for i in range(10)]
    assert all(int(x[1]) == int(x[0]) // 4 and x[2] == "fp32" for x in rows)
    assert rows[-1][-1] == "ring" and rows[0][-1].startswith("hier")
    assert lines[-1].startswith("Avg bus bandwidth:")


def test_json_busbw_is_algbw_times_the_bus_factor():
    """--json gives one object whose busbw is 2(r-1)/r x algbw and algbw = size / time in 2^30 B/s."""
    r = _run("all_reduce", "-r", "2", "-b", "1M", "-e", "4M", "-f", "2", "--json")
    out = json.loads(r.output)
    for row in out["rows"]:
        algbw = row["size"] / (row["time_us"] * 1e-6) / 2**30
        assert row["algbw"] == pytest.approx(algbw) and row["busbw"] == pytest.approx(algbw * 2 * 1 / 2)
    assert out["ranks"] == 2 and out["avg_busbw"] > 0


@pytest.mark.parametrize("system", ["trn1.32xlarge", "trn2.48xlarge", "Trn2 UltraServer", "Trn3 Gen1 UltraServer",
                                    "Trn3 Gen2 UltraServer"])
@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter", "alltoall", "permute"])
def test_every_system_runs(system, op):
    """Each system of the issue times each operation over its whole rank set."""
    r = _run(op, "--instance", system, "-b", "64K", "-e", "1M", "-f", "16", "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)["rows"]
    assert len(rows) == 2 and all(x["time_us"] > 0 for x in rows)


def test_sizes_read_like_nccom_test():
    """K, M and G are powers of 1024; garbage is refused."""
    assert [parse_size(s) for s in ("8", "64K", "32M", "1G", "1GB")] == [8, 65536, 2**25, 2**30, 2**30]
    r = _run("allr", "-b", "lots")
    assert r.exit_code == 2 and "cannot read size 'lots'" in r.output


def test_errors_are_one_line():
    """Too many ranks, an unknown operation and an unknown dtype print one line and exit non-zero."""
    for args, text in ((["allr", "--instance", "trn1.32xlarge", "-r", "33"], "-r/--nworkers: 33 workers over 1 x trn1.32xlarge is 33 per node; each holds 32"),
                       (["allreduce"], "unknown collective operation 'allreduce'"),
                       (["allr", "-d", "fp64"], "-d/--datatype: unknown dtype 'fp64'")):
        r = _run(*args)
        assert r.exit_code == 2 and text in r.output and "Traceback" not in r.output, r.output


def test_tour_prints_a_short_real_slice():
    """tour() prints the sweep lines and the bf16 rounding note in under 15 lines."""
    import io

    from rich.console import Console

    from trnsim.cli.collective import tour

    buf = io.StringIO()
    tour(Console(file=buf, width=100))
    text = buf.getvalue()
    assert "kangaring" in text and "bf16" in text and len(text.splitlines()) <= 15


def test_check_compares_every_op_with_numpy():
    """-c moves random values through each operation and every rank's output matches numpy's golden result."""
    for op in ("allr", "allg", "redsct", "alltoall", "alltoallv", "permute", "sendrecv", "broadcast"):
        for dtype, reduce in (("fp32", "sum"), ("bf16", "max"), ("int32", "sum"), ("fp16", "prod")):
            r = _run(op, "--instance", "trn2.48xlarge", "-r", "8", "-b", "4K", "-e", "64K", "-f", "16", "-d", dtype,
                     "-o", reduce, "-c", "--json")
            assert r.exit_code == 0, (op, dtype, r.output)
            rows = json.loads(r.output)["rows"]
            assert [x["check"] for x in rows] == ["ok", "ok"] and rows[1]["checked_elems"] == rows[1]["count"]


def test_check_fails_when_a_value_is_wrong(monkeypatch):
    """A corrupted all-reduce output is caught: the row says FAIL and the command exits 1, as nccom-test fails."""
    import trnsim.fabric as tf

    real = tf.all_reduce

    def corrupt(*a, **k):
        res = real(*a, **k)
        res.outputs[3][5] += 1
        return res

    monkeypatch.setattr(tf, "all_reduce", corrupt)
    r = _run("allr", "-r", "8", "-b", "1K", "-e", "1K", "-d", "fp32", "-c", "all_ones")
    assert r.exit_code == 1 and "FAIL" in r.output and "1 size(s) FAILED" in r.output


def test_options_nccom_test_has():
    """-i steps sizes linearly, -N spreads -r over nodes, -s sets the node count, the report file holds the JSON,
    and types print under nccom-test's names."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = f"{d}/r.json"
        r = _run("allr", "-r", "64", "-s", "h1,h2", "-b", "8", "-e", "16", "-i", "4", "-d", "bf16",
                 "--report-to-json-file", path, "-n", "3", "-w", "0")
        assert r.exit_code == 0, r.output
        rep = json.load(open(path))
    assert [x["size"] for x in rep["rows"]] == [8, 12, 16] and {x["type"] for x in rep["rows"]} == {"bf16"}
    assert (rep["nodes"], rep["ranks"], rep["iters"], rep["warmup_iters"]) == (2, 64, 3, 0)
    assert "bf16" in r.output and "bfloat16" not in r.output


def test_bad_sizes_and_counts_name_the_option():
    """Sizes that are not whole elements, -r 0, -N 0, uneven -r over -N and bad -n/-w/-t are refused by name."""
    for args, text in ((["-b", "3", "-e", "3", "-d", "fp32"], "-b/--minbytes: 3 B is not a whole number"),
                       (["-r", "0"], "-r/--nworkers: must be at least 1"), (["-N", "0"], "-N/--nnodes"),
                       (["-r", "5", "-N", "2"], "do not divide equally"), (["-n", "0"], "-n/--iters"),
                       (["-w", "-1"], "-w/--warmup_iters"), (["-t", "p200"], "-t/--stats"),
                       (["-b", "8", "-e", "4"], "-e/--maxbytes: 4 is below"), (["-f", "1"], "-f/--stepfactor")):
        r = _run("allr", *args)
        assert r.exit_code >= 1 and text in r.output and "Traceback" not in r.output, (args, r.output)
