"""trnsim: a software Trainium.

Layers, each importing only those below it:
specs (the hardware catalog) < numerics < core (the NeuronCore) < nki (front ends) < fabric (many chips)
< plan (training runs) < report < cli.  See docs/layout.md.
"""
__version__ = "0.1.0"

from trnsim import compiled as _compiled  # noqa: E402  first: the built modules load in place of their sources
from trnsim import memos as _memos  # noqa: E402  the speed layer's memos of the fabric's and planner's pure functions

_compiled.install()
_memos.install()

_LAZY = {"trnsim.specs": ("chip", "chips", "hardware", "instance", "instances", "neuroncore", "system", "systems",
                          "ultraserver"),
         "trnsim.core.timing": ("benchmark",), "trnsim.fabric": ("cluster",)}


def __getattr__(name):
    """The top-level API, imported when first used: `trnsim --help` need not load numpy and the core."""
    import importlib

    for module, names in _LAZY.items():
        if name in names:
            value = getattr(importlib.import_module(module), name)
            globals()[name] = value
            return value
    raise AttributeError(f"module 'trnsim' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | {n for names in _LAZY.values() for n in names})
