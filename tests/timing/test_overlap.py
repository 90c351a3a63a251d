"""Overlap and dependence rules of the scheduler: engines run in parallel, producers gate consumers."""
import pytest

from trnsim.core import NeuronCore, Op
from trnsim.core.timing import simulate, summarize
from trnsim.specs.timing import timing

SEM = timing("trn1").semaphore_latency


def schedule(build, target="trn1"):
    nc = NeuronCore(target, values=False)
    build(nc)
    return simulate(nc.stream, target).events


def ready_tiles(nc):
    """A stationary and a moving bf16 tile, written by VectorE, and a PSUM tile for their product."""
    st, mv = nc.tensor((128, 128), "bfloat16"), nc.tensor((128, 512), "bfloat16")
    nc.issue(Op.MEMSET, engine="vector", dst=st, value=1.0)
    nc.issue(Op.MEMSET, engine="vector", dst=mv, value=1.0)
    return st, mv, nc.tensor((128, 512), "float32", "psum")


def test_independent_dma_and_matmul_overlap():
    """A load into one tile and a run of matmuls on other tiles proceed at the same time."""
    def build(nc):
        st, mv, ps = ready_tiles(nc)
        nc.issue(Op.DMA_COPY, dst=nc.tensor((128, 4096), "bfloat16"), src=nc.hbm_tensor((128, 4096), "bfloat16"))
        for _ in range(32):
            nc.issue(Op.NC_MATMUL, dst=ps, stationary=st, moving=mv)
    evs = schedule(build)
    dma, mms = evs[2], evs[3:]
    assert all(dma.index not in m.deps for m in mms)
    assert any(m.start < dma.end and dma.start < m.end for m in mms)  # some matmul runs during the load


def test_dependent_matmul_waits_for_its_load():
    """A matmul reading a freshly loaded tile starts a semaphore latency after the load ends."""
    def build(nc):
        st, mv = nc.tensor((128, 128), "bfloat16"), nc.tensor((128, 512), "bfloat16")
        nc.issue(Op.MEMSET, engine="vector", dst=st, value=1.0)
        nc.issue(Op.DMA_COPY, dst=mv, src=nc.hbm_tensor((128, 512), "bfloat16"))
        nc.issue(Op.NC_MATMUL, dst=nc.tensor((128, 512), "float32", "psum"), stationary=st, moving=mv)
    memset, dma, mm = schedule(build)
    assert mm.start == pytest.approx(dma.end + SEM)
    assert dma.index in mm.deps and mm.blocker == dma.index


def test_overwriting_load_waits_for_reader():
    """A load into a tile that a matmul still reads waits for the matmul (write after read). It starts the
    documented fixed latency after the matmul's end and no later: the ~1300 ns holds descriptor setup, the
    synchronisation and semaphore-to-start of a cross-engine wait (nki-dma-bandwidth-guide.rst), so no
    semaphore latency comes on top."""
    def build(nc):
        st, mv, ps = ready_tiles(nc)
        nc.issue(Op.NC_MATMUL, dst=ps, stationary=st, moving=mv)
        nc.issue(Op.DMA_COPY, dst=mv, src=nc.hbm_tensor((128, 512), "bfloat16"))
    *_, mm, dma = schedule(build)
    assert dma.start == pytest.approx(mm.end + 1300.0)
    assert dma.blocker == mm.index


def test_disjoint_partitions_do_not_depend():
    """Writing partitions 64..127 of a tile does not wait for a reader of partitions 0..63."""
    def build(nc):
        t = nc.tensor((128, 2048), "float32")
        nc.issue(Op.MEMSET, engine="vector", dst=t, value=0.0)
        nc.issue(Op.ACTIVATION, dst=nc.tensor((64, 2048), "float32"), data=t[0:64], op="exp")
        nc.issue(Op.DMA_COPY, dst=t[64:128], src=nc.hbm_tensor((64, 2048), "float32"))
    _, act, dma = schedule(build)
    assert act.index not in dma.deps and dma.start < act.end


def test_one_engine_runs_in_order():
    """Two independent VectorE instructions never overlap: the second starts when the first ends."""
    def build(nc):
        for _ in range(2):
            nc.issue(Op.MEMSET, engine="vector", dst=nc.tensor((128, 1024), "float32"), value=0.0)
    a, b = schedule(build)
    assert b.start == pytest.approx(a.end)


