"""Total cost of ownership: what a chip-hour costs to own instead of rent, and so a token or a training run.

    >>> t = tco("trn2.48xlarge")
    >>> round(t.usd_per_chip_hour, 3)      # $4,000 over 5 years + 500 W x PUE 1.15 at $0.08/kWh
    0.137

Per chip-hour: capex / (lifetime in hours) + power x PUE x electricity price. Chips only: hosts, network,
building and staff are not in it (the report says so). Purchase prices come from chips.toml (price_usd),
power and site figures from specs/data/tco.toml, each with its source; a figure the catalog lacks must be
given (`figures`), never taken as zero.
"""
from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from importlib import resources

from trnsim import specs
from trnsim.errors import ConfigError

HOURS_PER_YEAR = 365.25 * 24
FIGURES = ("capex_usd", "power_w", "pue", "usd_per_kwh", "lifetime_years")


class TCOError(ConfigError):
    """A TCO that lacks a figure, or a figure out of range: names it and how to give it."""


@functools.cache
def _data() -> dict:
    return tomllib.loads(resources.files("trnsim.specs").joinpath("data", "tco.toml").read_text())


def source(table: str, key: str) -> str:
    legend, text = _data()["sources"], _data()[table]["sources"][key]
    for tag in sorted(legend, key=len, reverse=True):
        text = text.replace(tag, legend[tag])
    return text


@dataclass(frozen=True)
class TCO:
    """One system's chips owned for their life: figures per chip and what each came from."""

    system: str
    chips: int
    capex_usd: float
    power_w: float
    pue: float
    usd_per_kwh: float
    lifetime_years: float
    sources: dict

    @property
    def usd_per_chip_hour(self) -> float:
        return self.capex_usd / (self.lifetime_years * HOURS_PER_YEAR) + self.power_w / 1e3 * self.pue * self.usd_per_kwh

    @property
    def usd_per_hour(self) -> float:
        return self.chips * self.usd_per_chip_hour

    def usd_per_million(self, tokens_per_s: float) -> float:
        return self.usd_per_hour / 3600 / tokens_per_s * 1e6

    def to_dict(self) -> dict:
        return {"system": self.system, "chips": self.chips, **{f: getattr(self, f) for f in FIGURES},
                "usd_per_chip_hour": self.usd_per_chip_hour, "usd_per_hour": self.usd_per_hour,
                "covers": "chips only (capex and power); not hosts, network, building or staff", "sources": self.sources}


def parse(text: str | None) -> dict[str, float]:
    """`capex_usd=5000,power_w=600,...` -> figures; unknown names and non-positive values are refused."""
    out = {}
    for item in filter(None, (x.strip() for x in (text or "").split(","))):
        name, _, value = item.partition("=")
        name = name.strip()
        if name not in FIGURES:
            raise TCOError(f"--tco-figures: unknown figure {name!r}; known: {', '.join(FIGURES)}")
        try:
            out[name] = float(value)
        except ValueError:
            raise TCOError(f"--tco-figures: {name} needs a number, got {value!r}") from None
        if not out[name] > 0:
            raise TCOError(f"--tco-figures: {name} must be positive, got {out[name]!r}")
    return out


def tco(system, nodes: int = 1, figures: dict | None = None) -> TCO:
    """The TCO of `nodes` of `system` (a name or record), catalog figures overridden by `figures`."""
    s = specs.system(system) if isinstance(system, str) else system
    chip, given = s.chip, dict(figures or {})
    site = {k: v for k, v in _data()["site"].items() if k != "sources"}
    catalog = {"capex_usd": chip.price_usd or None, "power_w": _data()["power_w"].get(chip.key), **site}
    where = {"capex_usd": f"chips.toml {chip.key}.price_usd ({chip.sources.get('price_usd', '')})",
             "power_w": source("power_w", chip.key) if chip.key in _data()["power_w"] else "",
             **{k: source("site", k) for k in site}}
    values, sources = {}, {}
    for f in FIGURES:
        if f in given:
            values[f], sources[f] = given[f], "given with --tco-figures"
        elif catalog.get(f):
            values[f], sources[f] = float(catalog[f]), where[f]
        else:
            raise TCOError(f"the catalog has no {f} for {chip.name}: give one with --tco-figures {f}=VALUE")
    return TCO(s.name, nodes * s.chips, sources=sources, **values)
