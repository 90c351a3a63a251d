"""The hardware catalog: every figure trnsim uses, with the source it came from.

    >>> import trnsim
    >>> trnsim.instance("trn1.32xlarge").peak_flops("bf16") / 1e12
    3040.0
    >>> trnsim.instance("trn1.32xlarge").peak_flops("bf16", rating="launch") / 1e12
    3360.0

Records are immutable and in base units (bytes, bytes/s, Hz, FLOP/s, ns); the TOML files in
data/ keep each figure in its published unit next to its source.
"""
from __future__ import annotations

from trnsim.errors import UnknownNameError
from trnsim.specs import catalog
from trnsim.specs.hardware import Hardware, HardwareError, active, hardware
from trnsim.specs.records import FLOPS_DTYPES, ChipSpec, NeuronCoreSpec, SystemSpec, UnsupportedDTypeError

DEFAULT_INSTANCE = "trn2.48xlarge"  # what every command simulates when no --instance is given

_ALIASES = {"inf2": "trn1"}  # Inferentia2 carries the NeuronCore-v2 of Trn1 (NKI accepts its name as a target)


def targets() -> tuple[str, ...]:
    """The NKI targets (`trn1`, `trn2`, ...): each NeuronCore generation's `target` in the catalog."""
    return tuple(c.target for c in catalog.neuroncores().values())


def neuroncore(generation: str) -> NeuronCoreSpec:
    """A NeuronCore generation by version (`"v3"`, `3`, `"gen3"`) or NKI target (`"trn2"`, `"inf2"`)."""
    g = str(generation).lower().removeprefix("neuroncore-")
    g = _ALIASES.get(g, g)
    cores = catalog.neuroncores()
    by_target = {c.target: k for k, c in cores.items()}
    g = by_target.get(g) or ("v" + g.removeprefix("gen") if not g.startswith("v") else g)
    if g not in cores:
        raise UnknownNameError("NeuronCore generation", str(generation), [*cores, *by_target])
    hw = active()
    return hw.neuroncore(cores[g]) if hw else cores[g]


def having(capability: str) -> str:
    """The generations with `capability` (catalog `capabilities`), for messages: "NeuronCore-v3 or newer"."""
    cores = sorted(catalog.neuroncores().values(), key=lambda c: c.version)
    have = [c for c in cores if c.capabilities[capability]]
    if not have:
        return "a NeuronCore generation the catalog does not list"
    if have == cores[cores.index(have[0]):]:
        return f"{have[0].name} or newer"
    return " or ".join(c.name for c in have)


def chip(name: str) -> ChipSpec:
    """A device by name: `"Trainium2"`, or an NKI target (`"trn2"`)."""
    by_target = {c.core.target: c for c in catalog.chips().values() if c.core}
    rec = by_target.get(catalog.normalize(name)) or catalog.lookup(catalog.chips(), name, "chip")
    hw = active()
    return hw.chip_for(rec) if hw else rec


def system(name: str) -> SystemSpec:
    """An instance or UltraServer by name: `"trn2.48xlarge"`, `"Trn2 UltraServer"`."""
    rec = catalog.lookup(catalog.systems(), name, "instance or UltraServer")
    hw = active()
    return hw.system(rec) if hw else rec


def instance(name: str) -> SystemSpec:
    """An instance (or UltraServer) by name; the same records as `system`."""
    return system(name)


def ultraserver(name: str) -> SystemSpec:
    s = system(name)
    if s.kind != "ultraserver":
        raise UnknownNameError("UltraServer", name, [x.name for x in catalog.systems().values() if x.kind == "ultraserver"])
    return s


def instances() -> list[SystemSpec]:
    return [s for s in systems() if s.kind == "instance"]


def systems() -> list[SystemSpec]:
    hw = active()
    return [hw.system(s) if hw else s for s in catalog.systems().values()]


def chips() -> list[ChipSpec]:
    hw = active()
    return [hw.chip_for(c) if hw else c for c in catalog.chips().values()]


__all__ = ["DEFAULT_INSTANCE", "FLOPS_DTYPES", "Hardware", "HardwareError", "active", "hardware", "ChipSpec", "NeuronCoreSpec", "SystemSpec", "UnsupportedDTypeError", "chip", "chips",
           "instance", "instances", "neuroncore", "system", "systems", "ultraserver"]
