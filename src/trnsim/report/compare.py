"""Two profiles side by side (before and after an optimisation): the terminal table and one HTML page.

Reads the `.profile.json` summaries that `trnsim profile` writes: latency, engine active times, MFU,
DMA traffic, memory peaks, the bound engine and the time per source line.
"""
from __future__ import annotations

import html
import json
from pathlib import Path

from trnsim.errors import ConfigError
from trnsim.report.summary import format_bytes, format_time

_ROWS = (("latency", "latency_ns", format_time), ("MFU (TensorE)", "mfu", lambda x: f"{100 * x:.1f} %"),
         ("DMA bytes", "dma_bytes", format_bytes), ("achieved DMA bandwidth", "dma_bandwidth",
                                                    lambda x: f"{x / 1e9:.3g} GB/s"),
         ("SBUF peak (allocated)", "sbuf_peak_bytes", format_bytes), ("PSUM peak (allocated)", "psum_peak_bytes", format_bytes),
         ("critical path waiting", "critical_waiting_ns", format_time))


def load_profile(path: str | Path) -> dict:
    try:
        d = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"{path}: not a readable profile summary ({e})") from None
    if not isinstance(d, dict) or "latency_ns" not in d or "active_ns" not in d:
        raise ConfigError(f"{path}: not a trnsim .profile.json (no latency_ns / active_ns); "
                          "`trnsim profile KERNEL.py` writes one next to its report")
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

    a, b = load_profile(a_path), load_profile(b_path)
    table_rows = rows(a, b)
    if console is not None:
        t = Table(title=f"{a['kernel']} (A) against {b['kernel']} (B) on {a['target']} / {b['target']}",
                  header_style="bold")
        for col, just in (("figure", "left"), ("A", "right"), ("B", "right"), ("B / A", "right")):
            t.add_column(col, justify=just)
        for r in table_rows:
            t.add_row(*r)
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
    path = out / f"compare_{a['kernel']}_{b['kernel']}.html"
    path.write_text(page, encoding="utf-8")
    return path
