"""`NkiInstruction.depends_on`: an ordering edge the compiler's scheduler keeps (nki.isa.NkiInstruction). A runtime
edge (the default) is a semaphore wait: the consumer starts after the producer ends, plus the semaphore latency
across engines; a schedule edge orders issue alone: on one engine the consumer follows the producer, on another it
may overlap it. Times are worked by hand on trn1: GpSimd sets N fp32 elements in N cycles at 1.4 GHz, VectorE
copies N in N cycles at 1.12 GHz (plus 100 cycles when it waited for a producer)."""
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core import KernelError
from trnsim.core.timing import simulate
from trnsim.specs.timing import timing

SEM = timing("trn1").semaphore_latency
VEC, POOL, STATIC = 1.12, 1.4, 100
FILL = 2048 / POOL  # GpSimd's set of X


def _events(edge):
    """GpSimd sets X (2048 a partition); VectorE copies X (blocked until then) and sets Y (512, free from 0);
    GpSimd then sets Z (512). `edge(copy_x, set_y, set_z)` adds the edges. Returns the four events."""
    @nki.jit
    def kernel(a):
        x, p = (nl.ndarray((128, 2048), nl.float32, buffer=nl.sbuf) for _ in range(2))
        y, z = (nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf) for _ in range(2))
        nisa.memset(dst=x, value=3.0, engine=nisa.gpsimd_engine)
        copy_x = nisa.tensor_copy(dst=p, src=x, engine=nisa.vector_engine)
        set_y = nisa.memset(dst=y, value=2.0, engine=nisa.vector_engine)
        set_z = nisa.memset(dst=z, value=1.0, engine=nisa.gpsimd_engine)
        edge(copy_x, set_y, set_z)
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=y)
        return out

    kernel.trace(np.zeros((128, 512), np.float32), target="trn1", values=False)
    return simulate(kernel.last_cores[0].stream, "trn1").events[:4]


def test_without_an_edge_the_independent_set_fills_the_gap():
    fill, copy_x, set_y, set_z = _events(lambda c, y, z: None)
    assert copy_x.start == pytest.approx(FILL + SEM)
    assert set_y.start == pytest.approx(0.0) and set_z.start == pytest.approx(FILL)


def test_a_runtime_edge_on_one_engine_keeps_the_set_after_the_copy():
    """set_y.depends_on(copy_x): the set waits for the copy's end (its own engine: no semaphore)."""
    fill, copy_x, set_y, set_z = _events(lambda c, y, z: y.depends_on(c))
    assert copy_x.end == pytest.approx(FILL + SEM + (2048 + STATIC) / VEC)
    assert set_y.start == pytest.approx(copy_x.end) and copy_x.index in set_y.deps
    assert set_y.blocker == copy_x.index


def test_a_runtime_edge_across_engines_waits_for_the_semaphore():
    """set_z.depends_on(copy_x, kind=runtime): GpSimd's set of Z starts a semaphore latency after the copy ends."""
    fill, copy_x, set_y, set_z = _events(lambda c, y, z: z.depends_on(c, kind=nisa.dependency.runtime))
    assert set_z.start == pytest.approx(copy_x.end + SEM)


def test_a_schedule_edge_across_engines_orders_issue_only():
    """kind=schedule emits no semaphore: across engines the set of Z may still overlap the copy; on one engine the
    set of Y follows the copy."""
    fill, copy_x, set_y, set_z = _events(lambda c, y, z: (z.depends_on(c, kind=nisa.dependency.schedule),
                                                          y.depends_on(c, kind=nisa.dependency.schedule)))
    assert set_z.start == pytest.approx(FILL) and set_z.start < copy_x.end
    assert set_y.start == pytest.approx(copy_x.end)


def test_chained_calls_add_every_edge_and_return_the_consumer():
    def edges(c, y, z):
        assert z.depends_on(c).depends_on(y) is z
    fill, copy_x, set_y, set_z = _events(edges)
    assert {copy_x.index, set_y.index} <= set(set_z.deps)
    assert set_z.start == pytest.approx(copy_x.end + SEM)


def test_an_edge_to_a_later_instruction_is_refused_by_name():
    """The consumer must come after its producer in program order (trnsim places the stream in that order)."""
    with pytest.raises(KernelError, match="depends_on.*later"):
        _events(lambda c, y, z: c.depends_on(z))


def test_values_are_unchanged():
    @nki.jit
    def kernel(a):
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        u = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        load = nisa.dma_copy(dst=t, src=a)
        nisa.memset(dst=u, value=1.0).depends_on(load)
        nisa.tensor_tensor(dst=u, data1=u, data2=t, op=nl.add)
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=u)
        return out

    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    np.testing.assert_array_equal(kernel(x), x + 1)
