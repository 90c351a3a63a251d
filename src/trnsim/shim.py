"""Make `import nki` (and nki.language, nki.isa, nki.isa.constants, nki.typing, nki.compiler) resolve to
trnsim's emulator, so an unmodified kernel file and its test script run on CPU; `import neuronxcc.nki`
(the beta API) resolves to trnsim.nki.beta the same way.

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
    "nki.collectives": "trnsim.nki.collectives",
    # the beta API of SDK 2.20-2.27: `import neuronxcc.nki as nki`
    "neuronxcc": "trnsim.nki.beta.neuronxcc",
    "neuronxcc.nki": "trnsim.nki.beta",
    "neuronxcc.nki.language": "trnsim.nki.beta.language",
    "neuronxcc.nki.isa": "trnsim.nki.beta.isa",
    "neuronxcc.nki.typing": "trnsim.nki.beta.typing",
    "neuronxcc.nki.compiler": "trnsim.nki.beta.compiler",
    "neuronxcc.nki.language.constants": "trnsim.nki.beta.constants",
    "neuronxcc.nki.isa.constants": "trnsim.nki.constants",
    "neuronxcc.nki.compiler.backends": "trnsim.nki.beta.backends",
    "neuronxcc.nki.compiler.backends.neuron": "trnsim.nki.beta.backends",
    "neuronxcc.nki.compiler.backends.neuron.indexing": "trnsim.nki.beta.backends",
    "neuronxcc.nki.compiler.backends.neuron.tensor": "trnsim.nki.beta.backends",
    # torch-neuronx's custom C++ operators: `from torch_neuronx.xla_impl import custom_op`
    "torch_neuronx": "trnsim.nki.neuronx",
    "torch_neuronx.xla_impl": "trnsim.nki.neuronx.xla_impl",
    "torch_neuronx.xla_impl.custom_op": "trnsim.nki.neuronx.custom_op",
}
_saved: dict[str, object] = {}


def real_nki_installed() -> bool:
    """Whether a real `nki` package (not this shim) can be imported."""
    return _real("nki")


def _real(name: str) -> bool:
    mod = sys.modules.get(name)
    if mod is not None and not getattr(mod, "__name__", "").startswith("trnsim") and getattr(mod, "__file__", None):
        return True
    spec = importlib.machinery.PathFinder.find_spec(name)  # on sys.path, ignoring sys.modules
    return spec is not None and spec.origin is not None  # a bare folder (namespace) is not a package


def install(force: bool = False) -> bool:
    """Point the `nki` modules at trnsim; returns False (and changes nothing) if a real nki is installed."""
    if installed():
        return True
    if real_nki_installed() and not force:
        warnings.warn("a real `nki` package is installed; trnsim.shim.install(force=True) shadows it", stacklevel=2)
        return False
    real = tuple(p for p in ("neuronxcc", "torch_neuronx") if not force and _real(p))
    for name, target in MODULES.items():
        if name.split(".")[0] in real:
            continue  # a real neuronxcc (torch-neuronx) stays in charge of the beta API (its operators)
        if name in sys.modules and not getattr(sys.modules[name], "__name__", "").startswith("trnsim"):
            _saved[name] = sys.modules[name]
        sys.modules[name] = importlib.import_module(target)
    for name in MODULES:  # submodules reachable as attributes too (`nki.isa.constants`, `...backends.neuron`)
        parent, _, child = name.rpartition(".")
        if parent in sys.modules and name in sys.modules and not hasattr(sys.modules[parent], child):
            setattr(sys.modules[parent], child, sys.modules[name])
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
