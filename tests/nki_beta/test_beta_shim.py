"""A file that starts `import neuronxcc.nki as nki` runs unchanged under `trnsim run`."""
import json
import subprocess
import sys

from click.testing import CliRunner

from trnsim import shim
from trnsim.cli import cli

BETA_FILE = '''import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa
from neuronxcc.nki import baremetal
import numpy as np


@nki.jit
def scaled_exp(in_tensor, out_tensor):
    """A beta tutorial-style kernel: output passed in, an SPMD grid, masks for a ragged edge."""
    sz_p, sz_f = in_tensor.shape
    i_f = nl.arange(sz_f)[None, :]
    pid = nl.program_id(0)
    for t in nl.affine_range((sz_p + 127) // 128 // nl.num_programs(0)):
        i_p = (t * nl.num_programs(0) + pid) * 128 + nl.arange(128)[:, None]
        tile = nl.load(in_tensor[i_p, i_f], mask=(i_p < sz_p))
        out = nisa.activation(op=nl.exp, data=tile, scale=0.5)
        nl.store(out_tensor[i_p, i_f], value=out, mask=(i_p < sz_p))


x = np.linspace(-2, 2, 500 * 64, dtype=np.float32).reshape(500, 64)
y = np.zeros_like(x)
scaled_exp[2](x, y)
assert np.allclose(y, np.exp(0.5 * x), rtol=1e-6), "mismatch"
print("BETA OK", nisa.get_nc_version().name)
'''


def test_trnsim_run_executes_unmodified_beta_file(tmp_path):
    """`python -m trnsim run beta.py` runs a file starting `import neuronxcc.nki as nki` and checks its numpy result."""
    f = tmp_path / "beta.py"
    f.write_text(BETA_FILE)
    r = subprocess.run([sys.executable, "-m", "trnsim", "run", str(f)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "BETA OK gen3" in r.stdout


def test_trnsim_run_json_reports_the_grid(tmp_path):
    """`trnsim run --json --target trn1` reports the beta launch with its grid, target and instruction count."""
    f = tmp_path / "beta.py"
    f.write_text(BETA_FILE.replace("gen3", "gen2"))
    r = CliRunner().invoke(cli, ["run", "--json", "--target", "trn1", str(f)])
    try:
        assert r.exit_code == 0, r.output
        launch = json.loads(r.output.splitlines()[-1])["launches"][0]
        assert launch["kernel"] == "scaled_exp" and launch["target"] == "trn1" and launch["grid"] == [2]
        assert launch["instructions"] == 4 * 3  # 4 row tiles (the last masked to 116 rows): load, activation, store
    finally:
        shim.uninstall()


PROFILE_FILE = '''import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np


@nki.jit
def double(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.multiply(nl.load(x), 2.0))
    return out


def inputs():
    return (np.ones((128, 512), np.float32),)
'''


def test_trnsim_profile_takes_a_beta_kernel(tmp_path):
    """`trnsim profile --timing-only` times a beta kernel and writes its Perfetto trace."""
    f = tmp_path / "beta_profile.py"
    f.write_text(PROFILE_FILE)
    shim.install(force=True)
    try:
        r = CliRunner().invoke(cli, ["profile", "--timing-only", "--json", "--out", str(tmp_path / "out"), str(f)])
    finally:
        shim.uninstall()
    assert r.exit_code == 0, r.output
    data = json.loads(r.output[r.output.index("{"):])
    assert data["kernel"] == "double" and data["latency_ns"] > 0
    assert (tmp_path / "out" / "double.trace.json.gz").exists()


def test_shim_does_not_shadow_a_real_neuronxcc(tmp_path, monkeypatch):
    """With a real `neuronxcc` importable, install() maps `nki` but leaves `neuronxcc` alone unless forced."""
    import sys
    (tmp_path / "neuronxcc").mkdir()
    (tmp_path / "neuronxcc" / "__init__.py").write_text("REAL = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    shim.uninstall()
    for name in [n for n in sys.modules if n.startswith("neuronxcc")]:
        monkeypatch.delitem(sys.modules, name)
    try:
        assert shim.install(force=False)
        import neuronxcc
        assert getattr(neuronxcc, "REAL", False) and "neuronxcc.nki" not in sys.modules
        shim.uninstall()
        assert shim.install(force=True)
        import neuronxcc.nki as nki
        assert nki.__name__ == "trnsim.nki.beta"
    finally:
        shim.uninstall()
        sys.modules.pop("neuronxcc", None)
