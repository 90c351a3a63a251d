"""Every launch is bounded: a kernel that never stops issuing instructions ends with a BudgetError."""
import numpy as np
import pytest
from click.testing import CliRunner

from trnsim import nki
from trnsim.cli import cli
from trnsim.core.limits import BudgetError, loop_line
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl


def runaway(x):
    t = nl.load(x)
    y = nl.ndarray(t.shape, t.dtype)
    while True:  # the loop the error names
        nisa.tensor_scalar(y, t, nl.multiply, 2.0)


LOOP_LINE = runaway.__code__.co_firstlineno + 3


def test_runaway_loop_stops_at_the_instruction_budget():
    """With max_instructions=500 the 501st instruction raises, naming the while loop's line."""
    k = nki.jit(runaway, max_instructions=500)
    with pytest.raises(BudgetError, match=r"more than 500 instructions.*in the loop") as e:
        k(np.ones((128, 64), np.float32))
    assert e.value.location == f"{__file__}:{LOOP_LINE}"
    assert len(k.last_cores[0].stream) == 500


def test_budget_from_the_environment(monkeypatch):
    """TRNSIM_MAX_INSTRUCTIONS sets the budget of a launch that names none."""
    monkeypatch.setenv("TRNSIM_MAX_INSTRUCTIONS", "50")
    with pytest.raises(BudgetError, match="more than 50 instructions"):
        nki.jit(runaway)(np.ones((128, 64), np.float32))


def test_lnc2_cores_share_one_budget(trn):
    """The two cores of an LNC 2 launch charge one budget: core 1 stops once core 0 has spent most of it."""
    @nki.jit(max_instructions=300)
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        for _ in range(200):
            nisa.tensor_scalar(t, t, nl.add, 1.0)
        return out

    pair = k[2]
    with pytest.raises(BudgetError, match="more than 300"):
        pair(np.ones((128, 8), np.float32))
    assert [len(c.stream) for c in pair.last_cores] == [201, 99]


def test_memory_guard_stops_a_growing_launch():
    """A launch whose memory grows past max_memory_mb stops with a BudgetError naming the loop."""
    k = nki.jit(runaway, max_memory_mb=1)
    with pytest.raises(BudgetError, match=r"MiB of memory .* over its 1 MiB budget") as e:
        k(np.ones((128, 2048), np.float32))
    assert e.value.location.endswith(f":{LOOP_LINE}")


def test_loop_line_finds_the_innermost_loop(tmp_path):
    src = tmp_path / "k.py"
    src.write_text("for i in range(3):\n    x = 1\n    while x:\n        x = 0\ny = 2\n")
    assert loop_line(f"{src}:2") == f"{src}:1"
    assert loop_line(f"{src}:4") == f"{src}:3"
    assert loop_line(f"{src}:5") is None


def test_cli_prints_the_budget_error_without_traceback(tmp_path, monkeypatch):
    """`trnsim run` on a runaway kernel exits non-zero with one line naming the loop."""
    script = tmp_path / "spin.py"
    script.write_text(
        "import numpy as np\nimport nki\nimport nki.language as nl\nimport nki.isa as nisa\n\n"
        "@nki.jit\ndef spin(x):\n    t = nl.load(x)\n    while True:\n"
        "        nisa.tensor_scalar(t, t, nl.add, 1.0)\n\nspin(np.ones((128, 8), np.float32))\n")
    monkeypatch.setenv("TRNSIM_MAX_INSTRUCTIONS", "1000")
    r = CliRunner().invoke(cli, ["run", str(script)])
    assert r.exit_code != 0
    assert "Traceback" not in r.output
    lines = [l for l in r.output.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("trnsim: error: the launch issued more than 1,000 instructions")
    assert lines[0].endswith(f"{script}:9")


@nki.jit(max_memory_mb=32)
def copy_wide(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for j in nl.affine_range(x.shape[1] // 2048):
        nl.store(out[:, j * 2048:(j + 1) * 2048], nl.load(x[:, j * 2048:(j + 1) * 2048]))
    return out


def test_memory_budget_leaves_out_the_kernels_own_tensors(monkeypatch):
    """A 64 MiB input and a 64 MiB output (its bytes and never-written marks: 128 MiB of host memory) run
    under a 32 MiB budget read at every instruction: the budget counts what the run accumulates, not the
    tensors, which are the kernel's real data and bounded by HBM capacity."""
    import trnsim.core.limits as limits
    monkeypatch.setattr(limits, "_CHECK_EVERY", 1)
    x = np.random.default_rng(0).standard_normal((128, 1 << 17), np.float32)
    np.testing.assert_array_equal(copy_wide(x), x)
