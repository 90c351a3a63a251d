"""`trnsim collective` with nccom-test's flags: sizes that do not fit HBM, what -c samples, input/output
sizes, several statistics, NEFF iterations, hosts files, replica groups, custom source-target pairs,
NEURON_LOGICAL_NC_CONFIG."""
import json

import pytest
from click.testing import CliRunner

from trnsim.cli import cli


def _run(*args, env=None):
    return CliRunner(env=env).invoke(cli, ["collective", *args], prog_name="trnsim")


def _json(*args, env=None):
    r = _run(*args, "--json", env=env)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_a_size_that_does_not_fit_a_ranks_hbm_is_refused_with_the_numbers():
    r = _run("allr", "-b", "1M", "-e", "1T", "-f", "1024")
    rank_hbm = 96 * 2**30 // 4  # a Trainium2 chip's 96 GiB over its 4 logical cores at LNC 2
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert (f"-e/--maxbytes: 1,099,511,627,776 B all_reduce needs 1,099,511,627,776 B in + 1,099,511,627,776 B out"
            f" = 2,199,023,255,552 B per rank" in r.stderr)
    assert f"has {rank_hbm:,} B of HBM" in r.stderr
    assert _run("allr", "-b", "1G", "-e", "1G", "--json").exit_code == 0  # 2 GiB of 24 GiB fits


def test_input_and_output_sizes_follow_the_operation():
    for op, want in (("all_reduce", (4096, 4096)), ("all_gather", (512, 4096)), ("reduce_scatter", (4096, 512))):
        row = _json(op, "-r", "8", "-b", "4K", "-e", "4K", "--show-input-output-size")["rows"][0]
        assert (row["input_size"], row["output_size"]) == want, op
    text = _run("allg", "-r", "8", "-b", "4K", "-e", "4K", "--show-input-output-size", "--non-interactive").stdout
    head, row = text.splitlines()[1:3]
    assert head.split()[:4] == ["size(B)", "count(elems)", "total_input_size(B)", "total_output_size(B)"]
    assert row.split()[:4] == ["4096", "4096", "512", "4096"]  # nccom-test's columns: per-rank input and output


def test_check_says_exactly_what_it_samples():
    small = _json("allr", "-r", "4", "-b", "1M", "-e", "1M", "-c")["rows"][0]
    assert small["check"] == "ok" and small["checked_elems"] == small["count"] == 2**20
    big = _run("allr", "-r", "4", "-b", "8M", "-e", "8M", "-c")
    assert "checked on their first 1,048,576 elements per rank" in big.stdout  # 4 Mi elements over 4 ranks
    assert "first 4 Mi / ranks elements of each rank" in " ".join(_run("--help").stdout.split())


def test_several_statistics_and_neff_iterations(tmp_path):
    path = tmp_path / "nccom.json"
    out = _json("allr", "-r", "2", "-b", "1K", "-e", "1K", "-t", "avg,p99", "-t", "p50", "-I", "3", "-W", "1",
                "--report-to-json-file", str(path))
    assert out["stats"] == ["avg", "p99", "p50"] and (out["neff_iters"], out["neff_warmup_iters"]) == (3, 1)
    (res,) = json.loads(path.read_text())["results"]  # the report file in nccom-test's own layout
    assert res["time:avg(us)"] == res["time:p99(us)"] == out["rows"][0]["time_us"] and res["size(B)"] == 1024
    text = _run("allr", "-r", "2", "-b", "1K", "-e", "1K", "-t", "avg,p99").stdout
    assert "time:avg(us)" in text and "time:p99(us)" in text
    r = _run("allr", "-t", "avg,p101")
    assert r.exit_code == 2 and "-t/--stats" in r.stderr and "'p101'" in r.stderr


