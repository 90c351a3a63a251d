"""The commands of the README and the guides, run as written: every shell command in their code blocks is
either run here (the fast ones) or skipped for a stated reason, so a new command in the docs needs a decision."""
import re
import shlex
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from trnsim.cli import cli

ROOT = Path(__file__).parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# why a command is not run here; the first pattern that matches decides
SKIPPED = [
    (r"^(make|pip) ", "installs packages"),
    (r"^trnsim top$", "interactive: runs until Ctrl-C (tests/cli/test_top.py drives it in tmux)"),
    (r"^trnsim torchrun ", "starts torch-xla ranks for minutes (tests/xla/test_torchrun*.py run the launcher)"),
    (r"(^|\s)(my_\w+|kernel|beta_kernel|my_beta_kernel)\.(py|toml)|before/|examples/my_matmul\.py|path/to/",
     "names a file the reader writes"),
    (r"^trnsim plan sweep .*--ray", "starts a Ray cluster (tests/plan run sweeps on Ray)"),
    (r"^trnsim plan sweep .*,.*,", "three instances' layouts and a chart: a quarter of a minute (tests/plan run sweeps)"),
    (r"matmul_ladder\.py", "times the ladder at its published shape: half a minute (tests/test_examples.py)"),
]


def commands() -> list[tuple[str, int, str]]:
    """(file, line, command) of each `trnsim`, `python`, `make` or `pip` line in a shell code block."""
    out = []
    for doc in DOCS:
        text = doc.read_text()
        for m in re.finditer(r"```(\w*)\n(.*?)```", text, re.S):
            if m.group(1) not in ("", "sh", "bash", "shell", "console"):
                continue
            first = text.count("\n", 0, m.start(2)) + 1
            for i, line in enumerate(m.group(2).replace("\\\n", " ").splitlines()):
                cmd = re.split(r"\s+#", line)[0].strip()
                if cmd.startswith(("trnsim ", "python ", "make ", "pip ")) or cmd == "trnsim top":
                    out.append((doc.name, first + i, re.sub(r"\s+", " ", cmd)))
    return out


def skip_reason(cmd: str) -> str | None:
    return next((why for pattern, why in SKIPPED if re.search(pattern, cmd)), None)


RUN = [c for c in commands() if skip_reason(c[2]) is None]


def test_the_docs_have_commands_and_every_one_is_run_or_skipped_for_a_reason():
    found = commands()
    assert len(found) >= 30 and len(RUN) >= 12
    assert all(c[2].startswith("trnsim ") for c in RUN)  # everything run goes through trnsim's entry point


@pytest.mark.parametrize("doc, line, cmd", RUN, ids=[f"{d}:{n}" for d, n, _ in RUN])
def test_command_runs_as_written(doc, line, cmd, tmp_path, monkeypatch):
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, shlex.split(cmd)[1:], prog_name="trnsim")
    text = r.output + (r.stderr if r.stderr_bytes is not None else "")
    assert r.exit_code == 0, f"{doc}:{line}: {cmd}\n{text}"
    assert "Traceback" not in text and "trnsim: error" not in text, f"{doc}:{line}: {cmd}\n{text}"
