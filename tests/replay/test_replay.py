"""Every kernel the tests and examples launch records the same instruction stream and latency with values
on and in timing-only mode (values=False), and gives the same output bits and stream with the speed layer
off (TRNSIM_FAST=0).

The table is the set of test folders whose modules launch kernels (and the examples' test); each row runs
in a pytest subprocess with replay_plugin, which runs each distinct launch a second way and compares (see its
docstring).
"""
import json
import os
import pathlib
import subprocess
import sys

import pytest

TESTS = pathlib.Path(__file__).parents[1]
# the fuzz slice counts its own launches and draws random forms: replaying them proves nothing more
TABLE = {d: sorted(str(p) for p in (TESTS / d).glob("test_*.py") if p.name not in ("test_conformance.py",
                                                                                   "test_fuzz_slice.py"))
         for d in ("nki", "nki_beta", "core", "timing")} | {"examples": [str(TESTS / "test_examples.py")]}
SKIP = "not keeps_both_cores_writes"  # 200 launches of one kernel: checked once either way


def replay(modules: list[str], mode: str, tmp_path) -> dict:
    out = tmp_path / "replay.json"
    env = dict(os.environ, TRNSIM_REPLAY=mode, TRNSIM_REPLAY_OUT=str(out),
               PYTHONPATH=os.pathsep.join([str(TESTS / "replay"), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "replay_plugin", "-p", "no:cacheprovider",
                        "-k", SKIP, *modules], cwd=TESTS.parent, env=env, capture_output=True, text=True)
    assert r.returncode in (0, 5), r.stdout[-3000:] + r.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize("folder", sorted(TABLE))
def test_each_launch_is_the_same_run_every_way(folder, tmp_path):
    """Each distinct launch of the folder's kernels: the same stream (op, engine, operand regions) and latency
    timing-only, and the same output bits and stream with TRNSIM_FAST=0."""
    res = replay(TABLE[folder], "values,fast", tmp_path)
    assert not res["mismatches"], "\n".join(res["mismatches"])


def test_the_table_reaches_kernels(tmp_path):
    """The replay really runs launches: the kernel test module alone checks dozens of kernels."""
    res = replay([str(TESTS / "nki" / "test_kernels_more.py")], "values", tmp_path)
    assert len(res["checked"]) >= 10
