"""The speed layer's compiled half: the speed layer's modules (core/fast/), the timing scheduler and the hottest
modules of the meaning, built by Cython from their own sources.

A built module is imported in place of its source while the speed layer is on (TRNSIM_FAST, core/fast/)
and only if it was built from that source as it is now: an edited module runs as Python until the next
build. They are built when trnsim is installed (setup.py: `pip install .`, `pip install -e .`, a wheel), as
optional extensions: without a C compiler the install still succeeds, and trnsim says once, in one line, that
it runs the Python build. `trnsim.compiled.main()` rebuilds what is missing or stale (`make test` calls it).

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
import json
import os
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

ENV = "TRNSIM_FAST"  # the speed layer's one switch: 0 turns it off, compiled modules included
# The speed layer's modules (core/fast/), the timing scheduler with its interval maps and results, and the
# meaning's modules every issued instruction runs through (its checks, views, memories, records and the call
# itself): compiled from the same sources, which stay the meaning (tests/core/test_compiled.py).
MODULES = ("trnsim.core.fast.psum", "trnsim.core.fast.blas", "trnsim.core.fast.loads", "trnsim.core.fast.views",
           "trnsim.core.fast.memo", "trnsim.core.fast.stamp",
           "trnsim.core.timing.intervals", "trnsim.core.timing.scheduler", "trnsim.core.timing.result",
           "trnsim.core.errors", "trnsim.core.tensor", "trnsim.core.memory", "trnsim.core.liveness", "trnsim.core.hoist",
           "trnsim.core.machine", "trnsim.core.builder", "trnsim.core.isa.registry", "trnsim.core.isa.psum",
           "trnsim.core.isa.tensor_engine", "trnsim.nki._current", "trnsim.nki.isa")
ROOT = Path(__file__).resolve().parent.parent  # the directory holding the trnsim package
BUILT = Path(__file__).resolve().parent / "_compiled"  # one extension per module, and RECORD
SUFFIX = EXTENSION_SUFFIXES[0]  # sysconfig's EXT_SUFFIX, without importing sysconfig
# which source each extension was built from, one record per interpreter (its tag, as SUFFIX names it): builds for
# several Pythons share the folder, and rebuilding one must not make another's old build look current
RECORD = "sources" + SUFFIX.rsplit(".", 1)[0] + ".json"
PACKAGE = "trnsim._compiled"  # where an installed build puts module m: PACKAGE + "." + m (the file BUILT/m/as/path)
NOTED = "python-build-noted"  # beside the build, or in the user's cache: the Python build was reported here once


def enabled() -> bool:
    """Whether the speed layer is on (the default)."""
    return os.environ.get(ENV, "1") != "0"


def source(module: str) -> Path:
    return ROOT / (module.replace(".", "/") + ".py")


def declarations() -> bytes:
    """Every module's declarations (the .pxd files under trnsim), in path order."""
    return b"".join(p.read_bytes() for p in sorted((ROOT / "trnsim").rglob("*.pxd")))


def digest(module: str, declared: bytes | None = None) -> str:
    """The sha256 of a module's source and of every module's declarations (the .pxd files, `declarations()`
    unless given): a module may call another's declared functions directly, so a change to any declaration
    rebuilds them all."""
    h = hashlib.sha256(source(module).read_bytes())
    own = source(module).with_suffix(".pxd")
    if own.exists() and (ROOT / "trnsim") not in own.parents:
        h.update(own.read_bytes())
    h.update(declarations() if declared is None else declared)
    return h.hexdigest()


def digests() -> dict[str, str]:
    """module -> its digest, for every module."""
    declared = declarations()
    return {m: digest(m, declared) for m in MODULES}


def built_path(module: str, folder: Path | None = None) -> Path:
    """Where module's extension lies in a build folder (BUILT by default)."""
    return (BUILT if folder is None else folder) / (module.replace(".", "/") + SUFFIX)


