"""Which algorithm the runtime picks, and what a collective costs on the real links.

Two models price a schedule's phases, both linear in the message size per phase:
- "alpha-beta": a round costs the longest hop latency of its transfers plus the busiest resource's
  bytes over its capacity (every transfer of a round runs at once);
- "flow": a round's transfers are flows sharing the resources max-min fairly (progressive
  filling, recomputed as flows finish); the round ends when its last flow does.
A collective costs the chip's launch floor plus its phases' rounds. Because every round of a
phase moves bytes proportional to the message, each phase is priced once per (group, algorithm)
and cached: `collective_time` is then a few multiply-adds.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from trnsim.errors import ConfigError, TrnsimError, UnknownNameError, user_location
from trnsim.fabric import algorithms as A
from trnsim.fabric.cluster import Cluster, RankError
from trnsim.specs import fabric as fabric_specs

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "all_to_allv", "permute", "send_recv", "broadcast")
ALGORITHMS = ("ring", "torus", "mesh", "rdh", "kangaring", "hierarchical", "oneshot", "direct")
MODELS = ("alpha-beta", "flow")
_KIND = {"all_reduce": "ar", "reduce_scatter": "rs", "all_gather": "ag"}


class AlgorithmError(TrnsimError, ValueError):
    """An algorithm forced on a group or operation it cannot serve."""

    exit_code = 2


def _where() -> str:
    loc = user_location()
    return f" (at {loc})" if loc else ""


def check_op(op: str) -> str:
    if op not in OPS:
        raise UnknownNameError("collective operation", op, OPS)
    return op


@dataclass(frozen=True, eq=False)
class Group:
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
        Y = len(np.unique(nodes))
        if self.n % Y:
            return None
        X = self.n // Y
        ln, ll = nodes.reshape(Y, X), local.reshape(Y, X)
        ok = (ln == ln[:, :1]).all() and (ll == ll[:1]).all() and (np.diff(ln[:, 0]) > 0).all()
        return (Y, X) if ok else None

    @cached_property
    def nodes(self) -> int:
        return len(np.unique(self.ranks // self.cluster.ranks_per_node))

    @cached_property
    def pairs_on_chips(self) -> bool:
        """KangaRing needs ranks 2i and 2i+1 of the group on the same chip."""
        return self.n % 2 == 0 and self.n >= 4 and bool((self.chips[0::2] == self.chips[1::2]).all())


def group_of(cluster: Cluster, group) -> Group:
    """A Group from None (every rank), a rank count (the first n ranks) or a sequence of ranks; cached."""
    cache = cluster.__dict__.setdefault("_groups", {})
    key = group if group is None or isinstance(group, (int, np.integer)) else tuple(map(int, group))
    if key not in cache:
        if len(cache) > 4096:
            cache.clear()
        cache[key] = _new_group(cluster, group)
    return cache[key]


def _new_group(cluster: Cluster, group) -> Group:
    if group is None:
        ranks = np.arange(cluster.ranks)
    elif isinstance(group, (int, np.integer)) and not isinstance(group, bool):
        if not 1 <= group <= cluster.ranks:
            raise RankError(f"{group} ranks do not fit {cluster.name}: it holds {cluster.ranks} "
                            f"({cluster.chips} chips x {cluster.cores_per_chip} logical cores at LNC {cluster.lnc}){_where()}")
        ranks = np.arange(group)
    else:
        ranks = np.asarray(list(group), dtype=np.int64)
        if ranks.ndim != 1 or len(ranks) == 0:
            raise RankError(f"a group is a non-empty list of ranks, got {group!r}{_where()}")
        cluster.check_ranks(ranks)
    return Group(cluster, ranks)


# ---------------------------------------------------------------------------------------------
# Algorithm choice, as the runtime makes it (reference 2.3-2.4), and the schedule of each choice

def _pow2(n: int) -> bool:
    return n >= 2 and n & (n - 1) == 0


def _intra(op: str, nbytes: float, g: Group, n: int) -> str:
    th, switch = fabric_specs.constants().thresholds, g.cluster.system.topology_kind == "switch"
    if switch:  # every chip one switch away: direct writes at every size (runtime 2.32: mesh on Trn3 Gen2);
        # one-shot all-reduce sends the whole buffer to every rank, so only while that stays a small message
        return "oneshot" if op == "all_reduce" and nbytes * n < th.mesh_max_bytes else "mesh"
    if nbytes < th.mesh_max_bytes:
        return "mesh"
    if nbytes < th.rdh_max_bytes and _pow2(n):
        return "rdh"
    return "kangaring" if g.pairs_on_chips and n == g.n else "ring"


def _inter(nbytes: float, Y: int) -> str:
    th = fabric_specs.constants().thresholds
    if nbytes < th.mesh_max_bytes and Y <= th.inter_mesh_max_nodes:
        return "mesh"
    return "rdh" if _pow2(Y) and nbytes < th.rdh_max_bytes else "ring"


def choose(op: str, nbytes: float, g: Group) -> str:
    """The algorithm the runtime would run for `op` of `nbytes` on group `g`."""
    if g.n == 1:
        return "direct"
    if op in ("all_to_all", "all_to_allv"):
        return "mesh"
    if op not in _KIND:
        return "direct"
    k, th = g.cluster.constants, fabric_specs.constants().thresholds
    multi = g.nodes > 1
    if k.policy == "ring":  # the 2023 runtime: rings, hierarchical below the flat-ring threshold
        return "hierarchical" if multi and g.grid and nbytes < th.flat_ring_min_bytes else "ring"
    if multi:
        return "hierarchical" if g.grid else "ring"
    return _intra(op, nbytes, g, g.n)


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


def _ring_orders(g: Group, rows: np.ndarray, ch: int, rotate: bool) -> np.ndarray:
    """[ch, G, M] ring orders of the rows of group positions: neighbours on wires, channels alternate direction.

    Members are visited chip by chip along the system's ring of chips, node by node; with `rotate`
    channel pairs start at different chips of every node, so flat rings leave each node through
    different EFA NICs.
    """
    c = g.cluster
    cyc = _chip_cycle(c.system)
    r = g.ranks[rows]
    node, local = np.divmod(r, c.ranks_per_node)
    key = (node * c.ranks_per_node + cyc[local // c.cores_per_chip] * c.cores_per_chip + local % c.cores_per_chip)
    base = np.argsort(key, axis=1, kind="stable")
    out = np.empty((ch,) + rows.shape, dtype=np.int64)
    G, M = rows.shape
    per_node = M // max(1, g.nodes) if rotate else M
    for k in range(ch):
        o = base
        if rotate and per_node > 1:
            step = (k // 2) * per_node // max(1, ch // 2)
            step -= step % min(c.cores_per_chip, per_node)
            o = o.reshape(G, -1, per_node)
            o = np.roll(o, -step, axis=2).reshape(G, M)
        out[k] = o if k % 2 == 0 else o[:, ::-1]
    return out


def schedule(op: str, algorithm: str, g: Group, nbytes: float = 0.0) -> A.Schedule:
    """The schedule of `op` with `algorithm` on group `g` (sub-algorithms of hierarchical by `nbytes`)."""
    n, c = g.n, g.cluster
    if op not in _KIND:
        return _pointwise(op, algorithm, g)
    kind = _KIND[op]
    natural = lambda ch, G, M: np.broadcast_to(  # noqa: E731
        np.where(np.arange(ch)[:, None, None] % 2 == 0, np.arange(M), np.arange(M)[::-1]), (ch, G, M)).copy()
    if algorithm in ("ring", "mesh", "rdh", "kangaring"):
        if algorithm == "rdh" and not _pow2(n):
            raise AlgorithmError(f"rdh needs a power-of-two group, got {n} ranks{_where()}")
        if algorithm == "kangaring" and not g.pairs_on_chips:
            raise AlgorithmError(f"kangaring needs ranks paired on chips (2i and 2i+1 on one chip, 4 or more ranks); "
                                 f"this group of {n} ranks has {c.cores_per_chip} rank(s) per chip{_where()}")
        # rings run one channel per direction, and across nodes one per EFA NIC (reference 2.4)
        ch = 1 if algorithm in ("mesh", "rdh") else max(2, fabric_specs.efa_nics(c.system.key) if g.nodes > 1 else 2)
        ch += ch % 2 if ch > 1 else 0
        rows = np.arange(n)[None, :]
        orders = _ring_orders(g, rows, ch, rotate=g.nodes > 1)
        return A.two_level(kind, 1, n, ch, algorithm, algorithm, orders, natural(ch, n, 1), algorithm)
    if algorithm == "oneshot":
        if kind != "ar":
            raise AlgorithmError(f"oneshot is an all_reduce algorithm, not one for {op}{_where()}")
        return A.two_level(kind, n, 1, 1, "ring", "oneshot", natural(1, n, 1), natural(1, 1, n), "oneshot")
    if algorithm in ("hierarchical", "torus"):
        Y, X, row, col = _two_level_shape(op, algorithm, g, nbytes)
        ch = 2
        r_orders = _ring_orders(g, np.arange(n).reshape(Y, X), ch, rotate=False)
        name = algorithm if algorithm == "torus" else f"hier({row}+{col})"
        return A.two_level(kind, Y, X, ch, row, col, r_orders, natural(ch, X, Y), name)
    raise AlgorithmError(f"{algorithm} does not run {op}; choose from ring, torus, mesh, rdh, kangaring, "
                         f"hierarchical, oneshot{_where()}")


def _two_level_shape(op: str, algorithm: str, g: Group, nbytes: float) -> tuple[int, int, str, str]:
    """(rows Y, members per row X, row algorithm, column algorithm) of hierarchical or torus."""
    n, c = g.n, g.cluster
    if algorithm == "torus":
        shape = c.system.topology_shape
        if c.system.topology_kind != "torus" or g.nodes > 1 or n != c.ranks_per_node:
            raise AlgorithmError(f"torus rings run on one whole torus system; this group is {n} ranks "
                                 f"on {g.nodes} {c.system.name} ({c.system.topology_kind}){_where()}")
        X = shape[-1] * c.cores_per_chip
        return n // X, X, "ring", "ring"
    if not g.grid or g.nodes < 2:
        raise AlgorithmError(f"hierarchical needs the same ranks on each of 2 or more nodes; "
                             f"this group of {n} ranks spans {g.nodes} node(s){_where()}")
    Y, X = g.grid
    if c.constants.policy == "ring":
        return Y, X, "ring", "ring"
    row, col = _intra(op, nbytes, Group(c, g.ranks[:X]), X), _inter(nbytes / X, Y)
    return Y, X, "mesh" if row == "oneshot" else row, col


def _pointwise(op: str, algorithm: str, g: Group, root: int = 0, pairs=None) -> A.Schedule:
    """Schedules for the data-movement ops: all_to_all (mesh), permute/send_recv/broadcast (direct)."""
    n = g.n
    if op in ("all_to_all", "all_to_allv"):
        if algorithm not in ("mesh", "direct"):
            raise AlgorithmError(f"{op} runs as mesh (direct writes), not {algorithm}{_where()}")
        q, off = np.meshgrid(np.arange(n), np.arange(1, n), indexing="ij")
        src, dst = q.T.ravel(), ((q + off) % n).T.ravel()
        return A.Schedule("mesh", n, np.arange(n), (A.Phase("mesh", src, dst, 1, False, 1, lambda s: dst),))
    if algorithm not in ("direct", "mesh"):
        raise AlgorithmError(f"{op} moves buffers directly between ranks (algorithm 'direct'), not {algorithm}{_where()}")
    if pairs is None:
        pairs = [(i, (i + 1) % n) for i in range(n)] if op in ("permute", "send_recv") else [(root, i) for i in range(n) if i != root]
    return A.pairwise("direct", n, pairs)


# ---------------------------------------------------------------------------------------------
# Pricing phases

def _incidence(g: Group, ph: A.Phase, fold: bool):
    net = g.cluster.network
    src, dst = g.chips[ph.src], g.chips[ph.dst]
    count = np.broadcast_to(ph.count, (len(src),))
    if fold:  # every node carries the same traffic: price what the first node sends, on one node's resources
        mine = src // net.C == g.chips[0] // net.C
        src, dst, count = src[mine], dst[mine], count[mine]
    t, res, w, lat = net.load(src, dst, ph.reduce)
    cap = net.capacity
    if fold:
        res, cap = res % net.per_node, cap[:net.per_node]
    return t, res, w, lat, cap, count


def _alpha_beta(g: Group, ph: A.Phase, fold: bool) -> tuple[float, float]:
    """(latency ns, ns per chunk) of one round."""
    if len(ph.src) == 0:
        return 0.0, 0.0
    t, res, w, lat, cap, count = _incidence(g, ph, fold)
    load = np.bincount(res, weights=w * count[t], minlength=len(cap))
    return float(lat.max()), float((load / cap).max() * 1e9)


def _max_min(t, res, w, cap, active):
    """Max-min fair rates (chunks/s) of the active flows: progressive filling."""
    rate = np.zeros(len(active))
    live = active.copy()
    left = cap.astype(float).copy()
    level = 0.0
    while live.any():
        on = live[t]
        wsum = np.bincount(res[on], weights=w[on], minlength=len(cap))
        used = wsum > 0
        inc = (left[used] / wsum[used]).min()
        level += inc
        left[used] -= wsum[used] * inc
        full = np.zeros(len(cap), dtype=bool)
        full[used] = left[used] <= 1e-9 * cap[used]
        done = np.zeros(len(active), dtype=bool)
        done[t[on & full[res]]] = True
        done &= live
        rate[done] = level
        live &= ~done
    return rate


def _flow(g: Group, ph: A.Phase, fold: bool = False) -> tuple[float, float]:
    """(latency ns, ns per chunk) of one round under max-min fair sharing, flows finishing in turn."""
    if len(ph.src) == 0:
        return 0.0, 0.0
    t, res, w, lat, cap, count = _incidence(g, ph, False)
    used, res = np.unique(res, return_inverse=True)
    cap = cap[used]
    left = count.astype(float)
    active = np.ones(len(ph.src), dtype=bool)
    clock = 0.0
    while active.any():
        rate = _max_min(t, res, w, cap, active)
        dt = (left[active] / rate[active]).min()
        left[active] -= rate[active] * dt
        clock += dt
        active &= left > 1e-9 * np.max(ph.count)
    return float(lat.max()), float(clock * 1e9)


@dataclass(frozen=True)
class Profile:
    """A priced schedule: time(nbytes) = floor + sum over phases of repeat * (latency + per_byte * nbytes)."""

    algorithm: str
    steps: int
    floor: float
    phases: tuple[tuple[str, int, float, float], ...]  # (name, repeat, latency ns, ns per byte)

    def time(self, nbytes: float) -> float:
        return self.floor + sum(rep * (lat + nbytes * per) for _, rep, lat, per in self.phases)


def profile(op: str, algorithm: str, g: Group, model: str = "alpha-beta", nbytes: float = 0.0) -> Profile:
    """Price the schedule once; cached per (group, op, algorithm, model, sub-algorithms)."""
    if model not in MODELS:
        raise UnknownNameError("timing model", model, MODELS)
    subs = _two_level_shape(op, algorithm, g, nbytes) if algorithm == "hierarchical" else None
    key = (g, op, algorithm, subs, model)  # groups are cached per cluster, so identity is enough
    cache = g.cluster.__dict__.setdefault("_profiles", {})
    if key not in cache:
        sch = schedule(op, algorithm, g, nbytes)
        fold = g.grid is not None and g.nodes > 1 and model == "alpha-beta"
        price = _alpha_beta if model == "alpha-beta" else _flow
        phases = []
        for ph in sch.phases:
            lat, per_chunk = price(g, ph, fold)
            phases.append((ph.name, ph.repeat, lat, per_chunk / sch.nchunks))
        floor = g.cluster.constants.launch_floor if sch.phases else 0.0
        cache[key] = Profile(sch.algorithm, sch.steps, floor, tuple(phases))
    return cache[key]


def price_once(g: Group, ph: A.Phase, model: str = "alpha-beta", unit_bytes: float = 1.0) -> float:
    """Nanoseconds of one collective made of the single round `ph` whose counts are in units of `unit_bytes`."""
    if model not in MODELS:
        raise UnknownNameError("timing model", model, MODELS)
    lat, per = (_alpha_beta if model == "alpha-beta" else _flow)(g, ph, False)
    return g.cluster.constants.launch_floor + lat + per * unit_bytes


def collective_time(op: str, nbytes: float, group=None, cluster: Cluster | None = None,
                    algorithm: str | None = None, model: str = "alpha-beta") -> tuple[float, str, int]:
    """Time of one collective: (nanoseconds, algorithm, steps).

    Args:
      op: all_reduce, all_gather, reduce_scatter, all_to_all, all_to_allv, permute, send_recv, broadcast.
      nbytes: the message size as nccom-test counts it (all_reduce: the buffer; all_gather: the
        gathered output; reduce_scatter: the input; all_to_all: the per-rank buffer).
      group: None (every rank of the cluster), a rank count (ranks 0..n-1) or a list of ranks.
      cluster: a Cluster (`trnsim.fabric.cluster("trn2.48xlarge", nodes=8)`).
      algorithm: force one of ALGORITHMS; None lets the runtime's rules choose by size and topology.
      model: "alpha-beta" (default, microseconds to price once, then cached) or "flow".
    """
    check_op(op)
    if cluster is None:
        raise ConfigError(f"collective_time needs a cluster, e.g. trnsim.fabric.cluster('trn2.48xlarge'){_where()}")
    if nbytes < 0:
        raise ConfigError(f"nbytes must be >= 0, got {nbytes}{_where()}")
    g = group if isinstance(group, Group) else group_of(cluster, group)
    if algorithm is not None and algorithm not in ALGORITHMS:
        raise UnknownNameError("collective algorithm", algorithm, ALGORITHMS)
    alg = algorithm or choose(op, nbytes, g)
    if g.n == 1:
        return 0.0, "direct", 0
    p = profile(op, alg, g, model, nbytes)
    return p.time(nbytes), p.algorithm, p.steps


def bus_factor(op: str, n: int) -> float:
    """nccom-test's bus-bandwidth factor (reference 2.5)."""
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all", "all_to_allv"):
        return (n - 1) / n
    return 1.0
