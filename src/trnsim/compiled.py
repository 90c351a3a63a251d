"""The speed layer's compiled half: trnsim's hottest modules built by Cython from their own sources.

A built module is imported in place of its source while the speed layer is on (TRNSIM_FAST, core/fast.py)
and only if it was built from that source as it is now: an edited module runs as Python until the next
build. Nothing needs them: without Cython or a C compiler trnsim runs the same code as Python, slower.
`trnsim.compiled.main()` builds what is missing or stale (`make test` calls it).

Cython keeps Python's meaning for this code (annotations are not taken as C types). A `.pxd` beside a
module declares what its compiled build may assume and the source cannot say: its hottest classes as
extension types with their attributes, and the C types of some locals and arguments (a count, a float,
a list). The source stays the meaning; the declarations change only how fast it runs (the tests compare
the two). Two differences remain, which the compiled modules are written to respect
(tests/core/test_compiled.py):
- a compiled function has no frame, so trnsim finds the user's line by walking out to the first frame
  outside trnsim (core/errors.py: where), never by a fixed depth;
- a function's closure cells share one object, so a nested function another nested function calls makes
  a reference cycle; a kernel launch runs with the cyclic collector off and frees tiles by reference
  counting, so compiled modules keep nested functions out of closures.
"""
from __future__ import annotations

import hashlib
import importlib.abc
import importlib.util
import json
import os
import sys
import sysconfig
from pathlib import Path

ENV = "TRNSIM_FAST"  # the speed layer's one switch: 0 turns it off, compiled modules included
MODULES = ("trnsim.core.errors", "trnsim.core.tensor", "trnsim.core.memory", "trnsim.core.liveness",
           "trnsim.core.hoist", "trnsim.core.machine", "trnsim.core.isa.registry", "trnsim.core.isa.psum",
           "trnsim.core.isa.tensor_engine", "trnsim.core.timing.intervals", "trnsim.core.timing.scheduler",
           "trnsim.core.timing.result", "trnsim.nki._current", "trnsim.nki.isa")
ROOT = Path(__file__).resolve().parent.parent  # the directory holding the trnsim package
BUILT = Path(__file__).resolve().parent / "_compiled"  # one extension per module, and sources.json
SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")


def enabled() -> bool:
    """Whether the speed layer is on (the default)."""
    return os.environ.get(ENV, "1") != "0"


def source(module: str) -> Path:
    return ROOT / (module.replace(".", "/") + ".py")


def digest(module: str) -> str:
    """The sha256 of a module's source and of every module's declarations (the .pxd files): a module may call
    another's declared functions directly, so a change to any declaration rebuilds them all."""
    h = hashlib.sha256(source(module).read_bytes())
    own = source(module).with_suffix(".pxd")
    for pxd in sorted(set((ROOT / "trnsim").rglob("*.pxd")) | ({own} if own.exists() else set())):
        h.update(pxd.read_bytes())
    return h.hexdigest()


def current() -> dict[str, Path]:
    """module -> its built extension, for each one built from its source as it is now."""
    try:
        built = json.loads((BUILT / "sources.json").read_text())
    except (OSError, ValueError):
        return {}
    out = {}
    for m in MODULES:
        so = BUILT / (m + SUFFIX)
        if so.exists() and built.get(m) == digest(m):
            out[m] = so
    return out


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, built: dict[str, Path]):
        self.built = built

    def find_spec(self, name, path=None, target=None):
        so = self.built.get(name)
        return None if so is None else importlib.util.spec_from_file_location(name, so)


def install() -> None:
    """Import the current built modules in place of their sources, when the speed layer is on."""
    if enabled() and not any(isinstance(f, _Finder) for f in sys.meta_path):
        built = current()
        if built:
            sys.meta_path.insert(0, _Finder(built))


def loaded() -> list[str]:
    """The modules of MODULES this process runs compiled."""
    return [m for m in MODULES if m in sys.modules and str(getattr(sys.modules[m], "__file__", "")).endswith(SUFFIX)]


def build(jobs: int = 2) -> list[str]:
    """Build every missing or stale module (Cython and a C compiler needed); returns the modules built."""
    import shutil
    import tempfile

    from Cython.Build import cythonize
    from setuptools import Distribution, Extension

    have = current()
    todo = [m for m in MODULES if m not in have]
    if not todo:
        return []
    record = {m: digest(m) for m in MODULES}  # the sources as they are when the build starts
    with tempfile.TemporaryDirectory() as tmp:
        exts = [Extension(m, [str(source(m))]) for m in todo]
        exts = cythonize(exts, build_dir=tmp, nthreads=jobs, quiet=True, language_level=3,
                         compiler_directives={"binding": True, "annotation_typing": False})
        dist = Distribution({"ext_modules": exts})
        cmd = dist.get_command_obj("build_ext")
        cmd.build_lib, cmd.build_temp, cmd.parallel = os.path.join(tmp, "lib"), os.path.join(tmp, "temp"), jobs
        cmd.ensure_finalized()
        cmd.run()
        BUILT.mkdir(exist_ok=True)
        for m in todo:  # a new file, not rewritten in place: this process may have the old one loaded
            part = BUILT / (m + ".part")
            shutil.copyfile(cmd.get_ext_fullpath(m), part)
            os.replace(part, BUILT / (m + SUFFIX))
    (BUILT / "sources.json").write_text(json.dumps(record, indent=1, sort_keys=True))
    return todo


def main() -> int:
    try:
        import Cython  # noqa: F401
    except ImportError:
        print("trnsim.compiled: Cython is not installed (pip install cython); trnsim runs as Python")
        return 1
    try:
        done = build(os.cpu_count() or 1)
    except Exception as e:  # noqa: BLE001 - no compiler, no headers: the Python sources still run
        print(f"trnsim.compiled: the build failed ({type(e).__name__}: {e}); trnsim runs as Python")
        return 1
    print(f"trnsim.compiled: {len(done)} module(s) built, {len(MODULES)} current" if done
          else f"trnsim.compiled: all {len(MODULES)} modules current")
    return 0
