"""Shared fixtures."""
import os
import shutil

import pytest


@pytest.fixture
def require_tool():
    """`require_tool("tmux")` -> the program's path. A missing program skips the test with the reason, unless
    TRNSIM_REQUIRE_TOOLS=1 (set by `make test` in CI, which installs the programs first): then the test fails."""
    def find(*names: str) -> str:
        for name in names:
            path = shutil.which(name)
            if path:
                return path
        msg = (f"{' or '.join(names)} is not installed: this test needs it (Debian: apt-get install -y {names[0]}; "
               "`make test` installs it when run as root)")
        if os.environ.get("TRNSIM_REQUIRE_TOOLS") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return find


@pytest.fixture
def one_ray_cluster(tmp_path, monkeypatch):
    """Tests that start a local Ray cluster take turns (across xdist workers): two clusters started at once
    on one machine contend for the same session folder and ports. Each runs with a hostile cluster planted
    where Ray looks for "the running one" (RAY_TMPDIR/ray/ray_current_cluster, /tmp/ray's stand-in here):
    a listener that counts who connects. The test's Ray must start its own cluster: the fixture fails if
    anything connected to the planted one."""
    import fcntl
    import socket
    import tempfile
    import threading

    planted = socket.create_server(("127.0.0.1", 0))
    planted.settimeout(0.2)
    calls, stop = [], threading.Event()

    def listen():
        while not stop.is_set():
            try:
                conn, _ = planted.accept()
            except OSError:
                continue
            calls.append(conn)
            conn.close()
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text("127.0.0.1:%d" % planted.getsockname()[1])
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    with open(os.path.join(tempfile.gettempdir(), "trnsim-tests-ray.lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
            stop.set()
            listener.join()
            planted.close()
    assert not calls, f"{len(calls)} connections to the planted Ray cluster: Ray joined it instead of its own"


@pytest.fixture
def shim_as_found():
    """`trnsim run` and `profile` install the import shim for a kernel file: the test leaves it as it found it."""
    from trnsim import shim

    before = shim.installed()
    yield
    if not before:
        shim.uninstall()


@pytest.fixture(autouse=True)
def _cli_switches_stay_in_their_test():
    """The CLI's global options (--nki-version, --race-check, --neuron-sdk, --hardware) set TRNSIM_* variables for the worker
    processes they start; a command run in-process by CliRunner must not leave them to the tests after it."""
    keys = ("TRNSIM_NKI_VERSION", "TRNSIM_RACE_CHECK", "TRNSIM_NEURON_SDK", "TRNSIM_HARDWARE")
    saved = {k: os.environ.get(k) for k in keys}
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
