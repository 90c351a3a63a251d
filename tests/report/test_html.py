"""The self-contained HTML profile: one file, its data, colours and tables (the browser test drives it)."""
import json
import re

import numpy as np
from report_schedules import pipeline_schedule, random_schedule

from trnsim.report import Schedule, Span, render_html
from trnsim.report.html import OTHER, PALETTE, hotspots_of, op_colours


def data_of(page: str) -> dict:
    raw = re.search(r"<script type='application/json' id=data>(.*?)</script>", page, re.S).group(1)
    return json.loads(raw)


def test_report_is_one_file_with_no_network(tmp_path):
    sched = pipeline_schedule({"mfu": 0.41})
    page = render_html(sched, tmp_path / "r.html", tmp_path / "tiny_mlp.trace.json.gz").read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page.replace("href='https://ui.perfetto.dev'", ""))
    assert "<link" not in page and "url(" not in page and "<script src" not in page
    for text in ("tiny_mlp", "trn2", "TensorE", "DMA q2", "32.6 %", "MFU (TensorE)", "41.0 %",
                 "ui.perfetto.dev", "tiny_mlp.trace.json.gz", "<canvas id=tl>", "id=filter"):
        assert text in page


def test_data_holds_every_span_from_the_kernel_start(tmp_path):
    sched = random_schedule(3, 120)
    d = data_of(render_html(sched, tmp_path / "r.html").read_text())
    assert len(d["s"]) == 120 and d["latency"] == sched.latency and d["tracks"] == list(sched.tracks)
    t0 = min(s.start for s in sched.spans)
    for n, s in enumerate(sched.spans):
        assert d["s"][n] == round(s.start - t0, 2) and d["d"][n] == round(s.duration, 2)
        assert d["tracks"][d["k"][n]] == s.track and d["ops"][d["o"][n]] == s.name
        assert d["operands"][d["x"][n]] == s.args["operands"]


def test_one_colour_per_op_busiest_first_everywhere(tmp_path):
    sched = random_schedule(1, 300)
    colours = op_colours(sched)
    time = {}
    for s in sched.spans:
        time[s.name] = time.get(s.name, 0) + s.duration
    busiest = max(time, key=time.get)
    assert colours[busiest] == PALETTE[0]
    assert list(colours.values()).count(OTHER) == max(0, len(time) - len(PALETTE))
    page = render_html(sched, tmp_path / "r.html").read_text()
    d = data_of(page)
    assert all(d["colours"][i] == colours[name] for i, name in enumerate(d["ops"]))
    hot = hotspots_of(sched)[0]  # the hotspot bar takes its main op's colour
    assert f"background:{colours[hot['op']]}'></span>{hot['op']}" in page


def test_hotspots_sum_engine_time_per_source_line():
    spans = (Span(0, "TensorE", "MATMUL", 0, 100, {"source": "k.py:7"}),
             Span(1, "VectorE", "ADD", 0, 30, {"source": "k.py:9"}),
             Span(2, "TensorE", "MATMUL", 100, 50, {"source": "k.py:7"}),
             Span(3, "ScalarE", "EXP", 150, 80, {"source": "k.py:9"}))
    hot = hotspots_of(Schedule(spans, "trn2", "k", {}))
    assert hot == [{"source": "k.py:7", "ns": 150, "count": 2, "op": "MATMUL"},
                   {"source": "k.py:9", "ns": 110, "count": 2, "op": "EXP"}]


def test_dma_pieces_and_occupancy_travel_with_the_page(tmp_path):
    sched = pipeline_schedule()
    pieces = {"queue": np.array([0, 1, 0]), "start": np.array([0.0, 0.0, 500.0]), "end": np.array([900.0, 1000.0, 1500.0]),
              "span": np.array([0, 0, 2])}
    occ = {"SBUF": (np.array([0.0, 1500.0]), np.array([4096, 0]), 24 * 2**20, 8192)}
    d = data_of(render_html(sched, tmp_path / "r.html", dma_pieces=pieces, occupancy=occ).read_text())
    assert d["pq"] == [0, 1, 0] and d["pd"] == [900.0, 1000.0, 1000.0] and d["pi"] == [0, 0, 2]
    assert d["occ"] == {"SBUF": {"t": [0.0, 1500.0], "b": [4096, 0], "cap": 24 * 2**20, "alloc": 8192}}


def test_names_are_escaped(tmp_path):
    """Kernel and instruction names from user code cannot inject markup, not even inside the data."""
    sched = Schedule((Span(0, "TensorE", "</script><b>MATMUL</b>", 0, 10),), "trn2", "<script>x</script>", {})
    page = render_html(sched, tmp_path / "r.html").read_text()
    assert "<script>x" not in page and "&lt;script&gt;" in page and "</script><b>" not in page
    assert data_of(page)["ops"] == ["</script><b>MATMUL</b>"]


def test_empty_schedule_renders(tmp_path):
    page = render_html(Schedule((), "trn1", "empty", {}), tmp_path / "r.html").read_text()
    assert data_of(page)["s"] == [] and "<canvas id=tl>" in page
