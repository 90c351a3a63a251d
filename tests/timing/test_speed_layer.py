"""The scheduler's shortcuts: skipping a memory's partition-quadrant maps until a narrow access is recorded,
and the speed layer's shared Regions (TRNSIM_FAST), change no event."""
import numpy as np
import pytest

from trnsim import specs
from trnsim.core import NeuronCore, Op, fast
from trnsim.core.fast.views import keyed
from trnsim.core.isa.registry import REGISTRY, add_after, give_name
from trnsim.core.timing import Scheduler, simulate
from trnsim.core.timing.scheduler import (COMPUTE, _alike, _apart, _like, _nearby, _number, _psum_positions,
                                         keep_order)
from trnsim.specs.timing import timing


def stream(target="trn2"):
    """Whole-tile work, then a narrow (quadrant) write and read of the same tile, then whole work again."""
    nc = NeuronCore(target, values=False, builder=fast.Speed())
    t, u = nc.tensor((128, 256), "float32"), nc.tensor((128, 256), "float32")
    src = nc.hbm_tensor((128, 256), "float32")
    for _ in range(3):
        nc.issue(Op.DMA_COPY, dst=t, src=src)
        nc.issue(Op.TENSOR_COPY, dst=u, src=t)
    nc.issue(Op.DMA_COPY, dst=t[32:64, :], src=src[0:32, :])  # narrow write
    nc.issue(Op.ACTIVATION, dst=u[64:96, :], data=t[64:96, :], op="copy")  # narrow, other quadrant
    nc.issue(Op.TENSOR_COPY, dst=u, src=t)  # whole read: must see the narrow write
    nc.issue(Op.MEMSET, dst=t, value=0.0)  # whole write over narrow readers
    nc.issue(Op.TENSOR_COPY, dst=u[32:64, :], src=t[32:64, :])
    return nc.stream


def events(recs, target="trn2"):
    tl = simulate(recs, target)
    return [(e.index, e.track, e.start, e.end, e.deps, e.blocker, e.pieces) for e in tl.events], tl.memory_peak


def test_a_narrow_write_after_whole_accesses_is_waited_for():
    """The first narrow access of a memory starts its quadrant maps: the next whole read depends on it."""
    evs = simulate(stream(), "trn2").events
    narrow_dma, whole_read, whole_write = evs[6], evs[8], evs[9]
    assert narrow_dma.index in whole_read.deps
    assert whole_read.start >= narrow_dma.end
    assert evs[7].index in whole_write.deps  # ScalarE read t[64:96] before the VectorE memset overwrites it


def test_speed_layer_changes_no_event():
    """The same stream scheduled with the speed layer's signatures (cost and regions cached) and without: the
    same events, deps and blockers."""
    recs = stream()
    assert sum(r.sig is not None for r in recs) > len(recs) // 2
    on = events(recs)
    for r in recs:
        r._regions = r.sig = None  # regions made again, not shared; nothing cached by signature
    assert events(recs) == on


def test_views_laid_out_alike_share_a_layout_number():
    """Signature parts (fast.views.keyed): the same place, dtype, shape and offsets give one number; any other, another."""
    nc = NeuronCore("trn2", values=False, builder=fast.Speed())
    t = nc.tensor((128, 512), "float32")
    same, other = t._index((slice(None), slice(0, 128))), t._index((slice(None), slice(128, 256)))
    assert keyed(t[:, 0:128])[1] == keyed(same)[1] != keyed(other)[1]
    assert keyed(same)[2] == same.placement()


def test_operands_sharing_bytes_wait_as_separate_accesses():
    """An instruction that reads and writes one tile (recorded after all its lookups) and one whose operands
    touch disjoint bytes (each looked up and recorded in one walk) both wait for their producers and readers."""
    nc = NeuronCore("trn2", values=False, builder=fast.Speed())
    t, u, v = (nc.tensor((128, 256), "float32") for _ in range(3))
    nc.issue(Op.MEMSET, dst=t, value=0.0, engine="gpsimd")
    nc.issue(Op.ACTIVATION, dst=u, data=t, op="copy")  # ScalarE reads t
    nc.issue(Op.TENSOR_TENSOR, dst=t, data1=t, data2=u, op="add")  # VectorE: after the read of t, reads u
    nc.issue(Op.ACTIVATION, dst=v, data=t, op="copy")  # ScalarE: reads the sum, one walk
    nc.issue(Op.ACTIVATION, dst=t, data=v, op="copy")  # ScalarE writes t, which VectorE wrote
    evs = simulate(nc.stream, "trn2").events
    assert evs[0].index in evs[1].deps and evs[1].index in evs[2].deps
    assert evs[2].index in evs[3].deps and evs[3].start >= evs[2].end
    assert evs[2].index in evs[4].deps


