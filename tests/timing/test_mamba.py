"""The fused Mamba example kernels compute the selective scan (numpy recurrence), and issue what the
tutorial's kernels issue."""
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from trnsim import flags
from trnsim.core import SpillWarning

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import mamba  # noqa: E402


@pytest.fixture(autouse=True)
def _the_tutorials_stack(monkeypatch):
    """The tutorial and its profile figures came with Neuron 2.20 (2024-09-16): its DMA costs are the 2024 stack's."""
    monkeypatch.setenv(flags.NEURON_SDK.name, "2024")


@pytest.mark.parametrize("kernel", mamba.KERNELS, ids=lambda k: k.__name__)
def test_mamba_matches_the_recurrence(kernel, monkeypatch):
    monkeypatch.setattr(mamba, "SEQ_TILE", 32)  # v3: two sequence tiles, the scan carried across them
    args = mamba.inputs(channels=256, seq=64, state=4, rng=np.random.default_rng(1))
    np.testing.assert_allclose(kernel(*args), mamba.reference(*args), rtol=2e-4, atol=2e-5)


def test_a_step_is_five_vector_instructions_two_reading_psum():
    """Per (state, channel tile) step, as the tutorial's kernels lower: B and C spread by ones-matmuls on
    TensorE into PSUM, so of the five Vector instructions the two multiplies by B and C read PSUM."""
    args = [np.zeros(x.shape, np.float32) for x in mamba.inputs(channels=256, seq=512, state=4)]
    mamba.mamba_v2(*args)
    stream = mamba.mamba_v2.last_cores[0].stream
    steps = 2 * 4
    vector = [r for r in stream if r.engine.value == "vector" and r.op.value != "memset"]
    assert len(vector) == 5 * steps
    assert sum(any(o.space == "psum" for n, o in r.operands.items() if n not in r.writes) for r in vector) == 2 * steps
    assert sum(r.op.value == "nc_matmul" for r in stream) == 2 * steps


@pytest.mark.parametrize("kernel, hoisted", [(mamba.mamba_v1, 0), (mamba.mamba_v2, 3)], ids=["v1", "v2"])
def test_delta_times_u_is_hoisted_where_delta_and_u_are_loaded_outside_the_state_loop(kernel, hoisted):
    """v2 loads delta and u once per channel tile, so delta * u repeats unchanged in states 2..4 of each
    tile and the compiler computes it once; v1 reloads them every step, so nothing repeats."""
    args = [np.zeros(x.shape, np.float32) for x in mamba.inputs(channels=256, seq=512, state=4)]
    kernel(*args)
    stream = kernel.last_cores[0].stream
    assert sum(r.hoisted is not None for r in stream) == 2 * hoisted
    assert all(r.op.value == "tensor_tensor" for r in stream if r.hoisted is not None)


@pytest.mark.parametrize("seq, spills", [(6144, False), (7168, True)])
def test_v2_spills_from_the_seq_where_its_peak_tiles_outgrow_sbuf(seq, spills):
    """At its peak v2 holds seven [128, seq] fp32 tiles (the state sum, delta, u, delta * u, exp(delta * A),
    a spread B or C row and the product written from it) beside the 512 B ones row and the 4 B A column:
    28 * seq + 516 B per partition against trn1's 176 KiB usable (180,224 B). That fits at 6144 (172,548 B)
    and not at 7168 (201,220 B); the published v2 slows down at 7168 (calibration.md 1.3). A tile declared before the
    spread but written after it takes no room until then, so 6144 does not spill."""
    args = [np.zeros(x.shape, np.float32) for x in mamba.inputs(channels=128, seq=seq, state=2)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpillWarning)
        stream = mamba.mamba_v2.trace(*args, target="trn1", values=False)[0].stream
    assert any(r.spill for r in stream) is spills


def test_the_execution_overhead_is_what_the_v1_profile_shows_outside_the_kernel():
    """The tutorial's v1 profile at 256 channels (nki/img/mamba_v1_profile.png, 172.93 us): the runtime's setup
    ends and the kernel's first DMA starts 12.7 us in, its last store ends at 168.5 us; the overhead is the
    rest, and the kernel's own span, 155.8 us, is what trnsim's period stands for. The reported latency adds
    the overhead to the timeline, while the shares stay over the timeline."""
    from trnsim.core.timing import benchmark

    r = benchmark(mamba.mamba_v1, *mamba.inputs(channels=256, seq=512), target="trn1", timing_only=True)
    end = max(e.end for e in r.timelines[0].events) - min(e.start for e in r.timelines[0].events)
    assert r.period == pytest.approx(end) and r.overhead == pytest.approx(12_700 + (172_930 - 168_500), abs=100)
    assert r.latency == pytest.approx(r.period + r.overhead)
    assert r.share["VectorE"] == pytest.approx(r.active["VectorE"] / r.period)
    assert r.period == pytest.approx(168_500 - 12_700, rel=0.10)


def test_the_published_vector_share_is_over_the_vector_window_and_its_active_time_matches():
    """The 4096-channel profile's selection summary (nki/img/mamba_v1_profile_4k_chan.png) runs from the first
    VectorE instruction (17.59 us) to the last (2.31 ms) and finds VectorE active 2.12 ms (92.16%): the share
    is over that window, not over the execution less its start-up, so the active time is the figure to meet."""
    from trnsim.core.timing import benchmark

    r = benchmark(mamba.mamba_v1, *mamba.inputs(channels=4096, seq=512), target="trn1", timing_only=True)
    assert r.active["VectorE"] == pytest.approx(2_120_000, rel=0.02)
