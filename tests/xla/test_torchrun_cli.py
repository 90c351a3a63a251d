"""`trnsim torchrun` from the command line: torchrun's split of launcher and script options, its flags,
signals, exit codes and logs; the report file, TensorBoard scalars, the missing-extra message."""
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from trnsim.cli import cli

SCRIPTS = pathlib.Path(__file__).parent / "scripts"


def test_without_the_extra_the_command_names_it(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch_xla" else real(name, *a))
    r = CliRunner().invoke(cli, ["torchrun", str(SCRIPTS / "reshaping.py")])
    assert r.exit_code == 2 and "pip install 'trnsim[torch]'" in r.output and "Traceback" not in r.output


def test_too_many_ranks_for_the_instance_is_refused():
    pytest.importorskip("torch_xla", reason="the framework path needs pip install 'trnsim[torch]'")
    r = CliRunner().invoke(cli, ["torchrun", "--nproc_per_node=65", str(SCRIPTS / "reshaping.py")])
    assert r.exit_code == 2 and "trn2.48xlarge has 64 NeuronCores" in r.output


def test_report_and_tensorboard(tmp_path):
    pytest.importorskip("torch_xla", reason="the framework path needs pip install 'trnsim[torch]'")
    pytest.importorskip("tensorboard")
    rep, tb = tmp_path / "r.json", tmp_path / "tb"
    r = CliRunner().invoke(cli, ["torchrun", "--quiet", "--instance", "trn2.48xlarge", "--report", str(rep),
                                 "--tensorboard", str(tb), str(SCRIPTS / "reshaping.py")])
    assert r.exit_code == 0, r.output
    data = json.loads(rep.read_text())
    assert data["instance"] == "trn2.48xlarge" and data["lnc"] == 2 and len(data["per_step"]) == data["steps"] == 4
    assert "simulated step time" in r.output and "changed shape" in r.output
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ev = EventAccumulator(str(tb))
    ev.Reload()
    assert {"trnsim/step_time_ms", "trnsim/mfu", "trnsim/steps_per_s"} <= set(ev.Tags()["scalars"])
    assert len(ev.Scalars("trnsim/step_time_ms")) == 4


ROOT = pathlib.Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "train_xla.py"


def test_a_launcher_option_after_the_script_is_refused_before_any_rank_starts():
    """torchrun hands everything after the script to it; trnsim's own --report there would end every rank
    with an argparse error, so it is refused at once, naming the option and where it goes."""
    r = CliRunner().invoke(cli, ["torchrun", "--nproc_per_node=8", str(EXAMPLE), "--report", "run.json"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "--report" in r.output and "put it before the script" in r.output


def test_a_report_path_that_cannot_be_written_is_refused_before_the_run(tmp_path):
    t0 = time.perf_counter()
    r = CliRunner().invoke(cli, ["torchrun", "--report", str(tmp_path / "missing" / "r.json"), str(EXAMPLE)])
    assert r.exit_code == 2 and "--report: cannot write" in r.output and "does not exist" in r.output
    assert time.perf_counter() - t0 < 5  # refused before any rank (each takes seconds to import torch-xla)


@pytest.mark.parametrize("args, message", [
    (["--nnodes", "2:1"], "--nnodes: '2:1': need 1 <= MIN <= MAX"),
    (["--nproc_per_node", "gpu"], "a Trainium instance lacks"),
    (["--tee", "5"], "--tee: '5': each value is 0"),
    (["-r", "0:x"], "--redirects: '0:x' is neither"),
    (["-m"], "--module: not supported"),
])
def test_torchrun_flags_with_bad_values_are_named(args, message):
    pytest.importorskip("torch_xla", reason="the framework path needs pip install 'trnsim[torch]'")
    r = CliRunner().invoke(cli, ["torchrun", *args, str(SCRIPTS / "sleeping.py")])
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output, r.output


def _launch(tmp_path, *args):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.Popen([sys.executable, "-m", "trnsim", "torchrun", "--quiet", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ctrl_c_stops_every_rank_with_one_line(tmp_path):
    """A terminal's Ctrl-C reaches the launcher's process group only; it stops both ranks and says so once."""
    pytest.importorskip("torch_xla", reason="the framework path needs pip install 'trnsim[torch]'")
    p = _launch(tmp_path, "--nproc_per_node=2", str(SCRIPTS / "sleeping.py"), str(tmp_path))
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("*.pid"))) < 2 and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.2)
    pids = [int(f.stem) for f in tmp_path.glob("*.pid")]
    assert len(pids) == 2, p.communicate()
    os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert [line for line in err.splitlines() if "error" in line] == [
        "trnsim: error: interrupted by SIGINT: stopped 2 ranks"]
    assert not any(_alive(pid) for pid in pids)


def test_a_failing_rank_ends_the_run_with_its_status_and_tee_writes_the_logs(tmp_path):
    """Rank 1 exits with status 3: exit 1 naming the rank and status (torchrun's ChildFailedError); -t 3 puts
    each rank's streams in LOG_DIR/RUN/attempt_0/RANK/ and on the console prefixed [defaultRANK]:, and
    --local-ranks-filter 1 keeps rank 0 off the console."""
    pytest.importorskip("torch_xla", reason="the framework path needs pip install 'trnsim[torch]'")
    logs = tmp_path / "logs"
    p = _launch(tmp_path, "--nproc_per_node=2", "--log-dir", str(logs), "-t", "3", "--local-ranks-filter", "1",
                str(SCRIPTS / "sleeping.py"), str(tmp_path), "3")
    out, err = p.communicate(timeout=120)
    assert p.returncode == 1, err
    assert "rank 1 exited with status 3" in err and "Traceback" not in err
    assert "[default1]:rank 1 ready" in out and "rank 0 ready" not in out
    assert "[default1]:rank 1 to stderr" in err
    run, = logs.glob("none_*")
    for rank in (0, 1):
        assert (run / "attempt_0" / str(rank) / "stdout.log").read_text().endswith(f"rank {rank} ready\n")
        assert f"rank {rank} to stderr\n" in (run / "attempt_0" / str(rank) / "stderr.log").read_text()


def test_momentum_buffers_are_named_as_new_inputs_not_a_changed_shape():
    """Step 2 of SGD with momentum compiles again because the buffers become graph inputs: the cause says so;
    under --json the script's prints go to stderr."""
    pytest.importorskip("torch_xla", reason="the framework path needs pip install 'trnsim[torch]'")
    p = _launch(ROOT, "--json", str(EXAMPLE), "--steps", "2")
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert "trained 2 steps" in err  # the script's own print goes to stderr: stdout is the JSON alone
    second = json.loads(out)["compilations"][1]
    assert second["step"] == 2 and second["cause"].startswith("the graph's inputs changed: "), second
