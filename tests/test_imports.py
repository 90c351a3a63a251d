"""The imports of src/trnsim, walked from the sources (function-level imports included): no import circle,
and no arrow from a layer to one after it in docs/layout.md, whose table lists the layers in processing order."""
import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).parents[1]
PKG = ROOT / "src" / "trnsim"

# Known circles and upward arrows outside the lowering layer's area, each with why it is allowed for now.
ALLOWED_CIRCLES = [
    # specs/hardware.py reads the catalog's chip lookup through the package inside a function (a lazy import);
    # the package re-exports hardware's names
    {"trnsim.specs", "trnsim.specs.hardware"},
]
ALLOWED_UP: set = set()


def modules() -> dict:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = list(p.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


MODULES = modules()


def _resolve(name):
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str) -> set:
    """The trnsim modules `module` imports anywhere in its source (`from pkg import sub` names the submodule)."""
    path = MODULES[module]
    pkg = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {_resolve(a.name) for a in node.names if a.name.split(".")[0] == "trnsim"}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            if base.split(".")[0] != "trnsim":
                continue
            out |= {_resolve(f"{base}.{a.name}") if f"{base}.{a.name}" in MODULES else _resolve(base) for a in node.names}
    out.discard(None)
    out.discard(module)
    return out


GRAPH = {m: imports(m) for m in MODULES}


def layers() -> list[str]:
    """The top-level rooms of docs/layout.md's table, in its order (`core/errors.py` rows are inside core)."""
    rows = re.findall(r"^\| `([\w.]+/?)`", (ROOT / "docs" / "layout.md").read_text(), re.M)
    return [r.rstrip("/").removesuffix(".py") for r in rows]


def layer(module: str) -> int:
    order = layers()
    parts = module.split(".")
    if len(parts) > 1 and parts[1] == "__main__":
        return len(order)  # `python -m trnsim`: above the CLI it starts
    if len(parts) == 1:
        # the package itself is the public facade (trnsim.benchmark, trnsim.chip, ...): just below the CLI
        return order.index("cli") - 0.5
    return order.index(parts[1])


def circles() -> list[set]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found, count = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = count[0]
        count[0] += 1
        stack.append(v)
        on.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(comp)
    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return found


def test_every_module_is_in_a_layer_of_the_layout():
    order = layers()
    assert {m.split(".")[1] for m in MODULES if "." in m} - {"__main__"} <= set(order)


def test_no_import_circle():
    assert [sorted(c) for c in circles() if c not in ALLOWED_CIRCLES] == []


def test_no_arrow_up_the_layers():
    up = {(m, w) for m, ws in GRAPH.items() for w in ws if layer(w) > layer(m)}
    assert sorted(up - ALLOWED_UP) == []


def test_the_lowering_layer_sits_between_the_instructions_and_both_languages():
    """nki/lower.py knows the instructions and the launch helpers, never a language module; those never
    import it back; the beta tile algebra reaches the lowering layer, not the beta language."""
    nki = {w for w in GRAPH["trnsim.nki.lower"] if w.startswith("trnsim.nki")}
    assert nki <= {"trnsim.nki._frontend", "trnsim.nki.isa", "trnsim.nki._current"}
    for below in ("trnsim.nki._frontend", "trnsim.nki.isa", "trnsim.nki._current"):
        assert not {w for w in GRAPH[below] if w == "trnsim.nki.lower" or "language" in w or ".beta" in w}
    assert "trnsim.nki.beta.language" not in GRAPH["trnsim.nki.beta._tile"]
    assert "trnsim.nki.lower" in GRAPH["trnsim.nki.beta._tile"]


def test_the_walk_sees_function_level_imports():
    """The check would catch the circle the lowering layer dissolved: a function-level import is an arrow."""
    assert "trnsim.specs" in GRAPH["trnsim.specs.hardware"]  # `from trnsim import specs` inside a function


def test_the_meaning_never_imports_the_speed_layer():
    """core/fast/ overrides the hook points of core/builder.py; nothing below the front ends imports it (the
    meaning runs and is defined without it), and it is chosen only where a launch makes its cores (nki/)."""
    below = [m for m in MODULES if layer(m) <= layers().index("core") and not m.startswith("trnsim.core.fast")]
    assert "trnsim.core.machine" in below and "trnsim.core.timing.scheduler" in below
    assert sorted(m for m in below if any(w.startswith("trnsim.core.fast") for w in GRAPH[m])) == []
    users = {m for m, ws in GRAPH.items() if not m.startswith("trnsim.core.fast")
             and any(w.startswith("trnsim.core.fast") for w in ws)}
    assert users and all(m.startswith("trnsim.nki.") for m in users), sorted(users)


def test_no_word_of_the_speed_layer_in_the_meaning():
    """The instruction set, tensors, memories and the machine say nothing of the speed layer: its tricks live in
    core/fast/, behind the hook points the meaning exposes."""
    files = [*(PKG / "core" / "isa").glob("*.py"), *(PKG / "core" / n for n in ("tensor.py", "memory.py", "machine.py"))]
    assert [f"{p.relative_to(PKG)}:{i}" for p in files for i, line in enumerate(p.read_text().splitlines(), 1)
            if "fast" in line.lower()] == []
