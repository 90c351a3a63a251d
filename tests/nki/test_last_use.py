"""A tile dies at its last use, as the compiler frees it, not when Python drops its name (current API)."""
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core import SpillWarning

COLS = 15 * 1024  # 60 KiB of fp32 per partition: three fit a trn2 SBUF partition (208 KiB usable), four do not


def _scaled(src, factor):
    t = nl.ndarray((128, COLS), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=t, data=src, op0=nl.multiply, operand0=factor)
    return t


@nki.jit
def chain(x):
    """Four named tiles, each read only by the next: two live at a time on hardware."""
    out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
    a = nl.ndarray((128, COLS), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=x)
    b = _scaled(a, 2.0)
    c = _scaled(b, 3.0)
    d = _scaled(c, 5.0)
    nisa.dma_copy(dst=out, src=d[:, 0:8])
    return out


@nki.jit
def chain_used_at_the_end(x):
    """The same four tiles, all read at the end: four live at once cannot fit."""
    out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
    a = nl.ndarray((128, COLS), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=x)
    b = _scaled(a, 2.0)
    c = _scaled(b, 3.0)
    d = _scaled(c, 5.0)
    for t in (a, b, c):
        nisa.tensor_tensor(dst=d, data1=d, data2=t, op=nl.add)
    nisa.dma_copy(dst=out, src=d[:, 0:8])
    return out


@nki.jit
def rebound(x):
    """(c) outside loops: `acc = nl.zeros(...)` rebound while the old acc is never read again; over half
    of SBUF each, so the old and the new one cannot both be live."""
    out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    for k in range(4):  # unrolled: one name, four tiles
        acc = nl.zeros((128, 2 * COLS), nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=t, data1=t, data2=acc[:, 0:8], op=nl.add)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_a_tile_dies_at_its_last_use():
    x = np.random.default_rng(1).standard_normal((128, COLS)).astype(np.float32)
    f32 = np.float32
    np.testing.assert_array_equal(chain(x), x[:, 0:8] * f32(2) * f32(3) * f32(5))


def test_live_tiles_over_sbuf_are_spilled():
    """Four tiles live at once do not fit, but each add reads two: the compiler spills one to HBM and
    reloads it for its add (tests/core/test_spill.py)."""
    x = np.random.default_rng(3).standard_normal((128, COLS)).astype(np.float32)
    f32 = np.float32
    a, b = x, x * f32(2)
    c = b * f32(3)
    d = c * f32(5)
    with pytest.warns(SpillWarning):
        np.testing.assert_array_equal(chain_used_at_the_end(x)[:, 0:8], (((d + a) + b) + c)[:, 0:8])
    kinds = [r.spill for r in chain_used_at_the_end.trace(x, values=False)[0].stream if r.spill is not None]
    assert "save" in kinds and "reload" in kinds


def test_rebound_zeros_keep_one_alive():
    x = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    np.testing.assert_array_equal(rebound(x), x)


@nki.jit
def _double_into(dst, src):
    """A jit helper a kernel calls: traced into the caller, on the caller's core."""
    nisa.tensor_scalar(dst=dst, data=src, op0=nl.multiply, operand0=2.0)


@nki.jit
def calls_a_jit_helper(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    _double_into(t, t)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_a_jit_function_called_by_a_kernel_runs_on_its_core():
    x = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    np.testing.assert_array_equal(calls_a_jit_helper(x), x * 2)
    assert [r.op.value for r in calls_a_jit_helper.last_cores[0].stream] == ["dma_copy", "tensor_scalar", "dma_copy"]
