"""`trnsim specs NAME`: the spec sheet of a chip, instance, UltraServer or NeuronCore generation.

The sheet shows each catalog figure in human units, the totals that follow from it (peak FLOPS per
dtype and rating, HBM, bandwidth, cores), the topology, the price, where sources disagree, and with
`--sources` where each figure was published. `--json` gives the same in base units.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import click
from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

import trnsim.specs as specs
from trnsim.cli import cli, emit_json
from trnsim.errors import UnknownNameError
from trnsim.specs import catalog
from trnsim.specs.records import FLOPS_DTYPES, ChipSpec, NeuronCoreSpec, SystemSpec
from trnsim.specs.units import human

Record = SystemSpec | ChipSpec | NeuronCoreSpec
_SKIP = {"key", "name", "sources", "notes", "alternatives", "chip", "core", "ratings", "rating"}


def names() -> dict[str, list[str]]:
    """Every name `specs` accepts, by kind."""
    systems = catalog.systems().values()
    return {
        "instances": [s.name for s in systems if s.kind == "instance"],
        "ultraservers": [s.name for s in systems if s.kind == "ultraserver"],
        "chips": [c.name for c in catalog.chips().values()],
        "neuroncores": [c.name for c in catalog.neuroncores().values()],
    }


def lookup(name: str) -> Record:
    """A system, chip or NeuronCore generation by any of the names the catalog knows."""
    if catalog.normalize(name) in catalog.systems():
        return specs.system(name)
    for find in (specs.chip, specs.neuroncore, specs.system):  # a family names its chip here ("specs inf2")
        try:
            return find(name)
        except UnknownNameError:
            pass
    raise UnknownNameError("chip, instance, UltraServer or NeuronCore", name,
                           [n for ns in names().values() for n in ns] + list(specs.FAMILIES))


def _plain(v):
    if isinstance(v, Mapping):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    return v


def as_dict(rec: Record) -> dict:
    """All figures in base units (bytes, bytes/s, Hz, FLOP/s, ns, USD), their sources, and the totals."""
    out = {"kind": type(rec).__name__.removesuffix("Spec").lower()}
    for f in dataclasses.fields(rec):
        v = getattr(rec, f.name)
        out[f.name] = as_dict(v) if dataclasses.is_dataclass(v) else (None if v is None else _plain(v))
    if isinstance(rec, NeuronCoreSpec):
        out["derived"] = {"peak_flops": {d: rec.peak_flops(d) for d in rec.macs_per_pe_cycle},
                          "sbuf_bytes": rec.sbuf_bytes, "psum_bytes": rec.psum_bytes, "dma_bandwidth": rec.dma_bandwidth}
        return out
    chip = rec.chip if isinstance(rec, SystemSpec) else rec  # a chip is a system of one
    out["derived"] = {"peak_flops": {r: {d: rec.peak_flops(d, r) for d in t} for r, t in chip.ratings.items()},
                      "chips": rec.chips, "cores": rec.cores, "hbm_bytes": rec.hbm_bytes, "hbm_bandwidth": rec.hbm_bandwidth}
    return out


def _value(field: str, v) -> str:
    dim = catalog.dimension(field)
    if isinstance(v, Mapping):
        return ", ".join(f"{k} {_value(field, x)}" for k, x in v.items())
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, tuple):
        return " x ".join(map(str, v)) if v else "-"
    if field.startswith("efa") and isinstance(v, float):
        return f"{v * 8 / 1e9:,g} Gbps" if v else "-"  # networks are quoted in bits per second
    if field.startswith("price_usd"):
        return f"${v:,.2f}{'/h' if field.endswith('hour') else ''}" if v else "-"
    if isinstance(v, (int, float)) and dim:
        return human(v, dim) if v else "-"
    return f"{v:,}" if isinstance(v, int) else str(v)


def _fields(rec: Record, title: str, legend: dict[str, int] | None) -> Table:
    """The record's figures; with a `legend`, each row cites its source by number ([1], [2], ...), the texts
    listed once under the sheet, so a narrow terminal wraps nothing."""
    with_sources = legend is not None
    t = Table(title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD, show_header=with_sources)
    t.add_column("figure", style="cyan", no_wrap=True)
    t.add_column("value")
    if with_sources:
        t.add_column("source", style="grey50", no_wrap=True)

    def cite(text: str) -> str:
        return f"[{legend.setdefault(text, len(legend) + 1)}]" if text else ""

    for f in dataclasses.fields(rec):
        if f.name in _SKIP:
            continue
        row = [f.name.removesuffix("_bytes").replace("_", " "), _value(f.name, getattr(rec, f.name))]
        if f.name == "efa_bandwidth" and rec.efa_bandwidth_is_upper_bound:
            row[1] = f"up to {row[1]}"
        t.add_row(*row, *([cite(rec.sources.get(f.name, ""))] if with_sources else []))
    if with_sources and hasattr(rec, "ratings"):
        for r in rec.ratings:
            t.add_row(f"peak FLOPS ({r})", "see above", cite(rec.sources.get(f"ratings.{r}", "")))
    return t


def _peaks(rec: SystemSpec | ChipSpec) -> Table:
    chip = rec.chip if isinstance(rec, SystemSpec) else rec
    t = Table(title="Peak dense TFLOPS (int8: TOPS)", title_justify="left", title_style="bold", box=box.SIMPLE_HEAD)
    t.add_column("dtype", style="cyan")
    for r in chip.ratings:
        mark = " (used)" if r == chip.rating else ""
        t.add_column(f"{r}{mark}\nper chip", justify="right")
        if rec.chips > 1:
            t.add_column(f"{r}{mark}\nx {rec.chips}", justify="right", style="bold")
    for d in FLOPS_DTYPES:
        cells = []
        for table in chip.ratings.values():
            v = table.get(d, 0.0)
            cells += [f"{v / 1e12:,.6g}" if v else "-"] + ([f"{rec.chips * v / 1e12:,.6g}" if v else "-"] if rec.chips > 1 else [])
        if any(c != "-" for c in cells):
            t.add_row(d, *cells)
    return t


def _totals(rec: SystemSpec | ChipSpec) -> Table:
    chip = rec.chip if isinstance(rec, SystemSpec) else rec
    t = Table(title="Totals", title_justify="left", title_style="bold", box=box.SIMPLE_HEAD, show_header=False)
    t.add_column(style="cyan")
    t.add_column()
    cores = f"{rec.cores:,} physical" + "".join(
        f", {rec.chips * chip.logical_cores(n):,} at LNC {n}" for n in chip.lnc_configs if n > 1)
    rows = [("chips", f"{rec.chips} x {chip.vendor} {chip.name}"), ("NeuronCores", cores if chip.is_neuron else "-"),
            ("HBM", human(rec.hbm_bytes, "bytes")), ("HBM bandwidth", human(rec.hbm_bandwidth, "bytes/s"))]
    if isinstance(rec, SystemSpec):
        price = _value("price_usd_per_hour", rec.price_usd_per_hour)
        rows += [("topology", topology_summary(rec)),
                 ("price", price + (f" ({rec.price_status})" if rec.price_usd_per_hour else ""))]
    for row in rows:
        t.add_row(*row)
    return t


def topology_summary(s: SystemSpec) -> str:
    """One line: the shape of the chip graph and what carries it."""
    if s.topology_kind == "torus":
        ring = ", same-position chips ringed across instances" if len(s.topology_shape) == 3 else ""
        return f"{' x '.join(map(str, s.topology_shape))} torus with wrap-around over {s.chip.link}{ring}"
    if s.topology_kind == "switch":
        servers, per = s.topology_shape
        return f"{servers} servers x {per} chips, all-to-all through NeuronSwitch-v1"
    if s.topology_kind == "nvswitch":
        return f"{s.chips} GPUs under one NVSwitch fabric ({s.chip.link})"
    return "one chip, no chip-to-chip links"


def _disagreements(rec) -> list[Text]:
    out = [Text(f"• {n}") for n in rec.notes]
    for field, alts in rec.alternatives.items():
        used = _value(field, getattr(rec, field))
        others = "; ".join(f"{_value(field, v)} ({src})" for src, v in alts.items())
        out.append(Text.assemble("• ", (field.replace("_", " "), "cyan"), f": trnsim uses {used}; also published: {others}"))
    return out


def sheet(rec: Record, with_sources: bool = False) -> Group:
    """The full spec sheet of one record."""
    parts: list = []
    legend: dict[str, int] | None = {} if with_sources else None
    if isinstance(rec, NeuronCoreSpec):
        parts.append(Text(f"{rec.name} (NKI target {rec.target})", "bold"))
        peaks = ", ".join(f"{d} {human(rec.peak_flops(d), 'FLOP/s')}" for d in rec.macs_per_pe_cycle)
        parts.append(Text(f"dense peak per core: {peaks}"))
        parts.append(Text(f"SBUF {human(rec.sbuf_bytes, 'bytes')}, PSUM {human(rec.psum_bytes, 'bytes')} "
                          f"({rec.psum_banks} banks of {human(rec.psum_bank_bytes, 'bytes')} per partition), "
                          f"DMA {human(rec.dma_bandwidth, 'bytes/s')}"))
        parts.append(_fields(rec, "NeuronCore", legend))
    elif isinstance(rec, ChipSpec):
        parts.append(Text(f"{rec.name} ({rec.vendor} chip)", "bold"))
        parts += [_peaks(rec), _totals(rec), _fields(rec, "Chip", legend)]
    else:
        parts.append(Text(f"{rec.name} ({rec.kind}: {rec.chips} x {rec.chip.name})", "bold"))
        parts += [_peaks(rec), _totals(rec), _fields(rec, "System", legend),
                  _fields(rec.chip, f"Chip: {rec.chip.name}", legend)]
    notes = _disagreements(rec) + (_disagreements(rec.chip) if isinstance(rec, SystemSpec) else [])
    if notes:
        parts += [Text("Notes and disagreeing sources", "bold")] + notes
    if legend:
        parts += [Text("Sources", "bold")] + [Text(f"[{n}] {text}") for text, n in legend.items()]
    return Group(*parts)


def summary(s: SystemSpec) -> Text:
    """Three lines: the headline figures of a system."""
    chip = s.chip
    dtype, peak = max(chip.ratings[chip.rating].items(), key=lambda kv: kv[1])
    return Text("\n".join([
        f"{s.chips} x {chip.name}: {human(s.chips * peak, 'FLOP/s')} {dtype}, {human(s.peak_flops('bf16'), 'FLOP/s')} bf16",
        f"HBM {human(s.hbm_bytes, 'bytes')} at {human(s.hbm_bandwidth, 'bytes/s')}; EFA {_value('efa_bandwidth', s.efa_bandwidth)}",
        topology_summary(s),
    ]))


@cli.command("specs")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="All figures in base units, with their sources.")
@click.option("--sources", "with_sources", is_flag=True, help="Show where each figure was published.")
@click.option("--list", "list_names", is_flag=True, help="List the names the catalog knows.")
def specs_command(name, as_json, with_sources, list_names):
    """Spec sheet of a chip, instance, UltraServer or NeuronCore generation."""
    if list_names or not name:
        known = names()
        if as_json:
            click.echo(emit_json(known))
        else:
            labels = {"instances": "instances", "ultraservers": "UltraServers", "chips": "chips",
                      "neuroncores": "NeuronCores"}
            for kind, ns in known.items():
                click.echo(f"{labels[kind]}: {', '.join(ns)}")
        return
    rec = lookup(name)
    if as_json:
        click.echo(emit_json(as_dict(rec)))
        return
    Console().print(sheet(rec, with_sources))
