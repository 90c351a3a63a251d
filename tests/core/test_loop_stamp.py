"""Loop stamping (core/fast/stamp.py): a timing-only run that records loop iterations without running their Python
records and schedules exactly what running them records and schedules; a body it cannot prove the same runs as
before."""
import contextlib
import sys
from pathlib import Path

import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core import fast
from trnsim.core.builder import Builder
from trnsim.core.fast import stamp
from trnsim.core.isa.registry import Record
from trnsim.core.timing import simulate, summarize

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
OFFSETS = [0, 3, 1, 7, 2, 6, 4, 5]  # a data-dependent order: no affine pattern


@pytest.fixture(autouse=True)
def speed_layer_on(monkeypatch):
    """The speed layer on, and short loops stamped too (the kernels here are small)."""
    monkeypatch.setenv("TRNSIM_FAST", "1")
    monkeypatch.setattr(stamp, "MIN_STAMPED", 1)
    monkeypatch.setattr(stamp, "_fruitless", {})  # loops other tests found nothing to stamp in are watched again


def record(r, memories: dict) -> tuple:
    """Everything a record holds, its placements without the span cache (computed or not, the same region) and
    memories numbered in order of first use (their serial numbers count per process)."""
    placed = tuple((n, (_renumbered(p[0], memories),) + p[1:8]) for n, p in r.placed.items())
    attrs = tuple((k, repr(v)) for k, v in r.attrs.items())
    return (r.index, r.op, r.engine, placed, r.writes, attrs, r.location, r.sig, r.site, r.hoisted, r.accumulated,
            r.spill)


def _renumbered(place, memories):
    space, serial, *rest = place
    return (space, memories.setdefault((space, serial), len(memories)), *rest)


def run(kernel, args, monkeypatch, stamped: bool, target="trn2"):
    """(records, every scheduled event, the summary figures, iterations stamped) of a timing-only run."""
    with monkeypatch.context() as m:
        if not stamped:
            m.setattr(fast.Speed, "loop", Builder.loop)
        nc = kernel.trace(*args, target=target, values=False)[0]
    tl = simulate(nc.stream, target)
    r = summarize("k", [tl], nc.spec)
    events = [(e.track, e.start, e.end, tuple(e.deps), e.blocker, e.pieces) for e in tl.events]
    figures = (r.latency, r.bound, tuple(sorted(r.share.items())), r.hfu)
    memories: dict = {}
    return [record(x, memories) for x in nc.stream], events, figures, nc.builder.stamped


def same_both_ways(kernel, args, monkeypatch, target="trn2") -> int:
    """Assert a run with stamping equals one without, record by record and event by event; the iterations
    stamped."""
    a = run(kernel, args, monkeypatch, True, target)
    b = run(kernel, args, monkeypatch, False, target)
    assert b[3] == 0
    assert len(a[0]) == len(b[0])
    for x, y in zip(a[0], b[0]):
        assert x == y
    assert a[1] == b[1]
    assert a[2] == b[2]
    return a[3]


@nki.jit
def tiled_matmul(lhsT, rhs):
    """Loads in one inner loop, an accumulation group in another, tiles made in the outer body."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        a = nl.ndarray((128, K // 128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
        b = nl.ndarray((128, K // 128, N), dtype=rhs.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(K // 128):
            nisa.dma_copy(dst=a[:, k, :], src=lhsT[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
            nisa.dma_copy(dst=b[:, k, :], src=rhs[k * 128:(k + 1) * 128, :])
        acc = nl.ndarray((128, N), dtype=nl.float32, buffer=nl.psum)
        for k in nl.sequential_range(K // 128):
            nisa.nc_matmul(dst=acc, stationary=a[:, k, :], moving=b[:, k, :])
        res = nl.ndarray((128, N), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        nisa.dma_copy(dst=out[m * 128:(m + 1) * 128, :], src=res)
    return out


@nki.jit
def strips(x):
    """Vector work on strips of one tile, and a loop whose keys count down."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
    u = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    for i in nl.affine_range(8):
        nisa.tensor_scalar(dst=u[:, i * 64:i * 64 + 64], data=t[:, i * 64:i * 64 + 64], op0=nl.multiply, operand0=2.0)
    for i in nl.affine_range(8):
        j = 7 - i
        nisa.tensor_copy(dst=t[:, j * 64:(j + 1) * 64], src=u[:, nl.ds(i * 64, 64)])
    nisa.dma_copy(dst=out, src=t)
    return out


def test_a_matmul_stamped_records_and_schedules_what_it_runs(monkeypatch):
    lhsT, rhs = np.zeros((1024, 1024), np.float32), np.zeros((1024, 512), np.float32)
    assert same_both_ways(tiled_matmul, (lhsT, rhs), monkeypatch) > 0


def test_strips_and_descending_keys_stamp_exactly(monkeypatch):
    same_both_ways(strips, (np.zeros((128, 512), np.float32),), monkeypatch)


@nki.jit
def overrun(x):
    t = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(8):
        nisa.memset(dst=t[:, i * 96:i * 96 + 96], value=0.0)  # past the tile from i = 5
    return t


def test_an_iteration_out_of_bounds_raises_at_the_same_line(monkeypatch):
    from trnsim.core.errors import OutOfBoundsError
    got = []
    for stamped in (True, False):
        with pytest.raises(OutOfBoundsError) as e:
            run(overrun, (np.zeros((128, 512), np.float32),), monkeypatch, stamped)
        got.append(e.value.location)
    assert got[0] == got[1]


@nki.jit
def wraps(x, how: int):
    """A key that turns negative and wraps round: no straight line."""
    t = nl.ndarray((128, 16, 8), dtype=x.dtype, buffer=nl.sbuf)
    u = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    nisa.memset(dst=u, value=0.0)
    if how == 0:
        for i in nl.affine_range(8):
            nisa.tensor_tensor(dst=u, data1=u, data2=t[:, 5 - i, :], op=nl.add)
    elif how == 1:  # from i = 6 at k = 7 only, an iteration the inner loop stamps
        for i in nl.affine_range(8):
            for k in nl.affine_range(8):
                nisa.tensor_tensor(dst=u, data1=u, data2=t[:, 12 - i - k, :], op=nl.add)
    else:  # a numpy integer key: sliced afresh each time, out of the parts stamping watches
        for i in nl.affine_range(8):
            nisa.tensor_tensor(dst=u, data1=u, data2=t[:, (5 - i) * ONE, :], op=nl.add)
    return t


ONE = np.int64(1)


@pytest.mark.parametrize("how", [0, 1])
def test_a_key_that_wraps_round_is_run(monkeypatch, how):
    same_both_ways(wraps, (np.zeros((128, 512), np.float32), how), monkeypatch)


