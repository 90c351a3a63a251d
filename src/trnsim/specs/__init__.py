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

import warnings

from trnsim.errors import UnknownNameError
from trnsim.specs import catalog
from trnsim.specs.hardware import Hardware, HardwareError, active, hardware
from trnsim.specs.records import FLOPS_DTYPES, ChipSpec, NeuronCoreSpec, SystemSpec, UnsupportedDTypeError

DEFAULT_INSTANCE = "trn2.48xlarge"  # what every command simulates when no --instance is given

_ALIASES = {"inf2": "trn1"}  # Inferentia2 carries the NeuronCore-v2 of Trn1 (NKI accepts its name as a target)

# A family name stands for its flagship (the largest system of the family), said in a notice.
FAMILIES = {"trn1": "trn1.32xlarge", "trn1n": "trn1n.32xlarge", "trn2": "trn2.48xlarge", "trn2u": "trn2u.48xlarge",
            "trn2n": "trn2.48xlarge", "trn3": "Trn3 Gen2 UltraServer", "trn3 UltraServer": "Trn3 Gen2 UltraServer",
            "trn2 UltraServer": "Trn2 UltraServer", "trn3 gen1": "Trn3 Gen1 UltraServer",
            "trn3 gen2": "Trn3 Gen2 UltraServer"}
# Instances the Neuron tools name that have no figures of their own in the sources: the catalog system they match.
SAME_AS = {"trn2n.48xlarge": ("trn2.48xlarge", "neuron-ls's documentation shows the same 16 Trainium2 chips of 8 "
                              "NeuronCores and 96 GB; its network figures are not published apart")}
# Families the catalog holds a chip of but no system: named in the error.
CHIP_ONLY = {"inf2": "Inferentia2", "inf1": None}
CHIP_FAMILIES = {"trn1": "Trainium", "trn2": "Trainium2", "trn3": "Trainium3", "inf2": "Inferentia2"}


class NameNotice(UserWarning):
    """A name that trnsim read as another (a family as its flagship); the CLI prints it as a note."""


_noticed: set[str] = set()


def _notice(text: str) -> None:
    if text not in _noticed:
        _noticed.add(text)
        warnings.warn(text, NameNotice, stacklevel=3)


def resolve_system(name: str) -> str:
    """The catalog system a user's NAME means: itself, or a family's flagship and an alias's match (with a notice).
    Unknown names raise UnknownNameError whose suggestions include the family names."""
    table = catalog.systems()
    key = catalog.normalize(name)
    if key in table:
        return table[key].name
    same = {catalog.normalize(k): v for k, v in SAME_AS.items()}
    if key in same:
        target, why = same[key]
        _notice(f"{name} is simulated as {target} ({why})")
        return target
    fam = {catalog.normalize(k): v for k, v in FAMILIES.items()}
    if key in fam:
        _notice(f"{name!r} is a family; using its flagship {fam[key]} (name an instance to choose another)")
        return fam[key]
    known = [s.name for s in table.values()] + list(FAMILIES) + list(SAME_AS)
    if key in CHIP_ONLY:
        chip_name = CHIP_ONLY[key]
        have = f"the catalog has the {chip_name} chip (trnsim specs {name}) but" if chip_name else "the catalog has"
        raise UnknownNameError("instance or UltraServer", name, known, hint=f"{have} no {name} instance; instances: "
                               + ", ".join(s.name for s in table.values()))
    raise UnknownNameError("instance or UltraServer", name, known)


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
    """A device by name: `"Trainium2"`, or a family (`"trn2"`, `"inf2"`)."""
    family = CHIP_FAMILIES.get(catalog.normalize(name))
    rec = catalog.lookup(catalog.chips(), family or name, "chip")
    hw = active()
    return hw.chip_for(rec) if hw else rec


def system(name: str) -> SystemSpec:
    """An instance or UltraServer by name: `"trn2.48xlarge"`, `"Trn2 UltraServer"`, or a family (`"trn2"`, its
    flagship, with a notice); every command resolves names through here."""
    rec = catalog.systems()[catalog.normalize(resolve_system(name))]
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


__all__ = ["DEFAULT_INSTANCE", "FAMILIES", "FLOPS_DTYPES", "NameNotice", "resolve_system", "Hardware", "HardwareError", "active", "hardware", "ChipSpec", "NeuronCoreSpec", "SystemSpec", "UnsupportedDTypeError", "chip", "chips",
           "instance", "instances", "neuroncore", "system", "systems", "ultraserver"]
