"""What the Neuron runtime runs: the ranks of a collective, the algorithm it picks, and its schedule.

The choice follows reference 2.3-2.4: inside a Trn2/Trn3 node mesh for small messages, RDH for
medium ones, KangaRing for large; direct writes (mesh, one-shot) over Trn3's switches; across
nodes the hierarchical composition. Trn1 follows the 2023 runtime that produced its published
tables: rings only (fabric.toml, `policy`). Ring orders walk neighbouring chips, so each hop of
a ring is one NeuronLink where the topology allows.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from trnsim.errors import TrnsimError, UnknownNameError
from trnsim.fabric import algorithms as A
from trnsim.fabric.cluster import Cluster, RankError, where
from trnsim.pure import pure
from trnsim.specs import fabric as fabric_specs

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "all_to_allv", "permute", "send_recv", "broadcast")
ALGORITHMS = ("ring", "torus", "mesh", "rdh", "kangaring", "hierarchical", "oneshot", "direct")
_KIND = {"all_reduce": "ar", "reduce_scatter": "rs", "all_gather": "ag"}
MAX_DIRECT = 2**24  # direct writes (n * (n - 1) of them) one flat schedule may hold: 4,096 ranks; more would take gigabytes


class AlgorithmError(TrnsimError, ValueError):
    """An algorithm forced on a group or operation it cannot serve."""

    exit_code = 2



def check_op(op: str) -> str:
    if op not in OPS:
        raise UnknownNameError("collective operation", op, OPS)
    return op


@dataclass(frozen=True, eq=False)
class CollectiveGroup:
    """The ranks of one collective (group position i runs on global rank ranks[i]) and their shape."""

    cluster: Cluster
    ranks: np.ndarray

    @property
    def n(self) -> int:
        return len(self.ranks)

    @cached_property
    def chips(self) -> np.ndarray:
        return self.cluster.chip_of(self.ranks)

    @cached_property
    def grid(self) -> tuple[int, int] | None:
        """(nodes Y, ranks per node X) when every node holds the same local ranks, in order; else None."""
        c = self.cluster
        nodes, local = np.divmod(self.ranks, c.ranks_per_node)
        Y = self.nodes
        if self.n % Y:
            return None
        X = self.n // Y
        ln, ll = nodes.reshape(Y, X), local.reshape(Y, X)
        ok = (ln == ln[:, :1]).all() and (ll == ll[:1]).all() and (np.diff(ln[:, 0]) > 0).all()
        return (Y, X) if ok else None

    @cached_property
    def nodes(self) -> int:
        return int(np.count_nonzero(np.bincount(self.ranks // self.cluster.ranks_per_node)))  # O(n), no sort

    @cached_property
    def pairs_on_chips(self) -> bool:
        """KangaRing needs ranks 2i and 2i+1 of the group on the same chip."""
        return self.n % 2 == 0 and self.n >= 4 and bool((self.chips[0::2] == self.chips[1::2]).all())


def group_of(cluster: Cluster, group) -> CollectiveGroup:
    """A CollectiveGroup from None (every rank), a rank count (the first n ranks) or a sequence of ranks."""
    return _new_group(cluster, group if group is None or isinstance(group, (int, np.integer)) else tuple(map(int, group)))


@pure(4096)
def _new_group(cluster: Cluster, group) -> CollectiveGroup:
    if group is None:
        ranks = np.arange(cluster.ranks)
    elif isinstance(group, (int, np.integer)) and not isinstance(group, bool):
        if not 1 <= group <= cluster.ranks:
            raise RankError(f"{group} ranks do not fit {cluster.name}: it holds {cluster.ranks} "
                            f"({cluster.chips} chips x {cluster.ranks_per_chip} logical cores at LNC {cluster.lnc}){where()}")
        ranks = np.arange(group)
    else:
        ranks = np.asarray(list(group), dtype=np.int64)
        if ranks.ndim != 1 or len(ranks) == 0:
            raise RankError(f"a group is a non-empty list of ranks, got {group!r}{where()}")
        cluster.check_ranks(ranks)
    return CollectiveGroup(cluster, ranks)


def _pow2(n: int) -> bool:
    return n >= 2 and n & (n - 1) == 0


def _intra(op: str, nbytes: float, g: CollectiveGroup) -> list[str]:
    """What the runtime may run inside one node at this size (reference 2.3): each algorithm up to its
    published size limit, the large-message one at every size. Larger messages only lose candidates."""
    th = fabric_specs.constants().thresholds
    if g.cluster.system.topology_kind == "switch":
        # every chip one switch away: direct writes at every size (runtime 2.32: mesh on Trn3 Gen2);
        # one-shot all-reduce sends the whole buffer to every rank, so only while that stays small
        return ["oneshot"] * (op == "all_reduce" and nbytes * g.n < th.mesh_max_bytes) + ["mesh"]
    system = g.cluster.system
    if system.servers > 1 and system.topology_kind == "torus":
        # an UltraServer's torus spans servers over slower links: the published size limits are the
        # 16-chip instance's (reference 2.3), so every schedule trnsim has for it competes at every size,
        # whole-torus rings included when the group is the whole system
        whole, direct = g.nodes == 1 and g.n == g.cluster.ranks_per_node, g.n * (g.n - 1) <= MAX_DIRECT
        return (["oneshot"] * (op == "all_reduce" and direct) + ["mesh"] * direct + ["rdh"] * _pow2(g.n)
                + ["kangaring"] * g.pairs_on_chips + ["ring"] + ["torus"] * whole)
    out = ["mesh"] * (nbytes < th.mesh_max_bytes) + ["rdh"] * (nbytes < th.rdh_max_bytes and _pow2(g.n))
    return out + ["kangaring" if g.pairs_on_chips else "ring"]


def _inter(op: str, nbytes: float, Y: int) -> list[str]:
    """What the runtime may run across Y nodes (reference 2.4); all-reduce folds non-power-of-two RDH."""
    th = fabric_specs.constants().thresholds
    out = ["mesh"] * (nbytes < th.mesh_max_bytes and Y <= th.inter_mesh_max_nodes)
    return out + ["rdh"] * ((_pow2(Y) or op == "all_reduce") and nbytes < th.rdh_max_bytes) + ["ring"]


def rings_only(g: CollectiveGroup) -> bool:
    """Whether the 2023 runtime's rings-only policy holds: on Trn1, over as many nodes as its published tables
    measure (fabric.toml); beyond, the current runtime's choice."""
    return (g.cluster.constants.policy == "ring"
            and g.nodes <= fabric_specs.constants().thresholds.ring_policy_max_nodes)


