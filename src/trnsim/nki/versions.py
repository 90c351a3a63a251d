"""The NKI version a kernel targets: 0.7 (the current one, the default) or 0.6.

`trnsim --nki-version 0.6 run ...` or TRNSIM_NKI_VERSION picks it. Names NKI 0.7 removed (`nl.dynamic_range`,
a bare `while reg:`) keep running for kernels written for 0.6, with an NkiDeprecationWarning naming the 0.7
replacement (nki/deep-dives/nki-loops: the dynamic range iterator gives way to fori_loop and while_loop);
names 0.7 added (`nisa.scalar_load`, `nl.alloc_tiles` ...) are refused for a 0.6 target, as NKI 0.6 lacks them.
"""
from __future__ import annotations


from trnsim import flags
from trnsim.core.errors import KernelError, NkiDeprecationWarning, warn
from trnsim.errors import ConfigError

ENV = flags.NKI_VERSION.name
VERSIONS = ("0.6", "0.7")
RELEASES = {"0.6": "0.6.0", "0.7": "0.7.0"}  # the release each version means (`nki.__version__`)
_WARNED: dict = {}

DOCS = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/"
MIGRATION_07 = DOCS + "nki/migration/index.html#nki-migrate-0-6-to-0-7"
REMOVED_IN_07 = {"nl.dynamic_range": "nl.fori_loop(lower, upper, body)"}  # name -> its replacement
ADDED_IN_07 = ("nisa.scalar_load", "nisa.scalar_store", "nisa.NkiScalar", "nl.tiles", "nl.blocks", "nl.alloc_tiles",
               "nl.alloc_blocks")


def page(name: str) -> str:
    """The API reference page of `nl.X` / `nisa.X`."""
    module, _, attr = name.partition(".")
    return f"{DOCS}nki/api/generated/nki.{'language' if module == 'nl' else 'isa'}.{attr}.html"


class VersionError(KernelError):
    """A name the targeted NKI version does not have."""


def target() -> str:
    """The targeted version, "0.6" or "0.7" (a release such as 0.7.0 names its version)."""
    raw = flags.NKI_VERSION.value().strip()
    v = ".".join(raw.split(".")[:2])
    if v not in VERSIONS:
        raise ConfigError(f"{ENV}={raw!r}: trnsim emulates NKI {' and '.join(VERSIONS)}")
    return v


def removed(name: str, replacement: str) -> None:
    """`name` was removed in 0.7: it runs, with a warning (once per kernel line) naming its replacement."""
    when = ("removed in NKI 0.7 (it runs here for kernels written for 0.6)" if target() == "0.7"
            else "deprecated in NKI 0.6 and removed in 0.7")
    warn(f"{name} is {when}: use {replacement}", NkiDeprecationWarning, registry=_WARNED)


def added(name: str) -> None:
    """`name` is new in 0.7: refused for a kernel that targets 0.6."""
    if target() == "0.6":
        raise VersionError(f"{name} is new in NKI 0.7; this kernel targets NKI 0.6 ({ENV} / --nki-version)")
