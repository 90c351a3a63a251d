"""`trnsim torchrun` from the command line: the report file, TensorBoard scalars, the missing-extra message."""
import json
import pathlib

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
    r = CliRunner().invoke(cli, ["torchrun", "--nproc_per_node=64", str(SCRIPTS / "reshaping.py")])
    assert r.exit_code == 2 and "trn1.32xlarge has 32 NeuronCores" in r.output


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