def recorded() -> dict[str, str]:
    """module -> the digest of the source its build was made from (RECORD), for each one built."""
    try:
        built = json.loads((BUILT / RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return built if isinstance(built, dict) else {}


def current() -> dict[str, Path]:
    """module -> its built extension, for each one built from its source as it is now."""
    built = recorded()
    if not built:
        return {}
    now = digests()
    return {m: built_path(m) for m in MODULES if built.get(m) == now[m] and built_path(m).exists()}


def extensions(build_dir: str, jobs: int = 1, base: Path | None = None, modules=MODULES) -> list:
    """The modules as optional setuptools extensions named PACKAGE.<module>, so that a build puts them under
    BUILT, each compiled by Cython under its own module name (C files in build_dir; sources relative to base,
    as setup.py needs them)."""
    from Cython.Build import cythonize
    from setuptools import Extension

    exts = cythonize([Extension(m, [str(source(m).relative_to(base) if base else source(m))]) for m in modules],
                     build_dir=build_dir, nthreads=jobs, quiet=True, language_level=3,
                     compiler_directives={"binding": True, "annotation_typing": False})
    for e in exts:
        e.name, e.optional = f"{PACKAGE}.{e.name}", True
    return exts


def record(folder: Path, sums: dict[str, str] | None = None) -> dict[str, str]:
    """Write folder/RECORD: the digest of each module whose extension the build in folder made (of its
    source as the build started, when `sums` holds them)."""
    sums = sums or digests()
    made = {m: sums[m] for m in MODULES if built_path(m, folder).exists()}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / RECORD).write_text(json.dumps(made, indent=1, sort_keys=True))
    return made


class _Finder:
    """A meta path finder (find_spec is all the import system asks of one) for the built modules."""

    def __init__(self, built: dict[str, Path]):
        import importlib.util  # here, not in find_spec: an import there would ask this finder again

        self.built, self.spec = built, importlib.util.spec_from_file_location

    def find_spec(self, name, path=None, target=None):
        so = self.built.get(name)
        return None if so is None else self.spec(name, so)


def install() -> None:
    """Import the current built modules in place of their sources, when the speed layer is on; with none
    built, say so once."""
    if enabled() and not any(isinstance(f, _Finder) for f in sys.meta_path):
        built = current()
        if built:
            sys.meta_path.insert(0, _Finder(built))
        else:
            note_python_build()


def note_python_build() -> None:
    """One line on stderr, the first time this installation runs without its compiled modules."""
    key = hashlib.sha256(str(ROOT).encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trnsim"
    for marker in (BUILT / NOTED, cache / f"{NOTED}-{key}"):
        if marker.exists():
            return
    why = ("they are older than their sources (pip install or make test rebuilds them)" if recorded() else
           "they were not built at install (that needs a C compiler and Python's headers)")
    print(f"trnsim: running the Python build, slower than the compiled one: {why}", file=sys.stderr)
    for marker in (BUILT / NOTED, cache / f"{NOTED}-{key}"):
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(str(ROOT) + "\n")
            return
        except OSError:
            continue


def loaded() -> list[str]:
    """The modules of MODULES this process runs compiled."""
    return [m for m in MODULES if m in sys.modules and str(getattr(sys.modules[m], "__file__", "")).endswith(SUFFIX)]


def build(jobs: int = 2) -> list[str]:
    """Build every missing or stale module in place (Cython and a C compiler needed); returns those built."""
    import shutil
    import tempfile

    from setuptools import Distribution

    todo = [m for m in MODULES if m not in current()]
    if not todo:
        return []
    sums = digests()  # the sources as they are when the build starts
    with tempfile.TemporaryDirectory() as tmp:
        exts = extensions(tmp, jobs, modules=todo)
        for e in exts:
            e.optional = False  # here a failure is reported, not skipped
        dist = Distribution({"ext_modules": exts})
        cmd = dist.get_command_obj("build_ext")
        cmd.build_lib, cmd.build_temp, cmd.parallel = os.path.join(tmp, "lib"), os.path.join(tmp, "temp"), jobs
        cmd.ensure_finalized()
        cmd.run()
        lib = Path(tmp, "lib", *PACKAGE.split("."))
        for m in todo:  # a new file, not rewritten in place: this process may have the old one loaded
            dest = built_path(m)
            dest.parent.mkdir(parents=True, exist_ok=True)
            part = dest.with_suffix(".part")
            shutil.copyfile(built_path(m, lib), part)
            os.replace(part, dest)
    record(BUILT, sums)
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

