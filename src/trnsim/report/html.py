"""A self-contained HTML report: engine timeline, utilisation chart and the summary, in one file.

The pictures are matplotlib (Agg) PNGs inlined as base64, so the file needs nothing else to open.
The timeline draws one row per track; spans are merged per row and colour where they lie closer
than a pixel apart, so a schedule of 100k+ spans draws as a few thousand rectangles.
"""
from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import numpy as np

from trnsim.report.schedule import Schedule, merge_intervals
from trnsim.report.summary import format_time, headline, meta_rows, summary_dict

_WIDTH_IN, _DPI = 12.0, 100
_COLOURED_KINDS = 9  # the instruction kinds with the most time get a colour each; the rest are "other"


def _png(fig) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _kinds(schedule: Schedule) -> tuple[np.ndarray, list[str]]:
    """Colour index per span (by instruction name, busiest first) and the legend labels."""
    names, inverse = np.unique([s.name for s in schedule.spans], return_inverse=True)
    dur = np.fromiter((s.duration for s in schedule.spans), float, len(schedule.spans))
    time = np.bincount(inverse, weights=dur, minlength=len(names))
    rank = np.empty(len(names), np.int64)
    rank[np.lexsort((names, -time))] = np.arange(len(names))
    labels = [str(n) for n in names[np.lexsort((names, -time))][:_COLOURED_KINDS]]
    if len(names) > _COLOURED_KINDS:
        labels.append("other")
    return np.minimum(rank[inverse], _COLOURED_KINDS), labels


def timeline_png(schedule: Schedule) -> str:
    """Gantt chart of the schedule, a row per track (base64 PNG)."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    tracks = schedule.tracks
    fig = Figure(figsize=(_WIDTH_IN, 1.2 + 0.32 * len(tracks)), layout="constrained")
    ax = fig.add_subplot()
    if schedule.spans:
        kind, labels = _kinds(schedule)
        cols = schedule.columns
        t0, lat = schedule.begin, schedule.latency
        start, end, row = (cols["start"] - t0) / 1e3, (cols["end"] - t0) / 1e3, cols["track"]
        pixel = lat / 1e3 / (_WIDTH_IN * _DPI)  # one pixel in microseconds
        colours = [f"C{k}" for k in range(_COLOURED_KINDS)] + ["0.6"]
        order = np.lexsort((kind, row))
        bounds = np.flatnonzero(np.diff(row[order] * (_COLOURED_KINDS + 1) + kind[order])) + 1
        for group in np.split(order, bounds):
            r, k = row[group[0]], kind[group[0]]
            s, e = merge_intervals(start[group], end[group], gap=pixel)
            ax.broken_barh(np.column_stack([s, np.maximum(e - s, pixel)]), (len(tracks) - 1 - r - 0.4, 0.8),
                           facecolors=colours[k], linewidth=0)
        handles = [Patch(color=colours[min(i, _COLOURED_KINDS)], label=lab) for i, lab in enumerate(labels)]
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
        ax.set_xlim(0, lat / 1e3)
    ax.set_yticks(range(len(tracks)), list(reversed(tracks)), fontsize=8)
    ax.set_ylim(-0.6, len(tracks) - 0.4)
    ax.set_xlabel("time since kernel start (µs)")
    ax.set_title(f"{schedule.kernel} on {schedule.target}: engine timeline", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def utilisation_png(schedule: Schedule) -> str:
    """Horizontal bar per track: busy share of the kernel latency (base64 PNG)."""
    from matplotlib.figure import Figure

    tracks = schedule.tracks
    share = [100 * schedule.utilisation[t] for t in tracks]
    fig = Figure(figsize=(_WIDTH_IN * 0.6, 1.0 + 0.28 * len(tracks)), layout="constrained")
    ax = fig.add_subplot()
    y = np.arange(len(tracks))[::-1]
    ax.barh(y, share, color=["C1" if t.startswith(("DMA", "q")) else "C0" for t in tracks])
    for yi, v in zip(y, share):
        ax.text(v + 1, yi, f"{v:.1f} %", va="center", fontsize=8)
    ax.set_yticks(y, tracks, fontsize=8)
    ax.set_xlim(0, 110)
    ax.set_xlabel("busy share of kernel latency (%)")
    ax.set_title("utilisation per engine and DMA queue", fontsize=10)
    return _png(fig)


_CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1250px}
table{border-collapse:collapse;margin:1em 0}td,th{padding:2px 10px;border-bottom:1px solid #ddd}
td.n{text-align:right;font-variant-numeric:tabular-nums}img{max-width:100%}code{background:#f4f4f4}"""


def _table(header: list[str], rows: list[list[str]], numeric_from: int = 1) -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f'<td{" class=n" if j >= numeric_from else ""}>{esc(c)}</td>'
                                    for j, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def render_html(schedule: Schedule, path: str | Path, trace_path: str | Path | None = None) -> Path:
    """Write the HTML report to `path`; `trace_path` names the JSON trace it points readers to."""
    esc = html.escape
    d = summary_dict(schedule)
    tracks = _table(["track", "spans", "active", "share"],
                    [[t["track"], f"{t['spans']:,}", format_time(t["busy_ns"]), f"{100 * t['utilisation']:.1f} %"]
                     for t in d["tracks"]])
    path_rows = [[t, format_time(ns)] for t, ns in sorted(d["critical_path"]["by_track"].items(),
                                                           key=lambda kv: -kv[1])]
    meta = meta_rows(d["meta"])
    trace = f"<code>{esc(Path(trace_path).name)}</code>" if trace_path else "the JSON trace"
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{esc(schedule.kernel)}: trnsim profile"
        f"</title><style>{_CSS}</style></head><body>",
        f"<h1>{esc(schedule.kernel)} <small>on {esc(schedule.target)}</small></h1>",
        "".join(f"<p>{esc(line)}</p>" for line in headline(d)),
        f"<img alt='engine timeline' src='data:image/png;base64,{timeline_png(schedule)}'>",
        f"<img alt='utilisation per track' src='data:image/png;base64,{utilisation_png(schedule)}'>",
        "<h2>Engines and DMA queues</h2>", tracks,
        "<h2>Critical path by track</h2>", _table(["track", "time on path"], path_rows),
        ("<h2>Kernel figures</h2>" + _table(["figure", "value"], [list(r) for r in meta])) if meta else "",
        f"<p>For every instruction with its operands and dependency arrows, open {trace} at "
        "<a href='https://ui.perfetto.dev'>ui.perfetto.dev</a> (<i>Open trace file</i>); "
        "the file stays on your machine.</p></body></html>",
    ]
    path = Path(path)
    path.write_text("".join(parts), encoding="utf-8")
    return path
