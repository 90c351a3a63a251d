"""Every bad input a user can give gets one error line that names the problem, a non-zero exit, no traceback."""
import pytest
from click.testing import CliRunner

from trnsim.cli import cli


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    (d / "syntax.py").write_text("import nki\n\ndef broken(:\n    pass\n")
    (d / "name.py").write_text("import numpy as np\nimport nki\nimport nki.language as nl\n\n@nki.jit\ndef k(x):\n"
                               "    return undefined_name\n\ndef inputs():\n    return (np.ones((128, 8), np.float32),)\n\n"
                               "if __name__ == '__main__':\n    k(*inputs())\n")
    (d / "model.toml").write_text("layers = = 3\n")
    (d / "model2.toml").write_text('preset = "llama2-7b"\nheads = -4\n')
    return d


CASES = [
    # (args, text the one line must contain)
    (["run", "{d}/syntax.py"], "SyntaxError: invalid syntax at {d}/syntax.py:3"),
    (["profile", "{d}/syntax.py", "--out", "{d}/p"], "SyntaxError: invalid syntax at {d}/syntax.py:3"),
    (["run", "{d}/name.py"], "NameError: name 'undefined_name' is not defined at {d}/name.py:7"),
    (["profile", "{d}/name.py", "--out", "{d}/p"], "NameError: name 'undefined_name' is not defined at {d}/name.py:7"),
    (["profile", "{d}/name.py", "--out", "/proc/nope"], "--out: cannot create folder /proc/nope"),
    (["plan", "sweep", "llama3-8b", "--csv", "/nonexistent/x.csv"], "--csv: cannot write /nonexistent/x.csv"),
    (["plan", "sweep", "llama3-8b", "--chart", "/nonexistent/x.png"], "--chart: cannot write /nonexistent/x.png"),
    (["collective", "allr", "-r", "1000"], "-r/--nworkers: 1000 workers"),
    (["collective", "allr", "-r", "0"], "-r/--nworkers: must be at least 1"),
    (["collective", "allr", "-N", "0"], "-N/--nnodes: must be at least 1"),
    (["collective", "allr", "--instance", "p5.48xlarge"], "p5.48xlarge has 8 NVIDIA H100 80GB GPUs, no Neuron devices"),
    (["collective", "allr", "-b", "3", "-e", "3", "-d", "fp32"], "-b/--minbytes: 3 B is not a whole number of 4-byte fp32"),
    (["collective", "allr", "-b", "1x"], "-b/--minbytes: cannot read size '1x'"),
    (["collective", "allr", "-n", "x"], "Invalid value for '-n' / '--iters': 'x' is not a valid integer"),
    (["ls", "--instance", "p5.48xlarge"], "p5.48xlarge has 8 NVIDIA H100 80GB GPUs and no Neuron devices"),
    (["ls", "--lnc", "x"], "Invalid value for '--lnc'"),
    (["specs", "trn9"], "unknown chip, instance, UltraServer or NeuronCore 'trn9'"),
    (["dtypes", "abc"], "Invalid value for '[VALUES]...': 'abc' is not a valid float"),
    (["plan", "llama3-70b", "--nodes", "8", "--tp", "3"], "layout field 'tp': heads 64 are not divisible by tp 3"),
    (["plan", "llama3-70b", "--nodes", "8", "--cp", "3"], "layout field 'cp': seq 8192 is not divisible by cp 3"),
    (["plan", "llama3-70b", "--nodes", "8", "--ep", "3"], "layout field 'ep': llama3-70b is dense (no experts)"),
    (["plan", "llama3-70b", "--nodes", "8", "--tp", "48"], "heads 64 are not divisible by tp 48"),
    (["plan", "llama3-8b", "--tokens", "-5"], "Invalid value for '--tokens': -5.0 is not in the range x>0"),
    (["plan", "llama3-8b", "--nodes", "x"], "Invalid value for '--nodes': 'x' is not a valid integer"),
    (["plan", "llama3-8b", "--seq", "8k"], "Invalid value for '--seq': '8k' is not a valid integer"),
    (["plan", "llama3-8b", "--price", "-3"], "--price: expected USD or SYSTEM=USD with a positive price"),
    (["plan", "{d}/model.toml"], "model.toml"),
    (["plan", "{d}/model2.toml"], "heads"),
    (["plan", "sweep", "llama3-8b", "--workers", "0"], "Invalid value for '--workers': 0 is not in the range x>=1"),
    (["plan", "sweep", "llama3-8b", "--nodes", "1,x"], "--nodes: expected comma-separated integers, got '1,x'"),
    (["plan", "sweep", "{d}/model.toml"], "model.toml"),
    (["plan", "compare", "llama3-8b", "--systems", ""], "--systems: is empty"),
    (["plan", "compare", "llama3-8b", "--systems", "trn1.32xlarge:0"], "--systems: expected SYSTEM:NODES with NODES >= 1"),
    (["plan", "compare", "llama3-8b", "--price", "trn1.32xlarge=abc"], "--price: expected USD or SYSTEM=USD"),
    (["plan", "compare", "{d}/model.toml"], "model.toml"),
    (["demo", "--only", "nosuch"], "--only: no section title contains 'nosuch'"),
    (["run", "{d}/name.py", "--target", "trn9"], "Invalid value for '--target': 'trn9' is not one of"),
    (["run", "{d}/missing.py"], "Invalid value for 'FILE': File '{d}/missing.py' does not exist"),
    (["profile", "{d}/name.py", "--kernel", "nosuch", "--out", "{d}/p"], "no kernel named 'nosuch'; kernels: k"),
    (["ls", "--lnc", "3"], "Invalid value for '--lnc': 3 is not in the range 1<=x<=2"),
    (["collective", "nosuch"], "unknown collective operation 'nosuch'"),
    (["collective", "allr", "--report-to-json-file", "/nonexistent/r.json"], "--report-to-json-file: cannot write"),
]


