"""Profile files on disk: `--compare` takes nothing from a shared `.profile.json` on trust (its names never
leave --out, never reach the terminal as markup or escape sequences, malformed fields are named), and
`profile` writes all or nothing, under names that two same-named kernels do not share."""
import json

import pytest
from click.testing import CliRunner

from trnsim.cli import cli
from trnsim.report import compare

KERNEL = '''import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def twice(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=SCALE)
    nisa.dma_copy(dst=out, src=t)
    return out
'''
GOOD = {"kernel": "k", "target": "trn2", "latency_ns": 1000.0, "active_ns": {"VectorE": 500.0}, "mfu": 0.1,
        "hotspots": [{"source": "k.py:3", "ns": 10.0, "op": "tensor_copy"}]}


pytestmark = pytest.mark.usefixtures("shim_as_found")


def _compare(tmp_path, a: dict | bytes, b: dict = GOOD):
    pa, pb = tmp_path / "a.profile.json", tmp_path / "b.profile.json"
    pa.write_bytes(a if isinstance(a, bytes) else json.dumps(a).encode())
    pb.write_text(json.dumps(b))
    return CliRunner().invoke(cli, ["profile", str(pa), "--compare", str(pb), "--out", str(tmp_path / "out")])


def test_a_kernel_name_never_leaves_out_nor_reaches_the_terminal(tmp_path):
    evil = {**GOOD, "kernel": "../../../escaped\x1b]0;title\x07[link=https://x.example]y[/link][/]",
            "active_ns": {"[/]\x1b[2J": 1.0}}
    r = _compare(tmp_path, evil)
    assert r.exit_code == 0, r.output
    assert "\x1b" not in r.output and "\x07" not in r.output
    assert "[link=https://x.exam" in r.output and "[/][2J active" in r.output  # shown as written, not as markup
    (page,) = (tmp_path / "out").iterdir()  # the one file written, inside --out
    assert page.name == "compare__.._.._escaped__0_title__link_https___x.example_y__link_____k.html"
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == ["a.profile.json", "b.profile.json", f"out/{page.name}"]


@pytest.mark.parametrize("bad, rule", [
    ({**GOOD, "active_ns": [1]}, "'active_ns' must map engine names"),
    ({**GOOD, "latency_ns": "fast"}, "'latency_ns' must be a finite number"),
    ({**GOOD, "mfu": {"x": 1}}, "'mfu' must be a finite number"),
    ({**GOOD, "hotspots": [1]}, "'hotspots' must list"),
    ({**GOOD, "hotspots": [{"source": "a", "ns": "1", "op": "x"}]}, "'hotspots' must list"),
    ({**GOOD, "kernel": 5}, "'kernel' must be text"),
    ({**GOOD, "target": None}, "'target' must be text"),
    (b"[" * 100_000 + b"]" * 100_000, "not a trnsim .profile.json|not a readable profile summary"),
    (b'{"kernel": "\xff"}', "is not UTF-8 text"),
])
def test_malformed_profiles_are_named(tmp_path, bad, rule):
    r = _compare(tmp_path, bad)
    assert r.exit_code != 0 and "internal error" not in r.output, r.output
    assert isinstance(r.exception, SystemExit) and __import__("re").search(rule, r.output), r.output
    with pytest.raises(compare.ProfileFormatError):
        compare.load_profile(tmp_path / "a.profile.json")


def test_dev_zero_is_no_profile(tmp_path):
    r = CliRunner().invoke(cli, ["profile", "/dev/zero", "--compare", "/dev/zero", "--out", str(tmp_path)])
    assert r.exit_code != 0 and "must be a regular file" in r.output, r.output


def _profile(path, out, *extra):
    return CliRunner().invoke(cli, ["profile", str(path), "--arg", "x=float32[128,64]", "--out", str(out), "--json",
                                    *extra])


def test_same_named_kernels_from_two_files_get_their_own_reports(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    (one / "k.py").write_text("SCALE = 2.0\n" + KERNEL)
    (two / "k.py").write_text("SCALE = 3.0\n" + KERNEL)
    out = tmp_path / "out"
    first, second, again = (_profile(f, out) for f in (one / "k.py", two / "k.py", one / "k.py"))
    for r in (first, second, again):
        assert r.exit_code == 0, r.output
    summaries = sorted(p.name for p in out.glob("*.profile.json"))
    assert summaries == ["twice-2.profile.json", "twice.profile.json"]  # the rerun of one/k.py took its own name
    for stem, src in (("twice", one), ("twice-2", two)):
        s = json.loads((out / f"{stem}.profile.json").read_text())
        assert s["source_file"] == str((src / "k.py").resolve())
        assert s["trace"] == str(out / f"{stem}.trace.json.gz") and (out / f"{stem}.html").exists()


def test_a_run_that_dies_while_writing_leaves_no_stale_summary_and_no_partial_file(tmp_path, monkeypatch):
    (tmp_path / "k.py").write_text("SCALE = 2.0\n" + KERNEL)
    out = tmp_path / "out"
    assert _profile(tmp_path / "k.py", out).exit_code == 0
    page = (out / "twice.html").read_text()

    def killed(schedule, path, **kw):  # the page half written when the process dies
        path.write_text("<!DOCTYPE html><html>")
        raise KeyboardInterrupt
    monkeypatch.setattr("trnsim.cli.profile.render_html", killed, raising=False)
    import trnsim.report
    monkeypatch.setattr(trnsim.report, "render_html", killed)
    _profile(tmp_path / "k.py", out)
    assert not (out / "twice.profile.json").exists()  # the old summary would describe a trace no longer there
    assert (out / "twice.html").read_text() == page  # the previous page whole, not the truncated one
    assert sorted(p.name for p in out.iterdir()) == ["twice.html", "twice.trace.json.gz"]
