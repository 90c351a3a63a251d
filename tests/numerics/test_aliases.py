"""One table of dtype spellings: every alias names a real type, the tools print one spelling per type, and no
other module keeps a table of its own."""
import ast
import pathlib

from trnsim import numerics

PKG = pathlib.Path(__file__).parents[2] / "src" / "trnsim"
# torch dtype names -> HLO type names: a translation between two outside vocabularies (float64, pred are no
# trnsim types), not a spelling of trnsim's
ALLOWED = {"xla/neuron.py"}


def test_aliases_name_types():
    for alias, name in numerics.ALIASES.items():
        assert numerics.dtype(name).name == name, alias
    assert numerics.dtype_name("bf16") == "bfloat16" and numerics.dtype_name("f8e4m3fn") == "float8_e4m3fn"
    assert numerics.dtype_name("bfloat16") == "bfloat16"  # an nki name passes through
    assert numerics.SHORT["float8_e4m3"] == "fp8" and numerics.SHORT["float32"] == "fp32"


def test_families_of_hlo_and_cli_spellings():
    assert [numerics.family(t) for t in ("f32", "bf16", "f16", "f8e5m2", "fp8_e4m3", "tf32", "s32", "int8")] == \
        ["fp32", "bf16", "fp16", "fp8", "fp8", "tf32", None, None]


def test_no_second_alias_table():
    """A dict literal that maps a short spelling to an nki name (or back) outside numerics/ is a second table."""
    short, long = set(numerics.ALIASES), set(numerics.ALIASES.values())
    found = []
    for path in sorted(PKG.rglob("*.py")):
        if path.relative_to(PKG).parts[0] == "numerics" or path.relative_to(PKG).as_posix() in ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict):
                pairs = [(k.value, v.value) for k, v in zip(node.keys, node.values)
                         if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)]
                if sum((k in short and v in long) or (k in long and v in short) for k, v in pairs) >= 2:
                    found.append(f"{path.relative_to(PKG)}:{node.lineno}")
    assert not found, found
