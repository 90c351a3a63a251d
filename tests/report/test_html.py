"""The self-contained HTML report."""
import base64
import re
import struct

from report_schedules import pipeline_schedule, random_schedule

from trnsim.report import Schedule, Span, render_html

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def images(page: str) -> list[bytes]:
    return [base64.b64decode(b) for b in re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)]


def png_size(png: bytes) -> tuple[int, int]:
    """Width and height from the IHDR chunk, which follows the signature."""
    assert png[12:16] == b"IHDR"
    return struct.unpack(">II", png[16:24])


def test_report_is_self_contained_with_two_pictures(tmp_path):
    """One file, no external assets, a timeline and a utilisation PNG of sane size, tables and a trace hint."""
    sched = pipeline_schedule({"mfu": 0.41})
    page = render_html(sched, tmp_path / "r.html", tmp_path / "tiny_mlp.trace.json").read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page.replace("href='https://ui.perfetto.dev'", ""))
    assert "<link" not in page and "<script" not in page and "url(" not in page
    pngs = images(page)
    assert len(pngs) == 2
    for png in pngs:
        assert png.startswith(PNG_SIGNATURE)
        width, height = png_size(png)
        assert 400 <= width <= 3000 and 150 <= height <= 3000
    for text in ("tiny_mlp", "trn2", "TensorE", "DMA q2", "32.6 %", "MFU (TensorE)", "41.0 %",
                 "ui.perfetto.dev", "tiny_mlp.trace.json"):
        assert text in page


def test_timeline_grows_a_row_per_track(tmp_path):
    """The timeline picture is taller for a schedule with more tracks."""
    few = images(render_html(pipeline_schedule(), tmp_path / "a.html").read_text())[0]
    many = images(render_html(random_schedule(1, 200), tmp_path / "b.html").read_text())[0]
    assert png_size(many)[1] > png_size(few)[1]


def test_names_are_escaped(tmp_path):
    """Kernel and instruction names from user code cannot inject markup."""
    sched = Schedule((Span(0, "TensorE", "<b>MATMUL</b>", 0, 10),), "trn2", "<script>x</script>", {})
    page = render_html(sched, tmp_path / "r.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_empty_schedule_renders(tmp_path):
    """A schedule without spans still gives a page with both pictures."""
    page = render_html(Schedule((), "trn1", "empty", {}), tmp_path / "r.html").read_text()
    assert len(images(page)) == 2