def test_hosts_file_sets_the_nodes(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("10.0.0.1\n# a comment\n10.0.0.2\n")
    out = _json("allr", "--instance", "trn1.32xlarge", "-r", "64", "-b", "1K", "-e", "1K", "--hosts-file", str(hosts))
    assert out["hosts"] == ["10.0.0.1", "10.0.0.2"] and out["nodes"] == 2 and out["ranks"] == 64


def test_replica_groups_time_each_group_and_check_them_all(tmp_path):
    """32 ranks in groups of 2 (rank i with i + 16): the row is a 2-rank all-reduce's time between cores that
    far apart, no faster than the 2-rank all-reduce of neighbours; values of every group are checked."""
    dp = _json("allr", "-r", "32", "--data-parallel-dimension", "2", "-b", "1M", "-e", "1M", "-c", "all_ones")
    assert dp["ranks"] == 2 and dp["replica_groups"][0] == [0, 16] and len(dp["replica_groups"]) == 16
    assert dp["rows"][0]["check"] == "ok"
    groups = tmp_path / "groups.json"
    groups.write_text(json.dumps([[0, 16], [1, 17]]))
    custom = _json("allr", "-r", "32", "--custom-replica-group", str(groups), "-b", "1M", "-e", "1M")
    assert custom["replica_groups"] == [[0, 16], [1, 17]]
    assert custom["rows"][0]["time_us"] == dp["rows"][0]["time_us"]
    groups.write_text(json.dumps([[0, 1], [1, 2]]))
    r = _run("allr", "-r", "32", "--custom-replica-group", str(groups))
    assert r.exit_code == 2 and "a rank is in two groups" in r.stderr
    r = _run("allr", "-r", "32", "--data-parallel-dimension", "5")
    assert r.exit_code == 2 and "5 does not divide the 32 ranks" in r.stderr


def test_logical_nc_config_from_the_environment():
    assert _json("allr", "-b", "1K", "-e", "1K", env={"NEURON_LOGICAL_NC_CONFIG": "1"})["lnc"] == 1
    assert _json("allr", "-b", "1K", "-e", "1K")["lnc"] == 2


def _metadata(tmp_path, entries):
    path = tmp_path / "meta.json"
    path.write_text(json.dumps({"alltoallv_metadata": entries}))
    return str(path)


def test_alltoallv_metadata_sets_each_pairs_traffic(tmp_path):
    """Rank 0 sends 512 elements to itself and 1024 to rank 1; rank 1 sends 256 and 768: the row moves exactly
    that (sizes from the counts), its values are checked, and its time is the fabric's for those per-pair bytes."""
    import numpy as np

    import trnsim.fabric as tf

    meta = _metadata(tmp_path, [
        {"send_counts": [512, 1024], "send_displs": [0, 512], "recv_counts": [512, 256], "recv_displs": [0, 512]},
        {"send_counts": [256, 768], "send_displs": [0, 256], "recv_counts": [1024, 768], "recv_displs": [0, 1024]}])
    out = _json("alltoallv", "-r", "2", "-d", "fp32", "--alltoallv-metadata", meta, "-c")
    (row,) = out["rows"]
    assert (row["size"], row["input_size"], row["output_size"]) == (1536 * 4, 1536 * 4, 1792 * 4)
    assert row["check"] == "ok"
    arrays = [[np.zeros(512, np.float32), np.zeros(1024, np.float32)],
              [np.zeros(256, np.float32), np.zeros(768, np.float32)]]
    want = tf.all_to_allv(arrays, cluster=tf.cluster("trn2.48xlarge"), ranks=[0, 1]).time_ns
    assert row["time_us"] == want / 1e3
    even = _metadata(tmp_path, [{"send_counts": [32, 32], "send_displs": [0, 32], "recv_counts": [32, 32],
                                 "recv_displs": [0, 32]}])
    assert _json("alltoallv", "-r", "2", "-d", "fp32", "--alltoallv-metadata", even)["rows"][0]["time_us"] < row["time_us"]


def test_alltoallv_metadata_that_does_not_add_up_is_refused(tmp_path):
    bad = _metadata(tmp_path, [
        {"send_counts": [8, 8], "send_displs": [0, 8], "recv_counts": [8, 4], "recv_displs": [0, 8]},
        {"send_counts": [8, 8], "send_displs": [0, 8], "recv_counts": [8, 8], "recv_displs": [0, 8]}])
    r = _run("alltoallv", "-r", "2", "--alltoallv-metadata", bad)
    assert r.exit_code == 2 and "rank 0 expects 4 elements from rank 1, which sends it 8" in r.stderr
    overlap = _metadata(tmp_path, [{"send_counts": [8, 8], "send_displs": [0, 4], "recv_counts": [8, 8],
                                    "recv_displs": [0, 8]}])
    r = _run("alltoallv", "-r", "2", "--alltoallv-metadata", overlap)
    assert r.exit_code == 2 and "the send_counts regions at send_displs overlap" in r.stderr
    r = _run("allr", "-r", "2", "--alltoallv-metadata", overlap)
    assert r.exit_code == 2 and "applies to alltoallv, not all_reduce" in r.stderr


def _pairs(tmp_path, lists):
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps({"src_target_pairs": lists}))
    return str(path)


