"""SBUF spilling: live tiles that do not fit are saved to HBM and reloaded by compiler-inserted DMAs, with
the values unchanged; only the operands of one instruction that cannot fit together are refused.

The SBUF is shrunk to 80 KiB per partition (64 KiB usable after the reserved bytes) so the tiles stay small:
three tiles of 16 KiB per partition fit, four do not.
"""
import warnings

import numpy as np
import pytest

import trnsim
import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core import CapacityError, Op, SpillWarning
from trnsim.core.timing import benchmark

COLS = 4096  # fp32 per partition: 16 KiB


@pytest.fixture
def small_sbuf():
    with trnsim.hardware(base="trn2", core={"sbuf_partition_bytes": "80 KiB"}):
        yield


@nki.jit
def weighted_sum(x):
    """out = sum_i (i + 1) * x[i] over four tiles that are all live before the sum starts."""
    out = nl.ndarray(x.shape[1:], nl.float32, buffer=nl.shared_hbm)
    tiles = []
    for i in range(x.shape[0]):
        t = nl.ndarray(x.shape[1:], nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=float(i + 1))  # changed: must be saved
        tiles.append(t)
    acc = nl.ndarray(x.shape[1:], nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=acc, data1=tiles[0], data2=tiles[1], op=nl.add)
    for t in tiles[2:]:
        nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out


def _expected(x):
    f = np.float32
    acc = x[0] * f(1) + x[1] * f(2)
    for i in range(2, x.shape[0]):
        acc = acc + x[i] * f(i + 1)
    return acc


def test_live_tiles_over_sbuf_are_spilled_and_reloaded(small_sbuf):
    x = np.random.default_rng(0).standard_normal((4, 128, COLS)).astype(np.float32)
    with pytest.warns(SpillWarning, match=r"tiles are spilled to HBM .*test_spill.py:"):
        out = weighted_sum(x)
    np.testing.assert_array_equal(out, _expected(x))
    stream = weighted_sum.trace(x)[0].stream
    spills = [r for r in stream if r.spill is not None]
    assert {r.spill for r in spills} == {"save", "reload"}
    assert all(r.op is Op.DMA_COPY and r.engine.value == "dma" for r in spills)
    for r in spills:  # SBUF to HBM scratch and back, the tile's bytes whole
        sbuf = r.operands["src" if r.spill == "save" else "dst"]
        hbm = r.operands["dst" if r.spill == "save" else "src"]
        assert (sbuf.space, hbm.space) == ("sbuf", "hbm")
        assert sbuf.partitions == 128 and sbuf.byte_hi - sbuf.byte_lo == COLS * 4
        assert r.location == f"spill {r.spill} (compiler)" and "test_spill.py:" in r.attrs["line"]
    # every reload reads what a save wrote, and the next kernel instruction (after any other spill DMAs) reads
    # the reloaded bytes
    saved = set()
    for n, r in enumerate(stream):
        if r.spill == "save":
            saved.add(r.placed["dst"][0][1])
        elif r.spill == "reload":
            assert r.placed["src"][0][1] in saved
            user = next(u for u in stream[n + 1:] if u.spill is None)
            assert r.placed["dst"][0] in [p[0] for p in user.placed.values()]


def test_spills_are_timed_and_counted(small_sbuf):
    x = np.zeros((4, 128, COLS), np.float32)
    with pytest.warns(SpillWarning):
        r = benchmark(weighted_sum, x, timing_only=True)
    assert r.spill_saves >= 1 and r.spill_reloads >= 1
    assert r.spill_save_bytes == r.spill_saves * 128 * COLS * 4
    assert r.spill_reload_bytes == r.spill_reloads * 128 * COLS * 4
    assert r.spill_line.startswith(f"{r.spill_saves} spills, ")
    assert r.hbm_read_bytes == 4 * 128 * COLS * 4  # the kernel's own loads only
    assert r.meta()["spill_save_bytes"] == r.spill_save_bytes
    with trnsim.hardware(base="trn2", core={"sbuf_partition_bytes": "160 KiB"}):  # all five fit: no spill
        big = benchmark(weighted_sum, x, timing_only=True)
    assert big.spill_saves == big.spill_reloads == 0 and big.spill_line is None
    assert r.latency > big.latency  # the spill traffic costs time


