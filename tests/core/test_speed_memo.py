"""The front end's speed layer (core/fast/): check verdicts by instruction signature, views shared by index,
never-written memory made when first read. Each must give what the long way gives."""
import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core import NeuronCore, Op, fast
from trnsim.core.builder import REFERENCE
from trnsim.core.fast.views import keyed
from trnsim.core.errors import DTypeError, OutOfScopeError, PSUMBankError, ShapeError


@pytest.fixture(autouse=True)
def speed_layer_on(monkeypatch):
    """These tests look at the speed layer itself, whatever TRNSIM_FAST the suite runs under."""
    monkeypatch.setenv("TRNSIM_FAST", "1")


def test_the_same_layout_has_the_same_signature():
    nc = NeuronCore("trn2", values=False, builder=fast.builder())
    t, u = nc.tensor((128, 256), "float32"), nc.tensor((128, 256), "float32")
    nc.issue(Op.TENSOR_COPY, dst=u, src=t)
    nc.issue(Op.TENSOR_COPY, dst=u, src=t)
    nc.issue(Op.TENSOR_COPY, dst=u[:, 0:128], src=t[:, 128:256])
    sigs = [r.sig for r in nc.stream]
    assert sigs[0] == sigs[1] is not None and sigs[2] not in (None, sigs[0])
    assert len(nc.builder.verdicts) == 2


def test_without_the_speed_layer_nothing_is_memoised(monkeypatch):
    monkeypatch.setenv("TRNSIM_FAST", "0")
    nc = NeuronCore("trn2", values=False, builder=fast.builder())
    t, u = nc.tensor((128, 256), "float32"), nc.tensor((128, 256), "float32")
    nc.issue(Op.TENSOR_COPY, dst=u, src=t)
    assert nc.stream[0].sig is None and nc.builder is REFERENCE
    assert t[:, 0:64] is not t[:, 0:64]


def test_a_memoised_verdict_does_not_pass_another_attribute():
    """memset of an int32 tile: 3 passes; 3.5 on the same tile is refused though the layout is the same."""
    nc = NeuronCore("trn2", values=False, builder=fast.builder())
    t = nc.tensor((128, 64), "int32")
    nc.issue(Op.MEMSET, dst=t, value=3)
    nc.issue(Op.MEMSET, dst=t, value=3)
    with pytest.raises(DTypeError, match="3.5"):
        nc.issue(Op.MEMSET, dst=t, value=3.5)


def test_a_memoised_verdict_still_refuses_an_evicted_tile():
    """Eviction is state, not layout: a tile whose bytes were given away is refused even on a verdict hit."""
    nc = NeuronCore("trn2", values=False, builder=fast.builder())
    t, u = nc.tensor((128, 64), "float32"), nc.tensor((128, 64), "float32")
    nc.issue(Op.TENSOR_COPY, dst=u, src=t)
    t.alloc.evicted = True  # what Memory.evict sets when an expired tile's bytes go to another tensor
    with pytest.raises(OutOfScopeError):
        nc.issue(Op.TENSOR_COPY, dst=u, src=t)


def test_the_accumulation_group_opens_on_every_issue():
    """The second matmul into a PSUM tile accumulates; the third, after another engine read the tile, does not,
    though all three share one verdict."""
    nc = NeuronCore("trn2", values=False, builder=fast.builder())
    a, b = nc.tensor((128, 128), "bfloat16"), nc.tensor((128, 512), "bfloat16")
    acc, out = nc.tensor((128, 512), "float32", "psum"), nc.tensor((128, 512), "float32")
    nc.issue(Op.NC_MATMUL, dst=acc, stationary=a, moving=b)
    nc.issue(Op.NC_MATMUL, dst=acc, stationary=a, moving=b)
    nc.issue(Op.TENSOR_COPY, dst=out, src=acc)
    nc.issue(Op.NC_MATMUL, dst=acc, stationary=a, moving=b)
    mm = [r for r in nc.stream if r.op is Op.NC_MATMUL]
    assert [r.accumulated for r in mm] == [False, True, False]
    assert len({r.sig for r in mm}) == 1


def _issue_all(builder, calls):
    """Issue `calls` ((op, {operand name: (tile index, key)}, attributes) each) on a fresh trn1 core whose
    tiles are three SBUF tiles and a PSUM one; the core."""
    nc = NeuronCore("trn1", values=False, builder=builder)
    tiles = [nc.tensor((128, 4, 512), "bfloat16"), nc.tensor((128, 4, 512), "bfloat16"),
             nc.tensor((128, 4, 512), "float32"), nc.tensor((128, 2048), "float32", "psum")]
    for op, operands, attrs in calls:
        nc.issue(op, **{n: tiles[i][key] for n, (i, key) in operands.items()}, **attrs)
    return nc