def test_custom_src_target_pairs_move_each_buffer_where_the_file_says(tmp_path):
    """nccom-test's own example (0<->1, 2<->3, 4..7 in place) on 8 ranks: values checked, the time is the fabric's
    permute of those pairs with real buffers, and the ring shift written as pairs times as the built-in permute."""
    import numpy as np

    import trnsim.fabric as tf

    swap = [[0, 1], [1, 0], [2, 3], [3, 2], [4, 4], [5, 5], [6, 6], [7, 7]]
    out = _json("permute", "-r", "8", "-b", "64K", "-e", "64K", "--custom-src-target-pairs", _pairs(tmp_path, [swap]),
                "-c")
    (row,) = out["rows"]
    assert row["check"] == "ok" and out["src_target_pairs"] == swap
    buffers = [np.zeros(65536, np.uint8)] * 8
    want = tf.permute(buffers, [tuple(p) for p in swap], cluster=tf.cluster("trn2.48xlarge"), ranks=range(8))
    assert row["time_us"] == want.time_ns / 1e3 > 0
    ring = [[i, (i + 1) % 8] for i in range(8)]
    custom = _json("permute", "-r", "8", "-b", "64K", "-e", "64K", "--custom-src-target-pairs", _pairs(tmp_path, [ring]))
    assert custom["rows"][0]["time_us"] == _json("permute", "-r", "8", "-b", "64K", "-e", "64K")["rows"][0]["time_us"]
    still = _json("permute", "-r", "8", "-b", "64K", "-e", "64K", "--custom-src-target-pairs",
                  _pairs(tmp_path, [[[r, r] for r in range(8)]]))
    assert still["rows"][0]["time_us"] == 0  # every buffer stays in place: nothing crosses a link


@pytest.mark.parametrize("lists, message", [
    ([[[0, 1], [2, 1]]], "rank 1 is the target of both [0, 1] and [2, 1]; a rank sends to one target and receives "
                         "from one source"),
    ([[[0, 1]], [[0, 2]]], "rank 0 is the source of both [0, 1] and [0, 2]"),
    ([[[0, 8]]], "src_target_pairs[0][0] [0, 8]: rank 8 is not among the 8 ranks (0..7)"),
    ([[[0, 1, 2]]], "src_target_pairs[0][0] is [0, 1, 2], not a [source, target] pair of ranks"),
    ([], 'expected {"src_target_pairs": [[[0, 1], [1, 0], ...]]}'),
])
def test_bad_src_target_pairs_are_refused_with_the_rule(tmp_path, lists, message):
    r = _run("permute", "-r", "8", "--custom-src-target-pairs", _pairs(tmp_path, lists))
    assert r.exit_code == 2 and message in r.stderr and "Traceback" not in r.output, r.output


def test_src_target_pairs_apply_to_permutes_only_and_a_broken_file_names_its_line(tmp_path):
    import subprocess
    import sys

    r = _run("allr", "-r", "8", "--custom-src-target-pairs", _pairs(tmp_path, [[[0, 1]]]))
    assert r.exit_code == 2 and "applies to permute and sendrecv, not all_reduce" in r.stderr
    broken = tmp_path / "broken.json"
    broken.write_text('{"src_target_pairs":\n [[[0, 1],]]}')
    p = subprocess.run([sys.executable, "-m", "trnsim", "collective", "permute", "-r", "8",
                        "--custom-src-target-pairs", str(broken)], capture_output=True, text=True)
    assert p.returncode == 2 and f"{broken}:2: not JSON" in p.stderr and "Traceback" not in p.stderr, p.stderr
