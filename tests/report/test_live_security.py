"""The live-state directory on a shared machine: ours alone, never followed through another user's links,
and read by `top`/`monitor` without trusting a byte of it."""
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from trnsim import live
from trnsim.cli import cli


def _other_uid() -> int:
    """A second user's uid (made with useradd when none exists); skips where this process cannot act as one."""
    if os.geteuid() != 0:
        pytest.skip("acting as a second user needs root (to switch uid in a child); run as root to check this")
    for name in ("nobody", "trnsim-neighbour"):
        try:
            return pwd.getpwnam(name).pw_uid
        except KeyError:
            pass
    if shutil.which("useradd") is None:
        pytest.skip("no second user exists and useradd is missing: no other uid to act as")
    subprocess.run(["useradd", "--no-create-home", "trnsim-neighbour"], check=True)
    return pwd.getpwnam("trnsim-neighbour").pw_uid


def _as_user(uid: int, fn) -> None:
    """Run `fn()` in a forked child that has dropped to `uid` (root would bypass every permission)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            fn()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the other user's setup failed"


@pytest.fixture
def shared_tmp(tmp_path, monkeypatch):  # tmp_path first: pytest picks its own base folder before ours
    """A world-writable sticky folder standing in for /tmp, used as trnsim's default place (no XDG dir)."""
    d = Path(tempfile.mkdtemp(prefix="trnsim-shared-"))
    os.chmod(d, 0o1777)
    monkeypatch.delenv("TRNSIM_RUNTIME_DIR", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    monkeypatch.setattr(live, "_state", {})
    monkeypatch.setattr(live, "_last_write", 0.0)
    monkeypatch.setattr(live, "_warned", False)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_directory_is_made_0700_and_files_0600(shared_tmp):
    live.publish(kind="kernel", name="k", cores=[0], force=True)
    d = live.runtime_dir()
    assert d == shared_tmp / f"trnsim-{os.getuid()}"
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    assert stat.S_IMODE((d / f"{os.getpid()}.json").stat().st_mode) == 0o600
    assert [p["name"] for p in live.processes()] == ["k"]
    live.remove()


def test_a_neighbours_squatted_directory_is_refused_and_its_links_not_followed(shared_tmp, tmp_path, capsys):
    """Another user makes our directory first, full of links to our private file: we write nothing through them."""
    uid = _other_uid()
    secret = tmp_path / "private.txt"
    secret.write_text("mine")
    d, pid = shared_tmp / f"trnsim-{os.getuid()}", os.getpid()

    def squat():
        d.mkdir(mode=0o777)
        os.chmod(d, 0o777)
        for name in (f"{pid}.json", f".{pid}.tmp"):
            (d / name).symlink_to(secret)
    os.chmod(tmp_path, 0o755)  # the neighbour can name the file (not read it)
    _as_user(uid, squat)
    live.publish(kind="kernel", name="k", force=True)
    assert secret.read_text() == "mine"
    assert f"owned by uid {uid}" in capsys.readouterr().err
    with pytest.raises(live.StateDirError, match=f"owned by uid {uid}.*TRNSIM_RUNTIME_DIR"):
        live.processes()
    r = CliRunner().invoke(cli, ["top", "--once"])
    assert r.exit_code != 0 and "StateDirError" not in r.output and f"owned by uid {uid}" in r.output


def test_a_link_in_place_of_the_directory_is_refused(shared_tmp):
    uid = _other_uid()
    theirs, ours = shared_tmp / "theirs", shared_tmp / f"trnsim-{os.getuid()}"

    def plant():
        theirs.mkdir(mode=0o700)
        ours.symlink_to(theirs)
    _as_user(uid, plant)
    with pytest.raises(live.StateDirError, match="without following links"):
        live.processes()
    live.publish(kind="kernel", name="k", force=True)
    assert not (live.runtime_dir() / f"{os.getpid()}.json").exists()


def test_our_own_default_directory_left_open_is_closed(shared_tmp):
    """An older trnsim made it 0755: it is ours, so it is made 0700 (a planted file in it is still not read)."""
    d = shared_tmp / f"trnsim-{os.getuid()}"
    d.mkdir()
    os.chmod(d, 0o777)
    assert live.processes() == []
    assert stat.S_IMODE(d.stat().st_mode) == 0o700


def test_a_named_directory_open_to_others_is_refused(tmp_path, monkeypatch):
    """A directory the user names is theirs to set: trnsim refuses it rather than change its mode."""
    d = tmp_path / "state"
    d.mkdir()
    os.chmod(d, 0o775)
    monkeypatch.setenv("TRNSIM_RUNTIME_DIR", str(d))
    with pytest.raises(live.StateDirError, match="mode 0775.*chmod 700"):
        live.processes()
    assert stat.S_IMODE(d.stat().st_mode) == 0o775


def test_a_file_planted_by_another_user_is_not_listed(tmp_path, monkeypatch):
    """Only files this user owns are read, even when they name a live process of ours."""
    uid = _other_uid()
    monkeypatch.setenv("TRNSIM_RUNTIME_DIR", str(tmp_path))
    pid = os.getpid()
    f = tmp_path / "1.json"
    f.write_text(json.dumps({"pid": pid, "start": live._start_ticks(pid), "kind": "kernel", "name": "fake"}))
    assert [p["name"] for p in live.processes()] == ["fake"]
    os.chown(f, uid, uid)
    assert live.processes() == []


# --- what `top` and `monitor` read ---------------------------------------------------------------------------

@pytest.fixture
def rundir(tmp_path, monkeypatch):
    monkeypatch.setenv("TRNSIM_RUNTIME_DIR", str(tmp_path))
    return tmp_path


def _plant(rundir: Path, file: str = "9.json", **fields) -> None:
    pid = os.getpid()
    (rundir / file).write_text(json.dumps({"pid": pid, "start": live._start_ticks(pid), "kind": "kernel",
                                           "name": "k", "cores": [0], **fields}))


def test_control_characters_never_reach_the_terminal(rundir):
    _plant(rundir, name="k\x1b]0;owned\x07\x1b]52;c;ZWNobw==\x07\u202eevil\x9b2J",
           command="python \x1b[2Jrun.py\r\n")
    (p,) = live.processes()
    assert p["name"] == "k]0;owned]52;c;ZWNobw==evil2J" and p["command"] == "python [2Jrun.py"
    r = CliRunner().invoke(cli, ["top", "--once"])
    assert r.exit_code == 0 and "\x1b" not in r.output and "\x07" not in r.output


def test_markup_in_a_command_line_is_shown_as_written(rundir):
    _plant(rundir, command="trnsim [link=https://example.com]click[/link] [/] [bold]x")
    r = CliRunner(env={"COLUMNS": "200"}).invoke(cli, ["top", "--once"])
    assert r.exit_code == 0, r.output
    assert "[link=https://example.com]click[/link] [/] [bold]x" in r.output


@pytest.mark.parametrize("bad", [
    {"cores": "0"}, {"cores": [0, "1"]}, {"cores": [-1]}, {"busy": [1]}, {"busy": {"0": {"DMA": "x"}}},
    {"busy": {"0": {"DMA": 7}}}, {"utilisation": {"0": None}}, {"memory": {"hbm": "4096"}},
    {"memory": {"hbm": -1}}, {"name": 5}, {"command": ["a"]}, {"sim_time_ns": float("nan")},
    {"sim_time_ns": "1"}, {"start": None}, {"start": 12}, {"pid": True}, {"pid": "1"}, {"updated": {}},
    {"executions": {"completed": -1}}, {"executions": {"finished": 1}}, {"errors": {"model": "1"}},
    {"flops": {"core0": 1.0}}, {"flop_seconds": [1.0]}, {"latencies": [[1, 0.1]]}, {"latencies": [[1, 0.1, None]]},
    {"timed": -3},
])
def test_wrong_field_types_are_skipped_not_crashed_on(rundir, bad):
    _plant(rundir, **bad)
    assert live.processes() == []
    for args in (["top", "--once"], ["monitor", "--count", "1", "--interval", "0.05"]):
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 0 and r.exception is None, r.output


def test_a_process_without_a_start_time_is_not_listed(rundir):
    """A dead or foreign pid whose start time cannot be read must not match a file that gives none."""
    (rundir / "1.json").write_text(json.dumps({"pid": 2 ** 22 + 12345, "kind": "kernel", "name": "ghost"}))
    assert live.processes() == []


def test_non_json_deep_and_huge_files_are_skipped(rundir):
    (rundir / "a.json").write_bytes(b"\xff\xfe not json")
    (rundir / "b.json").write_text("[" * 100_000 + "]" * 100_000)
    _plant(rundir, file="c.json", command="x" * live.MAX_FILE_BYTES)
    _plant(rundir, file="d.json", command="y" * 100_000)
    (p,) = live.processes()
    assert p["command"] == "y" * live.MAX_TEXT


def test_devices_fifos_and_links_are_never_read(rundir):
    """/dev/zero behind a link would exhaust memory and a FIFO would hang the reader: neither is opened."""
    (rundir / "zero.json").symlink_to("/dev/zero")
    os.mkfifo(rundir / "fifo.json")
    _plant(rundir, file="ok.json")
    code = "import trnsim.live as l; print(len(l.processes()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "TRNSIM_RUNTIME_DIR": str(rundir)})
    # the planted file names the test process, alive while the child reads
    assert out.stdout.strip() == "1", out.stderr
