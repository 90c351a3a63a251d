"""The commands a user types first start fast because they import no numerics: `--help`, `ls` and `specs` must
not pull in numpy or an optional framework (each adds a tenth of a second or more before anything prints)."""
import subprocess
import sys

import pytest

HEAVY = ("numpy", "torch", "torch_xla", "jax", "pyarrow", "ray")

PROBE = """
import contextlib, io, sys
sys.argv = ["trnsim", *sys.argv[1:]]
from trnsim.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main()
    except SystemExit as e:
        code = e.code
print(code, *sorted(m for m in {heavy!r} if m in sys.modules))
"""


@pytest.mark.parametrize("argv", [["--help"], ["ls"], ["specs"], ["ls", "--json"], ["collective", "--help"]])
def test_first_commands_import_no_numerics(argv):
    out = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), *argv], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[0] in ("0", "None"), out
    assert out[1:] == [], f"`trnsim {' '.join(argv)}` imported {out[1:]}"
