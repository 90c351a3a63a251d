"""Tile lifetimes follow the compiler's (beta API): tiles are scoped to the loop iteration that made them,
loops keep as many iterations' buffers as fit, PSUM blocks used one at a time share banks, and a partition
broadcast wider than PSUM goes bank by bank. Only live data that cannot fit is refused."""
import warnings

import numpy as np
import pytest

import trnsim.nki.beta as nki
import trnsim.nki.beta.language as nl
from trnsim.core import CapacityError, OutOfScopeError, SpillWarning


@nki.jit
def load_store_in_nested_loops(x):
    """The tile of every inner iteration is dead once it is stored: 16 KiB live at a time."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(1):
        for j in nl.sequential_range(32):
            t = nl.load(x)
            nl.store(out, value=t)
    return out


def test_tile_made_in_an_iteration_dies_with_it():
    """(a): 32 iterations of a 16 KiB tile (512 KiB in all) fit a 208 KiB SBUF."""
    x = np.random.default_rng(0).standard_normal((128, 4096)).astype(np.float32)
    np.testing.assert_array_equal(load_store_in_nested_loops(x), x)


@nki.jit
def all_live_in_one_iteration(x):
    """14 loaded tiles of 16 KiB all used at the end of one iteration: 224 KiB live."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(1):
        tiles = [nl.load(x) for _ in range(14)]
        acc = tiles[0]
        for t in tiles[1:]:
            acc = nl.add(acc, t)
        nl.store(out, value=acc)
    return out


def test_live_tiles_over_sbuf_are_spilled_not_refused():
    """224 KiB live does not fit, but each add reads two tiles: the compiler spills the others to HBM."""
    x = np.random.default_rng(4).standard_normal((128, 4096)).astype(np.float32)
    want = x
    for _ in range(13):
        want = want + x
    with pytest.warns(SpillWarning):
        np.testing.assert_array_equal(all_live_in_one_iteration(x), want)


@nki.jit
def zeros_each_iteration(x, cols):
    """(c): `acc = nl.zeros(...)` in every iteration; over half of SBUF each."""
    out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(3):
        acc = nl.zeros((128, cols), nl.float32, buffer=nl.sbuf)
        t = nl.load(x)
        nl.store(out, value=nl.add(acc[:, 0:8], t))
    return out


def test_zeros_rebound_each_iteration():
    x = np.arange(1024, dtype=np.float32).reshape(128, 8)
    np.testing.assert_array_equal(zeros_each_iteration(x, 30 * 1024), x)
    with pytest.raises(CapacityError, match=r"needs 217088 B"):
        zeros_each_iteration(x, 53 * 1024)  # one alone does not fit


