"""NKI 0.7's compiler check that a kernel compiled into a model has the compiler's LNC degree (NCC_EVRF066): the
kernel's degree comes from kernel[lnc], else NEURON_LOGICAL_NC_CONFIG, else 1; the compiler's from --lnc in
NEURON_CC_FLAGS, else NEURON_LOGICAL_NC_CONFIG, else the chip's default (2 on Trn2 and Trn3, 1 on Trn1)."""
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.collectives as cc
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
import trnsim.nki.beta as nki_beta
import trnsim.nki.beta.language as nl_beta
from trnsim.nki import _frontend
from trnsim.nki._frontend import LncMismatchError

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:returned tensor")  # at LNC 1 the second rank's rows stay unwritten


@nki.jit
def plus_rank(x):
    """x + 1 + the rank; each rank writes its own row block of the output, so the degree shows in the values."""
    out = nl.ndarray((2,) + tuple(x.shape), x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(t, x)
    r = cc.rank_id()
    nisa.tensor_scalar(t, t, nl.add, 1.0 + r)
    nisa.dma_copy(out[r], t)
    return out


@pytest.fixture
def model(monkeypatch, trn):
    """Torch CPU tensors taken as tensors on the XLA device: launches compiled into a model's graph."""
    monkeypatch.setattr(_frontend, "_on_device", lambda x: isinstance(x, torch.Tensor))
    for var in ("NEURON_LOGICAL_NC_CONFIG", "NEURON_CC_FLAGS", "TRNSIM_NKI_VERSION"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def _x():
    return torch.from_numpy(np.arange(128 * 8, dtype=np.float32).reshape(128, 8))


def test_a_kernel_without_a_degree_meets_the_trn2_compiler_default(model):
    with pytest.raises(LncMismatchError, match=r"'plus_rank' is configured with LNC=1 \(no kernel\[lnc\] grid\), "
                                               r"but neuronx-cc is using LNC=2 \(the Trainium2 default\) "
                                               r"\(NCC_EVRF066\).*EVRF066.html\) at "):
        plus_rank(_x())


def test_the_environment_sets_both_degrees_and_the_kernel_runs_on_two_cores(model):
    model.setenv("NEURON_LOGICAL_NC_CONFIG", "2")
    got = plus_rank(_x()).numpy()
    x = _x().numpy()
    np.testing.assert_array_equal(got, np.stack([x + 1, x + 2]))  # both ranks ran: rank 1 added 2
    assert len(plus_rank.last_cores) == 2
    model.setenv("NEURON_LOGICAL_NC_CONFIG", "1")
    got = plus_rank(_x()).numpy()
    np.testing.assert_array_equal(got[0], x + 1)
    assert len(plus_rank.last_cores) == 1


def test_a_grid_or_compiler_flag_that_differs_is_refused(model):
    model.setenv("NEURON_LOGICAL_NC_CONFIG", "2")
    with pytest.raises(LncMismatchError, match=r"LNC=1 \(kernel\[1\]\), but neuronx-cc is using LNC=2 "
                                               r"\(NEURON_LOGICAL_NC_CONFIG=2\)"):
        plus_rank[1](_x())
    model.setenv("NEURON_CC_FLAGS", "--target trn2 --lnc=1")
    with pytest.raises(LncMismatchError, match=r"LNC=2 \(NEURON_LOGICAL_NC_CONFIG=2\), but neuronx-cc is using "
                                               r"LNC=1 \(NEURON_CC_FLAGS --lnc=1\)"):
        plus_rank(_x())
    model.delenv("NEURON_LOGICAL_NC_CONFIG")
    np.testing.assert_array_equal(plus_rank[1](_x()).numpy()[0], _x().numpy() + 1)  # kernel[1] and --lnc=1 agree


def test_trn1_compiles_at_lnc_1(model, trn):
    trn("trn1")
    np.testing.assert_array_equal(plus_rank(_x()).numpy()[0], _x().numpy() + 1)


def test_what_is_not_checked(model, rng):
    """Simulator launches (numpy, CPU tensors), kernels targeting NKI 0.6 and beta kernels are not checked."""
    x = _x().numpy()
    np.testing.assert_array_equal(plus_rank(x)[0], x + 1)
    model.setenv("TRNSIM_NKI_VERSION", "0.6")
    np.testing.assert_array_equal(plus_rank(_x()).numpy()[0], x + 1)
    model.delenv("TRNSIM_NKI_VERSION")

    @nki_beta.jit
    def beta_copy(a):
        out = nl_beta.ndarray(a.shape, a.dtype, buffer=nl_beta.shared_hbm)
        nl_beta.store(out, nl_beta.load(a) + 1.0)
        return out
    np.testing.assert_array_equal(beta_copy(_x()).numpy(), x + 1)


def test_a_bad_environment_value_is_a_config_error(model):
    from trnsim.errors import ConfigError
    model.setenv("NEURON_LOGICAL_NC_CONFIG", "4")
    with pytest.raises(ConfigError, match="NEURON_LOGICAL_NC_CONFIG=4: Trainium2 takes 1 or 2"):
        plus_rank(_x())


def test_the_device_test():
    assert not _frontend._on_device(torch.ones(2)) and not _frontend._on_device(np.ones(2))
    assert not _frontend._on_device(torch.ones(2, device="meta"))