def test_psum_accumulation_group_then_eviction():
    """Matmuls accumulating into one PSUM tile run back to back with no semaphore gap; the PSUM->SBUF
    copy waits for the last of them plus the semaphore latency, then pays the dependent overhead."""
    def build(nc):
        st, mv, ps = ready_tiles(nc)
        for _ in range(3):
            nc.issue(Op.NC_MATMUL, dst=ps, stationary=st, moving=mv)
        nc.issue(Op.TENSOR_COPY, engine="vector", dst=nc.tensor((128, 512), "float32"), src=ps)
    *mms, copy = schedule(build)[2:]
    for prev, nxt in zip(mms, mms[1:]):
        assert nxt.start == pytest.approx(prev.end)
    assert copy.start == pytest.approx(mms[-1].end + SEM)
    assert copy.end - copy.start == pytest.approx((512 + 100) / 1.12)


def test_a_vector_chain_pays_the_static_overhead():
    """Back-to-back Vector instructions, each reading the tile the one before wrote, pay the static
    overhead of 100 cycles (trainium_inferentia2_arch.rst, Vector engine); one that reads other tiles
    follows at once, without it."""
    def build(nc):
        a, b, c, d, e = (nc.tensor((128, 512), "float32") for _ in range(5))
        for t in (a, b, e):
            nc.issue(Op.MEMSET, engine="vector", dst=t, value=1.0)
        nc.issue(Op.TENSOR_TENSOR, dst=c, data1=a, data2=b, op="multiply")  # independent of the memset before
        nc.issue(Op.TENSOR_TENSOR, dst=d, data1=c, data2=a, op="add")  # reads what the one before wrote
        nc.issue(Op.TENSOR_TENSOR, dst=a, data1=b, data2=b, op="add")  # reads neither c nor d
    *_, first, chained, other = schedule(build)
    assert first.end - first.start == pytest.approx(2 * 512 / 1.12)
    assert chained.start == pytest.approx(first.end)
    assert chained.end - chained.start == pytest.approx((2 * 512 + 100) / 1.12)
    assert other.end - other.start == pytest.approx(2 * 512 / 1.12)


def test_pipelined_loads_run_ahead_of_stores():
    """load -> compute -> store in a loop: each DMA statement gets its own in-order queue, so the next
    load does not wait behind the previous store (which waits on the compute), and loads overlap compute."""
    def build(nc):
        ins = [nc.tensor((128, 2048), "float32") for _ in range(2)]
        outs = [nc.tensor((128, 2048), "float32") for _ in range(2)]
        for i in range(3):
            src, dst = nc.hbm_tensor((128, 2048), "float32"), nc.hbm_tensor((128, 2048), "float32")
            nc.issue(Op.DMA_COPY, dst=ins[i % 2], src=src)
            nc.issue(Op.TENSOR_COPY, engine="vector", dst=outs[i % 2], src=ins[i % 2])
            nc.issue(Op.DMA_COPY, dst=dst, src=outs[i % 2])
    evs = schedule(build)
    load0, copy0, store0, load1 = evs[:4]
    assert load1.start < store0.start  # it runs while the store still waits for the copy
    assert load1.start < copy0.end
    assert load0.track != store0.track and load0.track == load1.track


def test_dma_engines_are_shared_by_queues():
    """Two transfers on different queues with no dependence share the DMA engines: together they take
    the time of their bytes, not of two fixed latencies back to back."""
    def build(nc):
        a, b = nc.tensor((128, 4096), "float32"), nc.tensor((128, 4096), "float32")
        nc.issue(Op.DMA_COPY, dst=a, src=nc.hbm_tensor((128, 4096), "float32"))
        nc.issue(Op.DMA_COPY, dst=b, src=nc.hbm_tensor((128, 4096), "float32"))
    one, two = schedule(build)
    assert two.start == pytest.approx(one.end)  # same engines: the second runs after the first's bytes
    assert two.end - one.start == pytest.approx(2 * (one.end - one.start))


