"""docs/layout.md matches the tree: every package, module and folder it names exists, and every one that
exists is named."""
import pathlib
import re

ROOT = pathlib.Path(__file__).parents[1]
PKG = ROOT / "src" / "trnsim"
LAYOUT = (ROOT / "docs" / "layout.md").read_text()


def test_every_part_of_the_package_is_in_the_layout():
    """Each subpackage, each top-level module and each module of core/ and its subfolders appears."""
    names = {p.name + "/" for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    names |= {p.name for p in PKG.glob("*.py") if p.name not in ("__init__.py", "__main__.py")}
    names |= {p.name for d in ("core", "core/isa", "core/timing", "nki", "nki/beta", "fabric")
              for p in (PKG / d).glob("*.py") if p.name != "__init__.py"}
    missing = sorted(n for n in names if f"`{n}" not in LAYOUT and f"/{n}`" not in LAYOUT and f" {n}" not in LAYOUT)
    assert not missing, f"docs/layout.md does not name {missing}"


def test_every_path_the_layout_names_exists():
    """Paths in backquotes that end in / or .py exist under src/trnsim (or the repository root)."""
    for name in re.findall(r"`([\w/]+(?:/|\.py))`", LAYOUT):
        found = (PKG / name).exists() or (ROOT / name).exists() or any(PKG.rglob(name.rstrip("/")))
        assert found, f"docs/layout.md names {name}, which is not in the tree"
