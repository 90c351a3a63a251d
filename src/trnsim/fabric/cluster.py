"""Clusters of Trainium systems and where each rank runs.

    >>> c = cluster("trn1.32xlarge", nodes=2)
    >>> c.ranks, c.place(33)
    (64, Placement(rank=33, node=1, chip=16, core=1))

A cluster is `nodes` copies of one catalog system (an instance or an UltraServer) joined over EFA.
Ranks are placed as the Neuron runtime places them: contiguous per node, then rank r of a node on
logical NeuronCore r, and logical cores to chips in order (`lnc` physical cores per logical core),
so chip d of a node holds logical cores [d*k, (d+1)*k) with k = cores per chip / lnc.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from trnsim import specs
from trnsim.errors import ConfigError, TrnsimError, user_location
from trnsim.specs import fabric as fabric_specs
from trnsim.specs.records import ChipSpec, SystemSpec


class RankError(TrnsimError, ValueError):
    """A rank count or rank list that the cluster cannot hold."""

    exit_code = 2


def where() -> str:
    """' (at path:line)' of the user's code that made the call, or '' when there is none."""
    loc = user_location()
    return f" (at {loc})" if loc else ""


@dataclass(frozen=True)
class Placement:
    rank: int
    node: int  # which system of the cluster
    chip: int  # global chip index: node * chips per node + chip in node
    core: int  # logical NeuronCore on that chip


@dataclass(frozen=True)
class Device:
    """One chip of a cluster: its catalog record, its HBM and the ranks (logical cores) on it."""

    index: int  # global chip index
    node: int
    spec: ChipSpec
    ranks: range

    @property
    def hbm_bytes(self) -> int:
        return self.spec.hbm_bytes

    @property
    def hbm_bandwidth(self) -> float:
        return self.spec.hbm_bandwidth


