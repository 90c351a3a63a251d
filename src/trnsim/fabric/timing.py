"""What a collective costs on the real links: `collective_time`, the planner's entry point.

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

import functools
from dataclasses import dataclass

import numpy as np

from trnsim.errors import ConfigError, UnknownNameError
from trnsim.fabric import algorithms as A
from trnsim.fabric.cluster import Cluster, cluster as make_cluster, where
from trnsim.fabric.runtime import ALGORITHMS, Group, check_op, choose, group_of, schedule, two_level_shape

MODELS = ("alpha-beta", "flow")


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
    subs = two_level_shape(op, algorithm, g, nbytes) if algorithm == "hierarchical" else None
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
        cluster = _named_cluster(cluster)
    if nbytes < 0:
        raise ConfigError(f"nbytes must be >= 0, got {nbytes}{where()}")
    g = group if isinstance(group, Group) else group_of(cluster, group)
    if algorithm is not None and algorithm not in ALGORITHMS:
        raise UnknownNameError("collective algorithm", algorithm, ALGORITHMS)
    alg = algorithm or choose(op, nbytes, g)
    if g.n == 1:
        return 0.0, "direct", 0
    p = profile(op, alg, g, model, nbytes)
    return p.time(nbytes), p.algorithm, p.steps


@functools.cache
def _named_cluster(name: str) -> Cluster:
    return make_cluster(name)


def bus_factor(op: str, n: int) -> float:
    """nccom-test's bus-bandwidth factor (reference 2.5)."""
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all", "all_to_allv"):
        return (n - 1) / n
    return 1.0