def test_transfers_reaching_other_hbm_bytes_share_their_cost_and_pieces():
    """A loop's loads and stores reach other HBM bytes each time: new signatures whose cost and pieces the
    scheduler shares by a key without HBM addresses. The events equal those of the same stream with nothing
    shared, also for transfers the key must tell apart: other partitions of a tile (other DMA engines), a
    strided source (shorter descriptor runs), another dtype."""
    nc = NeuronCore("trn1", values=False, builder=fast.Speed())
    src = nc.hbm_tensor((1024, 512), "bfloat16")
    out = nc.hbm_tensor((1024, 512), "bfloat16")
    wide = nc.hbm_tensor((1024, 256), "float32")
    t, u = nc.tensor((128, 512), "bfloat16"), nc.tensor((128, 256), "float32")
    for i in range(8):
        nc.issue(Op.DMA_COPY, dst=t, src=src[i * 128:(i + 1) * 128, :])
        nc.issue(Op.DMA_COPY, dst=t[0:64, 0:256], src=src[i * 64:(i + 1) * 64, 0:256])
        nc.issue(Op.DMA_COPY, dst=t[64:128, 0:256], src=src[i * 64:(i + 1) * 64, 0:256])  # upper partitions
        nc.issue(Op.DMA_COPY, dst=t[0:64, 0:256], src=src[i * 64:(i + 1) * 64, 0:512:2])  # strided: 2-byte runs
        nc.issue(Op.DMA_COPY, dst=u, src=wide[i * 128:(i + 1) * 128, :])  # fp32
        nc.issue(Op.TENSOR_COPY, dst=t, src=t)
        nc.issue(Op.DMA_COPY, dst=out[i * 128:(i + 1) * 128, :], src=t)
    recs = nc.stream
    dmas = [r for r in recs if r.op is Op.DMA_COPY]
    assert len({r.sig for r in dmas}) == len(dmas)  # every transfer a new signature
    s = Scheduler(nc.spec, timing("trn1"))
    for r in recs:
        s.step(r)
    assert len(s.transfers) == 6  # one key per way of moving, whichever bytes
    on = [(e.index, e.track, e.start, e.end, e.deps, e.blocker, e.pieces) for e in s.tl.events]
    assert on == events(recs, "trn1")[0]
    for r in recs:
        r._regions = r.sig = None  # nothing cached by signature or by transfer key
    off = events(recs, "trn1")[0]
    assert on == off
    lower, upper, strided = off[1], off[2], off[3]  # alike but for the partitions, or the descriptor runs
    assert {p[0] for p in lower[6]} != {p[0] for p in upper[6]}
    assert lower[3] - lower[2] != strided[3] - strided[2]


def _shared_work_is_fresh_work(recs, target) -> tuple[int, int]:
    """Schedule `recs`, then check every signature's plan, cost and durations (those asked for) against ones
    computed afresh from a record of it: equal, also where the scheduler took them from a record alike but for
    its addresses (Scheduler._fresh). Returns (signatures, plans computed: the rest were shared)."""
    spec = specs.neuroncore(target)
    s = Scheduler(spec, timing(target))
    for r in recs:
        s.step(r)
    rules, checked = s.rules, set()
    for r in recs:
        sig = (r.sig, r.engine) if r.attrs.get("choices") else r.sig
        if r.sig is None or sig in checked:
            continue
        checked.add(sig)
        plan, psum, w, apart, memo, track = s.plans[sig]
        fresh = s._plan(r)
        assert plan == fresh and psum == _psum_positions(fresh) and apart == _apart(fresh), r
        assert track == (-1 if r.engine.value == "dma" else COMPUTE.index(r.engine.value)), r
        cost = REGISTRY[r.op].cost(r, spec)
        assert type(w) is type(cost) and all(getattr(w, k) == getattr(cost, k) for k in type(w).__slots__), r
        asked = [memo[0] is not None and memo[0] == rules.matmul(cost),
                 memo[1] is not None and memo[1] == rules.stream(r, cost, False),
                 memo[2] is not None and memo[2] == rules.stream(r, cost, True),
                 memo[3] is not None and memo[3][0] == rules.dma_pieces(r, cost)]
        assert [m is not None for m in memo] == asked, r
    return len(checked), len(s.like)


