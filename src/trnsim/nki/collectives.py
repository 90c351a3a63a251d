"""`nki.collectives`: collectives a kernel calls across the ranks of its launch (nki/api/nki.collectives.rst).

The ranks are the programs of the launch: the two cores of an LNC 2 launch (`kernel[2](...)`), one rank
otherwise. Each collective lowers to the instructions a kernel could write itself: `sendrecv` moves a tile
to the peer core and back (values really move between the cores), `dma_copy` places a rank's own part, and
the reductions run on the Vector engine (`tensor_tensor`, through SBUF for HBM tensors). Both ranks combine
the same two values in rank order, so every rank holds the same bits.
"""
from __future__ import annotations

import dataclasses
import enum
import functools
import inspect

from trnsim.core import Register
from trnsim.core.errors import KernelError, OutOfBoundsError, ShapeError, where
from trnsim.core.isa.registry import give_name
from trnsim.nki import isa as nisa
from trnsim.nki import versions as _versions
from trnsim.nki._current import named as _instruction_name
from trnsim.nki._frontend import LAUNCH_END, core, ndarray
from trnsim.nki.language import NKIObject


class rg_partition_op(enum.Enum):
    """How `ReplicaGroup.from_partition_op` maps a rank to its rank-list id."""

    bitwise_and = "bitwise_and"
    div = "div"
    mod = "mod"


@dataclasses.dataclass
class ReplicaGroup(NKIObject):
    """The rank-lists a collective runs on, each independently: `ReplicaGroup([[0, 1]])`."""

    groups: list = dataclasses.field(default_factory=list)

    @staticmethod
    def from_partition_op(world_size: int, op: rg_partition_op, operand: int) -> ReplicaGroup:
        """Ranks 0..world_size-1 grouped by `op(rank, operand)` (v2.33 docs: ReplicaGroup.from_partition_op)."""
        key = {rg_partition_op.bitwise_and: lambda r: r & operand, rg_partition_op.div: lambda r: r // operand,
               rg_partition_op.mod: lambda r: r % operand}[rg_partition_op(op)]
        lists: dict[int, list[int]] = {}
        for r in range(int(world_size)):
            lists.setdefault(key(r), []).append(r)
        return ReplicaGroup([lists[k] for k in sorted(lists)])


def rank_id(name=None) -> int:
    """This rank's id: its program id in the launch."""
    return core().program_id


def _members(replica_group) -> list[int]:
    """The rank-list holding this rank, checked against the launch's ranks."""
    nc = core()
    groups = replica_group.groups if isinstance(replica_group, ReplicaGroup) else replica_group
    mine = [list(map(int, g)) for g in groups if nc.program_id in g]
    if len(mine) != 1:
        raise KernelError(f"replica group {groups}: rank {nc.program_id} must be in exactly one rank-list")
    bad = [r for r in mine[0] if not 0 <= r < nc.num_programs]
    if bad:
        raise KernelError(f"replica group {groups}: ranks {bad} are not in this launch of {nc.num_programs} "
                          f"rank(s) (kernel[2](...) launches 2)")
    return mine[0]


def _pairs(srcs, dsts, what):
    srcs, dsts = list(srcs), list(dsts)
    if len(srcs) != len(dsts):
        raise ShapeError(f"{what}: {len(srcs)} srcs and {len(dsts)} dsts; they pair one to one")
    if len({v.on_chip for v in srcs + dsts}) > 1:
        raise KernelError(f"{what}: tensors are all in HBM or all in SBUF, not a mix")
    if len(srcs) > 1 and srcs[0].on_chip:
        raise KernelError(f"{what}: several tensors at once (coalesced) only in HBM")
    return list(zip(srcs, dsts))


def _exchange(send, recv, pipe=0):
    """Send `send` to the peer rank and receive its tile into `recv` (on pipe `pipe`: one per channel)."""
    peer = 1 - core().program_id
    nisa.sendrecv(src=send, dst=recv, send_to_rank=peer, recv_from_rank=peer, pipe_id=pipe)


def _scratch_like(v):
    return ndarray(v.shape, v.dtype, "sbuf" if v.on_chip else "hbm")