def test_a_key_stamping_cannot_follow_that_wraps_round_is_refused_by_name(monkeypatch):
    with pytest.raises(stamp.StampError, match="TRNSIM_FAST=0"):
        run(wraps, (np.zeros((128, 512), np.float32), 2), monkeypatch, True)


@nki.jit
def rotating(lhsT, rhs, n: int):
    """Two PSUM tiles an iteration in eight banks: from the second iteration the state repeats every four."""
    a = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
    b = nl.ndarray((128, 2, 512), dtype=rhs.dtype, buffer=nl.sbuf)
    out = nl.ndarray((128, n, 2, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=lhsT)
    for j in nl.affine_range(2):
        nisa.dma_copy(dst=b[:, j, :], src=rhs[:, j * 512:(j + 1) * 512])
    nisa.memset(dst=out, value=0.0)
    for i in nl.affine_range(n):
        for j in nl.affine_range(2):
            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=acc, stationary=a, moving=b[:, j, :])
            part = out[:, i, j, :]
            nisa.tensor_tensor(dst=part, data1=part, data2=acc, op=nl.add)
    result = nl.ndarray((128, n, 2, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=result, src=out)
    return result


@nki.jit
def rotating_read_after(lhsT, rhs, n: int):
    """`rotating` with its index read after the loop: the loop's last iteration runs."""
    a = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
    b = nl.ndarray((128, 1024), dtype=rhs.dtype, buffer=nl.sbuf)
    out = nl.ndarray((128, n, 1024), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=lhsT)
    nisa.dma_copy(dst=b, src=rhs)
    nisa.memset(dst=out, value=0.0)
    for i in nl.affine_range(n):
        for j in nl.affine_range(2):
            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=acc, stationary=a, moving=b[:, j * 512:(j + 1) * 512])
            nisa.tensor_copy(dst=out[:, i, j * 512:(j + 1) * 512], src=acc)
    nisa.memset(dst=out[:, i, 0:512], value=1.0)
    result = nl.ndarray((128, n, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=result, src=out)
    return result


@pytest.mark.parametrize("kernel, n", [(rotating, 13), (rotating, 17), (rotating_read_after, 14),
                                       (rotating_read_after, 18)])
def test_a_period_of_psum_tiles_is_foretold_exactly(monkeypatch, kernel, n):
    """Iteration a + p starts as iteration a did, so it records what a did a period on: stamped without running,
    and the loop's end run only where whole periods do not reach it (or the index is read after the loop). The
    same records and events as running every iteration, and more iterations stamped than where each phase is
    paired with an iteration run."""
    args = (np.zeros((128, 128), np.float32), np.zeros((128, 1024), np.float32), n)
    foretold, paired = stamped_both_ways(kernel, args, monkeypatch)
    assert foretold > paired > 0


def stamped_both_ways(kernel, args, monkeypatch) -> tuple:
    """(iterations stamped, those stamped where no iteration is foretold), each run the same as unstamped."""
    foretold = same_both_ways(kernel, args, monkeypatch)
    with monkeypatch.context() as m:
        m.setattr(stamp, "_foretold", lambda *a: None)
        m.setattr(stamp, "_fruitless", {})
        return foretold, same_both_ways(kernel, args, monkeypatch)


@nki.jit
def blocks(x, invariant: bool):
    """Blocks summed into one SBUF tile, then copied out: the copy reads the same part in every iteration, which
    the next iteration's memset writes first (so the hoisting memo never repeats it), or, `invariant`, a tile no
    iteration writes (hoisted from the second iteration on)."""
    n = x.shape[1] // 512
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    fixed = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=fixed, value=1.0)
    out = nl.ndarray((128, n * 512), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(n):
        nisa.memset(dst=acc, value=0.0)
        t = nl.ndarray((128, 4, 512), dtype=x.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(4):
            nisa.dma_copy(dst=t[:, k, :], src=x[:, i * 512:(i + 1) * 512])
            nisa.tensor_tensor(dst=acc, data1=acc, data2=t[:, k, :], op=nl.add)
        rows = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=rows, src=fixed if invariant else acc)
        nisa.dma_copy(dst=out[:, i * 512:(i + 1) * 512], src=rows)
    return out


def test_an_iteration_after_the_first_is_foretold_from_the_one_before(monkeypatch):
    """A loop whose first iteration starts elsewhere (nothing allocated yet) and whose state then repeats every
    iteration: the third iteration is stamped from the second, each part's step taken from the first to the
    second; a copy the hoisting memo could repeat, whose input the next iteration writes first, does not stop it."""
    foretold, paired = stamped_both_ways(blocks, (np.zeros((128, 8 * 512), np.float32), False), monkeypatch)
    assert foretold > paired > 0


@nki.jit
def parting(x, written):
    """Two loads of one part in the first iteration that part ways after it (one moves a strip an iteration,
    the other two strips). Unless `written`, the first iteration starts elsewhere (its tile not written yet);
    written before the loop, every iteration starts in one state and the template is the first iteration."""
    n = 8
    t = nl.ndarray((128, n, 3, 64), dtype=x.dtype, buffer=nl.sbuf)
    if written:
        nisa.memset(dst=t, value=0.0)
    for i in nl.affine_range(n):
        nisa.dma_copy(dst=t[:, i, 0, :], src=x[:, i * 64:i * 64 + 64])
        nisa.dma_copy(dst=t[:, i, 1, :], src=x[:, 2 * i * 64:2 * i * 64 + 64])
        nisa.dma_copy(dst=t[:, i, 2, :], src=x[:, i * 64:i * 64 + 64])
    out = nl.ndarray((128, n, 3, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_a_part_shared_in_one_iteration_and_parted_in_the_next_is_foretold_apart(monkeypatch):
    """The first iteration's loads share one part, which the second's read at two places: the iteration
    foretold from them moves each load by its own step (the same records and events as running it)."""
    foretold, paired = stamped_both_ways(parting, (np.zeros((128, 16 * 64), np.float32), False), monkeypatch)
    assert foretold > paired > 0


def _moves(t) -> list:
    """Per phase and record of template `t`, its moves with each slot written out (the placement, by identity,
    and its steps) and its moving signature: what stamping reads of them."""
    out = []
    for i, steps in enumerate(t.steps):
        slots = t.slots[i]
        for moves, sig in steps:
            out.append(([(k, name, id(px), d, o, q, id(slots[s][0]), slots[s][1:]) for k, name, px, d, o, q, s in moves],
                        sig))
    return out


@pytest.mark.parametrize("kernel, args", [(blocks, (np.zeros((128, 8 * 512), np.float32), False)),
                                          (parting, (np.zeros((128, 16 * 64), np.float32), False)), ("ladder", None)])
def test_a_foretold_iteration_is_paired_as_its_records_would_pair(monkeypatch, kernel, args):
    """For a period of one iteration, the foretelling makes no record but gives the template its parts' moves
    (`_Snap.given`): the same moves, record by record, as pairing the records it stands for (each of the
    iteration's before it with its moving parts where the moves take them) with the iteration before."""
    target = "trn2"
    if kernel == "ladder":  # (its outer loop foretold: records none of whose parts moves by offset)
        sys.path.insert(0, str(EXAMPLES))
        import matmul_ladder as ladder
        kernel, args = ladder.matmul_optimized, [np.zeros((2048, d), ladder.nl.bfloat16.np) for d in (2048, 8192)]
        target = "trn1"
    seen, proven = [], stamp._proven

    def both(nc, snaps, n, plan, a, p, start):
        ahead = snaps[a + p + 1]
        given = ahead.given
        if given is not None:
            end = n - 1 - (n - 1 - start) % p
            fast_t = stamp._template(nc, snaps, a, p, end)
            assert len(nc.stream) == snaps[a + p].length  # (no record made)
            for j, x in enumerate(nc.stream[snaps[a].length:snaps[a + 1].length]):
                placed = dict(x.placed)
                for move, py in zip(given[0][j], given[2][j], strict=True):
                    assert placed[move[1]] is move[2]
                    placed[move[1]] = py
                y = Record.__new__(Record)
                y.index, y.op, y.engine, y.placed, y.writes = len(nc.stream), x.op, x.engine, placed, x.writes
                y.attrs, y.location, y.sig, y._regions, y.site = x.attrs, x.location, x.sig, None, x.site
                y.hoisted, y.accumulated, y.spill = None, x.accumulated, None
                nc.stream.append(y)
            assert len(nc.stream) == ahead.length
            ahead.given = None
            try:
                slow_t = stamp._template(nc, snaps, a, p, end)
            finally:
                ahead.given = given
                del nc.stream[snaps[a + p].length:]
            assert type(fast_t) is type(slow_t) is stamp._Template
            seen.append((_moves(fast_t), _moves(slow_t), fast_t.onto, slow_t.onto))
        return proven(nc, snaps, n, plan, a, p, start)

    monkeypatch.setattr(stamp, "_proven", both)
    assert same_both_ways(kernel, args, monkeypatch, target) > 0
    assert seen
    for fast_moves, slow_moves, fast_onto, slow_onto in seen:
        assert fast_moves == slow_moves
        assert fast_onto == slow_onto


def test_a_part_the_template_shares_moves_by_each_records_own_step(monkeypatch):
    """The template's loads share one part, paired with parts a strip and two strips on: each stamp moves its
    load by its own step (the same records and events as running the iterations)."""
    x = (np.zeros((128, 16 * 64), np.float32), True)
    a = run(parting, x, monkeypatch, True)
    assert a[3] > 0
    assert same_both_ways(parting, x, monkeypatch) == a[3]


@nki.jit
def copied_out(x, runs: int, written: bool):
    """Rows of one tile copied out one strip an iteration (the store loop of a blocked matmul), in `runs` runs of
    an outer loop: a run after the first repeats each copy of the first, hoisted onto it, unless the tile is
    written between them (`written`)."""
    n = x.shape[1] // 64
    block = nl.ndarray((128, n, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=block, src=x)
    out = nl.ndarray((runs, 128, n * 64), dtype=nl.float32, buffer=nl.shared_hbm)
    for r in nl.affine_range(runs):
        if written:
            nisa.memset(dst=block, value=1.0)
        for j in nl.affine_range(n):
            rows = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=rows, src=block[:, j, :])
            nisa.dma_copy(dst=out[r, :, j * 64:(j + 1) * 64], src=rows)
    return out


@pytest.mark.parametrize("runs, written", [(1, False), (2, False), (2, True), (5, False)])
def test_a_copy_whose_input_moves_is_stamped_leaving_the_hoisting_memo_as_running_does(monkeypatch, runs, written):
    """The copy reads another strip in every iteration, so no iteration repeats another's; the memo entries the
    stamped iterations leave are left, so that a later run is hoisted onto them as it is when every iteration
    runs (record by record, event by event)."""
    stamped = same_both_ways(copied_out, (np.zeros((128, 16 * 64), np.float32), runs, written), monkeypatch)
    assert stamped > 0


@nki.jit
def chained(x, runs: int, inside: bool):
    """A loop-invariant copy of one strip, hoisted from the second iteration on, added to another strip in every
    iteration: the add's memo entry names the first copy's result, so a later run of the outer loop is hoisted
    onto the first run's adds, unless the tile is loaded again in each run (`inside`)."""
    n = x.shape[1] // 64
    out = nl.ndarray((runs, 128, n * 64), dtype=nl.float32, buffer=nl.shared_hbm)
    block = nl.ndarray((128, n, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=block, src=x)
    for r in nl.affine_range(runs):
        if inside:
            block = nl.ndarray((128, n, 64), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=block, src=x)
        for j in nl.affine_range(n):
            first = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=first, src=block[:, 0, :])
            rows = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=rows, data1=first, data2=block[:, j, :], op=nl.add)
            nisa.dma_copy(dst=out[r, :, j * 64:(j + 1) * 64], src=rows)
    return out


@pytest.mark.parametrize("runs, inside", [(2, False), (3, False), (2, True)])
def test_an_instruction_reading_a_hoisted_result_leaves_the_hoisting_memo_as_running_does(monkeypatch, runs, inside):
    """Where a later run of the outer loop repeats the hoisted copy, its adds are hoisted onto the first run's,
    stamped or not; where each run loads its own tile, nothing is repeated across runs and the loop stamps."""
    x = np.zeros((128, 16 * 64), np.float32)
    hoisted = [r[9] is not None for r in run(chained, (x, runs, inside), monkeypatch, False)[0]]
    stamped = same_both_ways(chained, (x, runs, inside), monkeypatch)
    assert sum(hoisted) == (runs * 15 if inside else 15 + (runs - 1) * 32)  # copies; adds of the later runs
    if inside:
        assert stamped > 0


def test_a_period_holding_a_hoisted_record_is_not_foretold(monkeypatch):
    """A loop-invariant copy is hoisted from the second iteration on: the hoisting memo, outside the state,
    decides that, so the template is paired with an iteration run."""
    args = (np.zeros((128, 9 * 512), np.float32), True)  # nine: foretelling would run fewer iterations
    original, refused = stamp._unhoisted, []
    monkeypatch.setattr(stamp, "_unhoisted", lambda *a: refused.append(not original(*a)) or not refused[-1])
    assert same_both_ways(blocks, args, monkeypatch) > 0
    assert any(refused)  # the outer loop's (its inner loops hold no such copy)


@pytest.mark.parametrize("name", ["matmul_tiled", "matmul_hoisted", "matmul_blocked", "matmul_optimized"])
def test_the_matmul_ladder_stamped(monkeypatch, name):
    sys.path.insert(0, str(EXAMPLES))
    import matmul_ladder as ladder
    args = ladder.inputs(M=512, N=1024, K=1024, seed=0)
    same_both_ways(getattr(ladder, name), args, monkeypatch, target="trn1")


def test_the_optimised_ladder_step_stamps_its_nested_loops(monkeypatch):
    """Loops whose bodies hold loops are stamped whole; inner ones whose state repeats every few iterations
    (PSUM banks taken in turn, double-buffered tiles) are stamped a period at a time."""
    sys.path.insert(0, str(EXAMPLES))
    import matmul_ladder as ladder
    args = [np.zeros((8192, d), ladder.nl.bfloat16.np) for d in (4096, 1024)]
    assert same_both_ways(ladder.matmul_optimized, args, monkeypatch, target="trn1") >= 8


@pytest.mark.parametrize("example", ["rmsnorm", "mamba"])
def test_examples_stamped(monkeypatch, shim_as_found, example):
    from trnsim import shim
    shim.install()  # rmsnorm imports `nki` as on a Trainium
    sys.path.insert(0, str(EXAMPLES))
    mod = __import__(example)
    if example == "mamba":
        same_both_ways(mod.mamba_v3, [np.zeros(x.shape, np.float32) for x in mod.inputs(256, 512, state=4)], monkeypatch)
        # its state loop: keys built by slice(), a helper branching on a row's width, activation and scan
        for kernel in (mod.mamba_v1, mod.mamba_v2):  # v2's delta * u hoisted out of its state loop
            assert same_both_ways(kernel, [np.zeros(x.shape, np.float32) for x in mod.inputs(256, 512, state=16)],
                                  monkeypatch, target="trn1") > 0
        for kernel in (mod.mamba_v2, mod.mamba_v3):  # channel loops stamped whole, hoisted onto their own iteration
            assert same_both_ways(kernel, [np.zeros(x.shape, np.float32) for x in mod.inputs(1024, 1024, state=8)],
                                  monkeypatch, target="trn1") > 0
    else:
        same_both_ways(mod.rmsnorm, mod.inputs(), monkeypatch)


# -- bodies stamping must run ---------------------------------------------------------------------------------
@nki.jit
def refusals(x, which: int):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    n = 0
    if which == 0:  # an address from data: a Python list indexed by the loop index
        for i in nl.affine_range(8):
            nisa.tensor_copy(dst=t[:, OFFSETS[i] * 64:OFFSETS[i] * 64 + 64], src=t[:, 0:64])
    elif which == 1:  # a body that branches on the index
        for i in nl.affine_range(8):
            if i % 3:
                nisa.tensor_copy(dst=t[:, i * 64:i * 64 + 64], src=t[:, 0:64])
            else:
                nisa.memset(dst=t[:, i * 64:i * 64 + 64], value=0.0)
    elif which == 2:  # a key that is no affine function of the index
        for i in nl.affine_range(8):
            nisa.tensor_copy(dst=t[:, i * i:i * i + 8], src=t[:, 0:8])
    elif which == 3:  # a value carried from one iteration to the next
        for i in nl.affine_range(8):
            n = n + 1
            nisa.tensor_copy(dst=t[:, n * 8:n * 8 + 8], src=t[:, 0:8])
    elif which == 4:  # a function of the kernel's own that branches on the index
        for i in nl.affine_range(8):
            _copy_odd(t, i)
    elif which == 5:  # an inner loop whose step the index sets
        for i in nl.affine_range(8):
            for k in nl.affine_range(2):
                nisa.tensor_copy(dst=t[:, i * k * 8:i * k * 8 + 8], src=t[:, 0:8])
    elif which == 6:  # an attribute that changes with the index
        for i in nl.affine_range(8):
            nisa.memset(dst=t[:, i * 64:i * 64 + 64], value=i * 1.0)
    elif which == 7:  # views picked from a list by the index: no tensor's part at an affine key
        strips = [t[:, k * 64:k * 64 + 64] for k in OFFSETS]
        for i in nl.affine_range(8):
            nisa.tensor_copy(dst=strips[i], src=t[:, 0:64])
    elif which == 8:  # an inner loop whose length the index reaches (here the same: the rule reads the code)
        for i in nl.affine_range(8):
            for k in nl.affine_range(2 + i - i):
                nisa.tensor_copy(dst=t[:, k * 8:k * 8 + 8], src=t[:, 0:8])
    nisa.dma_copy(dst=out, src=t)
    return out


def _copy_odd(t, i):
    if i % 2:
        nisa.tensor_copy(dst=t[:, i * 64:i * 64 + 64], src=t[:, 0:64])


@pytest.mark.parametrize("which", range(9))
def test_a_body_that_cannot_be_proven_runs(monkeypatch, which):
    assert same_both_ways(refusals, (np.zeros((128, 512), np.float32), which), monkeypatch) == 0


# -- the kernel's own functions called from a body ------------------------------------------------------------
def _rows(t, i):
    """A part at a key computed from the argument: the index reaches it through the call."""
    return t[i * 128:(i + 1) * 128, :]


def _tile():
    return nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)


def _scaled(dst, src, k=2.0):
    nisa.tensor_scalar(dst=dst, data=src, op0=nl.multiply, operand0=k)


def _pass(x, out, i):
    """Calls of calls: a block loaded into a tile made here, scaled into another, stored."""
    w = _tile()
    nisa.dma_copy(dst=w, src=_rows(x, i))
    v = _tile()
    _scaled(v, w)
    nisa.dma_copy(dst=_rows(out, i), src=v)


def _shifted(t, i):
    """A global read, never written while the loop runs."""
    return t[(i + SHIFT[0]) * 128:(i + SHIFT[0] + 1) * 128, :]


SHIFT = [0]


@nki.jit
def own_functions(x, which: int):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    if which == 0:
        for i in nl.affine_range(8):
            _pass(x, out, i)
    elif which == 1:  # arguments by keyword, a descending key
        for i in nl.affine_range(8):
            w = _tile()
            nisa.dma_copy(dst=w, src=_rows(x, 7 - i))
            v = _tile()
            _scaled(dst=v, src=w, k=3.0)
            nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=v)
    elif which == 2:
        for i in nl.affine_range(8):
            w = _tile()
            nisa.dma_copy(dst=w, src=_shifted(x, i))
            nisa.dma_copy(dst=_rows(out, i), src=w)
    else:  # `_pass` written out
        for i in nl.affine_range(8):
            w = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=w, src=x[i * 128:(i + 1) * 128, :])
            v = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=v, data=w, op0=nl.multiply, operand0=2.0)
            nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=v)
    return out


