"""`kernel.with_schedule(edges)`: edges between instructions named with `name=` (nki/guides/how-to-scheduling-
apis.rst), kept as `depends_on` edges are. They are schedule edges unless `kind=nki.isa.dependency.runtime`: on one
engine the consumer follows the producer, across engines they may overlap. Times are worked by hand on trn1 as in
test_depends_on.py: GpSimd sets N fp32 elements in N cycles at 1.4 GHz, VectorE copies N in N cycles at 1.12 GHz
plus 100 static cycles when it waited for a producer; a semaphore wait across engines adds SEM."""
import contextlib
import sys

import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.collectives as cc
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core import OperandTypeError, ScheduleEdgeError, fast
from trnsim.core.builder import Builder
from trnsim.core.fast import stamp
from trnsim.core.timing import simulate
from trnsim.specs.timing import timing

SEM = timing("trn1").semaphore_latency
VEC, POOL, STATIC = 1.12, 1.4, 100
FILL = 2048 / POOL  # GpSimd's set of X


@nki.jit
def four(a):
    """GpSimd sets X (2048 a partition); VectorE copies X (blocked until then) and sets Y (512, free from 0);
    GpSimd then sets Z (512); each named."""
    x, p = (nl.ndarray((128, 2048), nl.float32, buffer=nl.sbuf) for _ in range(2))
    y, z = (nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf) for _ in range(2))
    nisa.memset(dst=x, value=3.0, engine=nisa.gpsimd_engine, name="fill")
    nisa.tensor_copy(dst=p, src=x, engine=nisa.vector_engine, name="copy_x")
    nisa.memset(dst=y, value=2.0, engine=nisa.vector_engine, name="set_y")
    nisa.memset(dst=z, value=1.0, engine=nisa.gpsimd_engine, name="set_z")
    out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=y)
    return out


def _events(kernel):
    kernel.trace(np.zeros((128, 512), np.float32), target="trn1", values=False)
    return simulate(kernel.last_cores[0].stream, "trn1").events


def test_names_are_kept_on_the_records():
    four.trace(np.zeros((128, 512), np.float32), target="trn1", values=False)
    names = [r.attrs.get("name") for r in four.last_cores[0].stream]
    assert names == ["fill", "copy_x", "set_y", "set_z", None]


def test_without_edges_the_independent_set_fills_the_gap():
    fill, copy_x, set_y, set_z = _events(four)[:4]
    assert copy_x.start == pytest.approx(FILL + SEM)
    assert set_y.start == pytest.approx(0.0) and set_z.start == pytest.approx(FILL)


def test_a_schedule_edge_on_one_engine_keeps_the_consumer_after_the_producer():
    """The default kind: set_y follows the copy on VectorE, which starts a semaphore after GpSimd's set of X and
    takes 2048 elements plus the static overhead."""
    fill, copy_x, set_y, set_z = _events(four.with_schedule([("set_y", "copy_x")]))[:4]
    assert copy_x.end == pytest.approx(FILL + SEM + (2048 + STATIC) / VEC)
    assert set_y.start == pytest.approx(copy_x.end) and set_y.blocker == copy_x.index


def test_a_schedule_edge_across_engines_orders_issue_only():
    fill, copy_x, set_y, set_z = _events(four.with_schedule([("set_z", "copy_x")]))[:4]
    assert set_z.start == pytest.approx(FILL) and set_z.start < copy_x.end


def test_a_runtime_edge_across_engines_waits_for_the_semaphore():
    fill, copy_x, set_y, set_z = _events(four.with_schedule([("set_z", "copy_x")], kind=nisa.dependency.runtime))[:4]
    assert set_z.start == pytest.approx(copy_x.end + SEM)


