"""The command line shell: help, version, python -m, and errors without tracebacks."""
import importlib.util
import re
import subprocess
import sys

from click.testing import CliRunner

from trnsim.cli import cli
from trnsim.errors import UnknownNameError


def test_help_lists_demo():
    r = CliRunner().invoke(cli, ["--help"])
    assert r.exit_code == 0 and "demo" in r.output


def test_python_dash_m_runs_the_cli():
    r = subprocess.run([sys.executable, "-m", "trnsim", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and "0.1.0" in r.stdout


def test_trnsim_error_prints_one_line_and_exit_code():
    @cli.command("_boom", hidden=True)
    def _boom():
        raise UnknownNameError("widget", "wigdet", ["widget"])

    try:
        r = CliRunner().invoke(cli, ["_boom"])
    finally:
        cli.commands.pop("_boom")
    assert r.exit_code == 2
    assert "unknown widget 'wigdet'; did you mean widget" in r.output
    assert "Traceback" not in r.output


def test_demo_runs_every_section():
    from trnsim.cli.demo import SECTIONS

    r = CliRunner().invoke(cli, ["demo"])
    assert r.exit_code == 0, r.output
    for title, _ in SECTIONS:
        assert title in r.output
    assert "tour done" in r.output
    assert re.search(r"the compiler spills \(\d+ spills, [\d.]+ MiB moved\)", r.output.replace("\n", " "))
    # 2*(2*(2*0 + 1) + 2) + 1 = 9 in order and reversed; interleaved (x0, x0, x1): 2*(2*1 + 1) + 2 = 8
    assert "even-numbered first, then odd-numbered (at [0, 0]: 9.0 in order, 8.0 interleaved)" in " ".join(r.output.split())
    # the profiled latency, then its split: the timeline plus the execution's start-up and tear-down
    lat, period, over = map(float, re.search(r"timing only: ([\d.]+) us, HFU.*?latency = ([\d.]+) us timeline \+ "
                                              r"([\d.]+) us start-up", r.output.replace("\n", " ")).groups())
    assert over > 0 and abs(period + over - lat) <= 0.11
    text = " ".join(r.output.split())
    # --explain as bars: the longest mechanism gets the full bar, each one a basis
    bars = re.findall(r"([A-Za-z][\w -]+?) ([\d.]+) us (█+) (documented|assumed|calibrated|measured)", text)
    assert len(bars) >= 3
    longest = max(bars, key=lambda b: float(b[1]))
    assert len(longest[2]) == max(len(b[2]) for b in bars) == 20
    # the clock's own speed: the published matmul's instruction count, its simulated time and the CPU it took
    n, ms, cpu = re.search(r"on trn1 is ([\d,]+) instructions and ([\d.]+) ms simulated; traced and scheduled in "
                           r"([\d.]+) s of CPU", text).groups()
    assert int(n.replace(",", "")) == 39440 and float(ms) > 0 and float(cpu) > 0
    if importlib.util.find_spec("pyarrow"):
        rows, cols = (int(n.replace(",", "")) for n in re.search(
            r"Instruction\.parquet, ([\d,]+) instructions x (\d+) columns", text).group(1, 2))
        assert rows > 0 and cols > 0
    else:
        assert "pip install 'trnsim[parquet]' to see it here" in text
    assert re.search(r"t\.indirect\(index\).*gathered on the \w+ engine; matches numpy \(max relative error "
                     r"[\d.e+-]+\)", text)
    # copy_rows stores 3 of its 4 tiles of 128 rows: 128 x 64 of 512 x 64 elements are never written
    assert f"{128 * 64:,} of {512 * 64:,} elements never written (rows 384..511)" in text
    from trnsim.cli.run import _TOUR_KERNEL  # the finding names the line that made the output
    made = _TOUR_KERNEL.splitlines().index("def copy_rows(x):") + 2  # its first line, 1-based
    assert f"softmax_kernel.py:{made}: error: returned tensor" in text
    assert re.search(r"all_to_all_v of uneven chunks .* matches numpy; all_gather_v of 7 and 13 matches numpy", text)
    # the engine at rising load: throughput and the TTFT queue grow with the arrival rate
    load = [(float(t.replace(",", "")), float(q.replace(",", ""))) for t, q in
            re.findall(r"req/s ([\d,]+) tok/s TPOT p50 [\d.]+ ms TTFT p50 ([\d,]+) ms █+", text)]
    assert len(load) == 3 and load == sorted(load)
    # the training examples, run under trnsim torchrun and trnsim jax when the torch extra is installed
    if importlib.util.find_spec("torch_xla") and importlib.util.find_spec("jax"):
        steps = dict(re.findall(r"(FSDP2 \(fully_shard\)|DTensor tensor parallel|JAX pmap, data parallel) "
                                r"([\d.]+) ms/step █+ collective \d+%", text))
        assert len(steps) == 3 and all(float(v) > 0 for v in steps.values())
        assert "trained 3 steps with FSDP2 on 2 ranks" in text and "trained 3 steps tensor-parallel on 2 ranks" in text
        jax_diff = float(re.search(r"pmap on 2 devices and gradient descent on one in numpy end with the same weights "
                                   r"\(max \|diff\| ([\d.e+-]+)\)", text)[1])
        same = float(re.search(r"FSDP2 and tensor parallel end with the same weights \(max \|diff\| ([\d.e+-]+)\)",
                               text)[1])
        assert jax_diff < 1e-5 and same < 1e-5
    else:
        assert "pip install 'trnsim[torch]' to see them here" in text

