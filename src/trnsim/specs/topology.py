"""The chip-level graph of one system: which chips are wired to which, and how fast.

Nodes 0..chips-1 are chips (numbered as neuron-ls numbers devices: row by row in a torus, then
instance by instance); switch systems (NeuronSwitch, NVSwitch) add switch nodes after the chips.
A link's bandwidth is the per-chip figure of the catalog split evenly over the chip's links of
that class: the sources give per-chip totals only, and say neither how they split per link nor
whether they count one direction or both. trnsim.fabric builds on this graph (EFA, clusters, collectives).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True)
class Link:
    a: int
    b: int
    bandwidth: float  # bytes/s
    kind: str  # "torus", "ring" (UltraServer Z), "switch", "direct"


@dataclass(frozen=True)
class Topology:
    kind: str  # "single" | "torus" | "switch" | "nvswitch"
    shape: tuple[int, ...]
    chips: int
    switches: tuple[str, ...]  # names of switch nodes chips+0, chips+1, ...
    links: tuple[Link, ...]

    @cached_property
    def _adjacent(self) -> dict[int, tuple[int, ...]]:
        adj: dict[int, list[int]] = {n: [] for n in range(self.chips + len(self.switches))}
        for ln in self.links:
            adj[ln.a].append(ln.b)
            adj[ln.b].append(ln.a)
        return {n: tuple(v) for n, v in adj.items()}

    def neighbors(self, node: int) -> tuple[int, ...]:
        """Nodes wired directly to `node`, in link order."""
        return self._adjacent[node]

    def connected_chips(self, chip: int) -> tuple[int, ...]:
        """Chips one hop away, or one switch away: neuron-ls's CONNECTED DEVICES.

        Torus neighbours come in neuron-ls's order: the lower neighbour along each axis of the
        instance plane (row, then column), then the upper ones, then the instance ring.
        """
        out = []
        for n in self.neighbors(chip):
            out.extend([m for m in self.neighbors(n) if m < self.chips and m != chip] if n >= self.chips else [n])
        if self.kind == "torus":
            order = {c: i for i, c in enumerate(self._torus_order(chip))}
            out.sort(key=lambda c: order.get(c, len(order)))
        return tuple(dict.fromkeys(out))

    def _torus_order(self, chip: int) -> list[int]:
        strides = _strides(self.shape)
        coord = [(chip // st) % n for st, n in zip(strides, self.shape)]

        def step(axis: int, d: int) -> int:
            return chip + ((coord[axis] + d) % self.shape[axis] - coord[axis]) * strides[axis]

        plane, ring = range(len(self.shape) - 2, len(self.shape)), range(len(self.shape) - 2)
        return [step(a, -1) for a in plane] + [step(a, 1) for a in plane] + [step(a, d) for a in ring for d in (-1, 1)]


def _strides(shape: tuple[int, ...]) -> list[int]:
    """Row-major strides: the last axis varies fastest."""
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    return strides


def _torus(shape: tuple[int, ...], bandwidths: tuple[float, ...]) -> list[Link]:
    """Rings along every axis; axis 0 varies slowest (rows, then columns, then instances)."""
    links = []
    strides = _strides(shape)
    # The UltraServer's instance axis is listed first in the shape but numbered slowest.
    for coord in itertools.product(*[range(n) for n in shape]):
        node = sum(c * s for c, s in zip(coord, strides))
        for axis, n in enumerate(shape):
            if n < 2:
                continue
            nxt = list(coord)
            nxt[axis] = (coord[axis] + 1) % n
            other = sum(c * s for c, s in zip(nxt, strides))
            if n == 2 and coord[axis] == 1:
                continue  # a ring of two is one link
            links.append(Link(node, other, bandwidths[axis], "ring" if len(shape) == 3 and axis == 0 else "torus"))
    return links


def build(system) -> Topology:
    """The graph of an instance or UltraServer from its catalog record."""
    shape, n = system.topology_shape, system.chips
    if system.topology_kind == "single":
        return Topology("single", shape, n, (), ())
    if system.topology_kind == "torus":
        per_xy = system.intra_link_bandwidth / 4  # four torus neighbours inside an instance
        if len(shape) == 2:
            return Topology("torus", shape, n, (), tuple(_torus(shape, (per_xy, per_xy))))
        per_z = system.inter_link_bandwidth / 2  # two ring neighbours across instances
        return Topology("torus", shape, n, (), tuple(_torus(shape, (per_z, per_xy, per_xy))))
    if system.topology_kind == "switch":
        servers, per_server = shape
        bw = system.intra_link_bandwidth
        if servers <= 4:
            # Gen1 (seed 004 figure, as read in reference/multichip-and-training.md 1.4): servers 0+1 and
            # 2+3 each share a switch; chip i also links directly to chip i of the paired server.
            # The chip's bandwidth is assumed split evenly between its switch port and that link.
            names = tuple(f"switch{k}" for k in range((servers + 1) // 2))
            links = [Link(s * per_server + c, n + s // 2, bw / 2, "switch")
                     for s in range(servers) for c in range(per_server)]
            links += [Link(s * per_server + c, (s + 2) * per_server + c, bw / 2, "direct")
                      for s in range(servers - 2) for c in range(per_server)]
            return Topology("switch", shape, n, names, tuple(links))
        # Gen2: one first-level switch per server, two second-level switches; uplinks assumed non-blocking.
        names = tuple(f"l1-switch{s}" for s in range(servers)) + ("l2-switch0", "l2-switch1")
        links = [Link(s * per_server + c, n + s, bw, "switch") for s in range(servers) for c in range(per_server)]
        links += [Link(n + s, n + servers + k, bw * per_server / 2, "switch") for s in range(servers) for k in (0, 1)]
        return Topology("switch", shape, n, names, tuple(links))
    if system.topology_kind == "nvswitch":
        # One switch node stands for the baseboard's NVSwitches: each GPU has one aggregate port into it.
        links = tuple(Link(g, n, system.intra_link_bandwidth, "switch") for g in range(n))
        return Topology("nvswitch", shape, n, ("nvswitch",), links)
    raise ValueError(f"{system.name}: unknown topology kind {system.topology_kind!r}")