@pytest.mark.parametrize("which", range(3))
def test_a_body_calling_the_kernels_own_functions_stamps_exactly(monkeypatch, which):
    assert same_both_ways(own_functions, (np.zeros((1024, 64), np.float32), which), monkeypatch) > 0


def test_own_functions_stamp_what_the_same_body_written_out_stamps(monkeypatch):
    x = np.zeros((1024, 64), np.float32)
    assert same_both_ways(own_functions, (x, 0), monkeypatch) == same_both_ways(own_functions, (x, 3), monkeypatch)
    args = (np.zeros((1024, 1024), np.float32), np.zeros((1024, 512), np.float32))
    assert same_both_ways(tiled_matmul_own, args, monkeypatch) == same_both_ways(tiled_matmul, args, monkeypatch) > 0


def _load_blocks(a, b, lhsT, rhs, m, k):
    nisa.dma_copy(dst=a[:, k, :], src=lhsT[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
    nisa.dma_copy(dst=b[:, k, :], src=rhs[k * 128:(k + 1) * 128, :])


def _product(a, b, K, N):
    acc = nl.ndarray((128, N), dtype=nl.float32, buffer=nl.psum)
    for k in nl.sequential_range(K // 128):
        nisa.nc_matmul(dst=acc, stationary=a[:, k, :], moving=b[:, k, :])
    res = nl.ndarray((128, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    return res


@nki.jit
def tiled_matmul_own(lhsT, rhs):
    """tiled_matmul with its loads and its accumulation in functions of its own."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        a = nl.ndarray((128, K // 128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
        b = nl.ndarray((128, K // 128, N), dtype=rhs.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(K // 128):
            _load_blocks(a, b, lhsT, rhs, m, k)
        nisa.dma_copy(dst=out[m * 128:(m + 1) * 128, :], src=_product(a, b, K, N))
    return out


COUNT = 0


def _append(seen, x, out, i):
    seen.append(i)
    _pass(x, out, i)


def _counted(x):
    """Writes a global: a count kept from one call to the next."""
    global COUNT
    COUNT = COUNT + 1
    return x[(COUNT - 1) * 128:COUNT * 128, :]


def _next(prev, x, i):
    """Returns the tile the next call adds to."""
    w = _tile()
    nisa.dma_copy(dst=w, src=_rows(x, i))
    new = _tile()
    nisa.tensor_tensor(dst=new, data1=prev, data2=w, op=nl.add)
    return new


def _remembering(x, out, i, memo=[]):
    memo.append(i)
    _pass(x, out, i)


def _closure():
    kept = []

    def copy(x, out, i):
        kept.append(i)
        _pass(x, out, i)
    return copy


_with_state = _closure()


def _odd(x, out, i):
    if i % 2:
        _pass(x, out, i)


@nki.jit
def own_refusals(x, which: int):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    if which == 0:  # a list mutated
        seen = []
        for i in nl.affine_range(8):
            _append(seen, x, out, i)
    elif which == 1:  # a global written and read
        global COUNT
        COUNT = 0
        for i in nl.affine_range(8):
            w = _tile()
            nisa.dma_copy(dst=w, src=_counted(x))
            nisa.dma_copy(dst=_rows(out, i), src=w)
    elif which == 2:  # a tile returned and added to by the next call
        prev = _tile()
        nisa.memset(dst=prev, value=0.0)
        for i in nl.affine_range(8):
            prev = _next(prev, x, i)
    elif which == 3:  # a mutable default
        for i in nl.affine_range(8):
            _remembering(x, out, i)
    elif which == 4:  # a closure over a list
        for i in nl.affine_range(8):
            _with_state(x, out, i)
    elif which == 5:  # a branch on the index
        for i in nl.affine_range(8):
            _odd(x, out, i)
    return out


@pytest.mark.parametrize("which", range(6))
def test_own_functions_that_keep_state_or_branch_are_run(monkeypatch, which):
    assert same_both_ways(own_refusals, (np.zeros((1024, 64), np.float32), which), monkeypatch) == 0
    if which == 1:
        assert COUNT == 8  # every call ran


def _rows_branching(t, i):
    if i % 2:
        return t[i * 128:(i + 1) * 128, :]
    return t[i * 128:(i + 1) * 128, :]


def test_a_function_rebound_between_runs_is_analysed_again(monkeypatch):
    x = np.zeros((1024, 64), np.float32)
    assert same_both_ways(own_functions, (x, 2), monkeypatch) > 0
    monkeypatch.setattr(sys.modules[__name__], "_rows", _rows_branching)
    assert same_both_ways(own_functions, (x, 2), monkeypatch) == 0


def _loops(kernel) -> list:
    """What the analysis of the bytecode says of each loop of a kernel's body, in order."""
    import dis
    code = kernel.fn.__code__
    return [stamp._analyse(code, i.offset, kernel.fn.__globals__) for i in dis.get_instructions(code)
            if i.opname == "FOR_ITER"]


def test_the_bytecode_rules_decide_which_calls_qualify():
    """The refusals above come from the analysis of the functions' code, not from the records."""
    assert all(got is False for got in _loops(own_refusals))
    assert all(got is not False for got in _loops(own_functions))


def test_values_and_the_reference_stamp_nothing(monkeypatch):
    """Stamping is for timing-only runs with the speed layer on: with values, or with TRNSIM_FAST=0, a core runs
    every iteration of its loops."""
    from trnsim.core import NeuronCore
    r = range(8)
    nc = NeuronCore("trn2", values=True, builder=fast.builder(launch=True))
    assert nc.builder.loop(nc, r) is r
    nc = NeuronCore("trn2", values=False, builder=fast.builder(launch=True))
    assert nc.builder.loop(nc, r) is not r
    assert nc.builder.loop(nc, range(3)) == range(3)  # too short to gain
    monkeypatch.setenv("TRNSIM_FAST", "0")
    nc = NeuronCore("trn2", values=False, builder=fast.builder(launch=True))
    assert nc.builder.loop(nc, r) is r


def test_a_long_process_stamps_its_later_kernels(monkeypatch):
    """The layout tables fill over many launches: a launch finding them past half starts them again, and its
    loops are stamped as the first launch's were."""
    from trnsim.core.fast import views
    lhsT, rhs = np.zeros((1024, 1024), np.float32), np.zeros((1024, 512), np.float32)
    first = same_both_ways(tiled_matmul, (lhsT, rhs), monkeypatch)
    for n in range(views._LAYOUTS_MAX // 2 + 1 - len(views._LAYOUTS)):
        views.layout_number(("filler", n))
    assert len(views._LAYOUTS) > views._LAYOUTS_MAX // 2
    assert same_both_ways(tiled_matmul, (lhsT, rhs), monkeypatch) == first > 0
    assert len(views._LAYOUTS) < views._LAYOUTS_MAX // 2


# -- branches fixed for the whole loop, keys built by slice(), parts' layouts read ----------------------------
def _load_like(src):
    """A tile shaped as the part it loads: the part's layout read in the body."""
    t = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src)
    return t


def _wide_or_narrow(src, limit):
    """Branches on the width of a part the index moves (fixed: every key stays inside its tensor)."""
    n = src.shape[1]
    t = _load_like(src)
    if n <= limit:
        u = nl.ndarray((128, n), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=u, op=nl.exp, data=t, scale=2.0)
        return u
    u = nl.ndarray((128, n), dtype=nl.float32, buffer=nl.sbuf)
    for lo in range(0, n, limit):
        nisa.tensor_scalar(dst=u[:, lo:lo + limit], data=t[:, lo:lo + limit], op0=nl.multiply, operand0=2.0)
    return u


@nki.jit
def forms(x, which: int, flag: bool = True):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    if which == 0:  # keys built by slice(): index arithmetic
        for i in nl.affine_range(8):
            rows = slice(i * 128, (i + 1) * 128)
            w = _load_like(x[rows, :])
            nisa.dma_copy(dst=out[rows, :], src=w)
    elif which == 1:  # a branch on an argument: the same way in every iteration
        for i in nl.affine_range(8):
            w = _load_like(x[i * 128:(i + 1) * 128, :])
            if flag and x.shape[1] == 64:
                nisa.tensor_scalar(dst=w, data=w, op0=nl.multiply, operand0=3.0)
            else:
                nisa.tensor_copy(dst=w, src=w)
            nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=w)
    elif which == 2:  # a function of the kernel's branching on a part's width, both ways
        for i in nl.affine_range(8):
            u = _wide_or_narrow(x[i * 128:(i + 1) * 128, 0:32], 32 if flag else 16)
            nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, 0:32], src=u)
    elif which == 4:  # a loop-invariant product the compiler computes once: its later instances hoisted
        a = _load_like(x[0:128, :])
        b = _load_like(x[128:256, :])
        for i in nl.affine_range(8):
            d = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=d, data1=a, data2=b, op=nl.multiply)
            w = _load_like(x[i * 128:(i + 1) * 128, :])
            nisa.tensor_tensor(dst=w, data1=w, data2=d, op=nl.add)
            nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=w)
    elif which == 5:  # a branch on an inner loop's index: its iterations take different ways, the same in each
        for i in nl.affine_range(8):
            w = _load_like(x[i * 128:(i + 1) * 128, :])
            for k in nl.affine_range(3):
                if k == 1:
                    v = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=v, src=w)
                else:
                    v = w
                nisa.tensor_scalar(dst=w, data=v, op0=nl.multiply, operand0=2.0)
            nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=w)
    else:  # activation, scan and memset on parts the index moves, a sum carried in a tile (not a name)
        t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=1.0)
        for i in nl.affine_range(8):
            cols = slice(i * 64, (i + 1) * 64)
            e = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=e, op=nl.exp, data=t[:, cols], scale=0.5)
            h = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor_scan(dst=h, data0=e, data1=t[:, cols], initial=0.0, op0=nl.multiply, op1=nl.add)
            nisa.memset(dst=t[:, cols], value=0.0)
            nisa.tensor_tensor(dst=acc, data1=acc, data2=h, op=nl.add)
        nisa.dma_copy(dst=out[0:128, :], src=acc)
    return out


