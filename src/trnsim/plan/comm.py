"""How long one collective takes for one parallel group: the communication seam of the step model.

A CommModel answers `collective_time(op, nbytes, group, cluster)` in ns, for op in all_reduce,
all_gather, reduce_scatter, all_to_all and send_recv; `nbytes` is the full buffer (the reduced
buffer, the gathered output, the scattered input, one rank's all-to-all payload, the message).
`AlphaBeta` is an interim answer from catalog figures alone: hierarchical rings (intra-node
reduce-scatter, inter-node ring on 1/X of the data, intra-node all-gather, as the Neuron runtime
composes them), each rank getting its share of its chip's NeuronLink bandwidth inside a node and of
its node's EFA bandwidth between nodes, and a per-hop latency from training.toml.
`FabricComm` times them with trnsim.fabric on the real topology (the algorithm the runtime picks,
on the system's links and EFA NICs, with the fabric's fitted constants), and keeps AlphaBeta for
systems the fabric does not model (GPU instances: it models NeuronCore systems).
"""
from __future__ import annotations

from typing import Protocol

from trnsim import specs
from trnsim.pure import pure
from trnsim.specs import training
from trnsim.plan.layout import Cluster, ParallelGroup

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")


class CommModel(Protocol):
    name: str
    interim: bool

    def collective_time(self, op: str, nbytes: float, group: ParallelGroup, cluster: Cluster) -> float:
        """Time of one collective over `group`, in ns."""


@pure(64)
def _links(system_key: str, lnc: int, hardware=None) -> tuple[float, float, float, float]:
    """(intra-node bytes/s per rank, inter-node bytes/s per rank, intra alpha ns, inter alpha ns); `hardware`
    (the what-if chip in use) keys the cache."""
    system = specs.system(system_key)
    chip = system.chip
    per_chip = Cluster(system, 1, lnc).ranks_per_chip
    # every rank of a chip joins a collective at once (each in its own group), sharing the chip's links;
    # a one-chip system exchanges through its HBM (read and write)
    intra = system.intra_link_bandwidth or chip.hbm_bandwidth / 2
    inter = system.efa_bandwidth / (system.chips * per_chip)
    return intra / per_chip, inter, training.link_latency("intra_node"), training.link_latency("inter_node")


def _ring(n: int, nbytes: float, bw: float, alpha: float, passes: int) -> float:
    """`passes` trips around a ring of n (1: reduce-scatter or all-gather, 2: all-reduce)."""
    if n <= 1:
        return 0.0
    return passes * (n - 1) * alpha + passes * (n - 1) / n * nbytes / bw * 1e9


class AlphaBeta:
    """Interim collective model: hierarchical rings, per-hop latency plus bytes over per-rank bandwidth."""

    name = "alpha-beta"
    interim = True

    def collective_time(self, op: str, nbytes: float, group: ParallelGroup, cluster: Cluster) -> float:
        if op not in OPS:
            raise ValueError(f"unknown collective {op!r}; known: {', '.join(OPS)}")
        if group.size <= 1 or nbytes <= 0:
            return 0.0
        bw_in, bw_out, a_in, a_out = _links(cluster.system.key, cluster.lnc, specs.active())
        X, Y = group.per_node, group.nodes
        if op == "send_recv":
            return (a_out + nbytes / bw_out * 1e9) if Y > 1 else (a_in + nbytes / bw_in * 1e9)
        if op == "all_to_all":
            n = group.size
            return (n - 1) * (a_in if Y == 1 else a_out) + 1e9 * nbytes * ((X - 1) / n / bw_in + (n - X) / n / bw_out)
        passes = 2 if op == "all_reduce" else 1
        return (_ring(X, nbytes, bw_in, a_in, passes)  # intra-node reduce-scatter and/or all-gather
                + _ring(Y, nbytes / X, bw_out, a_out, passes))  # inter-node ring on this rank's 1/X


@pure(256)
def _fabric_cluster(system_key: str, nodes: int, lnc: int, hardware=None):
    """The fabric's cluster for a plan's cluster, or None where the fabric has no model of the system."""
    from trnsim import fabric

    system = specs.system(system_key)
    return fabric.cluster(system, nodes=nodes, lnc=lnc) if system.chip.is_neuron else None


@pure(65536)
def _fabric_time(op: str, nbytes: float, ranks: tuple[int, ...], system_key: str, nodes: int, lnc: int,
                 hardware=None) -> float:
    from trnsim import fabric

    return fabric.collective_time(op, nbytes, list(ranks), _fabric_cluster(system_key, nodes, lnc, hardware))[0]


class FabricComm:
    """Collectives timed by trnsim.fabric on the cluster's topology; AlphaBeta where the fabric has no model.

    A training step runs a collective in every group of a dimension at once. Groups inside one
    instance use disjoint chips; groups that cross instances share each instance's EFA NICs: together
    they load every NIC of a node evenly, while the fabric routes one group through its own chips' NICs
    only, so its bytes are scaled by how many groups' worth of traffic each of those NICs carries.
    """

    name = "fabric"
    interim = False

    def __init__(self, fallback: CommModel | None = None):
        self.fallback = fallback or AlphaBeta()

    def which(self, cluster: Cluster) -> CommModel:
        """The model that times this cluster's collectives."""
        return self if _fabric_cluster(cluster.system.key, cluster.nodes, cluster.lnc, specs.active()) else self.fallback

    def collective_time(self, op: str, nbytes: float, group: ParallelGroup, cluster: Cluster) -> float:
        if op not in OPS:
            raise ValueError(f"unknown collective {op!r}; known: {', '.join(OPS)}")
        if self.which(cluster) is not self:
            return self.fallback.collective_time(op, nbytes, group, cluster)
        if group.size <= 1 or nbytes <= 0:
            return 0.0
        ranks = group.ranks[:2] if op == "send_recv" else group.ranks
        return _fabric_time(op, float(nbytes * self.nic_sharing(group, cluster)), ranks,
                            cluster.system.key, cluster.nodes, cluster.lnc, specs.active())

    @staticmethod
    def nic_sharing(group: ParallelGroup, cluster: Cluster) -> float:
        """Groups' worth of EFA traffic on each NIC this group uses (1 inside one instance)."""
        if group.nodes <= 1:
            return 1.0
        network = _fabric_cluster(cluster.system.key, cluster.nodes, cluster.lnc, specs.active()).network
        R = cluster.ranks_per_node
        own = {network.nic_of(r // cluster.ranks_per_chip) for r in group.ranks if r < R}  # on rank 0's node
        return max(1.0, R // group.per_node * len(own) / network.nics)