def candidates(op: str, nbytes: float, g: CollectiveGroup) -> list[tuple[str, tuple[str, str] | None]]:
    """(algorithm, hierarchical's row and column algorithms or None) the runtime may run for `op` of `nbytes`.

    The runtime runs the fastest of them (`timing.choose`). Every algorithm's time grows with size and a
    larger message never gains a candidate, so the chosen time never falls as the message grows.
    """
    if g.n == 1:
        return [("direct", None)]
    if op in ("all_to_all", "all_to_allv"):
        return [("mesh", None)]
    if op == "broadcast":  # the root's direct writes, or scatter then ring all-gather for large messages
        return [("direct", None), ("ring", None)] if g.n > 2 else [("direct", None)]
    if op not in _KIND:
        return [("direct", None)]
    th = fabric_specs.constants().thresholds
    multi = g.nodes > 1
    if rings_only(g):  # the 2023 runtime: rings, hierarchical below the flat-ring threshold
        return [("hierarchical", None)] * bool(multi and g.grid and nbytes < th.flat_ring_min_bytes) + [("ring", None)]
    servers = _servers(g)
    if not multi and not servers:
        return [(a, None) for a in _intra(op, nbytes, g)]
    if not g.grid:
        return [("ring", None)]
    Y, X = servers or g.grid
    rows = dict.fromkeys("mesh" if a == "oneshot" else a for a in _intra(op, nbytes, CollectiveGroup(g.cluster, g.ranks[:X]))
                         if a != "torus")
    two = [("hierarchical", (r, c)) for r in rows for c in _inter(op, nbytes / X, Y)]
    if servers:
        return [(a, None) for a in _intra(op, nbytes, g)] + two
    # Trn1's runtime also keeps its flat ring over EFA (reference 2.4: for large messages, where it can win;
    # a candidate at every size, so that a larger message never gains one)
    return two + [("ring", None)] * (g.cluster.constants.policy == "ring")


def _servers(g: CollectiveGroup) -> tuple[int, int] | None:
    """(servers, ranks per server) when the group is a whole UltraServer of several servers (instances), whose
    links between servers make it a two-level system; else None."""
    s = g.cluster.system
    if g.nodes == 1 and s.servers > 1 and g.n == g.cluster.ranks_per_node:
        return s.servers, g.n // s.servers
    return None


def _chip_cycle(system) -> np.ndarray:
    """Position of each chip of a system on a ring through neighbours (snake through the torus)."""
    shape, n = system.topology_shape, system.chips
    if system.topology_kind != "torus":
        return np.arange(n)
    *outer, rows, cols = shape
    order = []
    for z in range(int(np.prod(outer)) if outer else 1):
        layer = [r * cols + (c if r % 2 == 0 else cols - 1 - c) for r in range(rows) for c in range(cols)]
        order += [z * rows * cols + i for i in (layer if z % 2 == 0 else layer[::-1])]
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    return pos