@pytest.mark.parametrize("which,flag", [(0, True), (1, True), (1, False), (2, True), (2, False), (3, True), (4, True),
                                        (5, True)])
def test_fixed_branches_slices_and_layouts_read_stamp_exactly(monkeypatch, which, flag):
    assert same_both_ways(forms, (np.zeros((1024, 64), np.float32), which, flag), monkeypatch) > 0


@nki.jit
def layout_refusals(x, which: int):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
    u = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    nisa.memset(dst=u, value=0.0)
    if which == 0:  # a part's width read where its key turns negative and wraps round (16 wide, then empty)
        for i in nl.affine_range(8):
            part = t[:, 8 - 4 * i:24 - 4 * i]
            if part.shape[1] == 16:
                nisa.memset(dst=u[:, 0:16], value=0.0)
            else:
                nisa.tensor_copy(dst=u[:, 0:16], src=u[:, 16:32])
    elif which == 1:  # a branch on a tile's place, which changes from one iteration to the next
        for i in nl.affine_range(8):
            w = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
            nisa.memset(dst=w, value=0.0)
            if w.offset:
                nisa.tensor_copy(dst=u, src=w)
    elif which == 2:  # a branch on a name set in an earlier iteration
        seen = False
        for i in nl.affine_range(8):
            if seen:
                nisa.tensor_copy(dst=u, src=t[:, i * 64:(i + 1) * 64])
            seen = True
    elif which == 3:  # a name one way of a branch on an inner loop's index stores and the other reads
        w = u
        for i in nl.affine_range(8):
            for k in nl.affine_range(2):
                if k:
                    nisa.tensor_copy(dst=w, src=t[:, i * 64:(i + 1) * 64])
                else:
                    w = t[:, i * 64:(i + 1) * 64]
    nisa.dma_copy(dst=out[0:128, :], src=u)
    return out


