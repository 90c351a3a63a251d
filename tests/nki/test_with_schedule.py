"""`kernel.with_schedule(edges)` returns a kernel with order edges between named instructions: the kernel it was
called on keeps none, values are unchanged, and the beta API, which has no such edges, refuses it by name (the
timing of the edges: tests/timing/test_schedule_edges.py)."""
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.beta as beta
import trnsim.nki.beta.language as bnl
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core import ScheduleEdgeError


@nki.jit()
def recip_plus1(t):
    """The scheduling guide's example (nki/guides/how-to-scheduling-apis.rst): 1/x + (x + 1)."""
    x = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=t)
    a = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
    b = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
    c = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
    nisa.reciprocal(dst=a, data=x, name="recip")
    nisa.tensor_scalar(dst=b, data=x, op0=nl.add, operand0=1, name="plus1")
    nisa.tensor_tensor(dst=c, data1=a, data2=b, op=nl.add)
    out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=c)
    return out


def test_values_are_unchanged_and_the_original_kernel_keeps_no_edges():
    x = np.arange(1, 128 * 64 + 1, dtype=np.float32).reshape(128, 64)
    expected = np.float32(1) / x + (x + np.float32(1))
    for edges in ([("plus1", "recip")], [("plus1", ["recip"])]):  # a name or a list of names, as the guide has
        scheduled = recip_plus1.with_schedule(edges)
        assert scheduled is not recip_plus1
        np.testing.assert_allclose(scheduled(x), expected, rtol=1e-6)
        after = [r.attrs.get("after") for r in scheduled.last_cores[0].stream]
        assert after[2] == ((1, False),) and after.count(None) == 4  # plus1 after recip: a schedule edge
    np.testing.assert_allclose(recip_plus1(x), expected, rtol=1e-6)
    assert all("after" not in r.attrs for r in recip_plus1.last_cores[0].stream)


def test_later_edges_replace_earlier_ones():
    x = np.ones((128, 64), np.float32)
    k = recip_plus1.with_schedule([("plus1", "recip")]).with_schedule([], kind=nisa.dependency.runtime)
    k(x)
    assert all("after" not in r.attrs for r in k.last_cores[0].stream)


def test_the_beta_api_has_no_schedule_edges():
    @beta.jit
    def copy(a):
        out = bnl.ndarray(a.shape, a.dtype, buffer=bnl.shared_hbm)
        bnl.store(out, bnl.load(a))
        return out

    with pytest.raises(ScheduleEdgeError, match="beta API .* has no schedule edges"):
        copy.with_schedule([("b", "a")])


def test_either_order_of_the_guides_pair_keeps_the_values():
    """The guide: recip and plus1 could run in either order; recip after plus1 issues it after, same values."""
    x = np.arange(1, 128 * 64 + 1, dtype=np.float32).reshape(128, 64)
    scheduled = recip_plus1.with_schedule([("recip", "plus1")])
    np.testing.assert_allclose(scheduled(x), np.float32(1) / x + (x + np.float32(1)), rtol=1e-6)
    stream = scheduled.last_cores[0].stream
    assert [r.attrs.get("name") for r in stream] == [None, "plus1", "recip", None, None]
    assert [r.index for r in stream] == list(range(5)) and stream[2].attrs["after"] == ((1, False),)
