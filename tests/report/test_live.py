"""trnsim.live: the per-process state files that `trnsim top`, `monitor` and `ls` read."""
import json
import os
import subprocess
import sys

import pytest

from trnsim import live


@pytest.fixture
def rundir(tmp_path, monkeypatch):
    monkeypatch.setenv("TRNSIM_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setattr(live, "_state", {})
    monkeypatch.setattr(live, "_last_write", 0.0)
    yield tmp_path
    live.remove()


def test_publish_writes_this_process_and_reader_sees_it(rundir):
    live.publish(kind="collective", name="all_reduce", cores=[1, 0], busy={0: {"DMA": 0.5, "VectorE": 0.25}},
                 target="trn2", memory={"hbm": 4096}, force=True)
    (p,) = live.processes()
    assert p["pid"] == os.getpid() and p["kind"] == "collective" and p["cores"] == [0, 1]
    assert p["busy"]["0"] == {"DMA": 0.5, "VectorE": 0.25}
    assert p["utilisation"] == {"0": 0.5}  # the busiest engine's share when none is given
    assert p["memory"] == {"hbm": 4096} and p["target"] == "trn2"


def test_writes_are_rate_limited_but_state_kept(rundir):
    live.publish(kind="kernel", name="a", force=True)
    live.publish(kind="kernel", name="b")  # within INTERVAL_S: kept in memory, not written
    assert live.processes()[0]["name"] == "a"
    live.publish(kind="kernel", name="c", force=True)
    assert live.processes()[0]["name"] == "c"


def test_stale_file_of_a_dead_process_is_ignored_and_removed(rundir):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    f = rundir / f"{pid}.json"
    f.write_text(json.dumps({"pid": pid, "start": "1", "kind": "kernel", "name": "ghost"}))
    assert live.processes() == []
    assert not f.exists()


def test_file_is_removed_when_the_process_exits(rundir):
    code = ("import time, trnsim.live as l; l.publish(kind='kernel', name='k', cores=[0], force=True); "
            "print(len(l.processes()), flush=True)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "TRNSIM_RUNTIME_DIR": str(rundir)})
    assert out.stdout.strip() == "1", out.stderr
    assert list(rundir.glob("*.json")) == []


def test_publishing_can_be_turned_off(rundir, monkeypatch):
    monkeypatch.setenv("TRNSIM_PUBLISH", "0")
    live.publish(kind="kernel", name="k", force=True)
    assert live.processes() == []


def test_timing_a_kernel_publishes_engine_shares(rundir):
    import numpy as np

    import trnsim
    import trnsim.nki as nki
    import trnsim.nki.isa as nisa
    import trnsim.nki.language as nl

    @nki.jit
    def add(a, b):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        x, y = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf), nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a)
        nisa.dma_copy(dst=y, src=b)
        nisa.tensor_tensor(dst=x, data1=x, data2=y, op=nl.add)
        nisa.dma_copy(dst=out, src=x)
        return out

    a = np.ones((128, 512), np.float32)
    seen = []
    r = trnsim.benchmark(add, a, a, target="trn2", progress=lambda d, t: seen.append((d, t)))
    live.publish(kind="kernel", name="add", force=True)  # flush the rate-limited state
    (p,) = live.processes()
    assert p["name"] == "add" and p["cores"] == [0] and p["phase"] == "timing"
    busy = p["busy"]["0"]
    assert busy["VectorE"] > 0 and busy["DMA"] > 0
    assert 0 < p["utilisation"]["0"] <= 1
    assert p["sim_time_ns"] == pytest.approx(r.period + min(e.start for e in r.timelines[0].events))
    assert seen[-1] == (4, 4)


def test_collective_sweep_publishes_its_ranks_and_instance(rundir):
    from click.testing import CliRunner

    from trnsim.cli import cli

    r = CliRunner().invoke(cli, ["collective", "allr", "--instance", "trn2.48xlarge", "--json"])
    assert r.exit_code == 0, r.output
    live.publish(kind="collective", name="flush", force=True)  # write the rate-limited state
    (p,) = live.processes()
    assert p["instance"] == "trn2.48xlarge" and p["kind"] == "collective" and p["cores"] == list(range(64))
