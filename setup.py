"""The compiled modules (src/trnsim/compiled.py) as optional extensions of the ordinary setuptools build:
`pip install .`, `pip install -e .` and a wheel build them; where Cython or a C compiler is missing, the
install still succeeds and trnsim runs (and says once that it runs) the Python build. Everything else about
the package is in pyproject.toml."""
import importlib.util
import os
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("_trnsim_compiled", HERE / "src" / "trnsim" / "compiled.py")
compiled = importlib.util.module_from_spec(_spec)  # by path: trnsim itself needs numpy, which a build may lack
_spec.loader.exec_module(compiled)


class BuildCompiled(build_ext):
    """Builds the extensions in parallel, then records which were built from which sources (compiled.RECORD,
    which trnsim reads to load only current ones) in the build and, for an editable install, in the tree."""

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1

    def run(self):
        sums = compiled.digests()
        super().run()
        made = compiled.record(Path(self.build_lib, *compiled.PACKAGE.split(".")), sums)
        if self.inplace:
            compiled.record(compiled.BUILT, sums)
        print(f"trnsim: {len(made)} of {len(compiled.MODULES)} modules compiled")

    def copy_extensions_to_source(self):
        for m in compiled.MODULES:  # an editable install copies each into a folder the tree may lack
            compiled.built_path(m).parent.mkdir(parents=True, exist_ok=True)
        super().copy_extensions_to_source()


def ext_modules():
    try:
        return compiled.extensions(os.path.join("build", "cython"), os.cpu_count() or 1, base=HERE)
    except ImportError:  # no Cython (a build without isolation): the Python build
        print("trnsim: Cython is missing; installing the Python build")
        return []


setup(ext_modules=ext_modules(), cmdclass={"build_ext": BuildCompiled})