@pytest.mark.parametrize("which", range(4))
def test_branches_that_may_change_between_iterations_run(monkeypatch, which):
    assert same_both_ways(layout_refusals, (np.zeros((1024, 64), np.float32), which), monkeypatch) == 0


KEYS = [  # (key, step as `_key_step` gives it): ints, slices with and without bounds, steps up, down and none
    (3, (2,)), (slice(0, 128), ((0, 0),)), (slice(64, 128), ((64, 64),)), (slice(None, 64), ((None, 32),)),
    (slice(16, None), ((-8, None),)), (slice(None, None), ((None, None),)), ((slice(0, 128), 5), ((0, 0), -1)),
    ((7, slice(512, 1024), slice(None, 3)), (1, (-512, -256), (None, 2))), ((slice(-4, 8),), ((3, 3),)),
]


@pytest.mark.parametrize("key, step", KEYS)
def test_keys_moved_from_their_parts_are_the_keys_moved(key, step):
    """`_key_from` (the key a stamp notes for the loops outside, from `_key_parts`) gives `_key_at`'s key at every
    step: the same numbers, ints and slices alike."""
    parts, single = stamp._key_parts(key, step), type(key) is not tuple
    for t in (-3, 0, 1, 2, 17):
        got, want = stamp._key_from(parts, single, t), stamp._key_at(key, step, t)
        assert type(got) is type(want) and got == want
        if not single:
            assert [type(x) for x in got] == [type(x) for x in want]


