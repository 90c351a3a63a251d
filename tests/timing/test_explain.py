"""Why a kernel is bound where it is: its critical path split by mechanism, each figure's basis, the headroom."""
import json

import pytest
from click.testing import CliRunner

from trnsim import flags, specs
from trnsim.cli import cli
from trnsim.core import NeuronCore, Op
from trnsim.core.timing import simulate, summarize
from trnsim.core.timing.explain import explain, mechanisms
from trnsim.specs.timing import timing


def one_load(target="trn1"):
    """A [128, 512] bf16 tile loaded and stored back: two dependent transfers."""
    nc = NeuronCore(target, values=False)
    t = nc.tensor((128, 512), "bfloat16")
    nc.issue(Op.DMA_COPY, dst=t, src=nc.hbm_tensor((128, 512), "bfloat16"))
    nc.issue(Op.DMA_COPY, dst=nc.hbm_tensor((128, 512), "bfloat16"), src=t)
    return summarize("one_load", [simulate(nc.stream, target)], specs.neuroncore(target))


def test_a_load_and_store_split_into_latency_bytes_descriptors_and_start_up():
    """On trn1 each transfer moves 8 partitions x 1 KiB per engine at 17 B/ns with 8 descriptors of 60 ns; the
    store waits 1.3 us of fixed latency after the load (the load's own lies before the period starts); the
    execution overhead comes on top; together they are the latency."""
    r = one_load()
    got = {m.name: m.ns for m in mechanisms(r)}
    assert got["DMA fixed latency"] == pytest.approx(1300.0)
    assert got["DMA bytes"] == pytest.approx(2 * 8 * 1024 / 17.0)
    assert got["DMA descriptors"] == pytest.approx(2 * 8 * timing("trn1").dma_descriptor_latency)
    assert got["execution start-up and tear-down"] == pytest.approx(timing("trn1").execution_overhead)
    assert sum(got.values()) == pytest.approx(r.latency)


@pytest.mark.parametrize("sdk, start_up", [("2024", "fitted"), ("2025", "assumed")])
def test_each_mechanism_says_how_sure_its_figure_is(monkeypatch, sdk, start_up):
    """Descriptor cost is fitted to calibration.md; the DMA rate and fixed latency documented. The start-up is
    read off a profile of the 2024 stack (calibration 1.3): fitted there, carried over to the 2025 stack as an
    assumption, since no document or calibration figure gives that stack's."""
    monkeypatch.setenv(flags.NEURON_SDK.name, sdk)
    basis = {m.name: m.basis for m in mechanisms(one_load())}
    assert basis["DMA descriptors"] == "fitted" and basis["execution start-up and tear-down"] == start_up
    assert basis["DMA bytes"] == "documented" and basis["DMA fixed latency"] == "documented"


def test_explain_names_the_bound_and_the_headroom_to_the_next_mechanism():
    """The largest mechanism could shrink by its lead over the second before the second is the largest."""
    r = one_load()
    ms = mechanisms(r)
    lines = explain(r)
    assert "bound by DMA" in lines[0]
    assert lines[-1].startswith("Headroom") or lines[-2].startswith("Headroom")
    head = next(l for l in lines if l.startswith("Headroom"))
    assert f"{ms[0].name} could shrink by {(ms[0].ns - ms[1].ns) / 1e3:,.1f} us" in head


KERNEL = '''import numpy as np
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def chain(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    for _ in range(4):
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out, src=t)
    return out


def inputs():
    return (np.ones((128, 512), np.float32),)
'''


def test_profile_explain_prints_the_mechanisms_and_marks_assumed_ones(tmp_path):
    """`trnsim profile --explain` prints the critical path by mechanism, the headroom and the assumed figures
    (the semaphore latency between the loads and the Vector chain); with --json, the mechanisms as a list."""
    (tmp_path / "k.py").write_text(KERNEL)
    args = ["profile", str(tmp_path / "k.py"), "--timing-only", "--target", "trn1", "--out", str(tmp_path / "o"),
            "--explain", "-q"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    assert "VectorE instructions" in r.output and "Headroom:" in r.output
    assumed = next(l for l in r.output.splitlines() if l.startswith("Assumed figures (no document or calibration):"))
    assert "semaphore waits" in assumed and "execution start-up and tear-down" in assumed  # the 2025 stack's
    r = CliRunner().invoke(cli, args + ["--json"])
    got = json.loads(r.stdout)["mechanisms"]
    assert {m["name"]: m["basis"] for m in got}["semaphore waits"] == "assumed"


@pytest.mark.parametrize("target", ["trn2", "trn1"])
def test_work_placed_by_workload_is_marked_assumed(target):
    """PSUM copies issued with no engine land on ScalarE beside VectorE work (the compiler's choice by
    workload, whose weighing no document gives; on trn1 the compiler's own copies, as activation copies): the
    critical path's ScalarE time is named as placed by workload and marked assumed, and the latency is still
    split in full."""
    nc = NeuronCore(target, values=False)
    p = nc.tensor((128, 512), "float32", "psum")
    for _ in range(4):
        nc.issue(Op.TENSOR_COPY, dst=nc.tensor((128, 512), "float32"), src=p, lowered=True)
    r = summarize("copies", [simulate(nc.stream, target)], specs.neuroncore(target))
    assert {e.track for e in r.timelines[0].events} == {"VectorE", "ScalarE"}
    ms = mechanisms(r)
    placed = [m for m in ms if m.name.endswith("placed by workload")]
    assert placed and all(m.basis == "assumed" for m in placed)
    assert sum(m.ns for m in ms) == pytest.approx(r.latency)
    assert any("placed by workload" in line for line in explain(r)[-1:])
