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
def one_ray_cluster():
    """Tests that start a local Ray cluster take turns (across xdist workers): two clusters started at once
    on one machine contend for the same session folder and ports."""
    import fcntl
    import tempfile

    with open(os.path.join(tempfile.gettempdir(), "trnsim-tests-ray.lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
