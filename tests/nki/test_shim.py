"""The drop-in shim: unmodified `import nki` files run under `trnsim run`, and a real nki is never shadowed."""
import json
import subprocess
import sys

from click.testing import CliRunner

from trnsim import shim
from trnsim.cli import cli

KERNEL_FILE = '''
import sys
import numpy as np
import nki
import nki.language as nl
import nki.isa as nisa
from nki.isa.constants import engine

@nki.jit
def double(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nisa.tensor_scalar(t, t, nl.multiply, 2.0, engine=engine.vector)
    nl.store(out, t)
    return out

n = int(sys.argv[1])
x = np.arange(128 * n, dtype=np.float32).reshape(128, n)
assert np.array_equal(double(x), 2 * x)
print("KERNEL OK", n)
'''


def test_trnsim_run_executes_unmodified_nki_file(tmp_path):
    """`python -m trnsim run kernel.py 16` runs a file that begins with `import nki` and passes its argv."""
    f = tmp_path / "kernel.py"
    f.write_text(KERNEL_FILE)
    r = subprocess.run([sys.executable, "-m", "trnsim", "run", str(f), "16"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "KERNEL OK 16" in r.stdout


def test_trnsim_run_json_counts_instructions(tmp_path):
    """`trnsim run --json` reports each launch with its target and instruction count (load, scale, store)."""
    f = tmp_path / "kernel.py"
    f.write_text(KERNEL_FILE)
    r = CliRunner().invoke(cli, ["run", "--json", "--target", "trn3", str(f), "8"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output.splitlines()[-1])
    assert data["launches"][0]["target"] == "trn3" and data["launches"][0]["instructions"] == 3
    shim.uninstall()


def test_trnsim_run_error_is_one_line_with_file_line(tmp_path):
    """A kernel error under `trnsim run` prints one line naming the rule and the kernel's file:line."""
    f = tmp_path / "bad.py"
    f.write_text("import numpy as np\nimport nki, nki.language as nl\n@nki.jit\ndef k(x):\n"
                 "    t = nl.ndarray((256, 4), nl.float32)\n    return t\nk(np.ones(4, np.float32))\n")
    r = subprocess.run([sys.executable, "-m", "trnsim", "run", str(f)], capture_output=True, text=True)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "partition dim 256 exceeds pmax 128" in r.stderr and "bad.py:5" in r.stderr


def test_shim_does_not_shadow_real_nki(tmp_path, monkeypatch):
    """With a real `nki` package importable, install() leaves it alone unless forced."""
    (tmp_path / "nki").mkdir()
    (tmp_path / "nki" / "__init__.py").write_text("REAL = True\n")
    shim.uninstall()
    monkeypatch.syspath_prepend(str(tmp_path))
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert shim.install() is False
    assert not shim.installed()
    assert shim.install(force=True) is True
    import nki
    assert nki.__name__ == "trnsim.nki"
    shim.uninstall()


def test_tour_runs_a_kernel_file_and_shows_an_error():
    """The CLI tour runs a softmax kernel file through the shim and shows a caught error with its line."""
    from rich.console import Console

    from trnsim.cli.run import tour
    con = Console(record=True, width=120)
    tour(con)
    text = con.export_text()
    assert "softmax matches numpy" in text and "FreeSizeError" in text and "softmax_kernel.py:14" in text
