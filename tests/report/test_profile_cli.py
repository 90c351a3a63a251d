"""`trnsim profile`: inputs from --arg, the file's own __main__, grid and LNC 2 launches, --every, --compare."""
import gzip
import json

import numpy as np
import pytest
from click.testing import CliRunner

from trnsim.cli import cli
from trnsim.cli.profile import parse_arg
from trnsim.errors import ConfigError
from trnsim.report import validate_trace_events

# Beta API (neuronxcc.nki), SPMD over a grid, a non-tensor argument, no inputs() and a __main__.
BETA = '''import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def scale_rows(x, factor):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0) * 128
    t = nl.load(x[i:i + 128, :])
    nl.store(out[i:i + 128, :], value=nl.multiply(t, factor))
    return out


if __name__ == "__main__":
    x = np.ones((256, 64), np.float32)
    print(scale_rows[2](x, 3.0).sum())
'''

# Current API, an LNC 2 launch: each core of the pair takes half of the rows.
LNC2 = '''import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def halves(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    rows = x.shape[0] // nl.num_programs(0)
    base = nl.program_id(0) * rows
    for r in nl.affine_range(rows // 128):
        t = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[base + r * 128:base + (r + 1) * 128, :])
        nisa.activation(dst=t, op=nl.exp, data=t)
        nisa.dma_copy(dst=out[base + r * 128:base + (r + 1) * 128, :], src=t)
    return out
'''


pytestmark = pytest.mark.usefixtures("shim_as_found")


def profile(*args):
    r = CliRunner().invoke(cli, ["profile", *map(str, args), "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_parse_arg_shapes_dtypes_and_literals():
    name, a = parse_arg("a=bf16[4,8]")
    assert name == "a" and a.shape == (4, 8) and a.dtype.name == "bfloat16" and np.isfinite(a.astype(np.float32)).all()
    assert parse_arg("b=float32[3]", values=False)[1].tolist() == [0.0, 0.0, 0.0]
    assert parse_arg("c=fp8_e4m3[2,2]")[1].dtype.name == "float8_e4m3"
    assert parse_arg("shape2D=(3, 4)") == ("shape2D", (3, 4))
    for bad in ("a", "a=bogus[2]", "a=[1", "1x=float32[2]"):
        with pytest.raises(ConfigError, match="--arg"):
            parse_arg(bad)


def test_beta_kernel_file_with_only_arg_shapes_and_a_grid(tmp_path):
    (tmp_path / "beta.py").write_text(BETA)
    out = profile(tmp_path / "beta.py", "--arg", "x=float32[256,64]", "--arg", "factor=2.0", "--grid", "2",
                  "--out", tmp_path / "o")
    assert out["kernel"] == "scale_rows" and out["latency_ns"] > 0
    assert out["instructions"]["DMA"] == 4  # two programs: a load and a store each
    page = (tmp_path / "o" / "scale_rows.html").read_text()
    assert "beta.py:10" in page  # the multiply's line, in the data the page draws


def test_main_profiles_the_last_launch_of_the_files_own_main(tmp_path):
    (tmp_path / "beta.py").write_text(BETA)
    r = CliRunner().invoke(cli, ["profile", str(tmp_path / "beta.py"), "--main", "--out", str(tmp_path / "o"), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["kernel"] == "scale_rows" and out["instructions"]["DMA"] == 4
    assert "49152.0" in r.stderr  # the file's own print (256 x 64 ones times 3), kept off the JSON


def test_lnc2_launch_times_both_cores(tmp_path):
    (tmp_path / "k.py").write_text(LNC2)
    one = profile(tmp_path / "k.py", "--arg", "x=float32[1024,512]", "--out", tmp_path / "a")
    two = profile(tmp_path / "k.py", "--arg", "x=float32[1024,512]", "--lnc", "2", "--out", tmp_path / "b")
    assert one["instructions"]["ScalarE"] == two["instructions"]["ScalarE"] == 8  # counted over both cores
    assert two["period_ns"] < 0.75 * one["period_ns"]  # half the rows per core
    assert one["overhead_ns"] > 0  # the same start-up and tear-down on either launch, outside the timeline
    for p in (one, two):
        assert p["latency_ns"] == pytest.approx(p["period_ns"] + one["overhead_ns"])
    assert two["dma_bytes"] == one["dma_bytes"]  # both cores' transfers counted
    summary = json.loads((tmp_path / "b" / "halves.profile.json").read_text())
    assert summary["instructions_total"] == 24  # 12 per core
    assert "2 (LNC 2); the timeline shows the slower one" in (tmp_path / "b" / "halves.html").read_text()


def test_missing_inputs_says_how_to_give_them(tmp_path):
    (tmp_path / "k.py").write_text(LNC2)
    r = CliRunner().invoke(cli, ["profile", str(tmp_path / "k.py")])
    assert r.exit_code != 0 and "--arg NAME=DTYPE[SHAPE]" in r.output and "--main" in r.output
    r = CliRunner().invoke(cli, ["profile", str(tmp_path / "k.py"), "--arg", "y=float32[128,4]"])
    assert r.exit_code != 0 and "halves has no argument 'y'" in r.output


def test_every_nth_instruction_and_a_valid_compressed_trace(tmp_path):
    (tmp_path / "k.py").write_text(LNC2)
    out = profile(tmp_path / "k.py", "--arg", "x=float32[1024,512]", "--every", "3", "--out", tmp_path / "o")
    with gzip.open(out["trace"], "rt") as f:
        trace = json.load(f)
    validate_trace_events(trace)
    ids = sorted(e["args"]["instruction"] for e in trace["traceEvents"] if e["ph"] == "X")
    assert ids == [*range(0, 24, 3), 23]  # 8 row tiles x (load, exp, store); the last store ends the axis
    assert trace["otherData"]["kernel"] == "halves"
    assert "every 3th" in (tmp_path / "o" / "halves.html").read_text()


def test_compare_two_profiles(tmp_path):
    (tmp_path / "k.py").write_text(LNC2)
    profile(tmp_path / "k.py", "--arg", "x=float32[1024,512]", "--out", tmp_path / "a")
    profile(tmp_path / "k.py", "--arg", "x=float32[1024,512]", "--lnc", "2", "--out", tmp_path / "b")
    a, b = tmp_path / "a" / "halves.profile.json", tmp_path / "b" / "halves.profile.json"
    r = CliRunner().invoke(cli, ["profile", str(a), "--compare", str(b), "--out", str(tmp_path / "c")])
    assert r.exit_code == 0, r.output
    la, lb = (json.loads(p.read_text())["latency_ns"] for p in (a, b))
    assert f"{lb / la:.2f}x" in r.output and "ScalarE active" in r.output
    assert (tmp_path / "c" / "compare_halves_halves.html").exists()
    r = CliRunner().invoke(cli, ["profile", str(tmp_path / "k.py"), "--compare", str(tmp_path / "k.py")])
    assert r.exit_code != 0 and "not a readable profile summary" in r.output