def _ring_orders(g: CollectiveGroup, rows: np.ndarray, ch: int, rotate: bool) -> np.ndarray:
    """[ch, G, M] ring orders of the rows of group positions: neighbours on wires, channels alternate direction.

    Members are visited chip by chip along the system's ring of chips, node by node; with `rotate`
    channel pairs start at different chips of every node, so flat rings leave each node through
    different EFA NICs.
    """
    c = g.cluster
    cyc = _chip_cycle(c.system)
    r = g.ranks[rows]
    node, local = np.divmod(r, c.ranks_per_node)
    key = (node * c.ranks_per_node + cyc[local // c.ranks_per_chip] * c.ranks_per_chip + local % c.ranks_per_chip)
    base = np.argsort(key, axis=1, kind="stable")
    out = np.empty((ch,) + rows.shape, dtype=np.int64)
    G, M = rows.shape
    per_node = M // max(1, g.nodes) if rotate else M
    for k in range(ch):
        o = base
        if rotate and per_node > 1:
            step = (k // 2) * per_node // max(1, ch // 2)
            step -= step % min(c.ranks_per_chip, per_node)
            o = o.reshape(G, -1, per_node)
            o = np.roll(o, -step, axis=2).reshape(G, M)
        out[k] = o if k % 2 == 0 else o[:, ::-1]
    return out


def _natural(ch: int, G: int, M: int) -> np.ndarray:
    """[ch, G, M] ring orders in position order, even channels forward and odd ones backward."""
    fwd = np.arange(M)
    return np.broadcast_to(np.where(np.arange(ch)[:, None, None] % 2 == 0, fwd, fwd[::-1]), (ch, G, M)).copy()


def schedule(op: str, algorithm: str, g: CollectiveGroup, nbytes: float = 0.0, subs: tuple[str, str] | None = None) -> A.Schedule:
    """The schedule of `op` with `algorithm` on group `g` (hierarchical's row and column algorithms
    `subs`, else the runtime's first candidates for `nbytes`)."""
    n, c = g.n, g.cluster
    if op == "broadcast" and algorithm == "ring":
        return _scatter_all_gather(g)
    if op not in _KIND:
        return _pointwise(op, algorithm, g)
    kind = _KIND[op]
    if algorithm in ("mesh", "oneshot"):
        _check_direct(algorithm, op, n)
    if algorithm in ("ring", "mesh", "rdh", "kangaring"):
        if algorithm == "rdh" and not _pow2(n) and kind != "ar":
            raise AlgorithmError(f"rdh {op} needs a power-of-two group, got {n} ranks (all_reduce folds "
                                 f"the extra ranks in){where()}")
        if algorithm == "kangaring" and not g.pairs_on_chips:
            raise AlgorithmError(f"kangaring needs ranks paired on chips (2i and 2i+1 on one chip, 4 or more ranks); "
                                 f"this group of {n} ranks has {c.ranks_per_chip} rank(s) per chip{where()}")
        # rings run one channel per direction, and across nodes one per EFA NIC (reference 2.4)
        ch = 1 if algorithm in ("mesh", "rdh") else max(2, fabric_specs.efa_nics(c.system.key) if g.nodes > 1 else 2)
        rows = np.arange(n)[None, :]
        orders = _ring_orders(g, rows, ch, rotate=g.nodes > 1)
        return A.two_level(kind, 1, n, ch, algorithm, algorithm, orders, _natural(ch, n, 1), algorithm)
    if algorithm == "oneshot":
        if kind != "ar":
            raise AlgorithmError(f"oneshot is an all_reduce algorithm, not one for {op}{where()}")
        return A.two_level(kind, n, 1, 1, "ring", "oneshot", _natural(1, n, 1), _natural(1, 1, n), "oneshot")
    if algorithm in ("hierarchical", "torus"):
        Y, X, row, col = two_level_shape(op, algorithm, g, nbytes, subs)
        ch = 2
        r_orders = _ring_orders(g, np.arange(n).reshape(Y, X), ch, rotate=False)
        name = algorithm if algorithm == "torus" else f"hier({row}+{col})"
        return A.two_level(kind, Y, X, ch, row, col, r_orders, _natural(ch, X, Y), name)
    raise AlgorithmError(f"{algorithm} does not run {op}; choose from ring, torus, mesh, rdh, kangaring, "
                         f"hierarchical, oneshot{where()}")


def hierarchical_parts(op: str, g: CollectiveGroup, nbytes: float = 0.0, subs: tuple[str, str] | None = None):
    """Hierarchical's phases for one row (node 0's) and one column (each node's first member), each marked
    "row" or "column", with the schedule's name and chunk count: on a grid every row moves the same
    traffic on its own node, and every column the same on each node's chips, so timing prices these
    alone (`timing.profile`) and never builds the other rows and columns."""
    Y, X, row, col = two_level_shape(op, "hierarchical", g, nbytes, subs)
    ch = 2
    rows, cols = A.grid_levels(Y, X, ch, _ring_orders(g, np.arange(X)[None, :], ch, rotate=False),
                               _natural(ch, 1, Y), rows=[0], cols=[0])
    return f"hier({row}+{col})", Y * X * ch, A.compose(_KIND[op], Y, row, col, rows, cols)


def two_level_shape(op: str, algorithm: str, g: CollectiveGroup, nbytes: float,
                    subs: tuple[str, str] | None = None) -> tuple[int, int, str, str]:
    """(rows Y, members per row X, row algorithm, column algorithm) of hierarchical or torus."""
    n, c = g.n, g.cluster
    if algorithm == "torus":
        shape = c.system.topology_shape
        if c.system.topology_kind != "torus" or g.nodes > 1 or n != c.ranks_per_node:
            raise AlgorithmError(f"torus rings run on one whole torus system; this group is {n} ranks "
                                 f"on {g.nodes} {c.system.name} ({c.system.topology_kind}){where()}")
        X = shape[-1] * c.ranks_per_chip
        return n // X, X, "ring", "ring"
    if not _servers(g) and (not g.grid or g.nodes < 2):
        raise AlgorithmError(f"hierarchical needs the same ranks on each of 2 or more nodes (or a whole UltraServer); "
                             f"this group of {n} ranks spans {g.nodes} node(s){where()}")
    Y, X = _servers(g) or g.grid
    if rings_only(g):
        return Y, X, "ring", "ring"
    if subs is None:
        row, col = _intra(op, nbytes, CollectiveGroup(c, g.ranks[:X]))[0], _inter(op, nbytes / X, Y)[0]
        subs = "mesh" if row == "oneshot" else row, col
    return Y, X, *subs


def _scatter_all_gather(g: CollectiveGroup) -> A.Schedule:
    """Broadcast from position 0 as large-message runtimes run it: the root scatters block x to
    position x, then a ring all-gather gives every rank every block ((n-1)/n of the message each way)."""
    n, ch = g.n, 2
    orders = _ring_orders(g, np.arange(n)[None, :], ch, rotate=g.nodes > 1)
    ag = A.two_level("ag", 1, n, ch, "ring", "ring", orders, _natural(ch, n, 1), "ring")
    dst = np.tile(np.arange(1, n), ch)
    starts = np.repeat(np.arange(ch), n - 1) * n + dst  # block x's part on channel c has id c*n + x
    scatter = A.Phase("scatter", np.zeros(len(dst), dtype=np.int64), dst, 1, False, 1, lambda s: starts, uniform=False)
    return A.Schedule("scatter+ring", ag.nchunks, ag.layout, (scatter,) + ag.phases)


def _check_direct(algorithm: str, op: str, n: int) -> None:
    """Direct writes between every pair of n ranks are priced transfer by transfer: refuse more than MAX_DIRECT."""
    if n * (n - 1) > MAX_DIRECT:
        raise AlgorithmError(f"{algorithm} {op} over {n:,} ranks is {n * (n - 1):,} direct writes per round; trnsim "
                             f"prices at most {MAX_DIRECT:,} (4,096 ranks); over more, use hierarchical{where()}")


def _pointwise(op: str, algorithm: str, g: CollectiveGroup) -> A.Schedule:
    """Schedules for the data-movement ops: all_to_all (mesh), permute/send_recv/broadcast (direct)."""
    n = g.n
    if op in ("all_to_all", "all_to_allv"):
        if algorithm not in ("mesh", "direct"):
            raise AlgorithmError(f"{op} runs as mesh (direct writes), not {algorithm}{where()}")
        _check_direct(algorithm, op, n)
        q, off = np.meshgrid(np.arange(n), np.arange(1, n), indexing="ij")
        src, dst = q.T.ravel(), ((q + off) % n).T.ravel()
        # (all_to_all's values are moved directly by collectives.all_to_all: sender and receiver slots differ)
        return A.Schedule("mesh", n, np.arange(n), (A.Phase("mesh", src, dst, 1, False, 1, lambda s: dst),))
    if algorithm not in ("direct", "mesh"):
        raise AlgorithmError(f"{op} moves buffers directly between ranks (algorithm 'direct'), not {algorithm}{where()}")
    pairs = {"permute": [(i, (i + 1) % n) for i in range(n)],  # the ring shift
             "send_recv": [(i, i + 1) for i in range(0, n - 1, 2)],  # position 2i sends to 2i+1
             "broadcast": [(0, i) for i in range(1, n)]}[op]  # from the group's first rank
    return A.pairwise("direct", n, pairs)
