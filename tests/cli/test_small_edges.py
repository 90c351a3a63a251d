"""Small edges a new user meets: numpy warnings, the user's own frames with TRNSIM_TRACEBACK=1, an --arg
larger than memory, the demo's temporary files, charts without matplotlib."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from trnsim.cli import cli

ROOT = Path(__file__).parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT / "src"))

KERNEL = '''import nki, nki.language as nl
from helpers import tile_size


@nki.jit
def k(a):
    t = tile_size(a.shape[0])
    return nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
'''
HELPERS = '''def tile_size(n):
    return split(n)


def split(n):
    return n // 0
'''


def _trnsim(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "trnsim", *args], capture_output=True, text=True,
                          env={**ENV, **(env or {})}, cwd=cwd)


def test_dtypes_of_a_value_past_fp32_prints_no_numpy_warning():
    r = _trnsim("dtypes", "1e40")
    assert r.returncode == 0 and "Warning" not in r.stderr and "inf" in r.stdout


def test_traceback_shows_the_frames_in_the_users_own_files(tmp_path):
    (tmp_path / "k.py").write_text(KERNEL)
    (tmp_path / "helpers.py").write_text(HELPERS)
    plain = _trnsim("profile", "k.py", "--arg", "a=float32[128,128]", cwd=tmp_path)
    assert plain.returncode != 0 and "Traceback" not in plain.stderr
    assert "ZeroDivisionError" in plain.stderr and "helpers.py:6" in plain.stderr
    r = _trnsim("profile", "k.py", "--arg", "a=float32[128,128]", env={"TRNSIM_TRACEBACK": "1"}, cwd=tmp_path)
    frames = [ln.strip() for ln in r.stderr.splitlines() if ln.strip().startswith("File ")]
    assert [f.split('"')[1].rsplit("/", 1)[-1] + f.split(",")[1] for f in frames] == [
        "k.py line 7", "helpers.py line 2", "helpers.py line 6"]
    assert "site-packages" not in r.stderr and "trnsim/" not in r.stderr.replace(str(tmp_path), "")


def test_an_arg_larger_than_memory_is_a_named_error(monkeypatch):
    """An array the core's HBM holds but this machine's free memory does not (1 GiB free, pretended)."""
    from trnsim.cli import profile

    monkeypatch.setattr(profile, "_available_bytes", lambda: 2**30)
    kernel = ROOT / "examples" / "rmsnorm.py"
    r = CliRunner().invoke(cli, ["profile", str(kernel), "--arg", "a=bf16[40000,40000]"])
    assert r.exit_code == 2 and "internal error" not in r.output and "Traceback" not in r.output
    assert "1,600,000,000 elements need 14.9 GiB of host memory" in r.stderr and "1.0 GiB available" in r.stderr


def test_the_demo_removes_what_it_wrote(tmp_path):
    r = _trnsim("demo", "--only", "Profiling", env={"TMPDIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert "report:" in r.stdout and list(tmp_path.iterdir()) == []


def test_charts_without_matplotlib_are_refused_before_the_sweep(monkeypatch, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    r = CliRunner().invoke(cli, ["plan", "sweep", "llama3-8b", "--chart", str(tmp_path / "f.png")])
    assert r.exit_code == 2 and "pip install 'trnsim[charts]'" in r.stderr
