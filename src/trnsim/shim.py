"""Make `import nki` (and nki.language, nki.isa, nki.isa.constants, nki.typing, nki.compiler) resolve to
trnsim's emulator, so an unmodified kernel file and its test script run on CPU.

    import trnsim.shim
    trnsim.shim.install()
    import nki, nki.language as nl   # -> trnsim.nki, trnsim.nki.language

A real installed `nki` is never shadowed unless `install(force=True)`.
"""
from __future__ import annotations

import importlib
import importlib.machinery
import sys
import warnings

MODULES = {
    "nki": "trnsim.nki",
    "nki.language": "trnsim.nki.language",
    "nki.isa": "trnsim.nki.isa",
    "nki.isa.constants": "trnsim.nki.constants",
    "nki.typing": "trnsim.nki.typing",
    "nki.compiler": "trnsim.nki.compiler",
}
_saved: dict[str, object] = {}


def real_nki_installed() -> bool:
    """Whether a real `nki` package (not this shim) can be imported."""
    mod = sys.modules.get("nki")
    if mod is not None and not getattr(mod, "__name__", "").startswith("trnsim") and getattr(mod, "__file__", None):
        return True
    spec = importlib.machinery.PathFinder.find_spec("nki")  # on sys.path, ignoring sys.modules
    return spec is not None and spec.origin is not None  # a bare `nki/` folder (namespace) is not a package


def install(force: bool = False) -> bool:
    """Point the `nki` modules at trnsim; returns False (and changes nothing) if a real nki is installed."""
    if installed():
        return True
    if real_nki_installed() and not force:
        warnings.warn("a real `nki` package is installed; trnsim.shim.install(force=True) shadows it", stacklevel=2)
        return False
    for name, target in MODULES.items():
        if name in sys.modules:
            _saved[name] = sys.modules[name]
        sys.modules[name] = importlib.import_module(target)
    sys.modules["nki.isa"].constants = sys.modules["nki.isa.constants"]
    return True


def installed() -> bool:
    """Whether every `nki` module name currently resolves to trnsim."""
    return all(getattr(sys.modules.get(n), "__name__", "") == t for n, t in MODULES.items())


def uninstall() -> None:
    """Restore whatever the `nki` names meant before `install`."""
    for name in MODULES:
        sys.modules.pop(name, None)
        if name in _saved:
            sys.modules[name] = _saved.pop(name)
