"""The cluster as a graph of shared resources: directed links, each chip's memory path, EFA NICs.

Every transfer between two ranks loads:
- the memory path (DMA + HBM) of its source chip (one read) and of its destination chip (one
  write; a reduction also reads the local operand and runs at 1/reduce_cost of copy speed),
- each directed NeuronLink / switch link on its route inside a system (shortest path, found once
  per system), or the source chip's EFA NIC out and the destination chip's NIC in across systems.

Capacities: a catalog per-chip link figure is split evenly over the chip's links (specs.topology),
and that share runs in each direction (fabric.toml says why); EFA is split evenly over the system's NICs;
each is scaled by the achieved efficiency in fabric.toml. The EFA spine is taken as non-blocking.
"""
from __future__ import annotations

from collections import deque

import numpy as np

from trnsim.specs import fabric as fabric_specs


class Network:
    """Resources and routes of a Cluster; resource ids are node * per_node + local id."""

    def __init__(self, cluster):
        s, k, self.k = cluster.system, cluster.constants, fabric_specs.constants().network
        topo = s.topology
        self.cluster, self.C = cluster, s.chips
        self.nics = fabric_specs.efa_nics(s.key)
        self.nic_bandwidth = s.efa_bandwidth / self.nics
        L = len(topo.links)
        # local resources: 2L directed links, C memory paths, nics out, nics in
        self.mem0, self.nic_out0, self.nic_in0 = 2 * L, 2 * L + self.C, 2 * L + self.C + self.nics
        self.per_node = 2 * L + self.C + 2 * self.nics
        cap = np.empty(self.per_node)
        per_direction = 1.0 if self.k.link_bandwidth_per_direction else 0.5
        for i, ln in enumerate(topo.links):
            cap[2 * i] = cap[2 * i + 1] = ln.bandwidth * per_direction * k.link_efficiency
        cap[self.mem0:self.nic_out0] = s.chip.hbm_bandwidth * k.hbm_efficiency
        cap[self.nic_out0:] = self.nic_bandwidth * self.k.efa_efficiency
        self.capacity = np.tile(cap, cluster.nodes)
        self.reduce_cost = k.reduce_cost
        self._routes(topo, k)

    def _routes(self, topo, k) -> None:
        """Shortest paths between every pair of chips of one system (BFS, first neighbour wins)."""
        C = self.C
        directed = {}
        for i, ln in enumerate(topo.links):
            directed[(ln.a, ln.b)], directed[(ln.b, ln.a)] = 2 * i, 2 * i + 1
        paths = [[None] * C for _ in range(C)]
        for a in range(C):
            prev = {a: None}
            q = deque([a])
            while q:
                u = q.popleft()
                for v in topo.neighbors(u):
                    if v not in prev:  # chips relay (torus routing), and so do switches
                        prev[v] = u
                        q.append(v)
            for b in range(C):
                hops, v = [], b
                while prev.get(v) is not None:
                    hops.append((prev[v], v))
                    v = prev[v]
                paths[a][b] = hops[::-1]
        H = max((len(p) for row in paths for p in row), default=0)
        self.route_res = np.full((C, C, max(H, 1)), -1, dtype=np.int64)
        self.route_lat = np.zeros((C, C))
        for a in range(C):
            for b in range(C):
                p = paths[a][b]
                self.route_res[a, b, :len(p)] = [directed[h] for h in p]
                switches = sum(1 for _, v in p if v >= C)
                self.route_lat[a, b] = (k.link_hop_latency * sum(1 for u, _ in p if u < C)
                                        + self.k.switch_hop_latency * switches)
            self.route_lat[a, a] = k.chip_hop_latency

    def nic_of(self, local_chip):
        return local_chip * self.nics // self.C

    def load(self, src_chip, dst_chip, reduce: bool):
        """Sparse incidence of transfers on resources: (transfer index, resource id, weight), latency per transfer."""
        src_chip, dst_chip = np.asarray(src_chip), np.asarray(dst_chip)
        T = len(src_chip)
        ns, ls = np.divmod(src_chip, self.C)
        nd, ld = np.divmod(dst_chip, self.C)
        same = ns == nd
        idx = np.arange(T)
        # inside a system: the precomputed route
        r = self.route_res[ls[same], ld[same]]
        ok = r >= 0
        t_link = np.broadcast_to(idx[same][:, None], r.shape)[ok]
        res_link = (r + (ns[same] * self.per_node)[:, None])[ok]
        # across systems: NIC out of the source's node, NIC in of the destination's
        far = ~same
        t_far = np.concatenate([idx[far], idx[far]])
        res_far = np.concatenate([ns[far] * self.per_node + self.nic_out0 + self.nic_of(ls[far]),
                                  nd[far] * self.per_node + self.nic_in0 + self.nic_of(ld[far])])
        mem_s = ns * self.per_node + self.mem0 + ls
        mem_d = nd * self.per_node + self.mem0 + ld
        t_idx = np.concatenate([t_link, t_far, idx, idx])
        res = np.concatenate([res_link, res_far, mem_s, mem_d])
        dst_w = 2.0 * self.reduce_cost if reduce else 1.0
        w = np.concatenate([np.ones(len(t_link) + len(t_far) + T), np.full(T, dst_w)])
        lat = np.where(same, self.route_lat[ls, ld], self.k.efa_hop_latency)
        return t_idx, res, w, lat
