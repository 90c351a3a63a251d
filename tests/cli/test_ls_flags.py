"""`trnsim ls` with neuron-ls's flags: -t, -w, -a, -j/--output-format json, NEURON_LOGICAL_NC_CONFIG, and the
PID, COMMAND and RUNTIME VERSION columns."""
import json
import os

import pytest
from click.testing import CliRunner

from trnsim import live
from trnsim.cli import cli

LONG = "python train.py " + " ".join(f"--option-{i} value-{i}" for i in range(12))


def _ls(*args, env=None):
    return CliRunner(env=env).invoke(cli, ["ls", *args], prog_name="trnsim")


@pytest.fixture
def published(tmp_path, monkeypatch):
    """This test process published as simulating cores 0-5 (devices 0 and 1 at LNC 2) of a trn2.48xlarge."""
    monkeypatch.setenv("TRNSIM_RUNTIME_DIR", str(tmp_path))
    pid = os.getpid()
    (tmp_path / f"{pid}.json").write_text(json.dumps({
        "pid": pid, "start": live._start_ticks(pid), "command": LONG, "kind": "kernel", "name": "mm",
        "instance": "trn2.48xlarge", "cores": list(range(6))}))
    return pid


def test_short_flags_and_output_format_match_the_long_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("TRNSIM_RUNTIME_DIR", str(tmp_path))  # no other process comes or goes between the runs
    assert _ls("-t").output == _ls("--topology").output and "wrap-around" in _ls("-t").output
    assert json.loads(_ls("--output-format", "json").stdout) == json.loads(_ls("-j").stdout)


def test_processes_show_pid_command_and_runtime_version(published):
    devices = json.loads(_ls("-j").stdout)
    on = [d["neuron_device"] for d in devices if d["neuron_processes"]]
    assert on == [0, 1]
    proc = devices[0]["neuron_processes"][0]
    assert proc["pid"] == published and proc["command"] == LONG and proc["neuron_runtime_version"] not in ("", "NA")
    narrow = _ls().stdout
    shown = LONG.removeprefix("python ")  # the interpreter is left out, as in top
    assert "COMMAND" in narrow and "RUNTIME" in narrow and shown[:37] + "..." in narrow and shown not in narrow
    assert shown in _ls("-w").stdout


def test_show_all_procs_adds_the_asking_process_to_every_device(published):
    devices = json.loads(_ls("-a", "-j").stdout)
    for d in devices:
        mine = [p for p in d["neuron_processes"] if p["neuron_runtime_version"] == "NA"]
        assert [p["pid"] for p in mine] == [os.getpid()]
    assert all(not [p for p in d["neuron_processes"] if p["neuron_runtime_version"] == "NA"]
               for d in json.loads(_ls("-j").stdout))


def test_logical_nc_config_from_the_environment():
    one = json.loads(_ls("-j", env={"NEURON_LOGICAL_NC_CONFIG": "1"}).stdout)
    assert one[0]["nc_count"] == 8 and one[0]["logical_neuroncore_config"] == 1 and one[1]["neuroncore_ids"][0] == 8
    assert "logical-neuroncore-config: 1" in _ls(env={"NEURON_LOGICAL_NC_CONFIG": "1"}).stdout
    assert json.loads(_ls("-j", "--lnc", "2", env={"NEURON_LOGICAL_NC_CONFIG": "1"}).stdout)[0]["nc_count"] == 4
    r = _ls(env={"NEURON_LOGICAL_NC_CONFIG": "4"})
    assert r.exit_code == 2 and "NEURON_LOGICAL_NC_CONFIG=4: Trainium2 takes 1 or 2" in r.stderr
