"""What-if hardware: a catalog chip with some figures changed, for kernels, profiles, collectives and plans.

    # my_chip.toml
    base = "trn2"
    name = "trn2 with 2x SBUF"
    [core]
    sbuf_partition_bytes = "384 KiB"
    clocks.tensor = "5.6 GHz"
    [chip]
    hbm_bandwidth = "5.8 TB/s"
    [system]
    intra_link_bandwidth = "1.28 TB/s"

    >>> with trnsim.hardware("my_chip.toml"):
    ...     trnsim.benchmark(kernel, a, b)

While a what-if chip is in use, `specs.neuroncore`, `specs.chip` and `specs.system` answer with the
changed records for the base chip's generation (and every system built of that chip), so every layer
above runs on it unchanged. Sections and fields are those of the catalog records (records.py); values
take the catalog's units ("2.8 GHz", "24 MiB", "2.9 TB/s") or base units. Only the fields in ALLOWED may
be changed, each within a range that keeps the model meaningful; anything else is a HardwareError naming
the field, the value, the allowed range and file:line.
"""
from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path

from trnsim.errors import TrnsimError, read_user_file
from trnsim.specs import catalog, units
from trnsim.specs.records import _freeze

KiB, GB, GHz = 1024, 1e9, 1e9
# section -> field -> (lowest, highest, unit). Ranges bound what the timing and memory models can mean,
# not what any chip has: a NeuronCore's 128 partitions and the NKI tile limits stay as published.
ALLOWED = {
    "core": {
        "sbuf_partition_bytes": (16 * KiB, 4096 * KiB, "bytes"),
        "psum_partition_bytes": (2 * KiB, 256 * KiB, "bytes"),
        "clocks": (100e6, 10 * GHz, "Hz"),
        "pe_rows": (32, 1024, ""),
        "pe_cols": (32, 1024, ""),
        "dma_engines": (1, 128, ""),
        "dma_engine_bandwidth": (1 * GB, 2000 * GB, "bytes/s"),
        "dma_fixed_latency": (0.0, 100_000.0, "ns"),
        "hbm_bandwidth": (1 * GB, 100_000 * GB, "bytes/s"),
        "hbm_bytes": (1 << 30, 1 << 40, "bytes"),
    },
    "chip": {
        "hbm_bandwidth": (10 * GB, 1_000_000 * GB, "bytes/s"),
        "hbm_bytes": (1 << 30, 1 << 44, "bytes"),
        "dma_engines": (1, 4096, ""),
        "link_bandwidth": (1 * GB, 1_000_000 * GB, "bytes/s"),
    },
    "system": {
        "intra_link_bandwidth": (1 * GB, 1_000_000 * GB, "bytes/s"),
        "inter_link_bandwidth": (1 * GB, 1_000_000 * GB, "bytes/s"),
        "efa_bandwidth": (1 * GB, 1_000_000 * GB, "bytes/s"),
    },
}
CLOCKS = ("tensor", "vector", "scalar", "gpsimd", "base")


class HardwareError(TrnsimError, ValueError):
    """A what-if hardware file or override that cannot be applied."""