def test_a_verdict_holds_for_the_same_layout_elsewhere(monkeypatch):
    """Copies and matmuls between parts of tiles at other offsets, the matmuls into one PSUM bank: each new
    signature is numbered, but the checks run once per layout wherever it lies (the operands' places aside, the
    matmul's destination's), and every record is what the reference builder records."""
    import trnsim.core.fast.memo as memo
    calls = []
    for k in range(4):
        for j in range(4):
            calls.append((Op.TENSOR_COPY, {"dst": (2, (slice(None), k, slice(128 * j, 128 * j + 128))),
                                           "src": (0, (slice(None), j, slice(128 * k, 128 * k + 128)))}, {}))
            calls.append((Op.NC_MATMUL, {"dst": (3, (slice(None), slice(0, 512))),
                                         "stationary": (0, (slice(None), k, slice(128 * j, 128 * j + 128))),
                                         "moving": (1, (slice(None), j, slice(None)))}, {}))
    checked = []
    real = memo.check
    monkeypatch.setattr(memo, "check", lambda nc, d, op, *rest: checked.append(op) or real(nc, d, op, *rest))
    fast_nc = _issue_all(fast.builder(), calls)
    ref = _issue_all(None, calls)
    assert len({r.sig for r in fast_nc.stream}) > 16
    assert sorted(checked, key=lambda op: op.value) == [Op.NC_MATMUL, Op.TENSOR_COPY]
    def seen(rec):  # the memories' serial numbers aside: these are two cores
        return rec.op, rec.engine, rec.attrs, rec.accumulated, {n: r._replace(memory=0) for n, r in rec.operands.items()}
    assert len(fast_nc.stream) == len(ref.stream) == len(calls)
    assert [seen(r) for r in fast_nc.stream] == [seen(r) for r in ref.stream]


def test_a_verdict_elsewhere_passes_no_other_shape_nor_bank():
    """A part of another shape is checked afresh (and refused), and so is a matmul's destination at another
    place: crossing a PSUM bank, which NeuronCore-v2 refuses."""
    ok = [(Op.TENSOR_COPY, {"dst": (2, (slice(None), 0, slice(0, 128))), "src": (0, (slice(None), 1, slice(0, 128)))},
           {}), (Op.NC_MATMUL, {"dst": (3, (slice(None), slice(0, 512))), "stationary": (0, (slice(None), 0, slice(0, 128))),
                                "moving": (1, (slice(None), 0, slice(None)))}, {})]
    with pytest.raises(ShapeError):
        _issue_all(fast.builder(), ok + [(Op.TENSOR_COPY, {"dst": (2, (slice(None), 1, slice(0, 128))),
                                                           "src": (0, (slice(None), 2, slice(0, 64)))}, {})])
    with pytest.raises(PSUMBankError):
        _issue_all(fast.builder(), ok + [(Op.NC_MATMUL, {"dst": (3, (slice(None), slice(256, 768))),
                                                         "stationary": (0, (slice(None), 1, slice(0, 128))),
                                                         "moving": (1, (slice(None), 1, slice(None)))}, {})])


def test_a_view_is_shared_by_index():
    nc = NeuronCore("trn2", values=False, builder=fast.builder())
    t = nc.tensor((128, 4, 256), "float32")
    assert t[:, 1, 0:128] is t[:, 1, 0:128]
    assert t[:, 1, 0:128] is not t[:, 2, 0:128]
    assert t[:, 1, 0:128:2] is not t[:, 1, 0:128:2]  # stepped slices are not remembered
    v = t[:, 1, 64:192]
    assert (v.shape, v.strides, v.offset) == ((128, 128), (1, 1), 256 + 64)


def test_values_read_through_shared_views():
    """Shared views read and write the memory like fresh ones (values on)."""
    nc = NeuronCore("trn2", builder=fast.builder())
    src = nc.hbm_tensor(np.arange(128 * 64, dtype=np.float32).reshape(128, 64))
    t = nc.tensor((128, 64), "float32")
    for j in range(2):
        nc.issue(Op.DMA_COPY, dst=t[:, j * 32:(j + 1) * 32], src=src[:, j * 32:(j + 1) * 32])
    np.testing.assert_array_equal(t[:, 0:32].array(), np.arange(128 * 64, dtype=np.float32).reshape(128, 64)[:, :32])
    np.testing.assert_array_equal(t.array(), src.array())


