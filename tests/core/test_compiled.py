"""The compiled modules (trnsim/compiled.py): built in CI, loaded only when current, and the same runs as
their Python sources."""
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from trnsim import compiled
from trnsim.core.timing import simulate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def figures() -> dict:
    """Each matmul ladder step (timing only) and the tiled one with values: its stream, every event of its
    schedule and, with values, the output's bits."""
    sys.path.insert(0, str(EXAMPLES))
    import matmul_ladder as ladder
    out = {}
    for kernel, values in [(k, False) for k in ladder.LADDER] + [(ladder.matmul_tiled, True)]:
        lhsT, rhs = ladder.inputs(M=2048, N=1024, K=1024, seed=1)
        if values:
            lhsT, rhs = lhsT[:256, :256], rhs[:256, :512]
        res = kernel(lhsT, rhs) if values else kernel.trace(lhsT, rhs, target="trn2", values=False)
        nc = kernel.last_cores[0]
        tl = simulate(nc.stream, nc.spec.target)
        memories: dict = {}  # numbered per process: relabelled in order of first use
        out[f"{kernel.__name__} values={values}"] = {
            "stream": [[r.op.value, r.engine.value, r.location,
                        [str(v._replace(memory=memories.setdefault(v.memory, len(memories)))) for v in r.operands.values()]]
                       for r in nc.stream],
            "events": [[e.track, e.start, e.end, list(e.deps), e.blocker] for e in tl.events],
            "bits": np.asarray(res).view(np.uint16).tolist() if values else None}
    return out


def test_the_compiled_modules_run_as_their_sources_do():
    """This process (compiled modules when built, speed layer on) against a fresh one running every module
    as Python with the speed layer off: the same streams, schedules and output bits."""
    env = dict(os.environ, TRNSIM_FAST="0", PYTHONPATH=os.pathsep.join([str(Path(__file__).parent),
                                                                         os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-c", "import json, test_compiled as t; from trnsim import compiled; "
                        "print(json.dumps([compiled.loaded(), t.figures()]))"], env=env, capture_output=True,
                       text=True, check=True)
    python_loaded, python = json.loads(p.stdout)
    assert python_loaded == []
    ours = json.loads(json.dumps(figures()))
    assert ours.keys() == python.keys()
    for name in ours:
        for part in ("stream", "events", "bits"):
            assert ours[name][part] == python[name][part], f"{name}: {part} differ"
    assert len(ours["matmul_optimized values=False"]["events"]) > 300


def test_ci_runs_the_compiled_modules():
    """`make test` builds them; in CI (TRNSIM_REQUIRE_TOOLS=1) a build that failed fails here."""
    built = compiled.current()
    if len(built) < len(compiled.MODULES) and os.environ.get("TRNSIM_REQUIRE_TOOLS") != "1":
        pytest.skip("the compiled modules are not built here (make test builds them)")
    assert sorted(built) == sorted(compiled.MODULES)
    for m in compiled.MODULES:
        __import__(m)
    assert compiled.loaded() == list(compiled.MODULES)


def test_a_stale_build_is_not_loaded(tmp_path, monkeypatch):
    """A module is loaded compiled only when built from its source as it is now."""
    monkeypatch.setattr(compiled, "BUILT", tmp_path)
    name = compiled.MODULES[0]
    (tmp_path / (name + compiled.SUFFIX)).write_bytes(b"")
    (tmp_path / "sources.json").write_text(json.dumps({name: "0" * 64}))
    assert compiled.current() == {}
    (tmp_path / "sources.json").write_text(json.dumps({name: compiled.digest(name)}))
    assert compiled.current() == {name: tmp_path / (name + compiled.SUFFIX)}
    (tmp_path / (name + compiled.SUFFIX)).unlink()
    assert compiled.current() == {}


def test_a_modules_declarations_are_part_of_its_build(tmp_path, monkeypatch):
    """Editing a module's .pxd makes its build stale, as editing its source does."""
    monkeypatch.setattr(compiled, "ROOT", tmp_path)
    (tmp_path / "m.py").write_text("class C:\n    pass\n")
    alone = compiled.digest("m")
    (tmp_path / "m.pxd").write_text("cdef class C:\n    pass\n")
    declared = compiled.digest("m")
    (tmp_path / "m.pxd").write_text("cdef class C:\n    cdef public object x\n")
    assert len({alone, declared, compiled.digest("m")}) == 3


def test_another_modules_declarations_are_part_of_its_build(tmp_path, monkeypatch):
    """A module may call what another module's .pxd declares at C level, so editing any .pxd makes every
    build stale."""
    monkeypatch.setattr(compiled, "ROOT", tmp_path)
    (tmp_path / "trnsim" / "core").mkdir(parents=True)
    (tmp_path / "trnsim" / "a.py").write_text("def f():\n    return 1\n")
    before = compiled.digest("trnsim.a")
    (tmp_path / "trnsim" / "core" / "b.pxd").write_text("cpdef int g()\n")
    assert compiled.digest("trnsim.a") != before


def test_no_compiled_function_keeps_a_nested_function_in_its_closure():
    """Compiled closures share one cell object, so a nested function that another nested function calls
    would make a cycle, which a launch (collector off) never frees: the tiles it holds would stay live."""
    found = []

    def walk(code):
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                if c.co_name in code.co_cellvars:
                    found.append(f"{code.co_qualname} -> {c.co_name}")
                walk(c)
    for m in compiled.MODULES:
        walk(compile(compiled.source(m).read_text(), str(compiled.source(m)), "exec"))
    assert found == []
    walk(compile("def f():\n    def g(): pass\n    def h(): g()\n", "<check>", "exec"))
    assert found == ["f -> g"]  # the check sees such a function