def _placement(place, off, poff, span=None):
    return (place, "bfloat16", (128, 512), (1, 1), off, poff, True, False, span)


def _moved_by_hand(px, step, dtile, doff, dpoff):
    """A placement moved `step` steps, written out: its tile number, offset, span and partition offset."""
    place, off, poff, span = px[0], px[4], px[5], px[8]
    place = place[:5] + (place[5] + dtile * step,)
    if span is not None:
        span = (span[0] + doff * step, span[1] + doff * step, span[2])
    return (place,) + px[1:4] + (off + doff * step, poff + dpoff * step) + px[6:8] + (span,)


def test_moved_slots_are_the_placements_moved_one_place_a_tile():
    """`_moved_slots` and `_moved` move each placement of a template by its steps, and parts of one tile share
    its moved place (one object an iteration, not one a part)."""
    tile = ("sbuf", 0, 0, 4096, 1024, 300)
    other = ("psum", 1, 0, 2048, 2048, 40)
    slots = [(_placement(tile, 0, 0), 2, 0, 0), (_placement(tile, 64, 0, (64, 127, 1)), 2, 128, 0),
             (_placement(other, 0, 0), 0, 512, 32), (_placement(other, 8, 4), 3, 0, 0),
             (_placement(("sbuf", 0, 0, 4096, 1024, 300), 32, 0), 2, 0, 0)]  # tile's place again, its own object
    movers = stamp._movers(slots)
    for step in (0, 1, 5):
        got = stamp._moved_slots(movers, step)
        want = [_moved_by_hand(px, step, dtile, doff, dpoff) for px, dtile, doff, dpoff in slots]
        assert got == want
        assert [stamp._moved(px, step, dtile, doff, dpoff) for px, dtile, doff, dpoff in slots] == want
        assert got[0][0] is got[1][0]  # one tile's place, moved once
        assert got[2][0] is slots[2][0][0]  # a part whose tile stays keeps its place
        assert got[3][0] is not got[2][0]  # another tile step: another place


