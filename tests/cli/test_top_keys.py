"""`trnsim top` in a real terminal (tmux) with neuron-top's keys: Tab/arrows between the 'all' tab and one
per process, F between utilisation and TFLOPS, q to quit."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trnsim import live
from trnsim.specs import neuroncore

ROOT = Path(__file__).parents[2]


def _publish(folder: Path, pid: int, tensor_share: float, core: int):
    (folder / f"{pid}.json").write_text(json.dumps({
        "pid": pid, "start": live._start_ticks(pid), "command": f"python job{core}.py", "kind": "kernel",
        "name": f"job{core}", "instance": "trn2.48xlarge", "cores": [core],
        "utilisation": {str(core): tensor_share}, "busy": {str(core): {"TensorE": tensor_share}}}))


@pytest.fixture
def two_processes(tmp_path):
    """This test process on core 0 (TensorE 50%) and a sleeping child on core 1 (TensorE 25%)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        _publish(tmp_path, os.getpid(), 0.5, 0)
        _publish(tmp_path, child.pid, 0.25, 1)
        yield tmp_path, sorted([os.getpid(), child.pid])
    finally:
        child.kill()
        child.wait()


def _rows(screen: str, pids) -> list[str]:
    return [line.split()[0] for line in screen.splitlines() if line.split()[:1] in ([str(p)] for p in pids)
            and len(line.split()) > 2 and line.split()[1] in ("0", "1")]


def test_keys_switch_tabs_and_views_and_quit(two_processes, tmp_path, require_tool):
    tmux = require_tool("tmux")
    rundir, pids = two_processes
    sock = str(tmp_path / "tmux.sock")
    cmd = (f"env TRNSIM_RUNTIME_DIR={rundir} PYTHONPATH={ROOT / 'src'} {sys.executable} -m trnsim top "
           "--interval 0.3")
    subprocess.run([tmux, "-S", sock, "new-session", "-d", "-x", "150", "-y", "40", cmd], check=True)

    def screen():
        return subprocess.run([tmux, "-S", sock, "capture-pane", "-p", "-t", "0"], capture_output=True,
                              text=True).stdout

    def until(test, what):
        deadline, s = time.monotonic() + 30, ""
        while time.monotonic() < deadline:
            s = screen()
            if test(s):
                return s
            time.sleep(0.2)
        pytest.fail(f"trnsim top never showed {what}; last screen:\n{s}")

    def key(k):
        subprocess.run([tmux, "-S", sock, "send-keys", "-t", "0", k], check=True)

    try:
        until(lambda s: set(_rows(s, pids)) == {str(p) for p in pids}, "both processes on the 'all' tab")
        key("Right")
        until(lambda s: set(_rows(s, pids)) == {str(pids[0])}, f"only {pids[0]} on its tab")
        key("Tab")
        until(lambda s: set(_rows(s, pids)) == {str(pids[1])}, f"only {pids[1]} on its tab")
        key("Left")
        key("Left")
        until(lambda s: len(set(_rows(s, pids))) == 2, "the 'all' tab again")
        key("F")
        peak = neuroncore("trn2").peak_flops("bf16") / 1e12
        want = {f"{0.5 * peak:,.1f}", f"{0.25 * peak:,.1f}"}
        until(lambda s: "TFLOPS" in s and want <= set(s.split()), f"TFLOPS {sorted(want)}")
        key("F")
        until(lambda s: "UTILISATION" in s and "50.0%" in s, "utilisation again")
        key("q")
        deadline = time.monotonic() + 15
        while subprocess.run([tmux, "-S", sock, "has-session"], capture_output=True).returncode == 0:
            assert time.monotonic() < deadline, f"q did not quit; screen:\n{screen()}"
            time.sleep(0.2)
    finally:
        subprocess.run([tmux, "-S", sock, "kill-server"], check=False, capture_output=True)
