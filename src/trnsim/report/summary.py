"""The terminal summary of a schedule, and the same figures as a JSON-ready dict.

Like a profiler's summary table: kernel latency, each engine's and queue's active time and share,
the critical path and the track that bound it, and whatever figures the timing model put in
`meta` (FLOPs, MFU, bytes moved, bandwidth, SBUF/PSUM peaks). Units convert here, at the edge.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trnsim.report.schedule import Schedule


def format_time(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3g} {unit}" if abs(ns) < 100 * scale else f"{ns / scale:,.1f} {unit}"
    return f"{ns:.3g} ns"


def format_bytes(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:g} B"


def _si(unit: str) -> Callable[[float], str]:
    def fmt(x: float) -> str:
        for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
            if abs(x) >= scale:
                return f"{x / scale:.3g} {prefix}{unit}"
        return f"{x:g} {unit}"
    return fmt


# Figures the timing model may put in `meta`, in display order: key -> (label, formatter).
# Units are the house's: FLOPs, bytes, bytes per second, fractions (0..1) for shares.
META_FIELDS: dict[str, tuple[str, Callable[[Any], str]]] = {
    "overhead_ns": ("execution overhead (start-up, tear-down)", format_time),
    "flops": ("FLOPs", _si("FLOP")),
    "mfu": ("MFU (TensorE)", lambda x: f"{100 * x:.1f} %"),
    "dma_bytes": ("DMA bytes", format_bytes),
    "hbm_read_bytes": ("HBM read", format_bytes),
    "hbm_write_bytes": ("HBM written", format_bytes),
    "dma_bandwidth": ("achieved DMA bandwidth", lambda x: f"{x / 1e9:.3g} GB/s"),
    "sbuf_peak_bytes": ("SBUF peak (allocated)", format_bytes),
    "psum_peak_bytes": ("PSUM peak (allocated)", format_bytes),
    "spill_save_bytes": ("spill save (SBUF to HBM)", format_bytes),
    "spill_reload_bytes": ("spill reload (HBM to SBUF)", format_bytes),
}


def meta_rows(meta: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, value) for each meta figure: known ones first, formatted; others as given."""
    rows = [(label, fmt(meta[k])) for k, (label, fmt) in META_FIELDS.items() if meta.get(k) is not None]
    return rows + [(k, str(v)) for k, v in meta.items() if k not in META_FIELDS]


def summary_dict(schedule: Schedule) -> dict:
    """The summary's figures in base units (ns, shares 0..1), ready for `--json`."""
    cp = schedule.critical_path()
    util = schedule.utilisation
    return {
        "kernel": schedule.kernel, "target": schedule.target,
        "latency_ns": schedule.latency, "active_ns": schedule.active, "spans": len(schedule.spans),
        "tracks": [{"track": t, "spans": schedule.span_counts[t], "busy_ns": schedule.busy[t],
                    "utilisation": util[t]} for t in schedule.tracks],
        "critical_path": {"length_ns": cp.length, "spans": len(cp.span_ids), "bound": cp.bound,
                          "bound_ns": cp.by_track.get(cp.bound, 0.0), "waiting_ns": cp.waiting,
                          "by_track": dict(cp.by_track)},
        "meta": dict(schedule.meta),
    }


def headline(d: dict) -> list[str]:
    """The lines above the table: latency (with the execution's start-up and tear-down, when the timing
    model gives one: the timeline and its shares leave it out, as a profile does) and what bound it."""
    cp = d["critical_path"]
    over = d["meta"].get("overhead_ns")
    total = (f"{format_time(d['latency_ns'] + over)} latency = {format_time(d['latency_ns'])} timeline + "
             f"{format_time(over)} start-up and tear-down " if over else f"{format_time(d['latency_ns'])} ")
    lines = [f"{d['kernel']} on {d['target']}: {total}"
             f"({d['spans']:,} spans; some engine or queue busy {format_time(d['active_ns'])})"]
    if cp["bound"] is not None:
        share = cp["bound_ns"] / cp["length_ns"] if cp["length_ns"] > 0 else 0.0
        lines.append(f"critical path {format_time(cp['length_ns'])} over {cp['spans']:,} spans; bound by "
                     f"{cp['bound']} ({format_time(cp['bound_ns'])}, {100 * share:.0f} % of it), "
                     f"waiting {format_time(cp['waiting_ns'])}")
    return lines


def print_summary(schedule: Schedule, console=None) -> dict:
    """Print the summary with rich; returns `summary_dict(schedule)`."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    d = summary_dict(schedule)
    for line in headline(d):
        console.print(line)
    table = Table(show_edge=False, header_style="bold")
    for col, justify in (("track", "left"), ("spans", "right"), ("active", "right"), ("share", "right"),
                         ("", "left")):
        table.add_column(col, justify=justify)
    for t in d["tracks"]:
        bar = "█" * round(20 * t["utilisation"])
        table.add_row(t["track"], f"{t['spans']:,}", format_time(t["busy_ns"]),
                      f"{100 * t['utilisation']:.1f} %", f"[cyan]{bar}[/]")
    console.print(table)
    rows = meta_rows(d["meta"])
    if rows:
        meta = Table(show_header=False, show_edge=False, box=None)
        for label, value in rows:
            meta.add_row(f"[bold]{label}[/]", value)
        console.print(meta)
    return d
