"""`trnsim --nki-version`: the NKI version a kernel file targets (default 0.7)."""
import pytest
from click.testing import CliRunner

from trnsim.cli import cli

KERNEL = '''
import numpy as np
import nki, nki.language as nl, nki.isa as nisa

@nki.jit
def times_four_plus_one(v):
    t = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=v)
    r = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.scalar_store(r, nisa.scalar_load(t) * 4 + 1)
    out = nl.ndarray((1, 1), nl.int32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=r)
    return out

got = times_four_plus_one(np.array([[5]], np.int32))
assert int(got[0, 0]) == 21, got
print("version", nki.__version__)
'''


@pytest.fixture
def kernel_file(tmp_path, monkeypatch):
    monkeypatch.delenv("TRNSIM_NKI_VERSION", raising=False)  # and removes what the option sets, afterwards
    path = tmp_path / "scalar.py"
    path.write_text(KERNEL)
    return str(path)


def test_a_07_kernel_runs_by_default(kernel_file):
    r = CliRunner().invoke(cli, ["run", kernel_file])
    assert r.exit_code == 0, r.output
    assert "version 0.7.0" in r.output


def test_targeting_06_refuses_the_07_names_in_one_line(kernel_file):
    r = CliRunner().invoke(cli, ["--nki-version", "0.6", "run", kernel_file])
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert "nisa.scalar_load is new in NKI 0.7; this kernel targets NKI 0.6" in r.output


def test_an_unknown_version_is_refused(kernel_file):
    r = CliRunner().invoke(cli, ["--nki-version", "0.5", "run", kernel_file])
    assert r.exit_code == 2 and "'0.5' is not one of '0.6', '0.7'" in r.output


def test_neuron_sdk_picks_the_stacks_dma_costs(monkeypatch):
    """`trnsim --neuron-sdk YEAR` sets the software stack whose DMA costs the clock uses; an unknown year is refused."""
    from trnsim import flags
    from trnsim.specs.timing import timing

    monkeypatch.delenv(flags.NEURON_SDK.name, raising=False)
    r = CliRunner().invoke(cli, ["--neuron-sdk", "2024", "specs", "trn1"])
    assert r.exit_code == 0, r.output
    assert flags.NEURON_SDK.value() == "2024" and timing("trn1").dma_descriptor_latency == 60.0
    r = CliRunner().invoke(cli, ["--neuron-sdk", "2023", "specs", "trn1"])
    assert r.exit_code != 0 and "2023" in r.output