class Hardware:
    """A what-if chip: `base` (a catalog chip) with `overrides` ({section: {field: value}}) applied.

    Use it as a context manager, or `use()` it for the rest of the process (the CLI's --hardware)."""

    def __init__(self, base: str = "trn2", overrides: dict | None = None, name: str | None = None,
                 path: str | None = None, text: str = ""):
        from trnsim import specs

        self.path, self._text = path, text
        self.base = specs.chip(base)
        if not self.base.is_neuron:
            raise HardwareError(f"{self._at('base')}: base = {base!r} is a GPU; a what-if chip starts from a Trainium")
        self.overrides = {s: dict(v) for s, v in (overrides or {}).items()}
        self.name = name or f"{self.base.name} (what-if)"
        self.core, self.chip = self._build()
        self._systems: dict = {}

    # -- building ---------------------------------------------------------------------------------
    def _at(self, key: str) -> str:
        """`path:line` of `key` in the TOML file (or '<hardware>' for overrides given in Python)."""
        if not self.path:
            return "<hardware>"
        leaf = key.rsplit(".", 1)[-1]
        for n, line in enumerate(self._text.splitlines(), 1):
            if re.match(rf"\s*(\w+\.)*{re.escape(leaf)}\s*=", line) or re.match(rf"\s*\[[\w.]*\b{re.escape(leaf)}\]", line):
                return f"{self.path}:{n}"
        return self.path

    def _value(self, section: str, field: str, raw, key: str):
        lo, hi, unit = ALLOWED[section][field]
        try:
            if isinstance(raw, str):
                v = units.value(raw, unit) if unit else float(raw)
            elif isinstance(raw, bool) or not isinstance(raw, (int, float)):
                raise ValueError
            else:
                v = float(raw)
        except (ValueError, TrnsimError):
            raise HardwareError(f"{self._at(key)}: {key} = {raw!r} is not a {unit or 'number'} value") from None
        if not lo <= v <= hi:
            raise HardwareError(f"{self._at(key)}: {key} = {raw!r} is outside the allowed range "
                                f"{_show(lo, unit)} .. {_show(hi, unit)}")
        if unit in ("", "bytes"):
            if v != int(v):
                raise HardwareError(f"{self._at(key)}: {key} = {raw!r} must be a whole number")
            v = int(v)
        if field in ("pe_rows", "pe_cols") and v % 32:
            raise HardwareError(f"{self._at(key)}: {key} = {raw!r} must be a multiple of 32 (the array splits in quadrants)")
        if field == "psum_partition_bytes" and v % self.base.core.psum_banks:
            raise HardwareError(f"{self._at(key)}: {key} = {raw!r} must split evenly into "
                                f"{self.base.core.psum_banks} banks")
        return v

    def _fields(self, section: str) -> dict:
        table = self.overrides.get(section, {})
        out = {}
        for field, raw in table.items():
            key = f"{section}.{field}"
            if field not in ALLOWED[section]:
                raise HardwareError(f"{self._at(key)}: {key} cannot be changed; [{section}] allows: "
                                    f"{', '.join(ALLOWED[section])}")
            if field == "clocks":
                if not isinstance(raw, dict):
                    raise HardwareError(f"{self._at(key)}: {key} must be a table of engine clocks ({', '.join(CLOCKS)})")
                bad = [e for e in raw if e not in CLOCKS]
                if bad:
                    raise HardwareError(f"{self._at(f'{key}.{bad[0]}')}: {key}.{bad[0]} is no engine; clocks: {', '.join(CLOCKS)}")
                out[field] = {e: self._value(section, field, v, f"{key}.{e}") for e, v in raw.items()}
            else:
                out[field] = self._value(section, field, raw, key)
        return out

    def _build(self):
        extra = set(self.overrides) - set(ALLOWED)
        if extra:
            raise HardwareError(f"{self._at(sorted(extra)[0])}: unknown section [{sorted(extra)[0]}]; "
                                f"sections: {', '.join(ALLOWED)}")
        core, chip = self.base.core, self.base
        cf = self._fields("core")
        if "clocks" in cf:
            cf["clocks"] = _freeze(dict(core.clocks) | cf["clocks"])
        hf = self._fields("chip")
        # The chip's HBM bandwidth is shared by its cores: a chip-level change scales each core's share.
        if "hbm_bandwidth" in hf and "hbm_bandwidth" not in cf:
            cf["hbm_bandwidth"] = core.hbm_bandwidth * hf["hbm_bandwidth"] / chip.hbm_bandwidth
        core = dataclasses.replace(core, **cf)
        self.system_fields = self._fields("system")
        return core, dataclasses.replace(chip, core=core, **hf)

    # -- answering the catalog's questions ---------------------------------------------------------
    def neuroncore(self, rec):
        return self.core if rec.key == self.core.key else rec

    def chip_for(self, rec):
        return self.chip if rec.key == self.chip.key else rec

    def system(self, rec):
        if rec.chip.key != self.chip.key:
            return rec
        if rec.key not in self._systems:
            self._systems[rec.key] = dataclasses.replace(rec, chip=self.chip, **self.system_fields)
        return self._systems[rec.key]

    # -- activation ------------------------------------------------------------------------------
    def use(self) -> Hardware:
        """Make this chip the hardware for the rest of the process (until `release`)."""
        _ACTIVE.append(self)
        return self

    def release(self) -> None:
        if self in _ACTIVE:
            _ACTIVE.remove(self)

    def __enter__(self):
        return self.use()

    def __exit__(self, *exc):
        self.release()

    def __repr__(self):
        return f"Hardware({self.name!r}, base={self.base.name!r})"


_ACTIVE: list[Hardware] = []  # process-wide, so the threads of an LNC 2 launch see it too


def active() -> Hardware | None:
    return _ACTIVE[-1] if _ACTIVE else None


def load(path) -> Hardware:
    """Read a what-if hardware TOML file (see the module docstring)."""
    p = Path(path)
    text = read_user_file(p, "a hardware file", HardwareError)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise HardwareError(f"{path}: not valid TOML: {e}") from None
    except RecursionError:
        raise HardwareError(f"{path}: nested deeper than a hardware file can be (sections of fields)") from None
    base = data.pop("base", None)
    if not isinstance(base, str):
        raise HardwareError(f"{path}:1: a hardware file starts from a catalog chip: base = \"trn2\" (or trn1, trn3)")
    name = data.pop("name", None)
    loose = [k for k, v in data.items() if not isinstance(v, dict)]
    if loose:
        hw = Hardware.__new__(Hardware)
        hw.path, hw._text = str(path), text
        raise HardwareError(f"{hw._at(loose[0])}: {loose[0]} must sit in a section: [core], [chip] or [system]")
    try:
        return Hardware(base, data, name=name or f"{p.stem} ({base} what-if)", path=str(path), text=text)
    except catalog.UnknownNameError as e:
        raise HardwareError(f"{path}: base = {base!r}: {e}") from None


def hardware(spec=None, *, base: str = "trn2", name: str | None = None, **sections) -> Hardware:
    """A what-if chip from a TOML file path, or from keyword sections:
    `hardware(base="trn2", core={"sbuf_partition_bytes": "384 KiB"})`."""
    if spec is not None:
        return spec if isinstance(spec, Hardware) else load(spec)
    return Hardware(base, sections, name=name)


def _show(v, unit) -> str:
    return units.human(v, unit) if unit and hasattr(units, "human") else f"{v:g}{(' ' + unit) if unit else ''}"
