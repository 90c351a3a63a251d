"""nki.language helpers and NkiTensor views, each lowered to instructions and checked against numpy."""
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core import OutOfBoundsError, ShapeError


def run(body, *args):
    return nki.jit(body)(*args)


def test_reductions_and_elementwise_helpers(rng):
    """nl.sum/max/mean/var/all and binary/unary helpers match numpy along the free axis."""
    x = rng.standard_normal((64, 40), np.float32)

    def k(a):
        t = nl.load(a)
        outs = [nl.sum(t, 1, keepdims=True), nl.max(t, 1, keepdims=True), nl.mean(t, 1, keepdims=True),
                nl.var(t, 1), nl.all(nl.add(t, 100.0), 1, nl.float32)]
        res = []
        for o in outs:
            r = nl.ndarray(o.shape, nl.float32, buffer=nl.shared_hbm)
            nl.store(r, nl.copy(o, nl.float32))
            res.append(r)
        e = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        nl.store(e, nl.maximum(nl.multiply(t, 2.0), nl.exp(t)))
        return tuple(res) + (e,)

    s, m, mu, v, al, e = run(k, x)
    np.testing.assert_allclose(s[:, 0], x.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(m[:, 0], x.max(1))
    np.testing.assert_allclose(mu[:, 0], x.mean(1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(v[:, 0], x.var(1), rtol=1e-5)
    np.testing.assert_array_equal(al[:, 0], np.ones(64))
    np.testing.assert_allclose(e, np.maximum(2 * x, np.exp(x)), rtol=1e-6)


def test_matmul_transpose_where_identity(rng):
    """nl.matmul (with and without transpose_x), nl.where and shared_identity_matrix match numpy."""
    a, b = rng.standard_normal((64, 128), np.float32), rng.standard_normal((64, 96), np.float32)

    def k(x, y):
        out = nl.ndarray((128, 96), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.copy(nl.matmul(nl.load(x), nl.load(y), transpose_x=True)))
        out2 = nl.ndarray((128, 128), nl.float32, buffer=nl.shared_hbm)
        xt = nl.load(x)
        nl.store(out2, nl.copy(nl.matmul(nl.copy(nl.transpose(xt)), xt)))
        eye = nl.ndarray((64, 64), nl.float32, buffer=nl.shared_hbm)
        nl.store(eye, nl.shared_identity_matrix(64, nl.float32))
        w = nl.ndarray((64, 128), nl.float32, buffer=nl.shared_hbm)
        cond = nl.greater(xt, 0.0)
        nl.store(w, nl.where(cond, xt, -1.0))
        return out, out2, eye, w

    o1, o2, eye, w = run(k, a, b)
    np.testing.assert_allclose(o1, a.T @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(o2, a.T @ a, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(eye, np.eye(64))
    np.testing.assert_array_equal(w, np.where(a > 0, a, -1.0))


def test_tensor_views(rng):
    """Slices, nl.ds, reshape, permute, rearrange, view(dtype) and broadcast address the right elements."""
    x = rng.standard_normal((128, 64), np.float32)

    def k(a):
        t = nl.load(a)
        o1 = nl.ndarray((128, 16), nl.float32, buffer=nl.shared_hbm)
        nl.store(o1, t[:, nl.ds(8, 32)][:, ::2])
        o2 = nl.ndarray((128, 8, 8), nl.float32, buffer=nl.shared_hbm)
        nl.store(o2, t.reshape((128, 8, 8)).permute((0, 2, 1)))
        o3 = nl.ndarray((128, 4, 16), nl.float32, buffer=nl.shared_hbm)
        nl.store(o3, t.rearrange("p (a b)", "p b a", {"a": 16}))
        o4 = nl.ndarray((128, 64), nl.int32, buffer=nl.shared_hbm)
        nl.store(o4, t.view(nl.int32))
        o5 = nl.ndarray((4, 64), nl.float32, buffer=nl.shared_hbm)
        nl.store(o5, a[0:1, :].broadcast(0, 4))
        return o1, o2, o3, o4, o5

    o1, o2, o3, o4, o5 = run(k, x)
    np.testing.assert_array_equal(o1, x[:, 8:40:2])
    np.testing.assert_array_equal(o2, x.reshape(128, 8, 8).transpose(0, 2, 1))
    np.testing.assert_array_equal(o3, x.reshape(128, 16, 4).transpose(0, 2, 1))
    np.testing.assert_array_equal(o4, x.view(np.int32))
    np.testing.assert_array_equal(o5, np.repeat(x[:1], 4, 0))


def test_view_rules_refused():
    """Moving the partition dim, an off-layout reshape and an out-of-range nl.ds are refused."""
    def perm(a):
        nl.load(a).permute((1, 0))
    with pytest.raises(ShapeError, match="moves the partition dim"):
        run(perm, np.ones((8, 8), np.float32))

    def ds(a):
        nl.load(a)[:, nl.ds(4, 8)]
    with pytest.raises(OutOfBoundsError, match="slice 4:12 out of bounds for dim 1 of size 8"):
        run(ds, np.ones((8, 8), np.float32))


def test_fori_loop_registers_and_simulate(rng):
    """fori_loop runs its body per register value; nki.simulate runs a kernel; program_id is 0 on LNC 1."""
    x = rng.standard_normal((128, 8), np.float32)

    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        n = nisa.register_alloc(3)
        nl.fori_loop(0, n, lambda i: nisa.tensor_scalar(t, t, nl.add, 1.0))
        nl.store(out, t)
        assert nl.program_id(0) == 0 and nl.num_programs() == 1
        return out

    np.testing.assert_array_equal(nki.simulate(k)(x), ((x + np.float32(1)) + np.float32(1)) + np.float32(1))


def test_launch_pauses_the_cyclic_collector_and_restores_it():
    """A run pauses the cyclic collector and turns it back on after, also when the kernel fails; a
    tensor dropped inside the run is still freed at once (the SBUF it held is reused)."""
    import gc
    seen = []

    def body(a):
        seen.append(gc.isenabled())
        starts = []
        for _ in range(3):
            t = nl.load(a)
            starts.append(t.alloc.b0)
            del t
        seen.append(starts)
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a))
        return out

    x = np.ones((8, 8), np.float32)
    assert gc.isenabled()
    np.testing.assert_array_equal(run(body, x), x)
    assert seen[0] is False and gc.isenabled()
    assert len(set(seen[1])) == 1  # each dropped tile's bytes went to the next one

    def fails(a):
        nl.load(a).permute((1, 0))
    with pytest.raises(ShapeError):
        run(fails, x)
    assert gc.isenabled()


def test_inputs_are_read_in_place_and_written_back_only_when_written():
    """A launch reads its input arrays without copying them, yet the kernel's writes to an input stay its
    own until the launch ends: a tile loaded before the write keeps the old values, a load after it sees
    the new ones, and only then is the caller's array updated."""
    @nki.jit
    def k(x, y):
        before = nl.load(x)
        nl.store(x, nl.multiply(before, 2.0))  # an in-place write to input x
        after = nl.load(x)
        out = nl.ndarray((2,) + x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out[0], nl.add(before, nl.load(y)))
        nl.store(out[1], after)
        return out

    x0 = np.arange(64, dtype=np.float32).reshape(8, 8)
    x, y = x0.copy(), np.ones((8, 8), np.float32)
    got = k(x, y)
    np.testing.assert_array_equal(got[0], x0 + 1)
    np.testing.assert_array_equal(got[1], x0 * 2)
    np.testing.assert_array_equal(x, x0 * 2)  # written back at the end
    np.testing.assert_array_equal(y, 1.0)  # never written: untouched
    frozen = x0.copy()
    frozen.flags.writeable = False
    np.testing.assert_array_equal(k(frozen, y)[1], x0 * 2)
    np.testing.assert_array_equal(frozen, x0)  # a read-only input is never written


def test_tensor_copy_predicated_keeps_what_a_comparison_selects(rng):
    """nisa.tensor_copy_predicated with a uint8 predicate made by a comparison: np.where, element for element."""
    @nki.jit
    def k(x, y):
        a, b = nl.load(x), nl.load(y)
        p = nl.ndarray(x.shape, nl.uint8)
        nisa.tensor_scalar(p, a, nl.greater, 0.0)
        nisa.tensor_copy_predicated(b, a, p)
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, b)
        return out

    x, y = rng.standard_normal((64, 96)).astype(np.float32), rng.standard_normal((64, 96)).astype(np.float32)
    np.testing.assert_array_equal(k(x, y), np.where(x > 0, x, y))


def test_integer_division_is_true_division(rng):
    """nl.divide of int32 tiles (or an int32 tile and an int) is a float32 tile, as numpy.divide is; floor of
    it is the integer quotient."""
    x = np.arange(2176, 2304, dtype=np.int32).reshape(8, 16)
    d = rng.integers(1, 40, (8, 16), dtype=np.int32)

    def k(a, b):
        out = nl.ndarray((3,) + a.shape, nl.float32, buffer=nl.shared_hbm)
        ta, tb = nl.load(a), nl.load(b)
        q = nl.divide(ta, 38)
        assert q.dtype == nl.float32
        nl.store(out[0], q)
        nl.store(out[1], nl.copy(nl.floor(q, dtype=nl.int32), nl.float32))
        nl.store(out[2], nl.divide(ta, tb))
        return out

    got = run(k, x, d)
    np.testing.assert_array_equal(got[0], x.astype(np.float32) / np.float32(38))
    np.testing.assert_array_equal(got[1], x // 38)
    np.testing.assert_array_equal(got[2], x.astype(np.float32) / d.astype(np.float32))