def test_timing_only_memory_is_made_when_first_read():
    nc = NeuronCore("trn2", values=False, builder=fast.builder())
    assert "data" not in vars(nc.sbuf) and "poison" not in vars(nc.sbuf)
    out = nc.hbm_tensor((64, 32), "bfloat16")
    assert "data" not in vars(out.alloc.memory)
    assert (nc.sbuf.data == 0xFF).all() and (nc.sbuf.poison == 1).all()
    assert out.mask().all() and np.isnan(out.array().astype(np.float32)).all()


def test_a_part_of_a_new_tile_laid_out_as_an_old_one_is_the_same_part():
    """View._part: the second tile's part comes from the cache kept for the first tile's; it must be the part
    numpy slicing gives, with the first part's layout number only where the layouts are the same."""
    nc = NeuronCore("trn2", builder=fast.builder())
    a = nc.tensor((128, 4, 64), "float32")
    first = a[:, 1, 8:24]
    was = (first.shape, first.strides, first.offset, first.poff, keyed(first)[1], a.alloc.place[:5])
    b = nc.tensor((128, 4, 64), "float32")  # laid out as `a`, at other bytes
    del a, first
    c = nc.tensor((128, 4, 64), "float32")  # at `a`'s bytes again
    assert c.alloc.place[:5] == was[5] != b.alloc.place[:5]
    src = np.arange(128 * 4 * 64, dtype=np.float32).reshape(128, 4, 64)
    for t in (b, c):
        nc.issue(Op.DMA_COPY, dst=t, src=nc.hbm_tensor(src))
    part_b, part_c = b[:, 1, 8:24], c[:, 1, 8:24]
    for part in (part_b, part_c):
        assert (part.shape, part.strides, part.offset, part.poff) == was[:4]
        np.testing.assert_array_equal(part.array(), src[:, 1, 8:24])
    assert keyed(part_c)[1] == was[4] != keyed(part_b)[1]
    assert keyed(part_b)[2] == part_b.placement()


def test_the_collector_is_off_in_a_launch_and_what_it_made_is_settled():
    """collector.collector_off restores the collector as it was; with the speed layer on, what was made meanwhile
    waits for no young collection (the young generation's count starts again from 0)."""
    import gc

    from trnsim.core import collector
    assert gc.isenabled()
    with collector.collector_off():
        assert not gc.isenabled()
        made = [[i] for i in range(5000)]
    assert gc.isenabled() and gc.get_count()[0] < 1000 and len(made) == 5000
    gc.disable()
    try:
        with collector.collector_off():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


# -- a process's launches share verdicts and numbers (fast/memo.py: memories named by first use) ---------------------
@pytest.fixture
def fresh_tables(monkeypatch):
    """The launches' shared tables as a fresh process finds them."""
    import trnsim.core.fast.memo as memo
    monkeypatch.setattr(memo, "_STORE", [None, None, None, None, None])


def _reference_key(rec) -> tuple:
    """What a record's signature must tell apart, written out: its op, engine, attributes and each operand's
    memory (its serial number), place, dtype, shape, strides and offsets."""
    placed = tuple((n, p[0][:5], p[1:6]) for n, p in rec.placed.items())
    attrs = tuple((k, type(v), repr(v)) for k, v in rec.attrs.items() if k != "name")
    return rec.op, rec.engine, placed, attrs


def _numbered_alike(stream) -> None:
    """Two records share a signature number exactly when their reference keys are equal."""
    keys = [_reference_key(r) for r in stream]
    for i, a in enumerate(stream):
        for j in range(i):
            assert (a.sig == stream[j].sig) == (keys[i] == keys[j]), (a, stream[j])


def _launch(kernel, args, target="trn2"):
    """(the core, its scheduled events) of a timing-only launch."""
    from trnsim.core.timing import simulate
    nc = kernel.trace(*args, target=target, values=False)[0]
    tl = simulate(nc.stream, target)
    return nc, [(e.track, e.start, e.end, tuple(e.deps), e.blocker, e.pieces) for e in tl.events]


@nki.jit
def first_x(x, y):
    """Loads from two HBM tensors laid out alike, x first; a loop stamped over parts that move."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
    u = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=u, src=y)
    for i in nl.affine_range(8):
        nisa.tensor_scalar(dst=u[:, i * 64:i * 64 + 64], data=t[:, i * 64:i * 64 + 64], op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out, src=u)
    return out


@nki.jit
def first_y(x, y):
    """The same instructions on the same tiles, but y loaded first, and x then into both tiles."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
    u = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=y)
    nisa.dma_copy(dst=u, src=x)
    nisa.dma_copy(dst=t, src=x)
    for i in nl.affine_range(8):
        nisa.tensor_scalar(dst=u[:, i * 64:i * 64 + 64], data=t[:, i * 64:i * 64 + 64], op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out, src=u)
    return out