def test_instructions_alike_but_for_addresses_share_plan_cost_and_durations():
    """A loop's instructions reach other bytes each time: new signatures that take the plan (moved), cost and
    durations of the first one alike but for its addresses. Those equal the ones computed afresh, also where the
    key must tell records apart (other partitions, strides, dtype, engine), and the events equal those of the
    stream with nothing shared."""
    nc = NeuronCore("trn2", values=False, builder=fast.Speed())
    a, b = nc.tensor((128, 1024), "bfloat16"), nc.tensor((128, 1024), "bfloat16")
    wide = nc.tensor((128, 1024), "float32")
    acc = nc.tensor((128, 2048), "float32", space="psum")
    for i in range(8):
        cols = slice(i * 128, (i + 1) * 128)
        nc.issue(Op.NC_MATMUL, dst=acc[:, cols], stationary=a[:, cols], moving=b[:, cols])
        nc.issue(Op.TENSOR_TENSOR, dst=b[:, cols], data1=acc[:, cols], data2=a[:, cols], op="add")
        nc.issue(Op.TENSOR_TENSOR, dst=b[64:128, cols], data1=a[64:128, cols], data2=a[64:128, cols], op="add")
        nc.issue(Op.ACTIVATION, dst=wide[:, i * 64:(i + 1) * 64], data=a[:, i * 128:(i + 1) * 128:2], op="copy")  # strided
        nc.issue(Op.ACTIVATION, dst=wide[:, cols], data=acc[:, cols], op="copy")  # fp32 from PSUM
        nc.issue(Op.TENSOR_COPY, dst=a[:, cols], src=wide[:, cols], engine="gpsimd")
        nc.issue(Op.TENSOR_COPY, dst=a[:, cols], src=wide[:, cols], engine="vector")
    recs = nc.stream
    sigs, planned = _shared_work_is_fresh_work(recs, "trn2")
    assert sigs == len(recs) and planned == 7  # one plan per way of working, whichever bytes
    on = events(recs)
    for r in recs:
        r._regions = r.sig = None
    assert events(recs) == on


def _alike_stream():
    """Instructions of one op and attributes, alike but for their addresses or not (other partitions, strides,
    dtype, shape, engine, a matmul that accumulates), each kind several times."""
    nc = NeuronCore("trn2", values=False, builder=fast.Speed())
    a, b = nc.tensor((128, 1024), "bfloat16"), nc.tensor((128, 1024), "bfloat16")
    wide, acc = nc.tensor((128, 1024), "float32"), nc.tensor((128, 2048), "float32", space="psum")
    for i in range(4):
        cols = slice(i * 128, (i + 1) * 128)
        nc.issue(Op.TENSOR_TENSOR, dst=b[:, cols], data1=a[:, cols], data2=a[:, cols], op="add")
        nc.issue(Op.TENSOR_TENSOR, dst=b[64:128, cols], data1=a[64:128, cols], data2=a[64:128, cols], op="add")
        nc.issue(Op.TENSOR_TENSOR, dst=b[0:64, cols], data1=a[0:64, cols], data2=a[0:64, cols], op="add")
        nc.issue(Op.TENSOR_TENSOR, dst=b[:, i * 64:(i + 1) * 64], data1=a[:, i * 128:(i + 1) * 128:2],
                 data2=a[:, cols][:, 0:64], op="add")  # strided
        nc.issue(Op.TENSOR_TENSOR, dst=wide[:, cols], data1=a[:, cols], data2=a[:, cols], op="add")  # fp32 out
        nc.issue(Op.TENSOR_TENSOR, dst=b[:, 0:64], data1=a[:, cols][:, 0:64], data2=a[:, 0:64], op="add")  # shape
        nc.issue(Op.TENSOR_TENSOR, dst=b[:, cols], data1=a[:, cols], data2=a[:, cols], op="add", engine="gpsimd")
        nc.issue(Op.NC_MATMUL, dst=acc[:, cols], stationary=a[:, cols], moving=b[:, cols])
        nc.issue(Op.NC_MATMUL, dst=acc[:, cols], stationary=a[:, cols], moving=b[:, 512 + i * 128:640 + i * 128])
    recs = nc.stream
    assert len({r.accumulated for r in recs if r.op is Op.NC_MATMUL}) == 2
    return recs


