"""`trnsim profile`: a real kernel's trace validates against the trace-event format, the HTML has its pictures."""
import gzip
import json

import pytest
from click.testing import CliRunner

import trnsim
from trnsim.cli import cli
from trnsim.errors import ConfigError
from trnsim.report import validate_trace_events

KERNEL = '''
import numpy as np
import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl


@nki.jit
def scale_rows(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for i in range(x.shape[0] // 128):
        t = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i * 128:(i + 1) * 128, :])
        y = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.sbuf)
        nisa.activation(dst=y, op=nl.exp, data=t)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=y)
    return out


def inputs():
    return (np.ones((512, 1024), np.float32),)
'''


def test_profile_writes_valid_trace_and_html(tmp_path):
    """Profiling a real kernel gives a gzip trace-event JSON that validates, with engine threads, the DMA
    transfers on one DMA thread and dependency flows, and an HTML page holding the instructions."""
    src = tmp_path / "k.py"
    src.write_text(KERNEL)
    res = CliRunner().invoke(cli, ["profile", str(src), "--target", "trn2", "--out", str(tmp_path / "p"), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    with gzip.open(d["trace"], "rt") as f:
        trace = json.load(f)
    validate_trace_events(trace)
    threads = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
    assert "ScalarE" in threads and "DMA" in threads
    phases = [e["ph"] for e in trace["traceEvents"]]
    assert phases.count("s") == phases.count("f") > 0
    html = open(d["html"]).read()
    assert "<canvas id=tl>" in html and html.count('"activation"') == 1
    assert d["instructions"] == {"DMA": 8, "ScalarE": 4}


def test_profile_without_inputs_is_one_line_error(tmp_path):
    """A kernel file without inputs() gets a one-line error naming the rule, and a non-zero exit."""
    src = tmp_path / "k.py"
    src.write_text(KERNEL.replace("def inputs", "def other"))
    res = CliRunner().invoke(cli, ["profile", str(src)])
    assert res.exit_code != 0
    assert "define inputs()" in res.output and "Traceback" not in res.output


def test_profile_unknown_kernel_lists_the_kernels(tmp_path):
    """--kernel with a name the file lacks fails in one line naming the kernels it has."""
    src = tmp_path / "k.py"
    src.write_text(KERNEL)
    res = CliRunner().invoke(cli, ["profile", str(src), "--kernel", "nope"])
    assert res.exit_code != 0 and "kernels: scale_rows" in res.output


def test_benchmark_rejects_a_plain_function():
    """trnsim.benchmark of something that is not a kernel is a ConfigError saying what it needs."""
    with pytest.raises(ConfigError, match="@nki.jit kernel"):
        trnsim.benchmark(len, [1])
