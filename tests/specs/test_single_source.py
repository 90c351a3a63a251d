"""Hardware numbers the catalog holds are read from it, not repeated as literals in the code.

The walk flags, in every module of src/trnsim outside specs/ and numerics/: a module constant named like a hardware figure;
a comparison, min() or max() with a catalog-sized literal (16, 32, 128 or 512: GpSimd partitions per core,
quadrants, partitions and PE columns, a PSUM bank's fp32s); a set of memory spaces (the engine wiring); a
list or set of engine dtypes; and a cost `factor=` above 1. Each place that keeps such a literal for a reason
other than hardware is listed below with the reason."""
import ast
import pathlib
import re

PKG = pathlib.Path(__file__).parents[2] / "src" / "trnsim"
SIZES = {16, 32, 128, 512}
HARDWARE_NAME = re.compile(r"QUADRANT|PARTITION|PMAX|FMAX|PE_(ROWS|COLS)|TILE_[KMN]|BANK")

# (module path, source of the flagged expression) -> why it stays
ALLOWED = {
    ("core/fast/psum.py", "min(pitch, 128)"): "the host BLAS's cache blocking, not the PE array",
    ("core/fast/psum.py", "max(128, 16384 // bi)"): "the host BLAS's cache blocking, not the PE array",
    ("core/isa/vector.py", "v.dtype.bits == 32"): "a dtype's width",
    ("core/tensor.py", "getattr(scalar_offset, 'bits', 32) > 32"): "a dtype's width",
    ("live.py", "len(mem) <= 16"): "a bound on a published live-state file's size",
    ("core/memory.py", "partitions <= 32"): "the start rule's quadrant step, with its pmax read by the caller",
    ("core/timing/scheduler.py", "QUADRANT = 32"): "the scheduler's dependence groups; it moves with the scheduler",
}


def _int(node) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value in SIZES


def findings(path: pathlib.Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _int(node.value) and any(
                isinstance(t, ast.Name) and HARDWARE_NAME.search(t.id) for t in node.targets):
            yield node
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple) and any(
                isinstance(t, ast.Tuple) and any(isinstance(e, ast.Name) and HARDWARE_NAME.search(e.id) for e in t.elts)
                for t in node.targets):
            yield node
        elif isinstance(node, ast.Compare) and any(map(_int, [node.left, *node.comparators])):
            yield node
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max") \
                and any(map(_int, node.args)):
            yield node
        elif isinstance(node, ast.Set) and any(isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name)
                                               and e.value.id == "Space" for e in node.elts):
            yield node
        elif isinstance(node, (ast.Set, ast.List, ast.Tuple)) and {"tfloat32", "float8_e5m2"} <= {
                e.value for e in node.elts if isinstance(e, ast.Constant)}:
            yield node
        elif isinstance(node, ast.keyword) and node.arg == "factor" and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, (int, float)) and node.value.value > 1:
            yield node


def test_no_catalog_number_outside_specs():
    found = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        if rel.startswith(("specs/", "numerics/")):  # the catalog, and the dtypes themselves
            continue
        for node in findings(path):
            src = ast.unparse(node)
            if not any(rel == p and src.startswith(s) for p, s in ALLOWED):
                found.append(f"{rel}:{getattr(node, 'lineno', '?')}: {src[:100]}")
    assert not found, "hardware figures outside specs/ (read them from the catalog):\n" + "\n".join(found)


def test_the_walk_catches_each_kind():
    """The walk itself finds each kind of literal it looks for (so an empty result means something)."""
    samples = ["QUADRANT = 32", "TILE_K, TILE_M = (128, 512)", "ok = n <= 128", "k = min(n, 16)",
               "R = {Space.SBUF}", "D = ['float32', 'tfloat32', 'float8_e5m2']", "c = cost(r, factor=8.0)"]
    for text in samples:
        assert list(findings_of(text)), text
    assert not list(findings_of("x = min(n, 3)\nfactor = 0.5\nbits = v.bits == 8"))


def findings_of(text: str):
    class _Text:
        def read_text(self):
            return text
    return findings(_Text())
