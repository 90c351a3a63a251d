"""Two profiles side by side (before and after an optimisation): the terminal table and one HTML page.

Reads the `.profile.json` summaries that `trnsim profile` writes: latency, engine active times, MFU,
DMA traffic, memory peaks, the bound engine and the time per source line.
"""
from __future__ import annotations

import html
import json
import math
from pathlib import Path

from trnsim.errors import ConfigError, read_user_file
from trnsim.live import clean_text
from trnsim.report.files import safe_stem, write_text
from trnsim.report.summary import format_bytes, format_time

_ROWS = (("latency", "latency_ns", format_time), ("MFU (TensorE)", "mfu", lambda x: f"{100 * x:.1f} %"),
         ("DMA bytes", "dma_bytes", format_bytes), ("achieved DMA bandwidth", "dma_bandwidth",
                                                    lambda x: f"{x / 1e9:.3g} GB/s"),
         ("SBUF peak (allocated)", "sbuf_peak_bytes", format_bytes), ("PSUM peak (allocated)", "psum_peak_bytes", format_bytes),
         ("critical path waiting", "critical_waiting_ns", format_time))


class ProfileFormatError(ConfigError):
    """A file given to `--compare` that is not a `.profile.json` as `trnsim profile` writes it."""


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def load_profile(path: str | Path) -> dict:
    """A profile summary, every field the comparison reads checked (it may come from someone else)."""
    text = read_user_file(path, "a profile summary", ProfileFormatError, limit=64 << 20)
    try:
        d = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise ProfileFormatError(f"{path}: not a readable profile summary ({type(e).__name__}: {e})") from None
    if not isinstance(d, dict) or "latency_ns" not in d or "active_ns" not in d:
        raise ProfileFormatError(f"{path}: not a trnsim .profile.json (no latency_ns / active_ns); "
                                 "`trnsim profile KERNEL.py` writes one next to its report")

    def bad(field, rule):
        raise ProfileFormatError(f"{path}: field {field!r} {rule}, got {str(d.get(field))[:60]!r}")
    for field in ("kernel", "target"):
        if not isinstance(d.get(field), str):
            bad(field, "must be text")
    for _, key, _ in _ROWS:
        if d.get(key) is not None and not _number(d[key]):
            bad(key, "must be a finite number")
    if not (isinstance(d["active_ns"], dict) and all(isinstance(k, str) and _number(v)
                                                     for k, v in d["active_ns"].items())):
        bad("active_ns", "must map engine names to nanoseconds")
    hot = d.get("hotspots", [])
    if not (isinstance(hot, list) and all(isinstance(h, dict) and isinstance(h.get("source"), str)
                                          and _number(h.get("ns")) and isinstance(h.get("op"), str) for h in hot)):
        bad("hotspots", "must list {source, ns, op} records")
    return d


def rows(a: dict, b: dict) -> list[tuple[str, str, str, str]]:
    """(figure, A, B, B against A) for the headline figures and every engine's active time."""
    out = []

    def change(x, y):
        return f"{y / x:.2f}x" if x else "-"
    for label, key, fmt in _ROWS:
        if a.get(key) is not None and b.get(key) is not None:
            out.append((label, fmt(a[key]), fmt(b[key]), change(a[key], b[key])))
    out.append(("bound by", str(a.get("bound")), str(b.get("bound")), ""))
    for eng in dict.fromkeys([*a["active_ns"], *b["active_ns"]]):
        if eng.startswith("DMA q"):
            continue
        x, y = a["active_ns"].get(eng, 0.0), b["active_ns"].get(eng, 0.0)
        out.append((f"{eng} active", format_time(x), format_time(y), change(x, y)))
    return out


def compare_profiles(a_path, b_path, out: Path, console=None) -> Path:
    """Print the comparison and write `compare_<A>_<B>.html` under `out`; returns the page's path."""
    from rich.table import Table
    from rich.text import Text

    a, b = load_profile(a_path), load_profile(b_path)
    table_rows = rows(a, b)
    if console is not None:  # names from the files as plain text: no markup, no control characters
        t = Table(title=Text(clean_text(f"{a['kernel']} (A) against {b['kernel']} (B) on {a['target']} / "
                                        f"{b['target']}")), header_style="bold")
        for col, just in (("figure", "left"), ("A", "right"), ("B", "right"), ("B / A", "right")):
            t.add_column(col, justify=just)
        for r in table_rows:
            t.add_row(*(Text(clean_text(c)) for c in r))
        console.print(t)
    esc = html.escape

    def hot(d):
        body = "".join(f"<tr><td><code>{esc(h['source'])}</code></td><td class=n>{esc(format_time(h['ns']))}</td>"
                       f"<td>{esc(h['op'])}</td></tr>" for h in d.get("hotspots", [])[:25])
        return f"<table><tr><th>source</th><th>engine time</th><th>main op</th></tr>{body}</table>"
    figures = "".join("<tr>" + "".join(f"<td{' class=n' if j else ''}>{esc(c)}</td>" for j, c in enumerate(r)) + "</tr>"
                      for r in table_rows)
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{esc(a['kernel'])} vs {esc(b['kernel'])}</title>"
            "<style>body{font-family:system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse}"
            "td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left}td.n{text-align:right}"
            ".side{display:flex;gap:2em}.side>div{flex:1}</style></head><body>"
            f"<h1>A: {esc(a['kernel'])} &nbsp; B: {esc(b['kernel'])}</h1>"
            f"<p>A: <code>{esc(str(a_path))}</code><br>B: <code>{esc(str(b_path))}</code></p>"
            f"<table><tr><th>figure</th><th>A</th><th>B</th><th>B / A</th></tr>{figures}</table>"
            f"<h2>Time per source line</h2><div class=side><div><h3>A</h3>{hot(a)}</div><div><h3>B</h3>{hot(b)}</div>"
            "</div></body></html>")
    out.mkdir(parents=True, exist_ok=True)
    return write_text(out / f"compare_{safe_stem(a['kernel'])}_{safe_stem(b['kernel'])}.html", page)
