"""`trnsim ls`: neuron-ls's devices, cores, memory and torus neighbours for catalog systems."""
import json
import re

import pytest
from click.testing import CliRunner
from rich.console import Console

from trnsim.cli import cli

GiB = 2**30


@pytest.fixture(autouse=True)
def _empty_runtime(tmp_path, monkeypatch):
    """No simulating process is listed: kernels that other tests run in parallel publish theirs elsewhere."""
    monkeypatch.setenv("TRNSIM_RUNTIME_DIR", str(tmp_path))


def _ls(*args):
    return CliRunner().invoke(cli, ["ls", *args])


def _torus_neighbours(d, rows=4, cols=4):
    r, c = divmod(d, cols)
    return {((r - 1) % rows) * cols + c, ((r + 1) % rows) * cols + c, r * cols + (c - 1) % cols, r * cols + (c + 1) % cols}


def test_trn1_json_is_a_4x4_wraparound_torus_of_2_core_devices():
    """trn1.32xlarge: 16 devices of NCs 2d, 2d+1 and 32 GiB, each connected to its 4 torus neighbours."""
    r = _ls("--instance", "trn1.32xlarge", "--json")
    assert r.exit_code == 0, r.output
    devs = json.loads(r.output)
    assert [d["neuron_device"] for d in devs] == list(range(16))
    for d in devs:
        n = d["neuron_device"]
        assert d["nc_count"] == 2 and d["neuroncore_ids"] == [2 * n, 2 * n + 1]
        assert d["memory_size"] == 32 * GiB and d["logical_neuroncore_config"] == 1
        assert len(d["connected_to"]) == 4 and set(d["connected_to"]) == _torus_neighbours(n)


def test_neighbour_order_matches_neuron_ls_output():
    """Device 0 lists 12, 3, 4, 1; device 5 lists 1, 4, 9, 6; device 15 lists 11, 14, 3, 12 (runtime docs' neuron-ls)."""
    devs = json.loads(_ls("--instance", "trn2.48xlarge", "-j").output)
    assert devs[0]["connected_to"] == [12, 3, 4, 1]
    assert devs[5]["connected_to"] == [1, 4, 9, 6]
    assert devs[15]["connected_to"] == [11, 14, 3, 12]


@pytest.mark.parametrize("lnc, per", [(2, 4), (1, 8)])
def test_trn2_logical_cores(lnc, per):
    """trn2.48xlarge: 16 devices x 4 logical cores at LNC 2 (4d..4d+3), 8 at LNC 1, 96 GiB each."""
    devs = json.loads(_ls("--lnc", str(lnc), "--json").output)
    assert len(devs) == 16
    for d in devs:
        n = d["neuron_device"]
        assert d["neuroncore_ids"] == list(range(per * n, per * n + per)) and d["nc_count"] == per
        assert d["memory_size"] == 96 * GiB and d["logical_neuroncore_config"] == lnc


def test_trn2_table_shows_header_and_default_lnc_2():
    """The default table: instance type, logical-neuroncore-config 2, 16 rows of 4 cores and 96 GiB."""
    r = _ls()
    assert r.exit_code == 0
    assert "instance-type: trn2.48xlarge" in r.output and "logical-neuroncore-config: 2" in r.output
    rows = [ln for ln in r.output.splitlines() if "96 GiB" in ln]
    assert len(rows) == 16 and all(ln.split("│")[2].strip() == "4" for ln in rows)
    assert rows[15].split("│")[3].strip() == "60-63"


def test_trn3_gen2_json():
    """Trn3 Gen2 UltraServer: 144 devices of 4 logical cores and 144 GiB at the default LNC 2."""
    devs = json.loads(_ls("--instance", "Trn3 Gen2 UltraServer", "--json").output)
    assert len(devs) == 144 and {d["nc_count"] for d in devs} == {4} and {d["memory_size"] for d in devs} == {144 * GiB}
    assert devs[-1]["neuroncore_ids"] == [572, 573, 574, 575]


def test_lnc_2_on_trn1_is_refused_with_the_reason():
    """--lnc 2 on a Trn1 exits 2 with one line saying LNC applies to Trainium2/3 only, no traceback."""
    r = _ls("--instance", "trn1.32xlarge", "--lnc", "2")
    assert r.exit_code == 2
    assert "LNC applies to Trainium2 and Trainium3 only" in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_unknown_instance_names_close_ones():
    """An unknown instance exits 2 with one line naming the closest known names."""
    r = _ls("--instance", "trn2.48xlarg")
    assert r.exit_code == 2 and "did you mean trn2.48xlarge" in r.output
    assert len(r.output.strip().splitlines()) == 1


@pytest.mark.parametrize("name, marks", [
    ("trn1.32xlarge", ["[15]", "wrap-around", "NeuronLink-v2: 412.3 GB/s (384 GiB/s) per chip, 103.1 GB/s (96 GiB/s) per link"]),
    ("Trn2 UltraServer", ["instance 3", "[63]", "Z ring", "128 GB/s per link"]),
    ("Trn3 Gen1 UltraServer", ["switch1", "server 3", "[63]"]),
    ("Trn3 Gen2 UltraServer", ["l2-switch0", "s35", "140-143"]),
    ("trn1.2xlarge", ["no chip-to-chip links"]),
])
def test_topology_pictures(name, marks):
    """--topology draws each kind of system: torus, 4x4x4 planes with the Z ring, switches, one chip."""
    r = _ls("--instance", name, "--topology")
    assert r.exit_code == 0, r.output
    for m in marks:
        assert m in r.output


def test_tour_is_short():
    """The tour prints a compact slice: at most 15 lines."""
    from trnsim.cli.ls import tour

    con = Console(width=100, record=True)
    tour(con)
    text = con.export_text()
    assert len(text.strip().splitlines()) <= 15 and "362,448 TFLOPS" in text


def test_neuron_ls_columns_and_keys():
    """-j gives neuron-ls's keys (instance type, BDF, CPU affinity, NUMA node, processes); the table shows them:
    two NUMA nodes per server, each with a quarter of the vCPUs and their hyperthread siblings."""
    devs = json.loads(_ls("--instance", "trn2.48xlarge", "-j").output)
    assert {d["instance_type"] for d in devs} == {"trn2.48xlarge"} and all(d["neuron_processes"] == [] for d in devs)
    assert len({d["bdf"] for d in devs}) == 16 and all(re.fullmatch(r"0000:[0-9a-f]{2}:00\.0", d["bdf"]) for d in devs)
    assert [d["numa_node"] for d in devs] == ["0"] * 8 + ["1"] * 8
    assert devs[0]["cpu_affinity"] == "0-47,96-143" and devs[15]["cpu_affinity"] == "48-95,144-191"
    out = _ls("--instance", "trn2.48xlarge").output
    assert "BDF" in out and "AFFINITY" in out and "NUMA" in out and devs[3]["bdf"] in out


def test_gpu_instances_are_refused():
    """ls lists Neuron devices: a GPU instance gets one line saying it has GPUs and no Neuron devices."""
    for args in ((), ("-j",), ("--topology",)):
        r = _ls("--instance", "p5.48xlarge", *args)
        assert r.exit_code == 2 and "8 NVIDIA H100 80GB GPUs and no Neuron devices" in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "NEURON" not in r.output
        if args == ("-j",):  # under JSON the error is also an object on stdout
            assert "no Neuron devices" in json.loads(r.stdout)["error"]["message"]
        else:
            assert r.stdout == ""