def test_edges_place_as_the_equivalent_depends_on_edges():
    """A list of producers is one edge each; the schedule is the one depends_on gives for the same pairs."""
    @nki.jit
    def by_hand(a):
        x, p = (nl.ndarray((128, 2048), nl.float32, buffer=nl.sbuf) for _ in range(2))
        y, z = (nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf) for _ in range(2))
        nisa.memset(dst=x, value=3.0, engine=nisa.gpsimd_engine)
        copy_x = nisa.tensor_copy(dst=p, src=x, engine=nisa.vector_engine)
        set_y = nisa.memset(dst=y, value=2.0, engine=nisa.vector_engine)
        nisa.memset(dst=z, value=1.0, engine=nisa.gpsimd_engine).depends_on(copy_x, set_y,
                                                                            kind=nisa.dependency.runtime)
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=y)
        return out

    named = _events(four.with_schedule([("set_z", ["copy_x", "set_y"])], kind=nisa.dependency.runtime))
    expected = _events(by_hand)
    assert [(e.start, e.end, e.deps) for e in named] == [(e.start, e.end, e.deps) for e in expected]
    assert named[3].start == pytest.approx(named[1].end + SEM)


def test_a_name_in_a_loop_names_every_instance():
    """Three GpSimd sets named "fill" end at FILL, 2 FILL and 3 FILL; both VectorE sets named "late" wait for all
    three (runtime edges across engines), the second also behind the first on its engine."""
    @nki.jit
    def loops(a):
        for i in range(3):
            x = nl.ndarray((128, 2048), nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=x, value=float(i), engine=nisa.gpsimd_engine, name="fill")
        ys = [nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf) for _ in range(2)]
        for y in ys:
            nisa.memset(dst=y, value=1.0, engine=nisa.vector_engine, name="late")
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=ys[1])
        return out

    free = _events(loops)
    assert free[3].start == pytest.approx(0.0)
    ev = _events(loops.with_schedule([("late", "fill")], kind=nisa.dependency.runtime))
    fills, late = ev[:3], ev[3:5]
    assert [f.end for f in fills] == pytest.approx([FILL, 2 * FILL, 3 * FILL])
    assert late[0].start == pytest.approx(3 * FILL + SEM)
    assert late[1].start == pytest.approx(late[0].end)
    assert all({0, 1, 2} <= set(e.deps) for e in late)


@nki.jit
def loads(rhs):
    """A GpSimd set named "first", then eight loads named "ld" into one tile: a loop whose iterations a
    timing-only run stamps (core/fast/stamp.py)."""
    z = nl.ndarray((128, 2048), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=z, value=0.0, engine=nisa.gpsimd_engine, name="first")
    b = nl.ndarray((128, 8, 512), dtype=nl.float32, buffer=nl.sbuf)
    for k in nl.affine_range(8):
        nisa.dma_copy(dst=b[:, k, :], src=rhs[k * 128:(k + 1) * 128, :], name="ld")
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=b[:, 7, :])
    return out


def test_stamped_loop_iterations_carry_the_name_and_the_edges(monkeypatch):
    """Every load, stamped or run, waits for the set (runtime: across engines), and the schedule is the one the
    run without stamping gives."""
    monkeypatch.setenv("TRNSIM_FAST", "1")
    monkeypatch.setattr(stamp, "MIN_STAMPED", 1)
    monkeypatch.setattr(stamp, "_fruitless", {})
    scheduled = loads.with_schedule([("ld", "first")], kind=nisa.dependency.runtime)

    def run():
        nc = scheduled.trace(np.zeros((1024, 512), np.float32), target="trn1", values=False)[0]
        return nc, simulate(nc.stream, "trn1").events

    nc, events = run()
    assert nc.builder.stamped > 0
    lds = [r.index for r in nc.stream if r.attrs.get("name") == "ld"]
    assert len(lds) == 8
    assert all(0 in events[i].deps and events[i].start >= FILL for i in lds)
    with monkeypatch.context() as m:
        m.setattr(fast.Speed, "loop", Builder.loop)
        plain, expected = run()
    assert plain.builder.stamped == 0
    assert [(e.start, e.end, e.deps) for e in events] == [(e.start, e.end, e.deps) for e in expected]


def test_an_unknown_name_is_refused_where_with_schedule_was_called():
    scheduled = four.with_schedule([("set_y", "nope")])
    line = sys._getframe().f_lineno - 1
    with pytest.raises(ScheduleEdgeError, match="'nope'.*names given: 'copy_x', 'fill', 'set_y', 'set_z'") as e:
        _events(scheduled)
    assert e.value.location == f"{__file__}:{line}"