def test_records_sharing_attributes_are_alike_only_as_their_keys_say():
    """_alike, which compares a new signature's record with one holding the same attributes field by field, says
    two records are alike exactly where their _like keys are equal, and gives _like's byte lows."""
    recs = _alike_stream()
    assert len({_like(r)[0] for r in recs}) > 6
    pairs = 0
    for a in recs:
        near = _nearby(a, None)
        for b in recs:
            got = _alike(near, b)
            if a.op is b.op:
                key, lows = _like(b)
                assert (got is not None) == (_like(a)[0] == key), (a, b)
                assert got is None or got == lows, (a, b)
                pairs += got is not None and a is not b
    assert pairs > 0


def test_a_record_sharing_its_attributes_with_an_earlier_one_takes_its_own_plan():
    """Records that share one attribute dict (as a loop's stamped records share their template's), alike but for
    their addresses or not: every signature's plan, cost and durations equal those computed afresh, and the events
    those of the stream with nothing shared."""
    recs = _alike_stream()
    shared: dict = {}
    for r in recs:  # one dict for the records of equal attributes
        r.attrs = shared.setdefault((r.op, tuple(r.attrs.items())), r.attrs)
    assert len({id(r.attrs) for r in recs}) < len(recs) // 4
    sigs, planned = _shared_work_is_fresh_work(recs, "trn2")
    assert sigs == len(recs) and planned == len({_like(r)[0] for r in recs}) < sigs - 8
    on = events(recs)
    for r in recs:
        r._regions = r.sig = None
    assert events(recs) == on


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_shared_plans_and_costs_equal_fresh_ones_across_the_example_kernels(ladder, target, monkeypatch):
    """The matmul ladder's steps and the fused Mamba kernels: every signature's shared plan, cost and durations
    equal those computed afresh."""
    import mamba

    monkeypatch.setenv("TRNSIM_FAST", "1")  # signatures are the speed layer's: with it off, nothing is shared

    small = [np.zeros((1024, 512), ladder.nl.bfloat16.np), np.zeros((1024, 1024), ladder.nl.bfloat16.np)]
    runs = [(k, small) for k in ladder.LADDER]
    runs += [(k, [np.zeros(x.shape, np.float32) for x in mamba.inputs(256, 512, state=16)]) for k in mamba.KERNELS]
    shared = 0
    for kernel, args in runs:
        recs = kernel.trace(*args, target=target, values=False)[0].stream
        sigs, planned = _shared_work_is_fresh_work(recs, target)
        shared += sigs - planned
    assert shared > 100


def test_a_seen_signature_keeps_the_edges_marks_and_names_added_after_issue():
    """A record of a signature already placed takes its plan by the signature's number; the depends_on edges, the
    no_reorder mark and the name= its record gained after issue still hold: the same events as with nothing
    cached by signature, and the edge is waited for."""
    nc = NeuronCore("trn2", values=False, builder=fast.Speed())
    a, b, c = (nc.tensor(shape, "float32") for shape in ((128, 2048), (128, 64), (128, 64)))
    src = nc.hbm_tensor((128, 2048), "float32")
    nc.issue(Op.MEMSET, dst=c, value=0.0)
    for _ in range(5):
        nc.issue(Op.DMA_COPY, dst=a, src=src)  # long, and independent of the copies
        nc.issue(Op.ACTIVATION, dst=b, data=c, op="copy")
    recs = nc.stream
    sets = [r for r in recs if r.op is Op.ACTIVATION]
    assert len({r.sig for r in sets}) == 1 and sets[0].sig is not None and "choices" not in sets[0].attrs
    give_name(sets[:1], "first")  # the first record placed has one more attribute than it was issued with
    add_after(sets[1], ((sets[1].index - 1, True),))  # so many attributes as that first one: still an edge
    keep_order(recs, sets[3].index)
    on, _ = events(recs)
    dma, edged = on[sets[1].index - 1], on[sets[1].index]
    assert dma[0] in edged[4] and edged[2] >= dma[3]
    for r in recs:
        r._regions = r.sig = None
    assert events(recs)[0] == on