@nki.jit
def big_tile_per_iteration(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        nl.store(out, value=nl.load(x))
    return out


@pytest.mark.parametrize("cols, distinct", [(8 * 1024, True), (27 * 1024, False)])
def test_buffers_per_loop_are_what_fits(cols, distinct):
    """(b): consecutive iterations load into separate buffers where two fit (2 x 32 KiB), into one where
    they do not (2 x 108 KiB)."""
    x = np.ones((128, cols), np.float32)
    big_tile_per_iteration.trace(x, values=False)
    stream = big_tile_per_iteration.last_cores[0].stream
    loads = [r.operands["dst"].byte_lo for r in stream if r.op.value == "dma_copy" and r.operands["dst"].space == "sbuf"]
    assert len(loads) == 4
    assert all((a != b) == distinct for a, b in zip(loads, loads[1:]))


@nki.jit
def psum_blocks_one_at_a_time(a, b):
    """(d): 16 PSUM blocks of one bank each (32 KiB, twice PSUM), each written and read in its iteration."""
    out = nl.ndarray((16, 128, 512), nl.float32, buffer=nl.shared_hbm)
    ps = nl.ndarray((16, nl.par_dim(128), 512), nl.float32, buffer=nl.psum)
    lhs, rhs = nl.load(a), nl.load(b)
    for i in nl.affine_range(16):
        ps[i] = nl.matmul(nl.multiply(lhs, float(i)), rhs, transpose_x=True)
        nl.store(out[i], value=nl.copy(ps[i]))
    return out


@nki.jit
def psum_blocks_all_live(a, b):
    """All 16 blocks written in one iteration before any is read: they cannot share banks."""
    out = nl.ndarray((16, 128, 512), nl.float32, buffer=nl.shared_hbm)
    ps = nl.ndarray((16, nl.par_dim(128), 512), nl.float32, buffer=nl.psum)
    lhs, rhs = nl.load(a), nl.load(b)
    for i in nl.affine_range(1):
        for j in range(16):
            ps[j] = nl.matmul(lhs, rhs, transpose_x=True)
        for j in range(16):
            nl.store(out[j], value=nl.copy(ps[j]))
    return out


def test_psum_blocks_used_one_at_a_time_share_banks():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((128, 128)).astype(np.float32), rng.standard_normal((128, 512)).astype(np.float32)
    got = psum_blocks_one_at_a_time(a, b)
    ref = a.T @ b
    for i in range(16):
        np.testing.assert_allclose(got[i], i * ref, rtol=1e-4, atol=1e-3)
    with pytest.raises(CapacityError, match=r"PSUM overflow: .*8 x 'tile\[0\]' .. 'tile\[7\]'"):
        psum_blocks_all_live(a, b)


@nki.jit
def used_after_its_iteration(x):
    """A tile kept past its iteration and read after its bytes were given to later iterations' tiles."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    kept = []
    for i in nl.affine_range(4):
        kept.append(nl.load(x))
    nl.store(out, value=kept[0])
    return out


def test_tile_used_after_its_bytes_went_elsewhere_is_refused():
    with pytest.raises(OutOfScopeError, match=r"used after the loop iteration that made it ended"):
        used_after_its_iteration(np.ones((128, 20 * 1024), np.float32))  # 80 KiB: the third load evicts it
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    np.testing.assert_array_equal(used_after_its_iteration(x), x)  # nothing needed its bytes: still there


@nki.jit
def add_broadcast_row(x, row):
    """(e): a [1, F] row added to every partition of a [128, F] tile."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.add(nl.load(x), nl.load(row)))
    return out


def test_partition_broadcast_wider_than_psum():
    """F = 8192 fp32 is 32 KiB per partition, twice PSUM: the spread goes one bank at a time."""
    rng = np.random.default_rng(2)
    x, row = rng.standard_normal((128, 8192)).astype(np.float32), rng.standard_normal((1, 8192)).astype(np.float32)
    np.testing.assert_array_equal(add_broadcast_row(x, row), x + row)
    with pytest.raises(CapacityError, match=r"SBUF overflow"):  # x, the spread row and the sum: 3 x 72 KiB
        add_broadcast_row(np.zeros((128, 18432), np.float32), np.zeros((1, 18432), np.float32))


@nki.jit
def declared_outside_filled_inside(x):
    """`acc` is declared in the outer iteration and first written in a nested loop (where it is allocated),
    then read in a later nested loop whose 64 KiB tiles need the bytes of the finished iterations."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(1):
        acc = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        for h in nl.affine_range(2):
            acc[h * 64:(h + 1) * 64, :] = nl.load(x[h * 64:(h + 1) * 64, :])
        for j in nl.sequential_range(3):
            t = nl.load(x)
            nl.store(out, value=nl.add(acc, t))
    return out


def test_tile_lives_in_the_iteration_that_declared_it():
    """A one-tile tensor belongs to the iteration of its nl.ndarray, not to the nested loop of its first write."""
    x = np.random.default_rng(1).standard_normal((128, 16 * 1024)).astype(np.float32)
    np.testing.assert_array_equal(declared_outside_filled_inside(x), 2 * x)



@nki.jit
def blocks_filled_then_read_later(x, y):
    """A tensor of 4 blocks of 32 KiB per partition filled one block per iteration, then, after the 64 KiB
    tiles of a second loop needed the bytes of the finished iterations, read again and summed."""
    out = nl.ndarray(x.shape[1:], x.dtype, buffer=nl.shared_hbm)
    twice = nl.ndarray(y.shape, y.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(1):
        blocks = nl.ndarray((4, nl.par_dim(128), x.shape[2]), dtype=x.dtype, buffer=nl.sbuf)
        for b in nl.affine_range(4):
            blocks[b] = nl.multiply(nl.load(x[b]), float(b + 1))
        for j in nl.sequential_range(2):
            t = nl.load(y)
            nl.store(twice, value=nl.add(t, t))
        acc = nl.add(blocks[0], blocks[1])
        nl.store(out, value=nl.add(acc, nl.add(blocks[2], blocks[3])))
    return out, twice


def test_blocks_used_after_their_first_loop_come_back():
    """Blocks of a tensor of blocks are scoped to the iteration that first used them (blocks used one per
    iteration share buffers), so a later loop may take their bytes; used again, they come back from HBM, as
    a compiler-spilled tile does, with their values (4 x 32 KiB of blocks and 2 x 64 KiB of tiles overflow
    trn2's SBUF)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 128, 8 * 1024)).astype(np.float32)
    y = rng.standard_normal((128, 16 * 1024)).astype(np.float32)
    with pytest.warns(SpillWarning):
        got, twice = blocks_filled_then_read_later(x, y)
    f = np.float32
    np.testing.assert_array_equal(got, (x[0] * f(1) + x[1] * f(2)) + (x[2] * f(3) + x[3] * f(4)))
    np.testing.assert_array_equal(twice, y + y)


@nki.jit
def psum_blocks_written_then_read(a, b):
    """16 PSUM blocks of one bank each (twice PSUM) written one per iteration, then read in a later loop."""
    out = nl.ndarray((16, 128, 512), nl.float32, buffer=nl.shared_hbm)
    ps = nl.ndarray((16, nl.par_dim(128), 512), nl.float32, buffer=nl.psum)
    lhs, rhs = nl.load(a), nl.load(b)
    for i in nl.affine_range(16):
        ps[i] = nl.matmul(nl.multiply(lhs, float(i)), rhs, transpose_x=True)
    for i in nl.affine_range(16):
        nl.store(out[i], value=nl.copy(ps[i]))
    return out


def test_psum_blocks_read_after_their_loop_come_back_through_sbuf():
    """The blocks of finished iterations leave PSUM for HBM when later blocks need their banks, and come back
    when read: a DMA into an SBUF tile, then a copy into PSUM (no DMA reaches PSUM), with their values."""
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((128, 128)).astype(np.float32), rng.standard_normal((128, 512)).astype(np.float32)
    with pytest.warns(SpillWarning):
        got = psum_blocks_written_then_read(a, b)
    ref = a.T @ b
    for i in range(16):
        np.testing.assert_allclose(got[i], i * ref, rtol=1e-4, atol=1e-3)
    stream = psum_blocks_written_then_read.trace(a, b)[0].stream
    reloads = [r for r in stream if r.spill == "reload"]
    into_psum = [r for r in reloads if r.op.value == "tensor_copy" and r.placed["dst"][0][0] == "psum"]
    assert len(into_psum) >= 8 and len(reloads) == 2 * len(into_psum)



@nki.jit
def psum_blocks_per_iteration(a, b):
    """In each of three iterations, 8 PSUM blocks (all 8 banks) written in one loop and read in the next, then
    PSUM transposes: the banks of tiles past their iteration are taken back, not the blocks'."""
    out = nl.ndarray((3, 8, 128, 512), nl.float32, buffer=nl.shared_hbm)
    lhs, rhs = nl.load(a), nl.load(b)
    lhs_t = nl.ndarray((4, nl.par_dim(128), 128), nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(4):
        lhs_t[i] = nl.copy(nl.transpose(nl.multiply(lhs, float(i + 1))))
    for q in nl.sequential_range(3):
        ps = nl.ndarray((8, nl.par_dim(128), 512), nl.float32, buffer=nl.psum)
        for j in nl.affine_range(8):
            ps[j] = nl.matmul(lhs_t[(j + q) % 4], rhs, transpose_x=True)
        for j in nl.affine_range(8):
            nl.store(out[q, j], value=nl.copy(ps[j]))
        for i in nl.affine_range(4):  # small PSUM tiles after the blocks' last use, as an attention kernel's
            lhs_t[i] = nl.copy(nl.transpose(lhs_t[i]))  # transposes of its scores
    return out


def test_psum_blocks_that_fit_keep_their_banks():
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((128, 128)).astype(np.float32), rng.standard_normal((128, 512)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SpillWarning)
        got = psum_blocks_per_iteration(a, b)
    for q in range(3):
        for j in range(8):
            x = ((j + q) % 4 + 1) * a  # lhs_t holds x.T in iterations 0 and 2, x in iteration 1 (transposed back)
            np.testing.assert_allclose(got[q, j], (x if q % 2 == 0 else x.T) @ b, rtol=1e-4, atol=1e-3)