def test_a_cycle_is_refused_at_once():
    with pytest.raises(ScheduleEdgeError, match="cycle: 'set_y' after 'copy_x' after 'set_y'"):
        four.with_schedule([("set_y", "copy_x"), ("copy_x", ["set_y"])])
    with pytest.raises(ScheduleEdgeError, match="cycle: 'fill' after 'fill'"):
        four.with_schedule([("fill", "fill")])


def test_an_edge_to_a_later_instruction_moves_the_consumer_after_it():
    """copy_x, issued before set_z, shares no bytes with set_y or set_z: the edge issues it after set_z, as the
    compiler's scheduler may, and (runtime) it starts a semaphore after set_z ends: GpSimd sets Z (512) from FILL."""
    scheduled = four.with_schedule([("copy_x", "set_z")], kind=nisa.dependency.runtime)
    events = _events(scheduled)
    names = [r.attrs.get("name") for r in scheduled.last_cores[0].stream]
    assert names == ["fill", "set_y", "set_z", "copy_x", None]
    fill, set_y, set_z, copy_x = events[:4]
    assert set_z.end == pytest.approx(FILL + 512 / POOL)
    assert copy_x.start == pytest.approx(set_z.end + SEM) and copy_x.blocker == set_z.index
    assert set_y.start == pytest.approx(0.0)


def test_a_move_the_data_forbids_is_refused_by_name():
    """fill after copy_x: copy_x reads the X fill writes, so the data keeps fill first whatever the edge says."""
    with pytest.raises(ScheduleEdgeError, match=r"edges of 'fill' move its instruction at .*test_schedule_edges.py:\d+ "
                                                r"past tensor_copy at .*, which reads sbuf bytes 0..8192 it writes"):
        _events(four.with_schedule([("fill", "copy_x")]))


def test_a_move_out_of_a_no_reorder_block_is_refused_by_name():
    scheduled = _exp_three(True).with_schedule([("act0", "act2")])
    with pytest.raises(ScheduleEdgeError, match="edges of 'act0' move .* out of the nl.no_reorder"):
        scheduled.trace(*[np.zeros((128, 64), np.float32)] * 3, target="trn1", values=False)


@pytest.mark.parametrize("edges", [[("set_y",)], "set_y", [("set_y", 3)], [(1, "fill")], 7])
def test_malformed_edges_are_refused(edges):
    with pytest.raises(ScheduleEdgeError, match="pair"):
        four.with_schedule(edges)


def test_an_unknown_kind_is_refused():
    with pytest.raises(Exception, match="with_schedule kind must be"):
        four.with_schedule([("set_y", "copy_x")], kind="sometimes")


def test_a_named_collective_names_every_instruction_it_issues():
    """NKI 0.5: collectives take name= so that edges can name them. On each core of an LNC 2 launch the set named
    "after" waits for every instruction the all_reduce named "ar" issued there; the values are the sum."""
    @nki.jit
    def reduce_then_set(x):
        r = cc.rank_id()
        out = nl.ndarray((2,) + tuple(x.shape[1:]), x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x[r])
        s = nl.ndarray(t.shape, t.dtype)
        cc.all_reduce([t], [s], cc.ReplicaGroup([[0, 1]]), nl.add, name="ar")
        y = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=y, value=1.0, engine=nisa.vector_engine, name="after")
        nl.store(out[r], s)
        return out

    x = np.arange(2 * 64 * 48, dtype=np.float32).reshape(2, 64, 48)
    scheduled = reduce_then_set[2].with_schedule([("after", "ar")], kind=nisa.dependency.runtime)
    np.testing.assert_array_equal(scheduled(x)[1], x[0] + x[1])
    for nc in scheduled.last_cores:
        ar = [r.index for r in nc.stream if r.attrs.get("name") == "ar"]
        after = [r for r in nc.stream if r.attrs.get("name") == "after"]
        assert len(ar) >= 2 and len(after) == 1
        assert sorted(i for i, runtime in after[0].attrs["after"]) == ar
        events = simulate(nc.stream, nc.target).events
        assert events[after[0].index].start >= max(events[i].end for i in ar)


