"""`trnsim top` and `trnsim monitor`: the live view of simulating processes, in a real terminal and as JSON."""
import json
import os
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from trnsim.cli import cli

# A process that keeps timing a kernel (one NeuronCore of trn2) until it is killed.
LONG_KERNEL = '''
import numpy as np
import trnsim, trnsim.nki as nki, trnsim.nki.isa as nisa, trnsim.nki.language as nl

@nki.jit
def busy_matmul(a, b):
    out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(8):
        x = nl.ndarray((128, 128), a.dtype, buffer=nl.sbuf)
        y = nl.ndarray((128, 512), b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a[k * 128:(k + 1) * 128, :])
        nisa.dma_copy(dst=y, src=b[k * 128:(k + 1) * 128, :])
        nisa.nc_matmul(dst=acc, stationary=x, moving=y)
    res = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out

a, b = np.ones((1024, 128), np.float32), np.ones((1024, 512), np.float32)
print("ready", flush=True)
while True:
    trnsim.benchmark(busy_matmul, a, b, target="trn2", timing_only=True)
'''


@pytest.fixture
def sim(tmp_path):
    """A long-running simulating process, publishing under its own runtime directory."""
    rundir = tmp_path / "run"
    script = tmp_path / "long_kernel.py"
    script.write_text(LONG_KERNEL)
    env = {**os.environ, "TRNSIM_RUNTIME_DIR": str(rundir)}
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True)
    state = rundir / f"{proc.pid}.json"

    def timed():  # the launch publishes first; the shares follow once the timing model has run
        try:
            return json.loads(state.read_text()).get("utilisation")
        except (OSError, ValueError):
            return None
    try:  # the process never ends by itself: it goes whether the test passes, fails or errs
        assert proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 60
        while not timed():
            assert time.monotonic() < deadline and proc.poll() is None, "the kernel process never published its shares"
            time.sleep(0.1)
        yield proc, rundir, env
    finally:
        proc.kill()
        proc.wait()


def test_once_json_and_monitor_carry_the_same_figures(sim, monkeypatch):
    proc, rundir, env = sim
    monkeypatch.setenv("TRNSIM_RUNTIME_DIR", str(rundir))
    runner = CliRunner()
    top = runner.invoke(cli, ["top", "--once", "--json"])
    assert top.exit_code == 0, top.output
    mon = runner.invoke(cli, ["monitor", "--count", "2", "--interval", "0.1"])
    assert mon.exit_code == 0, mon.output
    docs = [json.loads(top.output)] + [json.loads(line) for line in mon.output.splitlines()]
    assert len(docs) == 3
    for doc in docs:
        (run,) = doc["neuron_runtime_data"]
        assert run["pid"] == proc.pid and run["instance_type"] == "trn2.48xlarge"
        assert run["running"] == {**run["running"], "kind": "kernel", "name": "busy_matmul"}
        core = run["report"]["neuroncore_counters"]["neuroncores_in_use"]["0"]
        assert 0 < core["neuroncore_utilization"] <= 100
        assert core["engines"]["TensorE"] > 0 and core["engines"]["DMA"] > 0
        # the HBM in use when the launch starts: its two fp32 inputs
        assert run["report"]["memory_used"]["neuron_runtime_used_bytes"]["neuron_device"] == 1024 * 640 * 4
        assert doc["system_data"]["memory_info"]["memory_total_bytes"] > doc["system_data"]["memory_info"]["memory_used_bytes"] > 0
        assert doc["neuron_hardware_info"]["neuroncores_in_use"] == 1
    # The same kernel gives the same simulated shares, whichever tool read them (flops is per period: what the
    # executions that ended since the reader's last document ran)
    shares = {json.dumps({c: {k: v for k, v in x.items() if k != "flops"} for c, x in
                          d["neuron_runtime_data"][0]["report"]["neuroncore_counters"]["neuroncores_in_use"].items()})
              for d in docs}
    assert len(shares) == 1


def test_no_processes(tmp_path, monkeypatch):
    monkeypatch.setenv("TRNSIM_RUNTIME_DIR", str(tmp_path))
    r = CliRunner().invoke(cli, ["top", "--once"])
    assert r.exit_code == 0 and "no trnsim process is simulating" in r.output
    assert json.loads(CliRunner().invoke(cli, ["monitor", "--count", "1", "--interval", "0.05"]).output)[
        "neuron_runtime_data"] == []


def test_ls_lists_the_process_on_its_device(sim, monkeypatch):
    proc, rundir, _ = sim
    monkeypatch.setenv("TRNSIM_RUNTIME_DIR", str(rundir))
    r = CliRunner().invoke(cli, ["ls", "--instance", "trn2.48xlarge", "--json"])
    devices = json.loads(r.output)
    assert [p["pid"] for p in devices[0]["neuron_processes"]] == [proc.pid]
    assert all(d["neuron_processes"] == [] for d in devices[1:])
    assert str(proc.pid) in CliRunner().invoke(cli, ["ls", "--instance", "trn2.48xlarge"]).output


def test_top_in_a_real_terminal(sim, tmp_path, require_tool):
    """tmux runs `trnsim top` in a pane; the captured screen shows the process, its core and a busy engine."""
    tmux = require_tool("tmux")
    proc, rundir, env = sim
    sock = str(tmp_path / "tmux.sock")
    trnsim = os.path.join(os.path.dirname(sys.executable), "trnsim")
    subprocess.run([tmux, "-S", sock, "new-session", "-d", "-x", "150", "-y", "40",
                    f"env TRNSIM_RUNTIME_DIR={rundir} {trnsim} top --interval 0.3"], check=True, env=env)
    try:
        deadline, screen = time.monotonic() + 30, ""
        while time.monotonic() < deadline:
            screen = subprocess.run([tmux, "-S", sock, "capture-pane", "-p", "-t", "0"], capture_output=True,
                                    text=True).stdout
            rows = [line.split() for line in screen.splitlines()]
            core = next((r for r in rows if r[:2] == [str(proc.pid), "0"]), None)
            if core is not None and "busy_matmul" in screen:
                util = float(next(w for w in core if w.endswith("%")).lstrip("█·").rstrip("%"))
                if util > 0:
                    break
            time.sleep(0.3)
        else:
            pytest.fail(f"trnsim top never showed process {proc.pid} busy on NeuronCore 0; last screen:\n{screen}")
        assert "trn2.48xlarge" in screen and "TensorE" in screen
        proc_row = next(r for r in rows if r and r[0] == str(proc.pid) and "kernel" in r)
        # cores after the pid (and the instance, when the pane is wide enough to show it)
        assert proc_row[1:3] in (["trn2.48xlarge", "0"], ["0", "kernel"]), proc_row
    finally:
        subprocess.run([tmux, "-S", sock, "kill-server"], check=False)
