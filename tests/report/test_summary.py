"""The terminal summary and its JSON form."""
import json

from report_schedules import pipeline_schedule
from rich.console import Console

from trnsim.report import print_summary, summary_dict
from trnsim.report.summary import format_bytes, format_time


def test_summary_dict_figures():
    """The dict holds latency, per-track busy time and share, the bound track and meta, in base units."""
    meta = {"flops": 2 * 128 * 128 * 512, "mfu": 0.41, "sbuf_peak_bytes": 3 * 2**20}
    d = summary_dict(pipeline_schedule(meta))
    json.dumps(d)  # ready for --json
    assert d["latency_ns"] == 4600.0 and d["spans"] == 8
    q0 = next(t for t in d["tracks"] if t["track"] == "DMA q0")
    assert q0 == {"track": "DMA q0", "spans": 2, "busy_ns": 1500.0, "utilisation": 1500 / 4600}
    assert [t["track"] for t in d["tracks"]][:3] == ["TensorE", "VectorE", "ScalarE"]
    cp = d["critical_path"]
    assert (cp["bound"], cp["bound_ns"], cp["length_ns"], cp["spans"]) == ("TensorE", 1500.0, 4100.0, 5)
    assert d["meta"] == meta


def test_print_summary_shows_tracks_bound_and_meta():
    """The rich output names every track, the bounding engine, and formats the meta figures."""
    con = Console(record=True, width=120)
    print_summary(pipeline_schedule({"flops": 16.8e6, "mfu": 0.41, "dma_bandwidth": 180e9,
                                     "psum_peak_bytes": 16384, "note": "tiled"}), con)
    out = con.export_text()
    for track in ("TensorE", "VectorE", "ScalarE", "DMA q0", "DMA q1", "DMA q2"):
        assert track in out
    assert "bound by TensorE" in out and "4.6 µs" in out and "32.6 %" in out  # q0: 1500 of 4600 ns
    assert "16.8 MFLOP" in out and "41.0 %" in out and "180 GB/s" in out and "16 KiB" in out
    assert "note" in out and "tiled" in out


def test_headline_adds_the_execution_overhead_to_the_timeline():
    """With an execution overhead in meta the headline reads latency = timeline + overhead; the tracks'
    shares stay over the timeline (4600 ns), as a profile's do."""
    con = Console(record=True, width=160)
    d = print_summary(pipeline_schedule({"overhead_ns": 38_900.0}), con)
    out = con.export_text()
    assert "43.5 µs latency = 4.6 µs timeline + 38.9 µs start-up and tear-down" in out
    assert "32.6 %" in out and d["latency_ns"] == 4600.0  # q0: 1500 of 4600 ns


def test_summary_without_meta_has_no_meta_rows():
    """Meta figures appear only when the timing model supplied them."""
    con = Console(record=True, width=120)
    print_summary(pipeline_schedule(), con)
    assert "MFU" not in con.export_text() and "FLOP" not in con.export_text()


def test_units_at_the_edge():
    """Times print in ns, µs, ms or s and sizes in B, KiB, MiB or GiB."""
    assert [format_time(t) for t in (12, 1500, 2.5e6, 3e9, 250e3)] == ["12 ns", "1.5 µs", "2.5 ms", "3 s", "250.0 µs"]
    assert [format_bytes(b) for b in (100, 2048, 3 * 2**20, 2**31)] == ["100 B", "2 KiB", "3 MiB", "2 GiB"]
