"""Beta API: a tile dies at its last use, as the compiler frees it; and a loop body is traced once, so a
Python counter bumped beside a direct allocation in the body places every iteration's tile the same way."""
import numpy as np
import pytest

import trnsim.nki.beta as nki
import trnsim.nki.beta.compiler as ncc
import trnsim.nki.beta.language as nl
from trnsim.core import CapacityError, Op, SpillWarning
from trnsim.core.errors import OutOfBoundsError

COLS = 15 * 1024  # 60 KiB of fp32 per partition: three fit a trn2 SBUF partition (208 KiB usable), four do not
F32 = np.float32


@nki.jit
def chain(x):
    """Four named tiles, each read only by the next: two live at a time on hardware."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    a = nl.load(x)
    b = nl.multiply(a, 2.0)
    c = nl.multiply(b, 3.0)
    d = nl.multiply(c, 5.0)
    nl.store(out, value=d)
    return out


@nki.jit
def chain_used_at_the_end(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    a = nl.load(x)
    b = nl.multiply(a, 2.0)
    c = nl.multiply(b, 3.0)
    d = nl.multiply(c, 5.0)
    nl.store(out, value=nl.add(nl.add(nl.add(d, a), b), c))
    return out


@nki.jit
def rebound(x):
    """(c) outside loops: `acc = nl.zeros(...)` rebound, over half of SBUF each, the old one never read again."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    for k in range(4):  # unrolled: one name, four tiles
        acc = nl.zeros((128, 2 * COLS), nl.float32, buffer=nl.sbuf)
        t = nl.add(t, acc[:, 0:8])
    nl.store(out, value=t)
    return out


def test_a_tile_dies_at_its_last_use():
    x = np.random.default_rng(2).standard_normal((128, COLS)).astype(F32)
    np.testing.assert_array_equal(chain(x), x * F32(2) * F32(3) * F32(5))


def test_live_tiles_over_sbuf_are_spilled():
    """Four tiles live at once do not fit, but each add reads two: the compiler spills and reloads."""
    x = np.random.default_rng(3).standard_normal((128, COLS)).astype(F32)
    b = x * F32(2)
    c = b * F32(3)
    d = c * F32(5)
    with pytest.warns(SpillWarning):
        np.testing.assert_array_equal(chain_used_at_the_end(x), ((d + x) + b) + c)
    kinds = [r.spill for r in chain_used_at_the_end.trace(x, values=False)[0].stream if r.spill is not None]
    assert "save" in kinds and "reload" in kinds


def test_rebound_zeros_keep_one_alive():
    x = np.arange(128 * 8, dtype=F32).reshape(128, 8)
    np.testing.assert_array_equal(rebound(x), x)


TILE = 4096  # fp32 elements: 16 KiB per partition; sixteen of them (256 KiB) overflow SBUF


@nki.jit
def counter_in_loop(x):
    """The address counter is bumped in the loop body; the compiler runs that Python once, so all
    sixteen iterations use the tile at the first address."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    addr = 1024
    for i in nl.affine_range(x.shape[0]):
        t = nl.ndarray((nl.par_dim(128), TILE), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=addr))
        addr += TILE * 4
        t[...] = nl.load(x[i])
        nl.store(out[i], value=nl.multiply(t, 2.0))
    return out


@nki.jit
def counter_unrolled(x):
    """The same counter in an unrolled loop: sixteen tensors, each at its own address, past the end of SBUF."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    addr = 1024
    for i in nl.static_range(x.shape[0]):
        t = nl.ndarray((nl.par_dim(128), TILE), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=addr))
        addr += TILE * 4
        t[...] = nl.load(x[i])
        nl.store(out[i], value=t)
    return out


def test_direct_allocation_in_a_loop_body_is_traced_once():
    x = np.random.default_rng(3).standard_normal((16, 128, TILE)).astype(F32)
    np.testing.assert_array_equal(counter_in_loop(x), x * F32(2))
    loads = [r.operands["dst"].byte_lo for r in counter_in_loop.last_cores[0].stream
             if r.op is Op.DMA_COPY and r.operands["dst"].space == "sbuf"]
    assert loads == [1024] * 16


def test_direct_allocation_past_sbuf_is_refused():
    with pytest.raises(OutOfBoundsError, match=r"address=\(0, \d+\) .* exceeds SBUF"):
        counter_unrolled(np.zeros((16, 128, TILE), F32))


@nki.jit(mode="trace")
def _scale_into(dst, src, factor):
    """A jit helper a kernel calls (flash attention's pattern): traced into the caller."""
    dst[...] = nl.multiply(src, factor)


@nki.jit
def calls_a_jit_helper(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    u = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    _scale_into(u, t, 3.0)
    nl.store(out, value=u)
    return out


def test_a_jit_function_called_by_a_kernel_runs_on_its_core():
    x = np.arange(128 * 8, dtype=F32).reshape(128, 8)
    np.testing.assert_array_equal(calls_a_jit_helper(x), x * F32(3))
    assert len(calls_a_jit_helper.last_cores) == 1
    ops = [r.op for r in calls_a_jit_helper.last_cores[0].stream]
    assert len(ops) == 3 and ops[0] is Op.DMA_COPY and ops[-1] is Op.DMA_COPY