def _reuse_loop(nc, n=6, address=None):
    """A loop that loads a fresh tile per iteration and reads it with ScalarE for longer than the load takes;
    returns the stream positions of the loads and of each tile's last reader."""
    loads, reads = [], []
    for _ in nc.loop(range(n)):
        t = nc.tensor((128, 2048), "float32", address=address)
        loads.append(len(nc.stream))
        nc.issue(Op.DMA_COPY, dst=t, src=nc.hbm_tensor((128, 2048), "float32"))
        for _ in range(4):
            nc.issue(Op.ACTIVATION, dst=nc.tensor((128, 2048), "float32"), data=t, op="exp")
        reads.append(len(nc.stream) - 1)
    return loads, reads


def test_reused_bytes_of_a_dead_tile_add_no_wait():
    """A tile placed in the bytes of a dead one does not wait for the dead tile's reader: the compiler
    gives the new tile a free buffer, so only the data orders the load (it depends on nothing)."""
    nc = NeuronCore("trn1", values=False)
    loads, reads = _reuse_loop(nc)
    evs = simulate(nc.stream, "trn1").events
    at = [(o.memory, o.byte_lo) for o in (nc.stream[i].operands["dst"] for i in loads)]
    reused = [j for j in range(len(loads)) if at[j] in at[:j]]
    assert reused, "the allocator must reuse a dead tile's bytes for this test to mean anything"
    for j in reused:
        load = evs[loads[j]]
        assert load.deps == ()
        prior = [evs[reads[i]] for i in range(j) if at[i] == at[j]]
        assert any(load.start < r.end for r in prior)  # it ran while the old tile was still being read


def test_bytes_the_kernel_placed_keep_their_order():
    """With address=, the kernel itself put every tile in the same bytes: each load waits for the
    previous reader (write after read), as the hardware must."""
    nc = NeuronCore("trn1", values=False)
    loads, reads = _reuse_loop(nc, n=3, address=(0, 0))
    evs = simulate(nc.stream, "trn1").events
    for j in range(1, len(loads)):
        assert reads[j - 1] in evs[loads[j]].deps
        assert evs[loads[j]].start >= evs[reads[j - 1]].end + SEM


def _psum_loop(nc, n, per_iteration):
    """A loop whose matmuls (183 ns) outrun the ScalarE reads that evict their PSUM tiles (4 x 366 ns);
    returns, per PSUM tile, the stream positions of its matmul and of its last reader."""
    st, mv, _ = ready_tiles(nc)
    mms, reads = [], []
    for _ in nc.loop(range(n)):
        for _ in range(per_iteration):
            acc = nc.tensor((128, 512), "float32", "psum")
            mms.append(len(nc.stream))
            nc.issue(Op.NC_MATMUL, dst=acc, stationary=st, moving=mv)
            for _ in range(4):
                nc.issue(Op.ACTIVATION, dst=nc.tensor((128, 512), "float32"), data=acc, op="exp")
            reads.append(len(nc.stream) - 1)
    return mms, reads


