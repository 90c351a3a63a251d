"""The compiled modules (trnsim/compiled.py): built in CI, loaded only when current, and the same runs as
their Python sources."""
import ast
import json
import re
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
    out["reordered trn2"] = {"stream": None, "events": _reordered(), "bits": None}
    return out


def _reordered() -> list:
    """The schedule of a stream whose engines run later independent instructions in the gaps of blocked ones
    (TensorE under its warm-up throttle on trn2): every event."""
    from trnsim.core import NeuronCore, Op
    nc = NeuronCore("trn2", values=False)
    st, mv = nc.tensor((128, 128), "bfloat16"), nc.tensor((128, 512), "bfloat16")
    nc.issue(Op.MEMSET, engine="vector", dst=st, value=1.0)
    nc.issue(Op.MEMSET, engine="vector", dst=mv, value=1.0)
    for _ in range(6):
        slow, ps, other = nc.tensor((128, 2048), "bfloat16"), nc.tensor((128, 512), "float32", "psum"), \
            nc.tensor((128, 512), "float32", "psum")
        nc.issue(Op.MEMSET, engine="gpsimd", dst=slow, value=2.0)
        nc.issue(Op.NC_MATMUL, dst=ps, stationary=st, moving=slow[:, 0:512])  # waits for GpSimd
        nc.issue(Op.TENSOR_COPY, engine="vector", dst=nc.tensor((128, 512), "float32"), src=ps)
        nc.issue(Op.NC_MATMUL, dst=other, stationary=st, moving=mv)  # free: fills TensorE's gap
        nc.issue(Op.TENSOR_COPY, engine="vector", dst=nc.tensor((128, 512), "float32"), src=other)
    return [[e.track, e.start, e.end, list(e.deps), e.blocker] for e in simulate(nc.stream, "trn2").events]


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
    assert compiled.loaded() == (list(compiled.MODULES) if compiled.enabled() else [])  # TRNSIM_FAST=0: as Python


def test_a_fresh_process_loads_the_built_modules():
    """A new interpreter (nothing of importlib imported yet) loads every current build in place of its source."""
    built = compiled.current()
    if not built:
        pytest.skip("the compiled modules are not built here")
    p = subprocess.run([sys.executable, "-c", "import json, trnsim.fabric, trnsim.nki, trnsim.core.timing.result; "
                        "from trnsim import compiled; print(json.dumps(compiled.loaded()))"],
                       env=dict(os.environ, TRNSIM_FAST="1"), capture_output=True, text=True, check=True)
    assert sorted(json.loads(p.stdout)) == sorted(built)


def test_a_stale_build_is_not_loaded(tmp_path, monkeypatch):
    """A module is loaded compiled only when built from its source as it is now, as this interpreter's record
    says."""
    monkeypatch.setattr(compiled, "BUILT", tmp_path)
    name = compiled.MODULES[0]
    so = tmp_path / (name.replace(".", "/") + compiled.SUFFIX)
    so.parent.mkdir(parents=True)
    so.write_bytes(b"")
    (tmp_path / compiled.RECORD).write_text(json.dumps({name: "0" * 64}))
    assert compiled.current() == {}
    (tmp_path / compiled.RECORD).write_text(json.dumps({name: compiled.digest(name)}))
    assert compiled.current() == {name: so}
    own = compiled.RECORD
    monkeypatch.setattr(compiled, "RECORD", "sources.cpython-399-elsewhere.json")
    assert compiled.current() == {}  # another interpreter's record: its builds are not this one's
    monkeypatch.setattr(compiled, "RECORD", own)
    so.unlink()
    assert compiled.current() == {}


def test_the_install_builds_each_module_as_an_optional_extension_under_the_package(tmp_path):
    """setup.py's extensions: named so that the build puts them where `current` looks, each Cython-compiled
    under its own module name, and optional, so that an install without a C compiler still succeeds."""
    pytest.importorskip("Cython")
    some = ("trnsim.core.liveness", "trnsim.core.timing.intervals")
    exts = compiled.extensions(str(tmp_path), modules=some)
    assert [e.name for e in exts] == [f"trnsim._compiled.{m}" for m in some]
    assert all(e.optional for e in exts)
    for m, e in zip(some, exts):
        c = Path(e.sources[0]).read_text()
        assert f'"{m}"' in c and f"PyInit_{m.rsplit('.', 1)[1]}" in c  # its own name, its own init function
    made = tmp_path / "built"
    so = compiled.built_path(compiled.MODULES[1], made)
    so.parent.mkdir(parents=True)
    so.write_bytes(b"")
    assert compiled.record(made) == {compiled.MODULES[1]: compiled.digest(compiled.MODULES[1])}
    assert json.loads((made / compiled.RECORD).read_text()) == compiled.record(made)