def test_a_second_launch_takes_the_first_ones_verdicts_and_numbers(monkeypatch, fresh_tables):
    """The same kernel launched again (on new tensors) numbers its records as the first launch did, checking
    nothing again and numbering nothing new, and schedules them as a process running it alone does."""
    import trnsim.core.fast.memo as memo
    from trnsim.core.fast import stamp
    monkeypatch.setattr(stamp, "MIN_STAMPED", 1)
    monkeypatch.setattr(stamp, "_fruitless", {})
    x, y = np.zeros((128, 512), np.float32), np.ones((128, 512), np.float32)
    a, events_a = _launch(first_x, (x, y))
    numbered = len(a.builder.verdicts.signatures)
    checked = []
    real = memo.check
    monkeypatch.setattr(memo, "check", lambda nc, d, op, *rest: checked.append(op) or real(nc, d, op, *rest))
    b, events_b = _launch(first_x, (x.copy(), y.copy()))
    assert a.builder.stamped > 0 and b.builder.stamped == a.builder.stamped
    assert [r.sig for r in b.stream] == [r.sig for r in a.stream]
    assert checked == [] and len(b.builder.verdicts.signatures) == numbered
    _numbered_alike(b.stream)
    assert events_b == events_a


def test_a_launch_after_another_names_its_memories_by_its_own_first_use(monkeypatch, fresh_tables):
    """A kernel using two HBM tensors laid out alike in another order than an earlier launch's kernel: its
    records share a number exactly when they share memory and layout, and it schedules as with the speed layer
    off."""
    x, y = np.zeros((128, 512), np.float32), np.ones((128, 512), np.float32)
    _launch(first_x, (x, y))
    b, events = _launch(first_y, (x, y))
    _numbered_alike(b.stream)
    monkeypatch.setenv("TRNSIM_FAST", "0")
    ref, ref_events = _launch(first_y, (x, y))
    assert ref.stream[0].sig is None
    assert events == ref_events


def test_a_verdict_of_one_generation_is_not_taken_by_another(fresh_tables):
    """tensor_copy on the Scalar engine passes on NeuronCore-v3; the same instruction, laid out the same way, is
    refused on v2 in a later launch."""
    from trnsim.core import Engine
    from trnsim.core.errors import GenerationError
    for target in ("trn2", "trn1"):
        nc = NeuronCore(target, values=False, builder=fast.builder(launch=True))
        t, u = nc.tensor((128, 256), "float32"), nc.tensor((128, 256), "float32")
        if target == "trn2":
            nc.issue(Op.TENSOR_COPY, dst=u, src=t, engine=Engine.SCALAR)
            assert nc.stream[0].sig is not None
        else:
            with pytest.raises(GenerationError, match="scalar engine"):
                nc.issue(Op.TENSOR_COPY, dst=u, src=t, engine=Engine.SCALAR)


def test_a_part_of_a_tile_laid_out_as_another_cores_is_the_same_part_with_its_own_number():
    """View._part across memories (another core, as the next launch's is): the part's shape, strides and offsets
    come from the cache kept for the first core's tile, its layout number is its own memory's."""
    from trnsim.core.fast import views
    cores = [NeuronCore("trn2", builder=fast.builder()) for _ in range(2)]
    src = np.arange(128 * 4 * 64, dtype=np.float32).reshape(128, 4, 64)
    parts = []
    for nc in cores:
        t = nc.tensor((128, 4, 64), "float32")
        nc.issue(Op.DMA_COPY, dst=t, src=nc.hbm_tensor(src))
        parts.append((t, t[:, 1, 8:24], t[:, 1, 8:24]))
    (a, part_a, _), (c, part_c, again) = parts
    assert a.alloc.place[2:5] == c.alloc.place[2:5] and a.alloc.place[1] != c.alloc.place[1]
    assert (part_c.shape, part_c.strides, part_c.offset, part_c.poff) == (part_a.shape, part_a.strides, part_a.offset,
                                                                          part_a.poff)
    np.testing.assert_array_equal(part_c.array(), src[:, 1, 8:24])
    for part, t in ((part_a, a), (part_c, c)):
        want = views.layout_number((t.alloc.place[:5], t.alloc.partitions, t.alloc.kind, part.dtype, part.shape,
                                    part.strides, part.offset, part.poff))
        assert keyed(part)[1] == want
    assert keyed(part_c)[1] != keyed(part_a)[1] and again is part_c
