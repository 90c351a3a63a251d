"""Every TRNSIM_* switch is defined once, in trnsim.flags, with its doc line; modules read it through there."""
import ast
import pathlib
import re

import pytest

from trnsim import flags

PKG = pathlib.Path(__file__).parents[1] / "src" / "trnsim"
# where a flag's name may still be written out: compiled.py names TRNSIM_FAST while the speed layer's switch
# moves into its own package; customop/build.py writes TRNSIM_MULTICORE as a C macro of the operator build
ALLOWED = {"compiled.py": {"TRNSIM_FAST"}, "core/customop/build.py": {"TRNSIM_MULTICORE"}}


def test_each_flag_is_documented():
    for name, flag in flags.FLAGS.items():
        assert name.startswith("TRNSIM_") and flag.name == name
        assert len(flag.doc) > 20, name


def test_no_module_reads_a_flag_by_its_name():
    found = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        if rel == "flags.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    re.fullmatch(r"TRNSIM_[A-Z_]+", node.value) and node.value not in ALLOWED.get(rel, ()):
                found.append(f"{rel}:{node.lineno}: {node.value}")
    assert not found, "read these through trnsim.flags:\n" + "\n".join(found)


def test_every_flag_the_sources_mention_is_defined():
    mentioned = {m for p in PKG.rglob("*.py") for m in re.findall(r"\bTRNSIM_[A-Z][A-Z_]*[A-Z]\b", p.read_text())}
    assert mentioned - set(flags.FLAGS) - {"TRNSIM_MULTICORE"} == set()


@pytest.mark.parametrize("raw, value, on", [(None, "1", True), ("", "1", True), ("0", "0", False), ("1", "1", True)])
def test_unset_or_empty_means_the_default(monkeypatch, raw, value, on):
    if raw is None:
        monkeypatch.delenv(flags.PUBLISH.name, raising=False)
    else:
        monkeypatch.setenv(flags.PUBLISH.name, raw)
    assert (flags.PUBLISH.raw(), flags.PUBLISH.value(), flags.PUBLISH.on()) == (raw, value, on)