def test_the_python_build_is_reported_once(tmp_path, monkeypatch, capsys):
    """With no compiled module current, one line on stderr the first time, none after."""
    monkeypatch.setenv(compiled.ENV, "1")  # the speed layer on, as installed (off, nothing is looked for)
    monkeypatch.setattr(compiled, "BUILT", tmp_path / "_compiled")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(compiled.sys, "meta_path", [f for f in compiled.sys.meta_path
                                                    if not isinstance(f, compiled._Finder)])
    for _ in range(3):
        compiled.install()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Python build" in err
    # an installation it cannot write to (when not root) is noted in the user's cache instead
    monkeypatch.setattr(compiled, "BUILT", tmp_path / "elsewhere" / "_compiled")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere").chmod(0o500)
    try:
        compiled.install()
        compiled.install()
    finally:
        (tmp_path / "elsewhere").chmod(0o700)
    assert capsys.readouterr().err.count("\n") == 1
    assert any((tmp_path / "cache" / "trnsim").glob(f"{compiled.NOTED}-*")) == (os.geteuid() != 0)

    def again(record: str) -> str:
        """What install says with this record and no marker anywhere."""
        for marker in [*(tmp_path / "cache" / "trnsim").glob(f"{compiled.NOTED}-*"), compiled.BUILT / compiled.NOTED]:
            marker.unlink(missing_ok=True)
        compiled.BUILT.mkdir(parents=True, exist_ok=True)
        (compiled.BUILT / compiled.RECORD).write_text(record)
        compiled.install()
        return capsys.readouterr().err

    assert "not built at install" in again("{not json")  # a damaged record is no build
    assert "older than their sources" in again(json.dumps({compiled.MODULES[0]: "0" * 64}))  # edited since


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


def _declared(pxd: Path) -> dict:
    """class -> the attributes a .pxd declares on it (`cdef [public] type a, b` lines in its `cdef class` body)."""
    out, cls = {}, None
    for line in pxd.read_text().splitlines():
        m = re.match(r"cdef class (\w+)", line)
        if m:
            cls = out.setdefault(m[1], set())
            continue
        if cls is not None and line and not line[0].isspace():
            cls = None
        m = re.match(r"\s+cdef (?:public |readonly )?(?:[\w.]+) ([\w, ]+)$", line)
        if cls is not None and m:
            cls |= {n.strip() for n in m[1].split(",")} - {"__dict__", "__weakref__"}
    return out


def _attributes(source: Path, name: str) -> set:
    """A class's attributes in its source: its __slots__, else every `self.x =` its methods assign."""
    cls = next(n for n in ast.walk(ast.parse(source.read_text())) if isinstance(n, ast.ClassDef) and n.name == name)
    for node in cls.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__slots__" for t in node.targets):
            return set(ast.literal_eval(node.value)) - {"__dict__", "__weakref__"}
    found = set()
    for node in ast.walk(cls):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
        for t in targets:
            for x in (t.elts if isinstance(t, ast.Tuple) else [t]):
                if isinstance(x, ast.Attribute) and getattr(x.value, "id", None) == "self":
                    found.add(x.attr)
    return found


def test_each_declaration_mirrors_its_class():
    """A .pxd declares its classes' attributes again for the compiled build: an attribute added to a class and
    not declared breaks only that build, so each declared class must list exactly its source's attributes."""
    pxds = sorted((Path(compiled.__file__).parent).rglob("*.pxd"))
    # A .pxd of inline C functions only is the compiled form of a Python module that is not compiled itself: the
    # modules that use it cimport it in its place (core/timing/arrays).
    twins = {p for p in pxds if "cdef inline" in p.read_text() and not re.search(r"^c(?:p)?def (?!inline)", p.read_text(), re.M)}
    assert {compiled.source(m).with_suffix(".pxd") for m in compiled.MODULES if compiled.source(m).with_suffix(".pxd").exists()} == set(pxds) - twins
    assert all(p.with_suffix(".py").exists() and p.with_suffix(".py") not in map(compiled.source, compiled.MODULES) for p in twins)
    checked = 0
    for pxd in pxds:
        for cls, declared in _declared(pxd).items():
            assert declared == _attributes(pxd.with_suffix(".py"), cls), f"{pxd.name}: {cls}"
            checked += 1
    assert checked >= 4


def test_the_speed_layer_and_the_scheduler_are_compiled():
    """Every module of core/fast/ but its switch, and the scheduler that replays every timed instruction."""
    fast = sorted(p.stem for p in (Path(compiled.__file__).parent / "core" / "fast").glob("*.py") if p.stem != "__init__")
    assert {f"trnsim.core.fast.{m}" for m in fast} | {"trnsim.core.timing.scheduler"} <= set(compiled.MODULES)


def test_an_install_carries_every_declaration():
    """A build is current only against the digest of every .pxd (compiled.declarations), so an installed
    package that lacked one would count its own extensions stale and run the Python build: pyproject's
    package data must take each .pxd under trnsim (glob semantics as setuptools reads them)."""
    import glob
    import tomllib
    root = Path(compiled.__file__).resolve().parents[2]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["trnsim"]
    package = Path(compiled.__file__).parent
    shipped = {Path(p) for pattern in patterns for p in glob.glob(str(package / pattern), recursive=True)}
    pxds = set(package.rglob("*.pxd"))
    assert len(pxds) >= 10
    assert pxds - shipped == set()