def _combine(dst, first, second, op):
    """dst = first op second on the Vector engine; HBM operands pass through SBUF 128 rows at a time."""
    if dst.on_chip:
        nisa.tensor_tensor(dst, first, second, op)
        return
    rows = dst.shape[0] if dst.ndim > 1 else 1
    flat = [v.reshape((rows, dst.size // rows)) for v in (dst, first, second)]
    pmax = core().limit("pmax")
    for lo in range(0, rows, pmax):
        hi = min(rows, lo + pmax)
        a, b = (ndarray((hi - lo, flat[0].shape[1]), dst.dtype, "sbuf") for _ in range(2))
        nisa.dma_copy(a, flat[1][lo:hi])
        nisa.dma_copy(b, flat[2][lo:hi])
        nisa.tensor_tensor(a, a, b, op)
        nisa.dma_copy(flat[0][lo:hi], a)


def _chunks(v, n, dim):
    size = v.shape[dim]
    if size % n:
        raise ShapeError(f"collective_dim {dim} of {list(v.shape)} ({size}) does not split into {n} ranks")
    step = size // n
    return [v.slice(dim, i * step, (i + 1) * step) for i in range(n)]


def all_reduce(srcs, dsts, replica_group, op, priority=None, name=None):
    """Every rank of the rank-list gets the reduction (nl.add, nl.minimum, nl.maximum) of all ranks' srcs."""
    group = _members(replica_group)
    for src, dst in _pairs(srcs, dsts, "all_reduce"):
        if len(group) == 1:
            nisa.dma_copy(dst, src)
            continue
        other = _scratch_like(src)
        _exchange(src, other)
        lo_first = core().program_id == group[0]
        _combine(dst, src if lo_first else other, other if lo_first else src, op)


def all_gather(srcs, dsts, replica_group, collective_dim, priority=None, name=None):
    """Every rank gets all ranks' srcs concatenated along collective_dim, in rank-list order."""
    group = _members(replica_group)
    me = group.index(core().program_id)
    for src, dst in _pairs(srcs, dsts, "all_gather"):
        parts = _chunks(dst, len(group), collective_dim)
        nisa.dma_copy(parts[me], src)
        if len(group) == 2:
            _exchange(src, parts[1 - me])


def reduce_scatter(srcs, dsts, replica_group, collective_dim, op, priority=None, name=None):
    """Rank i of the rank-list gets part i (along collective_dim) of the reduction of all ranks' srcs."""
    group = _members(replica_group)
    me = group.index(core().program_id)
    for src, dst in _pairs(srcs, dsts, "reduce_scatter"):
        parts = _chunks(src, len(group), collective_dim)
        if len(group) == 1:
            nisa.dma_copy(dst, parts[0])
            continue
        other = _scratch_like(dst)
        _exchange(parts[1 - me], other)
        _combine(dst, parts[me] if me == 0 else other, other if me == 0 else parts[me], op)


def all_to_all(srcs, dsts, replica_group, collective_dim, priority=None, name=None):
    """Part j of rank i's src goes to part i of rank j's dst (along collective_dim)."""
    group = _members(replica_group)
    me = group.index(core().program_id)
    for src, dst in _pairs(srcs, dsts, "all_to_all"):
        sp, dp = _chunks(src, len(group), collective_dim), _chunks(dst, len(group), collective_dim)
        nisa.dma_copy(dp[me], sp[me])
        if len(group) == 2:
            _exchange(sp[1 - me], dp[1 - me])


def collective_permute(srcs, dsts, source_target_pairs, priority=None, name=None):
    """For each (source, target) pair, the source rank's src lands in the target rank's dst."""
    nc = core()
    me = nc.program_id
    pairs = [(int(s), int(t)) for s, t in source_target_pairs]
    for s, t in pairs:
        if not (0 <= s < nc.num_programs and 0 <= t < nc.num_programs):
            raise KernelError(f"collective_permute pair ({s}, {t}): ranks of this launch are 0..{nc.num_programs - 1}")
    if len(srcs) != 1 or len(dsts) != 1:
        raise KernelError(f"collective_permute takes exactly one src and one dst tensor; got {len(srcs)} and {len(dsts)}")
    (src, dst), = _pairs(srcs, dsts, "collective_permute")
    if (me, me) in pairs:
        nisa.dma_copy(dst, src)
    crossing = [(s, t) for s, t in pairs if s != t]
    if crossing:
        # Both ranks take part in the exchange; a rank that is not a target of the peer keeps its dst.
        receives = (1 - me, me) in crossing
        _exchange(src, dst if receives else _scratch_like(dst))


def _ring_step(group, srcs_by_channel, dsts_by_channel, channel_ids, send_of):
    """Each channel: this rank's tile goes to its ring successor, its predecessor's lands in dst. In a ring
    of two the successor and the predecessor are the peer; in a ring of one, the rank itself."""
    if len(srcs_by_channel) != len(dsts_by_channel) or len(channel_ids) != len(dsts_by_channel):
        raise ShapeError(f"ring collective: {len(srcs_by_channel)} src channels, {len(dsts_by_channel)} dst "
                         f"channels and channel_ids {list(channel_ids)} must match")
    if list(channel_ids) != list(range(len(channel_ids))):
        raise KernelError(f"ring collective: channel_ids {list(channel_ids)} must be consecutive from 0")
    for ch, srcs, dsts in zip(channel_ids, srcs_by_channel, dsts_by_channel):
        # srcs: one list of tensors per operand (one operand for a permute, two for a reduce)
        if len(dsts) != 1 or any(len(x) != 1 for x in srcs):
            raise KernelError("ring collective: each channel takes exactly one tensor per list")
        send, dst = send_of([x[0] for x in srcs]), dsts[0]
        if len(group) == 1:
            nisa.dma_copy(dst, send)
        else:
            _exchange(send, dst, pipe=1 + int(ch))


def collective_permute_implicit(srcs_by_channel, dsts_by_channel, replica_group, channel_ids=(0,), priority=None,
                                name=None):
    """Each rank sends its src to its successor in the rank-list's ring and receives its predecessor's."""
    group = _members(replica_group)
    _ring_step(group, [[c] for c in srcs_by_channel], dsts_by_channel, channel_ids, lambda ts: ts[0])


def collective_permute_implicit_reduce(srcs0_by_channel, srcs1_by_channel, dsts_by_channel, replica_group, op,
                                       channel_ids=(0,), priority=None, name=None):
    """Each rank sends op(srcs0, srcs1) to its ring successor and receives its predecessor's into dst."""
    group = _members(replica_group)

    def reduced(ts):
        a, b = ts
        t = _scratch_like(a)
        _combine(t, a, b, op)
        return t
    _ring_step(group, list(zip(srcs0_by_channel, srcs1_by_channel)), dsts_by_channel, channel_ids, reduced)


def collective_permute_implicit_current_processing_rank_id(iteration_id, replica_group, channel_id=0, name=None):
    """The rank whose data this rank holds at ring step `iteration_id`: its own at step 0, then its
    predecessors' in ring order; a register, as on hardware."""
    group = _members(replica_group)
    me = group.index(core().program_id)
    step = core().read_register(iteration_id, "a ring step")
    return Register(group[(me - step) % len(group)], name="rank")


# -- the variable-size collectives: flat element buffers sized by a uint32 metadata tensor -------------------
# Rows of the metadata tensor ((rows, ranks) in HBM, (1, rows, ranks) in SBUF), one column per rank of the
# rank-list: send counts, send displacements, receive counts (written back unless recv_counts_known) and,
# with has_rdispls, receive displacements. Counts and displacements are in elements.
SEND_COUNT, SEND_DISPL, RECV_COUNT, RECV_DISPL = range(4)


@dataclasses.dataclass
class PreparedCollective(NKIObject):
    """What a `*_v_prepare` hands its trigger: the operands and the metadata it read (counts per rank)."""

    kind: str
    src: object
    dst: object
    group: list
    metadata: object
    recv_counts_known: bool
    sent: list  # sent[i][j]: (count, displacement) rank-list member i sends member j
    rdispls: list | None  # this rank's receive displacement per sender, or None (equal slots)
    location: str = ""
    triggered: bool = False


_PENDING: dict = {}  # id(core) -> (core, the prepare awaiting its trigger): prepares share one slot per core


def _metadata_flat(md, rows, n, what):
    want = (rows, n) if not md.on_chip else (1, rows, n)
    if md.dtype.name != "uint32":
        raise KernelError(f"{what}: metadata_tensor is {md.dtype.name}; it is nl.uint32")
    if md.ndim < 2 or md.shape[-1] != n or md.shape[-2] < rows:
        raise ShapeError(f"{what}: metadata_tensor {list(md.shape)} must be {list(want)} (rows: send counts, send "
                         f"displacements, receive counts{', receive displacements' if rows == 4 else ''}; one "
                         f"column per rank of the rank-list)")
    if md.on_chip and (md.ndim != 3 or md.shape[0] != 1):
        raise ShapeError(f"{what}: an SBUF metadata_tensor lives on one partition: (1, {rows}, {n}), not "
                         f"{list(md.shape)}")
    return md.reshape((1, md.size)) if md.on_chip else md.reshape((md.size,))


def _element(flat, k):
    return flat[0:1, k:k + 1] if flat.ndim == 2 else flat[k:k + 1]


def _read(flat, n_cols, row, col) -> int:
    """One metadata entry, through a sequencer register as the collective's setup reads it."""
    reg = Register(name=f"md{row}_{col}")
    nisa.register_load(reg, _element(flat, row * n_cols + col))
    return int(core().read_register(reg, "a variable-size collective's element count"))


def _prepare(kind, srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls):
    """Check the operands and read the metadata of every rank of the rank-list (the peer's comes over a
    sendrecv): the setup half of a variable-size collective."""
    what = f"{kind}_prepare"
    srcs, dsts = list(srcs), list(dsts)
    if len(srcs) != 1 or len(dsts) != 1:
        raise KernelError(f"{what}: exactly one src and one dst tensor; got {len(srcs)} and {len(dsts)}")
    src, dst = srcs[0], dsts[0]
    if src.on_chip or dst.on_chip:
        raise KernelError(f"{what}: src and dst are HBM tensors (flat element buffers); got "
                          f"{src.space.value} and {dst.space.value}")
    if kind == "all_gather_v" and has_rdispls:
        raise KernelError(f"{what}: has_rdispls=True is not supported for all_gather_v (nki.collectives."
                          f"all_gather_v: current limitations); incoming chunks land in equal slots")
    group = _members(replica_group)
    n, me = len(group), group.index(core().program_id)
    rows = 4 if has_rdispls else 3
    md = metadata_tensor
    flat = _metadata_flat(md, rows, n, what)

    def sends(f):
        """(count, displacement) per destination; all_gather_v broadcasts one chunk: only column 0 is read."""
        if kind == "all_gather_v":
            return [(_read(f, n, SEND_COUNT, 0), _read(f, n, SEND_DISPL, 0))] * n
        return [(_read(f, n, SEND_COUNT, j), _read(f, n, SEND_DISPL, j)) for j in range(n)]
    sent = [None] * n
    sent[me] = sends(flat)
    if n == 2:
        other = ndarray(md.shape, md.dtype, "sbuf" if md.on_chip else "hbm")
        _exchange(md, other)
        sent[1 - me] = sends(other.reshape(flat.shape))
    rdispls = [_read(flat, n, RECV_DISPL, j) for j in range(n)] if has_rdispls else None
    for count, displ in sent[me]:
        if displ + count > src.size:
            raise OutOfBoundsError(f"{what}: a chunk of {count} elements at displacement {displ} runs past src "
                                   f"{src.name!r} of {src.size} elements")
    return PreparedCollective(kind, src, dst, group, md, bool(recv_counts_known), sent, rdispls, where())


def _landing(p: PreparedCollective, sender: int) -> int:
    """Where in this rank's dst the chunk from rank-list member `sender` begins."""
    me = p.group.index(core().program_id)
    count = p.sent[sender][me][0]
    if p.rdispls is not None:
        at, room = p.rdispls[sender], p.dst.size - p.rdispls[sender]
    else:
        slot = p.dst.size // len(p.group)
        at, room = slot * sender, slot
    if count > room:
        raise OutOfBoundsError(f"{p.kind}: {count} elements from rank {p.group[sender]} do not fit at element {at} "
                               f"of dst {p.dst.name!r} ({room} elements there)")
    return at


def _trigger(p: PreparedCollective):
    """The data half: each rank's chunk for each rank of the rank-list moves into that rank's dst; receive
    counts are written into row 2 of the metadata unless recv_counts_known."""
    me = p.group.index(core().program_id)
    src, dst = p.src.reshape((p.src.size,)), p.dst.reshape((p.dst.size,))
    count, displ = p.sent[me][me]
    at = _landing(p, me)
    if count:
        nisa.dma_copy(dst[at:at + count], src[displ:displ + count])
    if len(p.group) == 2:
        peer = 1 - me
        (out_count, out_displ), in_count = p.sent[me][peer], p.sent[peer][me][0]
        width = max(out_count, in_count)  # one exchange both ways: as long as the longer chunk
        if width:
            at = _landing(p, peer)
            send = src[out_displ:out_displ + width] if out_displ + width <= src.size else None
            if send is None:
                send = ndarray((width,), src.dtype, "hbm")
                if out_count:
                    nisa.dma_copy(send[0:out_count], src[out_displ:out_displ + out_count])
            if in_count == width:
                _exchange(send, dst[at:at + width])
            else:
                recv = ndarray((width,), dst.dtype, "hbm")
                _exchange(send, recv)
                if in_count:
                    nisa.dma_copy(dst[at:at + in_count], recv[0:in_count])
    if not p.recv_counts_known:
        flat = _metadata_flat(p.metadata, 3, len(p.group), p.kind)
        for j in range(len(p.group)):
            nisa.register_store(_element(flat, RECV_COUNT * len(p.group) + j),
                                Register(p.sent[j][me][0], name=f"recv{j}"))


def _prepare_into_slot(kind, *args):
    _versions.added(f"nki.collectives.{kind}_prepare")
    nc = core()
    held = _PENDING.get(id(nc))
    if held is not None and held[0] is nc:
        raise KernelError(f"{kind}_prepare: the {held[1].kind}_prepare before it has not been triggered; prepares "
                          f"share one slot, so each is followed by its trigger before the next prepare")
    p = _prepare(kind, *args)
    _PENDING[id(nc)] = (nc, p)
    return p


def _untriggered(cores):
    """A prepare a core of the launch left without its trigger (forgotten either way)."""
    left = [p for p in (_PENDING.pop(id(c), (None, None))[1] for c in cores) if p is not None]
    if left:
        return KernelError(f"{left[0].kind}_prepare was never triggered: each prepare is followed by exactly one "
                           f"{left[0].kind}_trigger", left[0].location)
    return None


LAUNCH_END.append(_untriggered)


def _trigger_from_slot(kind, prepare_instr):
    _versions.added(f"nki.collectives.{kind}_trigger")
    nc = core()
    if not isinstance(prepare_instr, PreparedCollective) or prepare_instr.kind != kind:
        raise KernelError(f"{kind}_trigger takes the instruction {kind}_prepare returned; got {prepare_instr!r}")
    held = _PENDING.get(id(nc))
    if held is None or held[1] is not prepare_instr:
        raise KernelError(f"{kind}_trigger: its prepare was "
                          f"{'already triggered' if prepare_instr.triggered else 'not the last prepare'}; each "
                          f"prepare is followed by exactly one trigger")
    del _PENDING[id(nc)]
    prepare_instr.triggered = True
    _trigger(prepare_instr)
    return prepare_instr


def _named(fn):
    """`fn`, a collective, giving the instructions it issues its `name=`, by which `Kernel.with_schedule` edges
    name them (NKI 0.5: every collective takes `name` so that they can)."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        name = signature.bind(*args, **kwargs).arguments.get("name")
        if name is None:
            return fn(*args, **kwargs)
        name = _instruction_name(name)
        stream = core().stream
        first = len(stream)
        out = fn(*args, **kwargs)
        give_name(stream[first:], name)
        return out
    return call


def _split(kind):
    """The prepare and trigger halves of a variable-size collective (NKI 0.7)."""
    def prepare(srcs, dsts, replica_group, metadata_tensor, recv_counts_known=False, has_rdispls=False,
                priority=None, name=None) -> PreparedCollective:
        return _prepare_into_slot(kind, srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls)

    def trigger(prepare_instr, name=None):
        return _trigger_from_slot(kind, prepare_instr)
    prepare.__name__, trigger.__name__ = f"{kind}_prepare", f"{kind}_trigger"
    prepare.__doc__ = f"The setup half of {kind}: reads the metadata, not srcs or dsts."
    trigger.__doc__ = f"The data half of {kind}, with the operands of its prepare."
    return prepare, trigger


all_gather_v_prepare, all_gather_v_trigger = _split("all_gather_v")
all_to_all_v_prepare, all_to_all_v_trigger = _split("all_to_all_v")


def all_gather_v(srcs, dsts, replica_group, metadata_tensor, recv_counts_known=False, has_rdispls=False,
                 priority=None, name=None):
    """Each rank's one chunk src[send_displ : send_displ + send_count] lands in every rank's dst, sender s's in
    slot s (dst split equally among the rank-list)."""
    _trigger(_prepare("all_gather_v", srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls))


def all_to_all_v(srcs, dsts, replica_group, metadata_tensor, recv_counts_known=False, has_rdispls=False,
                 priority=None, name=None):
    """Rank i's chunk for rank j (send_counts[j] elements at send_displs[j]) lands in rank j's dst, in slot i or
    at recv_displs[i]."""
    _trigger(_prepare("all_to_all_v", srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls))


for _name, _fn in list(globals().items()):
    if inspect.isfunction(_fn) and _fn.__module__ == __name__ and not _name.startswith("_") \
            and "name" in inspect.signature(_fn).parameters:
        globals()[_name] = _named(_fn)