def test_a_replay_plan_names_each_place_placement_and_dict_once():
    """`_plan_of` finds a kept run's places, placements, placement dicts and attributes by identity (records sharing
    one share its position; places only notes name come after the records' own), and `_with_place` gives each
    tuple with a new first item, as slicing and joining it would."""
    from trnsim.core.isa.registry import Record
    from trnsim.core.isa.opcodes import Op
    a, b, c = ("sbuf", 0, 0, 4096, 1024, 7), ("psum", 1, 0, 2048, 2048, 3), ("sbuf", 0, 0, 4096, 1024, 9)
    qa, qb = _placement(a, 0, 0), _placement(b, 64, 0, (64, 127, 1))
    shared, attrs = {"dst": qb, "src": qa}, {"op": "add"}
    recs = [Record(0, Op.TENSOR_COPY, None, shared, ("dst",), attrs, "k.py:1"),
            Record(1, Op.TENSOR_COPY, None, {"dst": _placement(a, 0, 0), "src": qa}, ("dst",), {"op": "add"}, "k.py:2"),
            Record(2, Op.TENSOR_COPY, None, shared, ("dst",), attrs, "k.py:1")]
    notes = [((a, "bfloat16", (128, 512), (1, 1), 0, 0), (a,) + tuple(range(11))),
             ((c, "bfloat16", (128, 512), (1, 1), 0, 0), (c,) + tuple(range(11)))]
    places, ours, qs, dicts, kept_attrs, rows, marks = stamp._plan_of(recs, notes)
    assert places == [b, a, c] and ours == 2 and places[0] is b and places[1] is a and places[2] is c
    assert [q for q, _ in qs] == [qb, qa, recs[1].placed["dst"]] and [k for _, k in qs] == [0, 1, 1]
    assert qs[2][0] is recs[1].placed["dst"]  # another placement object of the same place: its own position
    assert [d for d, _ in dicts] == [shared, recs[1].placed] and dicts[0][0] is shared
    assert dicts[0][1] == (("dst", 0), ("src", 1)) and dicts[1][1] == (("dst", 2), ("src", 1))
    assert kept_attrs[0] is attrs and kept_attrs[1] is recs[1].attrs and rows == [(0, 0), (1, 1), (0, 0)]
    assert marks == [(1, 1), (2, 2)]
    new = ("sbuf", 2, 0, 4096, 1024, 11)
    for q in (qa, qb, notes[0][0], notes[0][1], a, (a, 1)):
        got = stamp._with_place(q, new)
        assert got == (new,) + q[1:] and got[0] is new


def test_watch_notes_what_running_would_note():
    """`_watch` appends for each proven key the part's layout and its tensor's, with the key moved to the
    iteration: what views.WATCH holds after running it (the entry `_key_at` gives)."""
    place = ("sbuf", 0, 0, 4096, 1024, 300)
    placed = {"dst": _placement(place, 640, 0), "src": _placement(place, 0, 0)}
    layout = ("bfloat16", (128, 2048), (1, 1), 0, 0, True)
    key, step = (slice(None, None), slice(512, 1024)), ((None, None), (128, 128))
    notes = (("dst", "bfloat16", layout, False, stamp._key_parts(key, step), 4),)
    got = []
    stamp._watch(got, notes, 9, placed)
    q = placed["dst"]
    assert got == [((place, "bfloat16", q[2], q[3], 640, 0),
                    (place, *layout, stamp._key_at(key, step, 5), q[2], q[3], 640, 0))]


@nki.jit
def repeated_runs(x):
    """Runs of one loop that start in the same state from run 1 on (the last PSUM tile of the one before still
    held by its name), each on a new tile at the same place: runs 1 and 2 read different steps (run 2, which
    starts as run 1 did, must not be recorded as run 1 was), run 3 run 2's; run 2 in an `nl.no_reorder()` block
    (its records alone marked)."""
    out = nl.ndarray((128, 8192), dtype=nl.float32, buffer=nl.shared_hbm)
    res = nl.ndarray((128, 8192), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=res, value=0.0)
    for r in range(4):
        src = nl.ndarray((128, 8192), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=src, src=x)
        w = 128 if r < 2 else 256
        with nl.no_reorder() if r == 2 else contextlib.nullcontext():
            for i in nl.affine_range(16):
                for h in nl.affine_range(2):
                    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
                    nisa.nc_matmul(dst=acc, stationary=src[:, nl.ds(h * 128, 128)],
                                   moving=src[:, nl.ds(i * w + h * 64, 512)])
                    part = res[:, nl.ds(i * 512, 512)]
                    nisa.tensor_tensor(dst=part, data1=part, data2=acc, op=nl.add)
        del src
    nisa.dma_copy(dst=out, src=res)
    return out


