"""Loop-invariant code motion (core/hoist.py): an instruction that a loop repeats on unchanged inputs costs
engine time once, and still produces its values in every iteration."""
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core.timing import simulate

N = 4  # loop iterations


def _load(src):
    t = nl.ndarray(src.shape, nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src)
    return t


def _kernel(loop, rewrite):
    """out[i] = a * b + c[i]; `rewrite` adds 1 to `a` in place at the end of every iteration, so the
    product changes from one iteration to the next."""
    @nki.jit
    def kernel(a, b, c):
        out = nl.ndarray(c.shape, nl.float32, buffer=nl.shared_hbm)
        at, bt = _load(a), _load(b)
        for i in loop(N):
            ab = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=ab, data1=at, data2=bt, op=nl.multiply)
            o = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=o, data1=ab, data2=_load(c[i]), op=nl.add)
            nisa.dma_copy(dst=out[i], src=o)
            if rewrite:
                nisa.tensor_scalar(dst=at, data=at, op0=nl.add, operand0=1.0)
        return out
    return kernel


def _run(loop, rewrite):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 128, 512)).astype(np.float32)
    c = rng.standard_normal((N, 128, 512)).astype(np.float32)
    k = _kernel(loop, rewrite)
    got = k(a, b, c)
    want = np.stack([(a + i * rewrite) * b + c[i] for i in range(N)])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    stream = k.last_cores[0].stream
    events = simulate(stream, "trn1").events
    muls = [e for e in events if e.rec.op.value == "tensor_tensor"][::2]  # each iteration's a * b, then its add
    assert len(muls) == N
    return muls


@pytest.mark.parametrize("loop", [nl.affine_range, nl.sequential_range], ids=["affine", "sequential"])
def test_an_invariant_multiply_costs_once_and_keeps_its_values(loop):
    """a * b does not change in the loop: the first iteration's instance pays, the others are hoisted (no
    engine time) and point at it; every iteration's output is still right."""
    muls = _run(loop, rewrite=False)
    first, rest = muls[0], muls[1:]
    assert first.rec.hoisted is None and first.end - first.start > 0
    assert all(e.rec.hoisted == first.index for e in rest)
    assert all(e.end == e.start for e in rest)


def test_a_multiply_whose_input_the_loop_rewrites_costs_every_iteration():
    """`a` is rewritten in place each iteration: the product is not invariant, nothing is hoisted."""
    muls = _run(nl.affine_range, rewrite=True)
    assert all(e.rec.hoisted is None for e in muls)
    durations = [e.end - e.start for e in muls]
    assert min(durations) > 0.9 * max(durations) > 0