@pytest.mark.parametrize("args, text", CASES, ids=[" ".join(a)[:60] for a, _ in CASES])
def test_bad_input_is_one_line(files, args, text):
    r = CliRunner().invoke(cli, [a.format(d=files) for a in args])
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code >= 1, r.output
    assert "Traceback" not in r.output and len(lines) == 1, r.output
    assert lines[0].startswith("trnsim: error: ") and text.format(d=files) in lines[0], r.output
    assert "click/core.py" not in r.output


def test_ctrl_c_in_a_sweep_is_one_line(monkeypatch):
    """Ctrl-C while a sweep runs: 'interrupted', exit 130, no traceback."""
    from trnsim.plan import sweep as S

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(S, "sweep", interrupted)
    r = CliRunner().invoke(cli, ["plan", "sweep", "llama2-7b", "--nodes", "1", "--no-progress"])
    assert r.exit_code == 130 and "interrupted" in r.output and "Traceback" not in r.output


def test_sweep_workers_ignore_ctrl_c():
    """Worker processes leave SIGINT to the parent, so an interrupted sweep prints no worker tracebacks."""
    import signal

    from trnsim.plan.sweep import _ignore_interrupts

    old = signal.getsignal(signal.SIGINT)
    try:
        _ignore_interrupts()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, old)


def _group(pgid: int) -> list[int]:
    """The live processes of process group `pgid` (Linux /proc)."""
    import os

    pids = []
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and int(open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[2]) == pgid:
                pids.append(int(d))
        except (OSError, IndexError, ValueError):
            continue
    return pids


def test_ctrl_c_to_a_sweep_with_workers_prints_no_traceback():
    """SIGINT to the whole process group (what a terminal's Ctrl-C sends) while two workers run:
    exit 130 and one line, nothing from the workers."""
    import os
    import signal
    import subprocess
    import sys
    import time

    p = subprocess.Popen([sys.executable, "-m", "trnsim", "plan", "sweep", "llama3-70b", "--instances", "trn1.32xlarge",
                          "--nodes", "8,16", "--workers", "2", "--dtype", "fp32", "--no-progress"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # a terminal's, not pytest's
    deadline = time.monotonic() + 60  # interrupt once the pool's workers run, however loaded the machine
    while len(_group(p.pid)) < 3 and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(0.5)
    os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130 and "Traceback" not in out + err and "Error" not in err
    assert [ln for ln in err.splitlines() if ln.strip()] == ["trnsim: error: interrupted"]