@pytest.mark.parametrize("per_iteration", [1, 2])
def test_psum_buffers_rotate_over_the_eight_banks(per_iteration):
    """A loop's one-bank PSUM tiles get the 8 banks as buffers, not a free one every time: the first 8
    run ahead of their evictions, and each later tile waits for the tile 8 before it to be read out."""
    nc = NeuronCore("trn1", values=False)
    mms, reads = _psum_loop(nc, 16 // per_iteration, per_iteration)
    evs = simulate(nc.stream, "trn1").events
    for j, i in enumerate(mms):
        waited = [k for k in range(j) if reads[k] in evs[i].deps]
        if j < 8:
            assert waited == []
            assert j == 0 or evs[i].start < evs[reads[j - 1]].end  # ran ahead of the evictions
        else:
            assert waited == [j - 8]
            assert evs[i].start >= evs[reads[j - 8]].end + SEM


def test_a_queue_turns_around_between_transfers():
    """Two transfers of one DMA statement run on one queue: the second starts once the first is done and
    its completion is in, a turnaround later (trn1)."""
    def build(nc):
        for _ in range(2):
            nc.issue(Op.DMA_COPY, dst=nc.tensor((128, 512), "float32"), src=nc.hbm_tensor((128, 512), "float32"))
    one, two = schedule(build)
    assert one.track == two.track
    assert two.start == pytest.approx(one.end + timing("trn1").dma_turnaround_latency)


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_a_queue_runs_in_order_per_dma_engine(target):
    """A queue runs its transfers in order on each DMA engine, not across engines (nki-dma-overview.rst):
    transfers of one statement into partitions 0-7 (engine 0), 8-15 (engine 1), then 0-7 again. The second
    follows only the first's completion write on engine 1, made at the first's start: it starts a turnaround
    after the first starts, not after it ends. On engine 0 the second's completion write comes a turnaround
    after the first's piece, and the third a turnaround after that write."""
    nc = NeuronCore(target, values=False)
    t = nc.tensor((16, 2048), "float32")
    for p in (0, 8, 0):
        nc.issue(Op.DMA_COPY, dst=t[p:p + 8], src=nc.hbm_tensor((8, 2048), "float32"))
    one, two, three = simulate(nc.stream, target).events
    turn, fixed = timing(target).dma_turnaround_latency, nc.spec.dma_fixed_latency
    assert one.track == two.track == three.track  # one statement, one queue
    assert [e for e, _, _ in one.pieces + two.pieces + three.pieces] == [0, 1, 0]
    assert one.start == pytest.approx(fixed)
    assert two.start == pytest.approx(fixed + turn) and two.end - two.start == pytest.approx(one.end - one.start)
    assert three.start == pytest.approx(one.end + 2 * turn) and three.blocker == two.index


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_a_narrow_transfer_sets_its_engine_apart(target):
    """Full-width transfers give every DMA engine an equal piece; one into partitions 0-7 between two of them
    moves data on engine 0 only. The third transfer's piece then follows that one on engine 0, and on every other
    engine the second's completion write (itself a turnaround after the first's piece), so its pieces differ."""
    nc = NeuronCore(target, values=False)
    t = nc.tensor((128, 2048), "float32")
    for p in (128, 8, 128):
        nc.issue(Op.DMA_COPY, dst=t[0:p], src=nc.hbm_tensor((p, 2048), "float32"))
    one, two, three = simulate(nc.stream, target).events
    turn, fixed = timing(target).dma_turnaround_latency, nc.spec.dma_fixed_latency
    engines = nc.spec.dma_engines
    assert [e for e, _, _ in one.pieces] == [e for e, _, _ in three.pieces] == list(range(engines))
    assert [e for e, _, _ in two.pieces] == [0]
    (_, s1, f1), (_, s2, f2) = one.pieces[0], two.pieces[0]
    assert s1 == fixed and all((s, f) == (s1, f1) for _, s, f in one.pieces)
    assert s2 == f1 + turn
    dur = f1 - s1
    assert three.pieces[0][1] == f2 + turn and three.pieces[0][2] == pytest.approx(f2 + turn + dur)
    for _, s, f in three.pieces[1:]:
        assert s == f1 + 2 * turn and f == pytest.approx(s + dur)


def test_two_dma_calls_on_one_line_get_two_queues():
    """Each DMA statement gets its own queue, also two calls written on one line (the compiler sees two
    statements): the second transfer takes the engines as the first leaves them, with no turnaround."""
    def build(nc):
        a, b = (nc.tensor((128, 512), "float32") for _ in "ab")
        x, y = (nc.hbm_tensor((128, 512), "float32") for _ in "xy")
        nc.issue(Op.DMA_COPY, dst=a, src=x), nc.issue(Op.DMA_COPY, dst=b, src=y)  # one line, two statements
    one, two = schedule(build)
    assert one.track != two.track and two.start == pytest.approx(one.end)


def test_statements_handed_to_one_hardware_dge_share_its_queue():
    """A queue goes with its trigger engine and descriptor generation (nki-dma-overview.rst): two statements
    that both hand their transfer to SyncE's hardware DGE share one queue, the second a turnaround after the
    first; one handed to ScalarE's DGE, or left to the compiler, gets a queue of its own."""
    def load(nc, **how):
        nc.issue(Op.DMA_COPY, dst=nc.tensor((128, 512), "float32"), src=nc.hbm_tensor((128, 512), "float32"), **how)

    def build(nc):
        load(nc, dge_mode="hwdge", queue_engine="sync")
        load(nc, dge_mode="hwdge", queue_engine="sync")
        load(nc, dge_mode="hwdge", queue_engine="scalar")
        load(nc, dge_mode="hwdge")
    one, two, three, four = schedule(build, "trn2")
    assert one.track == two.track and two.start == pytest.approx(one.end + timing("trn2").dma_turnaround_latency)
    assert len({one.track, three.track, four.track}) == 3


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_a_turnaround_counts_as_dma_active(target):
    """The completion writes of a transfer (each of the 16 engines writes a 4 B semaphore update) are DMA
    packets: the profiler's DMA-active time covers a queue's turnaround, so two transfers streamed through
    one queue keep DMA active from the first piece to the last, while the pieces alone leave the gap."""
    nc = NeuronCore(target, values=False)
    for _ in range(2):
        nc.issue(Op.DMA_COPY, dst=nc.tensor((128, 512), "float32"), src=nc.hbm_tensor((128, 512), "float32"))
    tl = simulate(nc.stream, target)
    one, two = tl.events
    turn = timing(target).dma_turnaround_latency
    assert turn > 0 and two.start == pytest.approx(one.end + turn)
    r = summarize("two", [tl], nc.spec)
    assert r.latency == pytest.approx(two.end - one.start + timing(target).execution_overhead)
    assert r.active["DMA"] == pytest.approx(r.period)  # the whole execution period; pieces alone: period - turn


def test_psum_tiles_made_one_at_a_time_rotate_over_the_banks():
    """A PSUM tile made right after the previous one died takes the next bank, as the compiler rotates PSUM
    tiles over the banks, also after an earlier phase filled all eight: each matmul runs ahead of the
    eviction of the tile before it instead of waiting to reuse its bank."""
    nc = NeuronCore("trn1", values=False)
    st, mv, _ = ready_tiles(nc)
    bank = nc.spec.psum_partition_bytes // nc.spec.psum_banks
    full = [nc.tensor((128, 512), "float32", "psum") for _ in range(nc.spec.psum_banks)]
    for t in full:
        nc.issue(Op.NC_MATMUL, dst=t, stationary=st, moving=mv)
    del full, t
    banks, mms, reads = [], [], []
    for _ in range(nc.spec.psum_banks):
        acc = nc.tensor((128, 512), "float32", "psum")
        banks.append(acc.alloc.b0 // bank)
        mms.append(len(nc.stream))
        nc.issue(Op.NC_MATMUL, dst=acc, stationary=st, moving=mv)
        for _ in range(4):
            nc.issue(Op.ACTIVATION, dst=nc.tensor((128, 512), "float32"), data=acc, op="exp")
        reads.append(len(nc.stream) - 1)
        del acc
    assert banks == [(banks[0] + k) % nc.spec.psum_banks for k in range(nc.spec.psum_banks)]
    evs = simulate(nc.stream, "trn1").events
    for j in range(1, len(mms)):
        assert evs[mms[j]].start < evs[reads[j - 1]].end  # ran ahead of the previous tile's eviction


def test_shares_read_a_transfers_pieces_as_their_tuples_say():
    """A transfer one DMA engine class moves holds its engines alone (Event.parts), its pieces made when asked;
    the live shares (interval_shares) read them so: equal to a sum over the pieces' tuples, for such transfers and
    for those whose pieces differ (a narrow one between full-width ones sets engine 0 apart)."""
    from trnsim.core.timing.result import interval_shares

    nc = NeuronCore("trn1", values=False)
    t = nc.tensor((128, 2048), "float32")
    for p in (128, 8, 128, 128):
        nc.issue(Op.DMA_COPY, dst=t[0:p], src=nc.hbm_tensor((p, 2048), "float32"))
    st, mv, ps = ready_tiles(nc)
    nc.issue(Op.NC_MATMUL, dst=ps, stationary=st, moving=mv)
    events = simulate(nc.stream, "trn1").events
    engines = nc.spec.dma_engines
    assert type(events[0].parts) is not tuple and type(events[2].parts) is tuple  # both forms are exercised
    assert [len(e.pieces) for e in events[:4]] == [engines, 1, engines, engines] and events[4].pieces == ()
    for e in events[:4]:
        assert all(s == e.start and f == e.end for _, s, f in e.pieces) or type(e.parts) is tuple
    moved = 0.0
    for e in events[:4]:
        m = 0.0
        for _, s, f in e.pieces:
            m += f - s
        moved += m / engines
    busy, _, hi = interval_shares(events, engines)
    lo = min(e.start for e in events)
    assert hi == max(e.end for e in events) and busy["DMA"] == min(1.0, moved / (hi - lo))