def test_a_later_run_of_a_loop_is_recorded_as_an_earlier_one_where_it_reads_the_same(monkeypatch):
    """A run that starts in the state an earlier one started in, its body reading the same values but for the
    tensors' tiles (each at the same place), records the earlier run's records renumbered; one reading another
    step runs (and both equal a run without stamping)."""
    x = np.zeros((128, 8192), nl.bfloat16.np)
    replayed = same_both_ways(repeated_runs, (x,), monkeypatch)
    monkeypatch.setattr(stamp, "REPLAYS", 0)
    assert replayed > same_both_ways(repeated_runs, (x,), monkeypatch)  # run 3 recorded whole



def _stored(dst, src):
    """A function of the kernel's that returns nothing (CPython 3.12 on: RETURN_CONST)."""
    nisa.dma_copy(dst=dst, src=src)


@nki.jit
def spelled(x, which: int, flag: bool = True):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
    if which == 0:  # what CPython 3.12 and 3.13 spell in their own instructions
        for i in nl.affine_range(8):
            lo, hi = i * 128, (i + 1) * 128  # 3.13: STORE_FAST_STORE_FAST
            w = _load_like(x[lo:hi])  # 3.12: BINARY_SLICE
            if not flag or x.shape[1] != 64:  # 3.13: TO_BOOL
                nisa.tensor_copy(dst=w, src=w)
            _stored(out[lo:hi], w)
    else:  # the index read after the loop only by an exception handler
        for i in nl.affine_range(8):
            nisa.memset(dst=t[:, i * 64:(i + 1) * 64], value=0.0)
        try:
            raise ValueError
        except ValueError:
            nisa.memset(dst=t[:, i * 64:(i + 1) * 64], value=1.0)
        nisa.dma_copy(dst=out[0:128, :], src=t[:, 0:64])
    return out


@pytest.mark.parametrize("which,flag", [(0, True), (0, False), (1, True)])
def test_each_pythons_spellings_stamp_exactly(monkeypatch, which, flag):
    """Single slices, tuple assignments, `not`/`or` branches and a function returning nothing stamp as the same
    body spelled otherwise does; a local read after the loop by a handler keeps the last iteration running."""
    assert same_both_ways(spelled, (np.zeros((1024, 64), np.float32), which, flag), monkeypatch) > 0


def test_each_python_reads_the_same_analysis_of_a_body():
    """The instructions of CPython 3.12 and 3.13, said in 3.11's words, give the analysis 3.11's gives (written
    out here): the calls and the names the keys index, whether the body's locals are dead after the loop, whether
    a part's layout is read, the names read from before the loop."""
    first, second = _loops(spelled)
    assert first[:3] + first[4:6] == ((("nisa", "tensor_copy"),), (("name", "out"), ("name", "x")), True, True,
                                      ("flag", "out", "x"))
    assert {name for _, name, _ in first[3]} == {"nl", "nisa", "_load_like", "_stored"}
    assert second[:3] + second[4:6] == ((("nisa", "memset"),), (("name", "t"),), False, False, ("t",))


def test_tile_steps_of_places_are_those_the_rule_gives():
    """`_made_in` (tile numbers asked before whole places) against the rule written out: the same tile made before
    the iteration moves 0, two tiles made in their iterations, of one size in one memory, move a period's tiles."""
    def before(q, f):
        return q[5] < 0 or q[5] < (f[0] if q[0] == "sbuf" else f[1])

    def rule(qa, qb, fresh, later, dtiles):
        if qa == qb:
            return 0 if before(qa, fresh) else None
        if qa[0] != qb[0] or qa[4] != qb[4] or before(qa, fresh) or before(qb, later):
            return None
        return dtiles[0] if qa[0] == "sbuf" else dtiles[1]

    fresh, later, dtiles = (10, 4), (13, 6), (3, 2)
    places = [(mem, serial, p0, 0, nbytes, tile) for mem in ("sbuf", "psum") for serial in (0, 1) for p0 in (0, 32)
              for nbytes in (512, 1024) for tile in (-1, 2, 10, 11, 13, 14, 4, 6)]
    for qa in places:
        for qb in places:
            for q in (qb, tuple(list(qb))):  # the same place, and an equal one
                assert stamp._made_in(qa, q, fresh, later, dtiles) == rule(qa, q, fresh, later, dtiles), (qa, q)


def test_a_hoistable_record_is_forgotten_only_by_a_write_of_a_tile_it_reads():
    """`_forgotten` over a period whose records of each op come in runs: a pure copy reading a tile made before
    the loop is an entry the hoisting memo keeps unless a record after it, before its line comes round again,
    writes that tile."""
    from trnsim.core.isa.opcodes import Engine, Op
    from trnsim.core.isa.registry import Record

    def place(tile):
        return ("sbuf", 0, 0, 0, 512, tile)

    def rec(op, engine, line, dst, src):
        r = Record.__new__(Record)
        r.op, r.engine, r.writes, r.location, r.hoisted, r.spill = op, engine, ("dst",), ("k.py", line), None, None
        r.placed = {name: (place(t), nl.float32, (128, 4), (4, 1), 0, 0, True, False, None)
                    for name, t in (("dst", dst), ("src", src))}
        return r

    def load(dst):
        return rec(Op.DMA_COPY, Engine.SYNC, 1, dst, -1)

    def copy(line, dst, src):
        return rec(Op.TENSOR_COPY, Engine.VECTOR, line, dst, src)

    fresh = [(10, 10)]  # tiles numbered below 10 were made before the iteration
    kept = [load(11), load(12), copy(2, 13, 0), copy(3, 14, 1), load(15), copy(4, 16, 0)]
    assert stamp._hoistable(kept[2], fresh[0]) and not stamp._hoistable(kept[0], fresh[0])
    assert not stamp._forgotten(kept, [len(kept)], fresh)  # nothing writes tiles 0 and 1
    written = [load(11), load(12), copy(2, 13, 0), copy(3, 14, 1), load(0), load(1), copy(4, 16, 0), load(0)]
    assert stamp._forgotten(written, [len(written)], fresh)
    unwritten = written[:5] + written[6:]  # tile 1 (line 3's) no longer written
    assert not stamp._forgotten(unwritten, [len(unwritten)], fresh)