def test_a_name_that_is_not_text_is_refused():
    @nki.jit
    def numbered(a):
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=1.0, name=7)
        return a

    with pytest.raises(OperandTypeError, match="name= of an instruction is a str.*got int '7' at .*test_schedule_edges.py:"):
        numbered(np.zeros((128, 4), np.float32))


def _exp_three(ordered: bool):
    """The scheduling guide's loop: three loads, an activation named act{i} on each (here taking the tiles last
    loaded first), three stores; `ordered` puts the activations in an nl.no_reorder() block, which the guide says
    the edges act{i} after act{i-1} equal."""
    @nki.jit
    def kernel(a, b, c):
        in_tiles = []
        for inp in (a, b, c):
            in_tile = nl.ndarray(inp.shape, inp.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=in_tile, src=inp)
            in_tiles.append(in_tile)
        out_tiles = []
        with nl.no_reorder() if ordered else contextlib.nullcontext():
            for i in range(len(in_tiles)):
                tile = in_tiles[len(in_tiles) - 1 - i]
                out_tile = nl.ndarray(tile.shape, tile.dtype, buffer=nl.sbuf)
                nisa.activation(dst=out_tile, data=tile, op=nl.exp, name=f"act{i}")
                out_tiles.append(out_tile)
        outs = []
        for tile in out_tiles:
            out = nl.ndarray(tile.shape, tile.dtype, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=out, src=tile)
            outs.append(out)
        return tuple(outs)
    return kernel


def test_the_guides_activation_chain_runs_as_its_no_reorder_block():
    """The loads share a queue (one statement), so c is loaded last and act0, which reads it, is ready last:
    without edges act1 and act2 run before it; with the guide's edges the three run in order, each after the one
    before it, at the times the no_reorder block gives."""
    args = [np.zeros((128, 1024), np.float32) for _ in range(3)]

    def activations(kernel):
        nc = kernel.trace(*args, target="trn1", values=False)[0]
        ev = simulate(nc.stream, "trn1").events
        return [ev[r.index] for r in nc.stream if str(r.attrs.get("name", "")).startswith("act")]

    free = activations(_exp_three(False))
    assert free[1].end <= free[0].start and free[2].end <= free[0].start
    chained = activations(_exp_three(False).with_schedule([(f"act{i}", f"act{i - 1}") for i in range(1, 3)]))
    assert chained[1].start >= chained[0].end and chained[2].start >= chained[1].end
    block = activations(_exp_three(True))
    assert [(e.start, e.end) for e in chained] == [(e.start, e.end) for e in block]


def test_the_profile_shows_each_instruction_by_its_name():
    """What a profile shows of an instruction holds its name= (Neuron Explorer shows names as debug symbols)."""
    from trnsim.core.timing import benchmark
    from trnsim.report.profile import schedule_of

    spans = schedule_of(benchmark(four, np.zeros((128, 512), np.float32), target="trn1", timing_only=True)).spans
    assert [s.args.get("name") for s in spans] == ["fill", "copy_x", "set_y", "set_z", None]


def test_a_cycle_through_depends_on_is_refused_by_name():
    """set_y.depends_on(copy_x) in the kernel, and the edge copy_x after set_y: no order keeps both."""
    @nki.jit
    def both(a):
        x, p = (nl.ndarray((128, 2048), nl.float32, buffer=nl.sbuf) for _ in range(2))
        y = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        copy_x = nisa.tensor_copy(dst=p, src=x, engine=nisa.vector_engine, name="copy_x")
        nisa.memset(dst=y, value=2.0, engine=nisa.vector_engine, name="set_y").depends_on(copy_x)
        return a

    with pytest.raises(ScheduleEdgeError, match=r"together form a cycle through tensor_copy at .*test_schedule_edges.py:\d+"):
        _events(both.with_schedule([("copy_x", "set_y")]))
