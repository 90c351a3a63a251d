"""One launch (nki/_frontend.py) serves one program, an LNC 2 pair and a beta SPMD grid: what either front
end's launch did, both do now (the collector off while a kernel runs, `platform_target=`, the compiler's
target from NEURON_CC_FLAGS for framework calls, the launch record, the first error re-raised)."""
import gc

import numpy as np
import pytest

import trnsim.nki as nki_cur
import trnsim.nki.language as nl_cur
import trnsim.nki.beta as nki_beta
import trnsim.nki.beta.language as nl_beta
from trnsim.core.errors import KernelError
from trnsim.nki import _frontend

GENERATIONS = {"current": (nki_cur, nl_cur), "beta": (nki_beta, nl_beta)}


def _copy_kernel(nl, seen):
    def copy_kernel(a):
        seen.append(gc.isenabled())
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(a), 1.0))
        return out
    return copy_kernel


@pytest.mark.parametrize("gen", sorted(GENERATIONS))
def test_the_collector_is_off_while_the_kernel_runs(gen):
    nki, nl = GENERATIONS[gen]
    seen = []
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    np.testing.assert_array_equal(nki.jit(_copy_kernel(nl, seen))(x), x + 1)
    assert seen and not any(seen) and gc.isenabled()  # (the replay runs a kernel more than once)


@pytest.mark.parametrize("gen", sorted(GENERATIONS))
def test_platform_target_option_picks_the_core(gen, monkeypatch):
    monkeypatch.delenv("NEURON_PLATFORM_TARGET_OVERRIDE", raising=False)
    nki, nl = GENERATIONS[gen]
    k = nki.jit(_copy_kernel(nl, []), platform_target="trn1")
    k(np.ones((4, 8), np.float32))
    assert [c.target for c in k.last_cores] == ["trn1"]


@pytest.mark.parametrize("gen", sorted(GENERATIONS))
def test_torch_arguments_compile_for_the_target_in_neuron_cc_flags(gen, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.delenv("NEURON_PLATFORM_TARGET_OVERRIDE", raising=False)
    monkeypatch.setenv("NEURON_CC_FLAGS", "--model-type transformer --target trn3")
    nki, nl = GENERATIONS[gen]
    k = nki.jit(_copy_kernel(nl, []))
    out = k(torch.ones(4, 8))
    assert isinstance(out, torch.Tensor) and torch.equal(out, torch.full((4, 8), 2.0))
    assert [c.target for c in k.last_cores] == ["trn3"]


@pytest.mark.parametrize("gen", sorted(GENERATIONS))
def test_a_failed_launch_raises_its_error_and_is_recorded(gen):
    nki, nl = GENERATIONS[gen]

    def bad(a):
        nl.load(a[0:200])  # past the tensor's 4 rows
    with pytest.raises(KernelError):
        nki.jit(bad)(np.ones((4, 8), np.float32))
    assert _frontend.LAUNCHES[-1]["kernel"] == "bad" and _frontend.LAUNCHES[-1]["ok"] is False


def test_each_kind_of_launch_records_its_programs():
    """One program (lnc 1), an LNC 2 pair (two cores, one stream each) and a beta grid (one core, its grid)."""
    x = np.ones((4, 8), np.float32)
    nki_cur.jit(_copy_kernel(nl_cur, []))(x)
    assert _frontend.LAUNCHES[-1]["lnc"] == 1
    pair = nki_cur.jit(_copy_kernel(nl_cur, []))[2]
    pair(x)
    assert _frontend.LAUNCHES[-1]["lnc"] == 2 and len(pair.last_cores) == 2
    grid = nki_beta.jit(_copy_kernel(nl_beta, []))[2, 3]
    grid(x)
    assert _frontend.LAUNCHES[-1]["grid"] == [2, 3] and len(grid.last_cores) == 1
