"""Kernels called with torch tensors return torch tensors (runs where torch is installed: `pip install 'trnsim[torch]'`)."""
import ml_dtypes
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl

torch = pytest.importorskip("torch")


@nki.jit
def scale_rows(x, out_in_place):
    """Returns 2x + 1 in a new shared_hbm tensor and writes x + 1 into its second input."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    u = nl.ndarray(t.shape, t.dtype)
    nisa.tensor_scalar(u, t, nl.multiply, 2.0, op1=nl.add, operand1=1.0)
    nl.store(out, u)
    nisa.tensor_scalar(u, t, nl.add, 1.0)
    nl.store(out_in_place, u)
    return out


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_torch_in_torch_out(dtype):
    """fp32 and bf16 torch tensors go in bit-exact; the result is a torch tensor and the in-place input is updated."""
    rng = np.random.default_rng(7)
    ref_dtype = np.float32 if dtype == "float32" else ml_dtypes.bfloat16
    x_np = rng.standard_normal((128, 64), np.float32).astype(ref_dtype)
    x = torch.from_numpy(x_np.astype(np.float32)).to(getattr(torch, dtype))
    side = torch.zeros_like(x)
    got = scale_rows(x, side)
    assert isinstance(got, torch.Tensor) and got.dtype == x.dtype and tuple(got.shape) == (128, 64)
    # the engine computes in fp32 and rounds to the tile dtype once per instruction (RNE)
    want = (x_np.astype(np.float32) * 2 + 1).astype(ref_dtype).astype(np.float32)
    np.testing.assert_array_equal(got.float().numpy(), want)
    np.testing.assert_array_equal(side.float().numpy(), (x_np.astype(np.float32) + 1).astype(ref_dtype).astype(np.float32))


def test_torch_call_compiles_for_the_target_in_neuron_cc_flags(monkeypatch):
    """A framework call compiles with NEURON_CC_FLAGS (`--target trn3`, as torch-neuronx passes the compiler);
    NEURON_PLATFORM_TARGET_OVERRIDE still decides when set, and a numpy (baremetal) call ignores the flags."""
    monkeypatch.delenv("NEURON_PLATFORM_TARGET_OVERRIDE", raising=False)
    monkeypatch.setenv("NEURON_CC_FLAGS", "--model-type transformer --target trn3 --pipeline compile")
    x_np = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    got = scale_rows(torch.from_numpy(x_np.copy()), torch.zeros(128, 8))
    np.testing.assert_array_equal(got.numpy(), x_np * 2 + 1)
    assert scale_rows.last_cores[0].target == "trn3"
    scale_rows(x_np, np.zeros((128, 8), np.float32))
    assert scale_rows.last_cores[0].target == "trn2"
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1")
    scale_rows(torch.from_numpy(x_np.copy()), torch.zeros(128, 8))
    assert scale_rows.last_cores[0].target == "trn1"


def test_torch_neuronx_nki_jit_is_the_kernels_jit():
    """`from torch_neuronx import nki_jit` (the SDK examples' PyTorch entry) resolves under the shim."""
    from trnsim import shim

    shim.install()
    from torch_neuronx import nki_jit

    @nki_jit
    def exp(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.exp(nl.load(a)))
        return out

    x = torch.linspace(-1, 1, 128 * 8).reshape(128, 8)
    got = exp(x)
    assert isinstance(got, torch.Tensor)
    np.testing.assert_allclose(got.numpy(), np.exp(x.numpy()), rtol=1e-5)
