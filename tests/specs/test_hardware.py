"""What-if hardware: a catalog chip with changed figures runs kernels, profiles, collectives and plans; every
changed field is validated with the field, the value, the allowed range and file:line."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

import trnsim
import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim import specs
from trnsim.core import CapacityError
from trnsim.core.timing import benchmark
from trnsim.specs import HardwareError

ROOT = Path(__file__).resolve().parents[2]


def _write(tmp_path, text):
    p = tmp_path / "chip.toml"
    p.write_text(text)
    return p


@nki.jit
def big_sbuf(x):
    """Three live tiles of 96 KiB per partition: 288 KiB, over trn2's SBUF, within twice it."""
    tiles = [nl.ndarray((128, 96 * 256), nl.float32, buffer=nl.sbuf) for _ in range(3)]
    for t in tiles:
        nisa.dma_copy(dst=t, src=x)
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 96 * 256), nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=acc, data1=tiles[0], data2=tiles[1], op=nl.add)
    nisa.tensor_tensor(dst=acc, data1=acc, data2=tiles[2], op=nl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out


def test_twice_the_sbuf_runs_a_kernel_that_overflows_on_trn2(tmp_path):
    x = np.ones((128, 96 * 256), np.float32)
    with pytest.raises(CapacityError):
        big_sbuf(x)
    base = specs.neuroncore("trn2").sbuf_partition_bytes
    path = _write(tmp_path, f'base = "trn2"\n[core]\nsbuf_partition_bytes = {2 * base}\n')
    with trnsim.hardware(path) as hw:
        assert specs.neuroncore("trn2").sbuf_partition_bytes == 2 * base
        assert specs.chip("trn2").core is hw.core
        np.testing.assert_array_equal(big_sbuf(x), 3 * x)
    assert specs.neuroncore("trn2").sbuf_partition_bytes == base  # released


def _ladder():
    spec = importlib.util.spec_from_file_location("matmul_ladder", ROOT / "examples" / "matmul_ladder.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_twice_the_tensor_clock_halves_the_tensor_engine_time():
    """On trn2, with its dI/dt warm-up: the ramp follows TensorE's instructions in time, so it costs both clocks
    the same start-up, once."""
    ladder = _ladder()
    lhsT, rhs = ladder.inputs(M=2048, N=1024, K=1024)
    base = benchmark(ladder.matmul_optimized, lhsT, rhs, target="trn2", timing_only=True)
    clock = specs.neuroncore("trn2").clocks["tensor"]
    with trnsim.hardware(base="trn2", core={"clocks": {"tensor": 2 * clock}}):
        fast = benchmark(ladder.matmul_optimized, lhsT, rhs, target="trn2", timing_only=True)
    assert fast.active["TensorE"] == pytest.approx(base.active["TensorE"] / 2, rel=0.02)
    assert fast.latency < base.latency
    assert fast.peak_flops == pytest.approx(2 * base.peak_flops)


def test_link_speed_reaches_the_fabric():
    intra = specs.system("trn2.48xlarge").intra_link_bandwidth
    base = trnsim.cluster("trn2.48xlarge").system.topology.links[0].bandwidth
    with trnsim.hardware(base="trn2", system={"intra_link_bandwidth": 4 * intra}):
        links = trnsim.cluster("trn2.48xlarge").system.topology.links
    assert links[0].bandwidth == pytest.approx(4 * base)


@pytest.mark.parametrize("text, match", [
    ('base = "trn2"\n[core]\nsbuf_partition_bytes = "64 MiB"\n',
     r"chip.toml:3: core.sbuf_partition_bytes = '64 MiB' is outside the allowed range 16 KiB .. 4 MiB"),
    ('base = "trn2"\n[core]\npe_rows = 100\n', r"chip.toml:3: core.pe_rows = 100 must be a multiple of 32"),
    ('base = "trn2"\n[core]\npartitions = 256\n', r"chip.toml:3: core.partitions cannot be changed"),
    ('base = "trn2"\n[core.clocks]\nwarp = "1 GHz"\n', r"chip.toml:3: core.clocks.warp is no engine"),
    ('base = "trn2"\n[core]\nclocks.tensor = "fast"\n', r"chip.toml:3: core.clocks.tensor = 'fast' is not a Hz value"),
    ('base = "trn2"\n[chip]\nhbm_bandwidth = "1 MB/s"\n', r"chip.toml:3: chip.hbm_bandwidth = '1 MB/s' is outside"),
    ('[core]\npe_rows = 64\n', r"chip.toml:1: a hardware file starts from a catalog chip"),
    ('base = "H100 80GB"\n', r"base = 'H100 80GB' is a GPU"),
    ('base = "trn2"\n[gpu]\nx = 1\n', r"unknown section \[gpu\]"),
])
def test_every_field_is_validated_with_file_and_line(tmp_path, text, match):
    with pytest.raises(HardwareError, match=match):
        trnsim.hardware(_write(tmp_path, text))


def test_cli_reports_a_bad_field_without_a_traceback(tmp_path):
    from click.testing import CliRunner

    from trnsim.cli import cli

    path = _write(tmp_path, 'base = "trn2"\n[core]\ndma_engines = 0\n')
    r = CliRunner().invoke(cli, ["--hardware", str(path), "ls"])
    assert r.exit_code != 0 and "chip.toml:3: core.dma_engines = 0 is outside the allowed range" in r.output
    assert "Traceback" not in r.output