@pytest.mark.parametrize("narrow", [False, True])
def test_the_timelines_flat_pieces_are_the_events_pieces(narrow):
    """Timeline.piece_engine/start/end hold every transfer's pieces in event order, whether all transfers move
    over as many engines (one table of engine lists, indexed) or not (lists of other lengths, concatenated)."""
    nc = NeuronCore("trn2", values=False, builder=fast.Speed())
    t, src = nc.tensor((128, 2048), "float32"), nc.hbm_tensor((128, 2048), "float32")
    for i in range(6):
        rows = slice(0, 64) if i % 2 else slice(64, 128)  # other engines, as many
        nc.issue(Op.DMA_COPY, dst=t[rows, i * 256:(i + 1) * 256], src=src[rows, i * 256:(i + 1) * 256])
        if narrow:
            nc.issue(Op.DMA_COPY, dst=t[0:1 + i, 0:8], src=src[0:1 + i, 0:8])
    tl = simulate(nc.stream, "trn2")
    pieces = [p for e in tl.events for p in e.pieces]
    assert len({len(e.pieces) for e in tl.events}) == (2 if narrow else 1)
    assert len({tuple(p[0] for p in e.pieces) for e in tl.events}) == 2 + narrow
    assert list(tl.piece_engine) == [p[0] for p in pieces]
    assert list(tl.piece_start) == [p[1] for p in pieces] and list(tl.piece_end) == [p[2] for p in pieces]


def test_where_a_plan_last_found_its_bytes_changes_no_event(ladder):
    """Each plan entry keeps the map segment its bytes were found in last (Access.seg), where the next record of
    its signature starts its search: a guess only. With every guess scrambled before every step (far off, past
    the end, stale), a kernel that reuses its buffers gets the events an undisturbed replay gives."""
    import random

    small = [np.zeros((1024, 512), ladder.nl.bfloat16.np), np.zeros((1024, 1024), ladder.nl.bfloat16.np)]
    cores = ladder.matmul_optimized.trace(*small, tiles_m=2, tiles_n=1, tiles_k=2, target="trn1", values=False)
    recs = cores[0].stream
    want, _ = events(recs, "trn1")
    s, rng, moved = Scheduler(specs.neuroncore("trn1"), timing("trn1")), random.Random(7), 0
    for rec in recs:
        for got in s.plans.values():
            for a in got[0]:
                a.seg = rng.choice((0, 1, a.seg + 1, a.seg + 5, 1 << 20))
                moved += 1
        s.step(rec)
    got = [(e.index, e.track, e.start, e.end, e.deps, e.blocker, e.pieces) for e in s.finish().events]
    assert got == want
    assert moved > 1000 or not fast.enabled()  # plans are shared by signature only with the speed layer on


def test_events_are_numbered_by_their_positions_from_the_shared_table():
    """An event's index (and so its deps' and blocker's) is its position in the stream: taken from the int objects
    every timeline shares (Scheduler.numbers), grown as a longer stream needs, or made, past the table's cap."""
    recs = stream()
    first, _ = events(recs)
    assert [e[0] for e in first] == list(range(len(recs)))
    assert all(d < e[0] for e in first for d in e[4]) and all(e[5] < e[0] for e in first)
    assert events(recs)[0] == first  # the table the first run grew serves the second
    s = Scheduler(specs.neuroncore("trn2"), timing("trn2"))
    s.numbers = []  # an empty table: grown from the first step on
    got = [(e.index, e.track, e.start, e.end, e.deps, e.blocker, e.pieces) for e in (s.step(r) for r in recs)]
    assert got == first and s.numbers[:len(recs)] == list(range(len(recs)))
    table = []
    assert _number(table, 5) == 5 and table[:6] == list(range(6))
    assert _number(table, 1 << 40) == 1 << 40 and len(table) < 1 << 20  # past the cap: made, not kept