@dataclass(frozen=True, eq=False)
class Cluster:
    """`nodes` identical systems (instances or UltraServers) on one EFA network."""

    system: SystemSpec
    nodes: int
    lnc: int

    @property
    def chips_per_node(self) -> int:
        return self.system.chips

    @property
    def chips(self) -> int:
        return self.nodes * self.system.chips

    @property
    def cores_per_chip(self) -> int:
        """Logical NeuronCores (ranks) per chip."""
        return self.system.chip.cores // self.lnc

    @property
    def ranks_per_node(self) -> int:
        return self.system.chips * self.cores_per_chip

    @property
    def ranks(self) -> int:
        return self.nodes * self.ranks_per_node

    @property
    def constants(self) -> fabric_specs.ChipConstants:
        return fabric_specs.chip_constants(self.system.chip.key)

    @property
    def hbm_bytes_per_rank(self) -> int:
        return self.system.chip.hbm_bytes // self.cores_per_chip

    def place(self, rank: int) -> Placement:
        """Where rank `rank` runs (node, global chip, logical core on the chip)."""
        self.check_ranks([rank])
        node, local = divmod(rank, self.ranks_per_node)
        chip, core = divmod(local, self.cores_per_chip)
        return Placement(rank, node, node * self.chips_per_node + chip, core)

    def device(self, chip: int) -> Device:
        """Chip `chip` of the cluster (global index, node by node)."""
        if not 0 <= chip < self.chips:
            raise RankError(f"chip {chip} is outside {self.name}, which has chips 0..{self.chips - 1}{where()}")
        k = self.cores_per_chip
        return Device(chip, chip // self.chips_per_node, self.system.chip, range(chip * k, (chip + 1) * k))

    def chip_of(self, ranks):
        """Global chip index of each rank (numpy-vectorized)."""
        return ranks // self.cores_per_chip

    def check_ranks(self, ranks) -> None:
        bad = [r for r in ranks if not 0 <= int(r) < self.ranks]
        if bad:
            raise RankError(f"rank {bad[0]} is outside {self.name}, which holds ranks 0..{self.ranks - 1} "
                            f"({self.chips} chips x {self.cores_per_chip} logical cores at LNC {self.lnc}){where()}")
        if len(set(int(r) for r in ranks)) != len(ranks):
            raise RankError(f"a rank appears twice in the group {list(ranks)[:16]}{where()}")

    @property
    def name(self) -> str:
        return self.system.name if self.nodes == 1 else f"{self.nodes} x {self.system.name}"

    @cached_property
    def network(self):
        from trnsim.fabric.network import Network

        return Network(self)

    def describe(self) -> str:
        """A few lines: systems, chips, ranks, links and EFA, for `trnsim ls` and reports."""
        s, net = self.system, self.network
        kinds = sorted({ln.kind for ln in s.topology.links})
        lines = [
            f"{self.name}: {self.chips:,} x {s.chip.name} in {self.nodes:,} x {s.name} "
            f"({s.topology_kind} {'x'.join(map(str, s.topology_shape))})",
            f"  ranks: {self.ranks:,} (LNC {self.lnc}: {self.cores_per_chip} per chip, {self.ranks_per_node} per node; "
            f"rank r -> node r // {self.ranks_per_node}, chip (r mod {self.ranks_per_node}) // {self.cores_per_chip})",
            f"  {s.chip.link}: {s.intra_link_bandwidth / 1e9:,.0f} GB/s per chip inside a server"
            + (f", {s.inter_link_bandwidth / 1e9:,.0f} GB/s across servers" if s.inter_link_bandwidth else "")
            + (f"; links: {', '.join(kinds)}" if kinds else ""),
        ]
        if self.nodes > 1:
            lines.append(f"  EFA: {net.nics} NICs x {net.nic_bandwidth * 8 / 1e9:,.0f} Gbps per node "
                         f"({s.efa_bandwidth * 8 / 1e9:,.0f} Gbps), non-blocking spine, "
                         f"{net.k.efa_hop_latency / 1e3:g} us per crossing")
        return "\n".join(lines)


def cluster(system: str | SystemSpec = "trn1.32xlarge", nodes: int = 1, lnc: int | None = None) -> Cluster:
    """`nodes` copies of a catalog system joined over EFA: an instance, an UltraServer, an UltraCluster.

    Args:
      system: a catalog name (`"trn2.48xlarge"`, `"Trn2 UltraServer"`, `"Trn3 Gen2 UltraServer"`) or record.
      nodes: how many of them (1,875 x trn2.48xlarge = 30,000 chips).
      lnc: logical NeuronCore size, 1 or 2; default the runtime's (1 on Trn1, 2 on Trn2/Trn3).
    """
    spec = system if isinstance(system, SystemSpec) else specs.system(system)
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise ConfigError(f"nodes must be a positive integer, got {nodes!r}{where()}")
    if not spec.chip.is_neuron:
        raise ConfigError(f"{spec.name} has {spec.chips} {spec.chip.vendor} {spec.chip.name} GPUs, no Neuron devices: "
                          f"trnsim simulates Trainium collectives (try trn1.32xlarge or trn2.48xlarge){where()}")
    if nodes > 1 and fabric_specs.efa_nics(spec.key) < 2 and spec.chips < 2:
        raise ConfigError(f"{spec.name} does not support multi-node collectives (single-chip size); "
                          f"use trn1.32xlarge or larger{where()}")
    lnc = spec.chip.lnc_default if lnc is None else lnc
    if lnc not in (1, 2):
        raise ConfigError(f"LNC must be 1 or 2 (NEURON_LOGICAL_NC_CONFIG), got {lnc!r}{where()}")
    if lnc not in spec.chip.lnc_configs:
        raise ConfigError(f"LNC {lnc} is not available on {spec.chip.name} (it supports LNC "
                          f"{', '.join(map(str, spec.chip.lnc_configs))}){where()}")
    return Cluster(spec, nodes, lnc)
