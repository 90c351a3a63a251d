"""`x[...] = nl.load(...)` / `x[...] = nisa.op(...)`: the instruction writes x itself, no temporary and no copy."""
import numpy as np

import trnsim.nki.beta as nki
import trnsim.nki.beta.isa as nisa
import trnsim.nki.beta.language as nl


@nki.jit
def load_exp_store(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    y = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    x[...] = nl.load(a)
    y[...] = nisa.activation(op=nl.exp, data=x)
    nl.store(out, y)
    return out


@nki.jit
def assign_later(a):
    """The loaded tile is used before it is assigned: the assignment stays a copy."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    t = nl.load(a)
    s = nl.multiply(t, 2.0)
    x[...] = t
    nl.store(out, nl.add(x, s))
    return out


@nki.jit
def in_place(a):
    """x is an input of the call that is assigned to it: it still runs, and stays correct."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    x[...] = nl.load(a)
    x[...] = nl.transpose(x)
    nl.store(out, x)
    return out


def _ops(kernel):
    return [r.op.value for r in kernel.last_cores[0].stream]


def test_assignment_writes_the_destination_directly(rng):
    a = rng.standard_normal((128, 64)).astype(np.float32)
    got = load_exp_store(a)
    np.testing.assert_allclose(got, np.exp(a), rtol=1e-5)
    assert _ops(load_exp_store) == ["dma_copy", "activation", "dma_copy"]
    # The re-issued instructions keep the kernel's own source lines.
    lines = [int(r.location.rsplit(":", 1)[1]) for r in load_exp_store.last_cores[0].stream]
    assert lines[0] + 1 == lines[1] and lines[1] + 1 == lines[2]
    assert all(r.location.startswith(__file__) for r in load_exp_store.last_cores[0].stream)


def test_a_used_result_is_still_copied(rng):
    a = rng.standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_allclose(assign_later(a), 3 * a, rtol=1e-6)
    assert _ops(assign_later).count("tensor_copy") == 1


def test_destination_read_by_the_call_keeps_the_copy(rng):
    a = rng.standard_normal((64, 64)).astype(np.float32)
    np.testing.assert_allclose(in_place(a), a.T, rtol=1e-6)