@nki.jit
def half_written(x):
    """A tile written in its first half only is spilled: its never-written half stays never-written, and
    reading the written half back is no error."""
    out = nl.ndarray((128, COLS // 2), nl.float32, buffer=nl.shared_hbm)
    half = nl.ndarray((128, COLS), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=half[:, 0:COLS // 2], src=x[0, :, 0:COLS // 2])
    others = [nl.ndarray((128, COLS), nl.float32, buffer=nl.sbuf) for _ in range(3)]
    for i, t in enumerate(others):
        nisa.dma_copy(dst=t, src=x[i + 1])
    nisa.tensor_tensor(dst=others[0], data1=others[0], data2=others[1], op=nl.add)
    nisa.tensor_tensor(dst=others[0], data1=others[0], data2=others[2], op=nl.add)
    res = nl.ndarray((128, COLS // 2), nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=res, data1=half[:, 0:COLS // 2], data2=others[0][:, 0:COLS // 2], op=nl.add)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_a_partly_written_tile_keeps_its_marks_through_a_spill(small_sbuf):
    x = np.random.default_rng(1).standard_normal((4, 128, COLS)).astype(np.float32)
    with pytest.warns(SpillWarning):
        out = half_written(x)
    h = COLS // 2
    np.testing.assert_array_equal(out, x[0, :, :h] + ((x[1, :, :h] + x[2, :, :h]) + x[3, :, :h]))
    assert any(r.spill == "save" for r in half_written.trace(x)[0].stream)


@nki.jit
def three_wide(x):
    """One tensor_tensor whose three operands need 72 KiB per partition together."""
    out = nl.ndarray((128, 6144), nl.float32, buffer=nl.shared_hbm)
    a = nl.ndarray((128, 6144), nl.float32, buffer=nl.sbuf, name="a")
    b = nl.ndarray((128, 6144), nl.float32, buffer=nl.sbuf, name="b")
    nisa.dma_copy(dst=a, src=x)
    nisa.dma_copy(dst=b, src=x)
    c = nl.ndarray((128, 6144), nl.float32, buffer=nl.sbuf, name="c")
    nisa.tensor_tensor(dst=c, data1=a, data2=b, op=nl.add)
    nisa.dma_copy(dst=out, src=c)
    return out


def test_operands_of_one_instruction_that_cannot_fit_are_refused(small_sbuf):
    with pytest.warns(SpillWarning), pytest.raises(CapacityError) as e:
        three_wide(np.zeros((128, 6144), np.float32))
    msg = str(e.value)
    assert msg.startswith("SBUF overflow: the operands of tensor_tensor ('c', 'a', 'b') need 73728 B per partition")
    assert "65528 usable B per partition" in msg and "'b'" in msg and "'c'" in msg
    assert "test_spill.py:" in msg and len(msg) < 800


@nki.jit
def fragmented(x):
    """a and b sit between two small tiles, so once c takes a's place after a spill, a's 16 KiB come back
    to no free range of 16 KiB, though a, b and c (48 KiB) fit the 64 KiB together."""
    small, big = (128, COLS // 2), (128, COLS)
    s1 = nl.ndarray(small, nl.float32, buffer=nl.sbuf, name="s1")
    a = nl.ndarray(big, nl.float32, buffer=nl.sbuf, name="a")
    s2 = nl.ndarray(small, nl.float32, buffer=nl.sbuf, name="s2")
    b = nl.ndarray(big, nl.float32, buffer=nl.sbuf, name="b")
    nisa.dma_copy(dst=s1, src=x[0, :, 0:COLS // 2])
    nisa.dma_copy(dst=a, src=x[1])
    nisa.dma_copy(dst=s2, src=x[2, :, 0:COLS // 2])
    nisa.dma_copy(dst=b, src=x[3])
    c = nl.ndarray(big, nl.float32, buffer=nl.sbuf, name="c")
    nisa.tensor_tensor(dst=c, data1=a, data2=b, op=nl.add)
    nisa.tensor_tensor(dst=s1, data1=s1, data2=s2, op=nl.multiply)
    out = nl.ndarray((2, 128, COLS), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[0], src=c)
    nisa.dma_copy(dst=out[1, :, 0:COLS // 2], src=s1)
    nisa.dma_copy(dst=out[1, :, COLS // 2:], src=s1)
    return out


def test_operands_that_fit_together_are_placed_afresh(small_sbuf):
    """Not refused: the operands of one instruction that fit SBUF together are spilled and placed again
    where they fit, whatever the order the other tiles left the free bytes in."""
    x = np.random.default_rng(3).standard_normal((4, 128, COLS)).astype(np.float32)
    with pytest.warns(SpillWarning):
        out = fragmented(x)
    np.testing.assert_array_equal(out[0], x[1] + x[3])
    prod = x[0, :, :COLS // 2] * x[2, :, :COLS // 2]
    np.testing.assert_array_equal(out[1], np.concatenate([prod, prod], axis=1))


@nki.jit
def placed_then_one_more(x):
    """Tiles the kernel placed itself (address=) are never spilled: the compiler leaves them where they are."""
    a = nl.ndarray((128, 8192), nl.float32, buffer=nl.sbuf, name="placed", address=(0, 0))
    nisa.dma_copy(dst=a[:, 0:8], src=x)
    b = nl.ndarray((128, 8192), nl.float32, buffer=nl.sbuf, name="one_more")
    nisa.tensor_copy(dst=b[:, 0:8], src=a[:, 0:8])


def test_placed_tiles_are_not_spilled(small_sbuf):
    with pytest.raises(CapacityError, match=r"tensor 'one_more' needs 32768 B .* 1 x 'placed'"):
        placed_then_one_more(np.zeros((128, 8), np.float32))


@nki.jit
def shared_in_affine_loop(x):
    """A tile made before an affine loop is spilled and reloaded inside it: the loop stays free of
    loop-carried dependencies (a spill moves the tile's bytes, never its values)."""
    out = nl.ndarray((2, 128, COLS), nl.float32, buffer=nl.shared_hbm)
    w = nl.ndarray((128, COLS), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=w, src=x[0])
    for i in nl.affine_range(2):
        ts = []
        for k in range(3):
            t = nl.ndarray((128, COLS), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[k + 1])
            ts.append(t)
            if k == 0:  # w is read, then spilled for the next tiles, then reloaded in the next iteration
                nisa.tensor_tensor(dst=t, data1=t, data2=w, op=nl.add)
        nisa.tensor_tensor(dst=ts[0], data1=ts[0], data2=ts[1], op=nl.add)
        nisa.tensor_tensor(dst=ts[0], data1=ts[0], data2=ts[2], op=nl.add)
        nisa.dma_copy(dst=out[i], src=ts[0])
    return out


def test_spills_inside_an_affine_loop_are_no_loop_carried_dependency(small_sbuf, monkeypatch):
    monkeypatch.setenv("TRNSIM_RACE_CHECK", "error")  # watch the affine loop for loop-carried dependencies
    x = np.random.default_rng(5).standard_normal((4, 128, COLS)).astype(np.float32)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = shared_in_affine_loop(x)
    assert seen and all(w.category is SpillWarning for w in seen)  # no LoopCarriedWarning
    want = ((x[1] + x[0]) + x[2]) + x[3]
    np.testing.assert_array_equal(out, np.stack([want, want]))
    assert any(r.spill == "reload" for r in shared_in_affine_loop.trace(x)[0].stream)


@nki.jit
def round_robin(x, n):
    """Four tiles, three fit: each iteration of a sequential loop updates them in turn. The least recently
    used tile is always the next one needed; the farthest next use is the one just updated."""
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    tiles = []
    for k in range(4):
        t = nl.ndarray((128, COLS), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[k])
        tiles.append(t)
    for i in nl.sequential_range(n):
        for t in tiles:
            nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
    for k in range(4):
        nisa.dma_copy(dst=out[k], src=tiles[k])
    return out


def test_the_spill_victim_is_the_tile_needed_last(small_sbuf):
    """From the second iteration on, the previous one predicts the next uses: about one reload per three
    updates (the optimum for four tiles in three places), where least recently used reloads every one."""
    x = np.random.default_rng(6).standard_normal((4, 128, COLS)).astype(np.float32)
    with pytest.warns(SpillWarning):
        out = round_robin(x, 8)
    want = x.copy()
    for _ in range(8):
        want += np.float32(1)
    np.testing.assert_array_equal(out, want)
    stream = round_robin.trace(x, 8, values=False)[0].stream
    reloads = [n for n, r in enumerate(stream) if r.spill == "reload"]
    assert len(reloads) <= 20  # least recently used: 36


@nki.jit
def declared_ahead(x):
    """c is declared before d but first written after d's last-but-one use: four 16 KiB tiles are declared,
    but at most three hold data at once (a, b, d; then d, c)."""
    a = nl.ndarray((128, COLS), nl.float32, buffer=nl.sbuf, name="a")
    b = nl.ndarray((128, COLS), nl.float32, buffer=nl.sbuf, name="b")
    nisa.dma_copy(dst=a, src=x[0])
    nisa.dma_copy(dst=b, src=x[1])
    c = nl.ndarray((128, COLS), nl.float32, buffer=nl.sbuf, name="c")
    d = nl.ndarray((128, COLS), nl.float32, buffer=nl.sbuf, name="d")
    nisa.tensor_tensor(dst=d, data1=a, data2=b, op=nl.add)
    nisa.tensor_scalar(dst=c, data=d, op0=nl.multiply, operand0=2.0)
    out = nl.ndarray((128, COLS), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=c)
    return out


def test_a_tile_holds_no_bytes_before_its_first_write(small_sbuf):
    """The compiler's buffer lives from its first write to its last read: c, declared ahead, takes no room
    while a, b and d are live, so nothing is spilled; c is placed where the dead a or b was."""
    x = np.random.default_rng(7).standard_normal((2, 128, COLS)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SpillWarning)
        out = declared_ahead(x)
    np.testing.assert_array_equal(out, (x[0] + x[1]) * np.float32(2))
    stream = declared_ahead.trace(x, values=False)[0].stream
    assert not any(r.spill is not None for r in stream)
    offset = [r.placed["dst"][0][3] for r in stream[:4]]  # the byte offset of a, b, d and c
    assert offset[3] in offset[:2] and offset[2] not in offset[:2]


@nki.jit
def accumulators(s, m, n, cols, again=False):
    """`n` PSUM accumulators declared up front (a Python list the kernel keeps), each written by a matmul and
    its first `cols` columns read out before the next is written: the compiler's live ranges (first write to
    last read) never overlap. With `again`, the first is read once more at the end."""
    out = nl.ndarray((n + 1, 128, cols), nl.float32, buffer=nl.shared_hbm)
    st, mv = nl.load(s), nl.load(m)
    acc = [nl.ndarray((128, m.shape[1]), nl.float32, buffer=nl.psum) for _ in range(n)]
    for i in range(n):
        nisa.nc_matmul(acc[i], st, mv)
        nl.store(out[i], value=nl.multiply(acc[i][:, 0:cols], float(i + 1)))
    if again:
        nl.store(out[n], value=nl.copy(acc[0][:, 0:cols]))
    return out


def operands(width, seed):
    rng = np.random.default_rng(seed)
    s, m = rng.standard_normal((128, 128)).astype(np.float32), rng.standard_normal((128, width)).astype(np.float32)
    return s, m, s.T.astype(np.float64) @ m


@pytest.mark.parametrize("n, width", [(40, 128), (12, 512)])
def test_psum_accumulators_used_one_at_a_time_fit(n, width):
    """More 512 B (40 x, beyond 32) or 2 KiB (12 x, beyond 8) PSUM tiles than PSUM holds, used one at a
    time, are placed as the compiler places them, in values and in timing-only mode alike, with no spill."""
    s, m, ref = operands(width, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SpillWarning)
        got = accumulators(s, m, n, width)
        timed = benchmark(accumulators, s, m, n, width, target="trn2", timing_only=True)
    for i in range(n):
        np.testing.assert_allclose(got[i], (i + 1) * ref, rtol=1e-4, atol=1e-3)
    assert timed.latency > 0 and accumulators.last_cores[0].spills == 0


def test_a_psum_tile_read_again_after_it_was_set_aside_comes_back():
    """A read PSUM tile whose bank went to a later one keeps its values: read again, it comes back through
    SBUF (PSUM has no DMA), counted as a spill."""
    s, m, ref = operands(512, 6)
    with pytest.warns(SpillWarning):
        got = accumulators(s, m, 9, 512, again=True)
    np.testing.assert_allclose(got[9], ref, rtol=1e-4, atol=1e-3)
    assert accumulators.last_cores[0].spills == 1


def test_a_psum_tile_with_a_sum_still_accumulating_keeps_its_bank():
    """A tile read only in part keeps an open accumulation group over the rest, so it is not set aside: the
    ninth 2 KiB accumulator finds no bank."""
    s, m, _ = operands(512, 7)
    with pytest.raises(CapacityError, match=r"PSUM overflow"):
        accumulators(s, m, 9, 256)
