"""What a collective costs on the real links: `collective_time`, the planner's entry point.

Two models price a schedule's phases, both linear in the message size per phase:
- "alpha-beta": a round costs the longest hop latency of its transfers plus the busiest resource's
  bytes over its capacity (every transfer of a round runs at once);
- "flow": a round's transfers are flows sharing the resources max-min fairly (progressive
  filling, recomputed as flows finish); the round ends when its last flow does. For rounds of
  equal-size flows (every algorithm's) that is provably the alpha-beta bound, so only ragged
  rounds (all_to_allv) are simulated (see `_flow`).
A collective costs the chip's launch floor plus its phases' rounds. Because every round of a
phase moves bytes proportional to the message, each phase is priced once per (group, algorithm)
and cached: `collective_time` is then a few multiply-adds.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from trnsim import specs
from trnsim.errors import ConfigError, UnknownNameError
from trnsim.fabric import algorithms as A
from trnsim.fabric.cluster import Cluster, cluster as make_cluster, where
from trnsim.fabric.runtime import (ALGORITHMS, CollectiveGroup, candidates, check_op, group_of, hierarchical_parts, schedule,
                                   two_level_shape)
from trnsim.pure import pure

MODELS = ("alpha-beta", "flow")
FLOW_TOLERANCE = 0.01  # relative: flows finishing this close together end in one event of the flow model
FLOW_MAX_RANKS = 2**17  # the flow model prices every node's flows: 30,000 Trn2 chips (120,000 ranks) fit, Rainier does not


def _incidence(g: CollectiveGroup, ph: A.Phase, fold: bool, merge: bool = False):
    """Resource loads of a round's transfers: (transfer, resource, weight) entries, latency per
    transfer, capacities and chunks per transfer.

    fold: every node carries the same traffic, so price what the first node sends on one node's
    resources. merge: transfers between the same two chips add up (alpha-beta only: loads are sums).
    """
    net = g.cluster.network
    src, dst = g.chips[ph.src], g.chips[ph.dst]
    count = np.broadcast_to(ph.count, (len(src),)).astype(float)
    fold = fold and ph.uniform
    if fold:
        mine = src // net.C == g.chips[0] // net.C
        src, dst, count = src[mine], dst[mine], count[mine]
    if merge and not fold:
        pair, inv = np.unique(src * g.cluster.chips + dst, return_inverse=True)
        count = np.bincount(inv, weights=count)
        src, dst = np.divmod(pair, g.cluster.chips)
    t, res, w, lat = net.load(src, dst, ph.reduce)
    cap = net.capacity
    if fold:
        res, cap = res % net.per_node, cap[:net.per_node]
    return t, res, w, lat, cap, count


def _alpha_beta(g: CollectiveGroup, ph: A.Phase, fold: bool) -> tuple[float, float]:
    """(latency ns, ns per chunk) of one round."""
    if len(ph.src) == 0:
        return 0.0, 0.0
    t, res, w, lat, cap, count = _incidence(g, ph, fold, merge=True)
    load = np.bincount(res, weights=w * count[t], minlength=len(cap))
    return float(lat.max()), float((load / cap).max() * 1e9)


class _Incidence:
    """Flow-resource incidence indexed both ways, so progressive filling touches each entry once."""

    def __init__(self, t, res, w, flows: int, resources: int):
        self.t, self.res, self.w, self.R = t, res, w, resources
        self.by_res = np.argsort(res, kind="stable")
        self.res_ptr = np.searchsorted(res[self.by_res], np.arange(resources + 1))
        self.by_flow = np.argsort(t, kind="stable")
        self.flow_ptr = np.searchsorted(t[self.by_flow], np.arange(flows + 1))

    @staticmethod
    def _entries(order, ptr, ids):
        starts, lens = ptr[ids], ptr[ids + 1] - ptr[ids]
        first = np.repeat(starts - np.cumsum(lens) + lens, lens)
        return order[first + np.arange(lens.sum())]

    def max_min(self, cap, active):
        """Max-min fair rates (chunks/s) of the active flows: raise every live flow's rate together
        until a resource saturates, freeze the flows through it, repeat."""
        t, res, w = self.t, self.res, self.w
        rate, live = np.zeros(len(active)), active.copy()
        on = live[t]
        wsum = np.bincount(res[on], weights=w[on], minlength=self.R)
        left, level = cap.astype(float).copy(), 0.0
        while live.any():
            used = np.flatnonzero(wsum > 1e-12 * wsum.max())
            inc = (left[used] / wsum[used]).min()
            level += inc
            left[used] -= wsum[used] * inc
            full = used[left[used] <= 1e-9 * cap[used]]
            flows = np.unique(t[self._entries(self.by_res, self.res_ptr, full)])
            flows = flows[live[flows]]
            rate[flows], live[flows] = level, False
            gone = self._entries(self.by_flow, self.flow_ptr, flows)
            wsum -= np.bincount(res[gone], weights=w[gone], minlength=self.R)
            wsum[full] = 0.0
        return rate


def _flow(g: CollectiveGroup, ph: A.Phase, fold: bool = False, simulate: bool = False) -> tuple[float, float]:
    """(latency ns, ns per chunk) of one round under max-min fair sharing, flows finishing in turn.

    When every flow of the round has the same size the answer is known without simulating: the
    first resource to saturate is the one with the most flow weight per capacity; its flows all
    get the lowest rate, keep it (rates only rise as others finish) and finish together, last,
    at load / capacity: the alpha-beta bound. `simulate` runs the event loop anyway (tests do).
    """
    if len(ph.src) == 0:
        return 0.0, 0.0
    if not simulate and np.ndim(ph.count) == 0:
        return _alpha_beta(g, ph, fold)
    t, res, w, lat, cap, count = _incidence(g, ph, False)
    used, res = np.unique(res, return_inverse=True)
    cap = cap[used]
    inc = _Incidence(t, res, w, len(ph.src), len(cap))
    left = count.astype(float)
    active = np.ones(len(ph.src), dtype=bool)
    clock = 0.0
    while active.any():
        rate = inc.max_min(cap, active)
        finish = np.full(len(left), np.inf)
        finish[active] = left[active] / rate[active]
        dt = finish.min()
        # flows due within FLOW_TOLERANCE of the first finish together: one rate update for the batch
        done = finish <= dt * (1 + FLOW_TOLERANCE)
        left[active] -= rate[active] * dt
        clock += dt
        active &= ~done
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


def _column(g: CollectiveGroup, ph: A.Phase) -> tuple[float, float]:
    """(latency ns, ns per chunk) of one round of hierarchical's column level on a grid, from one column's
    transfers: node y's resources carry what member y of every column sends (its chip's memory path and
    NIC out) and receives (memory path, NIC in), so the busiest resource is found per distinct
    (sent, received) pair of the nodes without building the other columns."""
    if len(ph.src) == 0:
        return 0.0, 0.0
    net = g.cluster.network
    Y, X = g.grid
    count = np.broadcast_to(ph.count, (len(ph.src),)).astype(float)
    sent = np.bincount(ph.src // X, weights=count, minlength=Y)
    received = np.bincount(ph.dst // X, weights=count, minlength=Y)
    local = g.chips[:X] % net.C  # the chip of each column's member on every node
    nic, mem = net.nic_of(local), net.mem0 + local
    out = np.bincount(np.concatenate([net.nic_out0 + nic, mem]), minlength=net.per_node)
    w = 2.0 * net.reduce_cost if ph.reduce else 1.0
    into = (np.bincount(net.nic_in0 + nic, minlength=net.per_node)
            + w * np.bincount(mem, minlength=net.per_node))
    pairs = np.unique(sent + 1j * received)  # nodes that send and receive alike load their resources alike
    load = pairs.real[:, None] * out + pairs.imag[:, None] * into
    return float(net.k.efa_hop_latency), float((load / net.capacity[:net.per_node]).max() * 1e9)


def profile(op: str, algorithm: str, g: CollectiveGroup, model: str = "alpha-beta", nbytes: float = 0.0,
            subs: tuple[str, str] | None = None, detailed: bool = False) -> Profile:
    """Price the schedule of a collective (the speed layer keeps it per group, op, algorithm, model and
    sub-algorithms).

    Hierarchical on a grid of nodes under alpha-beta is priced from one row and one column (`_column`),
    never building a per-rank schedule: 25,000 nodes cost what one does. `detailed` builds and prices
    the whole schedule instead (the tests compare the two)."""
    if model not in MODELS:
        raise UnknownNameError("timing model", model, MODELS)
    subs = two_level_shape(op, algorithm, g, nbytes, subs)[2:] if algorithm == "hierarchical" else None
    symmetric = (not detailed and algorithm == "hierarchical" and model == "alpha-beta" and g.nodes > 1
                 and op in ("all_reduce", "reduce_scatter", "all_gather"))
    return _priced(g, op, algorithm, subs, model, symmetric, nbytes)


@pure(4096, key=lambda g, op, algorithm, subs, model, symmetric, nbytes: (g, op, algorithm, subs, model, symmetric))
def _priced(g: CollectiveGroup, op: str, algorithm: str, subs, model: str, symmetric: bool, nbytes: float) -> Profile:
    """`profile`'s schedule priced: the same for every size once its sub-algorithms are chosen (`nbytes` only
    builds the schedule)."""
    if symmetric:
        name, nchunks, parts = hierarchical_parts(op, g, nbytes, subs)
        priced = [(ph, _alpha_beta(g, dataclasses.replace(ph, uniform=True), True) if level == "row"
                   else _column(g, ph)) for level, ph in parts]
    else:
        if model == "flow" and g.n > FLOW_MAX_RANKS:
            raise ConfigError(f"the flow model simulates every node's flows, for at most {FLOW_MAX_RANKS:,} ranks; "
                              f"this group has {g.n:,}: use the alpha-beta model (the same figure wherever a "
                              f"round's flows are equal){where()}")
        sch = schedule(op, algorithm, g, nbytes, subs)
        fold = g.grid is not None and g.nodes > 1 and model == "alpha-beta"
        price = _alpha_beta if model == "alpha-beta" else _flow
        name, nchunks, priced = sch.algorithm, sch.nchunks, [(ph, price(g, ph, fold)) for ph in sch.phases]
    phases = tuple((ph.name, ph.repeat, lat, per_chunk / nchunks) for ph, (lat, per_chunk) in priced)
    floor = g.cluster.constants.launch_floor if phases else 0.0
    return Profile(name, sum(ph.repeat for ph, _ in priced), floor, phases)


def price_once(g: CollectiveGroup, ph: A.Phase, model: str = "alpha-beta", unit_bytes: float = 1.0) -> float:
    """Nanoseconds of one collective made of the single round `ph` whose counts are in units of `unit_bytes`."""
    if model not in MODELS:
        raise UnknownNameError("timing model", model, MODELS)
    lat, per = (_alpha_beta if model == "alpha-beta" else _flow)(g, ph, False)
    return g.cluster.constants.launch_floor + lat + per * unit_bytes


def collective_time(op: str, nbytes: float, group=None, cluster: Cluster | str | None = None,
                    algorithm: str | None = None, model: str = "alpha-beta") -> tuple[float, str, int]:
    """Time of one collective: (nanoseconds, algorithm, steps).

    Args:
      op: all_reduce, all_gather, reduce_scatter, all_to_all, all_to_allv, permute, send_recv, broadcast.
      nbytes: the message size as nccom-test counts it (all_reduce: the buffer; all_gather: the
        gathered output; reduce_scatter: the input; all_to_all: the per-rank buffer).
      group: None (every rank of the cluster), a rank count (ranks 0..n-1) or a list of ranks.
      cluster: a Cluster (`trnsim.fabric.cluster("trn2.48xlarge", nodes=8)`), or a system name for
        one node of it at the default LNC.
      algorithm: force one of ALGORITHMS; None lets the runtime's rules choose by size and topology.
      model: "alpha-beta" (default, microseconds to price once, then cached) or "flow".
    """
    check_op(op)
    if cluster is None:
        raise ConfigError(f"collective_time needs a cluster, e.g. trnsim.fabric.cluster('trn2.48xlarge'){where()}")
    if isinstance(cluster, str):
        cluster = _named_cluster(cluster, specs.active())
    if nbytes < 0:
        raise ConfigError(f"nbytes must be >= 0, got {nbytes}{where()}")
    g = group if isinstance(group, CollectiveGroup) else group_of(cluster, group)
    if algorithm is not None and algorithm not in ALGORITHMS:
        raise UnknownNameError("collective algorithm", algorithm, ALGORITHMS)
    if g.n == 1:
        return 0.0, "direct", 0
    alg, subs = (algorithm, None) if algorithm else pick(op, nbytes, g, model)
    if alg == "hierarchical" and subs is None:  # forced: with the row and column algorithms the runtime would pick
        subs = _fastest([c for c in candidates(op, nbytes, g) if c[0] == "hierarchical"] or [(alg, None)],
                        op, nbytes, g, model)[1]
    p = profile(op, alg, g, model, nbytes, subs)
    return p.time(nbytes), p.algorithm, p.steps


def pick(op: str, nbytes: float, g: CollectiveGroup, model: str = "alpha-beta") -> tuple[str, tuple[str, str] | None]:
    """The runtime's choice: the fastest of the algorithms it may run at this size (`runtime.candidates`)."""
    return _fastest(candidates(op, nbytes, g), op, nbytes, g, model)


def _fastest(cands, op: str, nbytes: float, g: CollectiveGroup, model: str):
    if len(cands) == 1:
        return cands[0]
    return min(cands, key=lambda a: profile(op, a[0], g, model, nbytes, a[1]).time(nbytes))


def choose(op: str, nbytes: float, g: CollectiveGroup, model: str = "alpha-beta") -> str:
    """The name of the algorithm the runtime runs for `op` of `nbytes` on group `g`."""
    return pick(op, nbytes, g, model)[0]


@pure()
def _named_cluster(name: str, hardware=None) -> Cluster:
    """A cluster by system name; `hardware` (the what-if chip in use) keys the cache."""
    return make_cluster(name)


def bus_factor(op: str, n: int) -> float:
    """nccom-test's bus-bandwidth factor (reference 2.5)."""
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all", "all_to_allv"):
        return (n - 1) / n
    return 1.0
