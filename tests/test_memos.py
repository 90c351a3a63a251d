"""The fabric's and the planner's pure functions keep their results only through the speed layer (trnsim/memos.py
at the hook of trnsim/pure.py): TRNSIM_FAST=0 computes every call afresh, and nothing changes but the time."""
import ast
import json
import os
import pathlib
import subprocess
import sys

from trnsim import fabric, memos, pure
from trnsim.fabric import timing as fabric_timing
from trnsim.plan import plan
from trnsim.plan import serve
from trnsim.plan.serve.engine import requests, simulate

PKG = pathlib.Path(__file__).parents[1] / "src" / "trnsim"


def kept_by_hand(path: pathlib.Path) -> list[str]:
    """The caches a module keeps itself: functools cache decorators and memo dicts set on an object. A function
    of no argument reads a package file once (loading, not a memo)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (node.args.args or node.args.vararg):
            for d in node.decorator_list:
                name = ast.unparse(d.func if isinstance(d, ast.Call) else d)
                if name.split(".")[-1] in ("cache", "lru_cache"):
                    found.append(f"{path.name}:{node.lineno} {node.name} @{name}")
        elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith("__dict__.setdefault"):
            found.append(f"{path.name}:{node.lineno} a memo dict on an object")
    return found


def test_fabric_and_planner_keep_no_cache_of_their_own():
    """Their memos are declared pure; the caches are the speed layer's."""
    files = [*(PKG / "fabric").rglob("*.py"), *(PKG / "plan").rglob("*.py")]
    assert [f for p in files for f in kept_by_hand(p)] == []
    assert {f.__module__ for f in pure.DECLARED} >= {"trnsim.fabric.timing", "trnsim.fabric.runtime",
                                                      "trnsim.plan.comm", "trnsim.plan.compute"}


def test_the_walk_finds_a_cache_kept_by_hand(tmp_path):
    """The check above can fail."""
    src = tmp_path / "m.py"
    src.write_text("import functools\n@functools.lru_cache(maxsize=4)\ndef f(x):\n    return x\n"
                   "def g(c):\n    return c.__dict__.setdefault('_memo', {})\n"
                   "@functools.cache\ndef table():\n    return {}\n")
    assert len(kept_by_hand(src)) == 2


def test_only_the_package_installs_the_memos():
    """The meaning never imports the speed layer's memos: the package installs them when it is imported."""
    importers = []
    for p in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module == "trnsim.memos" or (
                    node.module == "trnsim" and any(a.name == "memos" for a in node.names))):
                importers.append(str(p.relative_to(PKG)))
            elif isinstance(node, ast.Import) and any(a.name == "trnsim.memos" for a in node.names):
                importers.append(str(p.relative_to(PKG)))
    assert importers == ["__init__.py"]


def figures() -> dict:
    """Collective times over a cluster and its groups, a training plan and a serving simulation."""
    c = fabric.cluster("trn2.48xlarge", nodes=2)
    out = {f"{op} {n} {size}": fabric_timing.collective_time(op, size, n, c)
           for op in ("all_reduce", "all_gather", "all_to_all") for n in (8, 64, 128) for size in (2**16, 2**26)}
    p = plan("llama3-8b", "trn2.48xlarge", 2, tp=8)
    out["plan"] = (p.step_ns, dict(p.breakdown), p.mfu)
    s = serve.plan("llama3-8b", "trn2.48xlarge", tp=8, batch=4, input_len=512, output_len=64)
    out["serve plan"] = (s.ttft_ms, s.tpot_ms)
    out["serve"] = simulate("llama3-8b", "trn2.48xlarge", requests(4, 4.0, (128, 512), (4, 8), seed=1), tp=8,
                            max_num_seqs=4).summary()
    return out


def run(fast: str) -> dict:
    """figures() twice in a fresh process with TRNSIM_FAST=`fast`, and what the declared functions kept."""
    code = ("import json, test_memos as t; from trnsim import pure; a = t.figures(); b = t.figures(); "
            "print(json.dumps({'figures': a, 'again': b, 'kept': [f.cache_info() is not None for f in pure.DECLARED], "
            "'hits': sum(f.cache_info().hits for f in pure.DECLARED if f.cache_info() is not None)}))")
    env = dict(os.environ, TRNSIM_FAST=fast, PYTHONPATH=os.pathsep.join([str(pathlib.Path(__file__).parent),
                                                                         os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(p.stdout)


def test_the_same_figures_with_the_speed_layer_on_and_off():
    """On, every declared function is kept and a second run is answered from the caches; off (TRNSIM_FAST=0),
    none is, and every figure is the same."""
    on, off = run("1"), run("0")
    assert all(on["kept"]) and on["hits"] > 100 and on["again"] == on["figures"]
    assert not any(off["kept"]) and off["hits"] == 0
    assert off["figures"] == on["figures"]


def test_a_declared_key_leaves_the_other_arguments_out():
    """A pure function with a `key` is kept per key; its other arguments only feed the first computation."""
    calls = []

    def f(x, extra):
        calls.append((x, extra))
        return x * 2

    kept = memos._kept(f, 8, lambda x, extra: x)
    assert (kept(1, "a"), kept(1, "b"), kept(2, "c")) == (2, 2, 4)
    assert calls == [(1, "a"), (2, "c")]
