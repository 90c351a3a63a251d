"""Model and hardware files that are hostile or broken: a named error with the file (and line), never an
internal error, a hang or gigabytes of memory."""
import contextlib
import os
import threading

import pytest
from click.testing import CliRunner

from trnsim.cli import cli
from trnsim.plan import workload

GOOD = "layers = 2\nhidden = 64\nheads = 4\nkv_heads = 4\nffn = 256\nvocab = 1000\nseq = 128\n"
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi")) + "layers: *i\n"


def _plan(*args):
    r = CliRunner().invoke(cli, ["plan", *args, "--instance", "trn2.48xlarge", "--json"])
    assert r.exit_code != 0 and r.exception is not None and "internal error" not in r.output \
        and "Traceback" not in r.output, r.output
    return r.output


@pytest.mark.parametrize("name, text, rule", [
    ("bomb.yaml", BOMB, r"bomb.yaml:2: malformed YAML:.*aliases \(\*name\) are not accepted"),
    ("deep.json", "[" * 100_000 + "]" * 100_000, "deep.json:1: nested deeper"),
    ("deep.toml", "x = " + "[" * 100_000 + "]" * 100_000, "deep.toml:1: nested deeper"),
    ("deep.yaml", "[" * 100_000 + "]" * 100_000, "deep.yaml:1: nested deeper"),
    ("model_list.toml", "model = [1]\n", r"model_list.toml:1: \[model\] holds a table of fields, got list"),
    ("preset_list.toml", "preset = [1]\n", "preset_list.toml:1: preset is a preset's name, got list"),
    ("name_int.toml", GOOD + "name = 5\n", "name_int.toml:8: name is text, got int"),
])
def test_malformed_model_files_are_named(tmp_path, name, text, rule):
    (tmp_path / name).write_text(text)
    with pytest.raises(workload.WorkloadError, match=rule):
        workload.load(tmp_path / name)
    _plan(str(tmp_path / name))


def test_a_model_file_not_in_utf8_is_named_with_its_line(tmp_path):
    f = tmp_path / "latin1.toml"
    f.write_bytes(GOOD.encode() + "name = 'caf\xe9'\n".encode("latin-1"))
    assert "latin1.toml:8: a model file is not UTF-8 text (byte 0xe9" in _plan(str(f))


def test_an_oversized_model_file_is_refused_unread(tmp_path):
    f = tmp_path / "big.toml"
    f.write_text(GOOD + "# " + "x" * (2 << 20) + "\n")
    assert "a model file of 2,097," in _plan(str(f))


def test_dev_zero_as_model_or_hardware_file_is_refused():
    assert "/dev/zero: a model file must be a regular file, and this is a device" in _plan("/dev/zero")
    r = CliRunner().invoke(cli, ["--hardware", "/dev/zero", "plan", "llama2-7b", "--instance", "trn2.48xlarge"])
    assert r.exit_code != 0 and "/dev/zero: a hardware file must be a regular file, and this is a device" in r.output


@contextlib.contextmanager
def _released(fifo):
    """A guard for a reader stuck on `fifo`: a writer that opens and closes it once anyone is waiting there
    while the test runs, so a blocking read ends with nothing instead of hanging the suite."""
    done = threading.Event()

    def poke():
        while not done.wait(0.05):
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # ENXIO while no reader has it open
            except OSError:
                continue
    t = threading.Thread(target=poke, daemon=True)
    t.start()
    try:
        yield
    finally:
        done.set()
        t.join()


def test_a_fifo_as_model_or_hardware_file_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "model.toml"
    os.mkfifo(fifo)
    with _released(fifo):
        assert "model.toml: a model file must be a regular file, and this is a FIFO" in _plan(str(fifo))
        r = CliRunner().invoke(cli, ["--hardware", str(fifo), "plan", "llama2-7b", "--instance", "trn2.48xlarge"])
    assert r.exit_code != 0 and "a hardware file must be a regular file, and this is a FIFO" in r.output, r.output


def test_hardware_file_nested_deep_or_not_utf8(tmp_path):
    from trnsim.specs.hardware import HardwareError, load

    (tmp_path / "deep.toml").write_text('base = "trn2"\nx = ' + "[" * 100_000 + "]" * 100_000)
    with pytest.raises(HardwareError, match="deep.toml: nested deeper"):
        load(tmp_path / "deep.toml")
    (tmp_path / "bin.toml").write_bytes(b'base = "trn2"\nname = "\xff"\n')
    with pytest.raises(HardwareError, match=r"bin.toml:2: a hardware file is not UTF-8 text"):
        load(tmp_path / "bin.toml")
