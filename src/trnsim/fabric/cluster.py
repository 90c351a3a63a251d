"""Clusters of Trainium systems and where each rank runs.

    >>> c = cluster("trn1.32xlarge", nodes=2)
    >>> c.ranks, c.place(33)
    (64, RankLocation(rank=33, node=1, chip=16, core=1))

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
class RankLocation:
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


class ClusterError(ConfigError):
    """A cluster that cannot be built: names the field, the rule and the numbers."""

    def __init__(self, field: str, rule: str):
        self.field, self.rule = field, rule
        super().__init__(f"cluster field {field!r}: {rule}")


@dataclass(frozen=True)
class Cluster:
    """`nodes` identical systems (instances or UltraServers) on one EFA network, and the logical core size: the
    one cluster of the fabric and the planner. Hashable by value, so caches key on it; a GPU system (kept for
    comparison by the planner) runs one rank per GPU."""

    system: SystemSpec
    nodes: int = 1
    lnc: int | None = None  # None: the generation's default

    def __post_init__(self):
        if isinstance(self.system, str):
            object.__setattr__(self, "system", specs.system(self.system))
        chip = self.system.chip
        if not chip.is_neuron:
            if self.lnc not in (None, 1):
                raise ClusterError("lnc", f"{self.system.name} has GPUs, not NeuronCores: LNC does not apply, got {self.lnc}")
            object.__setattr__(self, "lnc", 1)
        elif self.lnc is None:
            object.__setattr__(self, "lnc", chip.lnc_default)
        elif self.lnc not in chip.lnc_configs:
            raise ClusterError("lnc", f"{chip.name} allows LNC {', '.join(map(str, chip.lnc_configs))}, got {self.lnc}")
        if isinstance(self.nodes, bool) or not isinstance(self.nodes, int) or self.nodes < 1:
            raise ClusterError("nodes", f"must be a positive integer, got {self.nodes!r}")
        if self.nodes > 1 and self.system.efa_bandwidth <= 0:
            raise ClusterError("nodes", f"{self.nodes} x {self.system.name}: the catalog has no EFA bandwidth for "
                                        f"{self.system.name}, so a multi-node cluster cannot be timed")

    def __hash__(self):  # equal clusters have equal keys; a what-if system differs in its fields, not its key
        return hash((self.system.key, self.nodes, self.lnc))

    @property
    def chips_per_node(self) -> int:
        return self.system.chips

    @property
    def chips(self) -> int:
        return self.nodes * self.system.chips

    @property
    def ranks_per_chip(self) -> int:
        """Logical NeuronCores (Trainium) or GPUs per chip: one rank each."""
        chip = self.system.chip
        return chip.cores // self.lnc if chip.is_neuron else 1  # lnc checked against the chip's configs when made

    @property
    def ranks_per_node(self) -> int:
        return self.system.chips * self.ranks_per_chip

    @property
    def ranks(self) -> int:
        return self.nodes * self.ranks_per_node

    @property
    def constants(self) -> fabric_specs.ChipConstants:
        return fabric_specs.chip_constants(self.system.chip.key)

    @property
    def hbm_bytes_per_rank(self) -> int:
        return self.system.chip.hbm_bytes // self.ranks_per_chip

    def place(self, rank: int) -> RankLocation:
        """Where rank `rank` runs (node, global chip, logical core on the chip)."""
        self.check_ranks([rank])
        node, local = divmod(rank, self.ranks_per_node)
        chip, core = divmod(local, self.ranks_per_chip)
        return RankLocation(rank, node, node * self.chips_per_node + chip, core)

    def device(self, chip: int) -> Device:
        """Chip `chip` of the cluster (global index, node by node)."""
        if not 0 <= chip < self.chips:
            raise RankError(f"chip {chip} is outside {self.name}, which has chips 0..{self.chips - 1}{where()}")
        k = self.ranks_per_chip
        return Device(chip, chip // self.chips_per_node, self.system.chip, range(chip * k, (chip + 1) * k))

    def chip_of(self, ranks):
        """Global chip index of each rank (numpy-vectorized)."""
        return ranks // self.ranks_per_chip

    def check_ranks(self, ranks) -> None:
        bad = [r for r in ranks if not 0 <= int(r) < self.ranks]
        if bad:
            raise RankError(f"rank {bad[0]} is outside {self.name}, which holds ranks 0..{self.ranks - 1} "
                            f"({self.chips} chips x {self.ranks_per_chip} logical cores at LNC {self.lnc}){where()}")
        if len(set(int(r) for r in ranks)) != len(ranks):
            raise RankError(f"a rank appears twice in the group {list(ranks)[:16]}{where()}")

    @property
    def name(self) -> str:
        return self.system.name if self.nodes == 1 else f"{self.nodes} x {self.system.name}"

    @cached_property
    def network(self):
        from trnsim.fabric.network import Network

        return Network(self)

    def short(self) -> str:
        """One line for titles and messages: systems, ranks and LNC."""
        lnc = f", LNC {self.lnc}" if self.system.chip.core else ""
        return f"{self.nodes} x {self.system.name} ({self.ranks} ranks{lnc})"

    def describe(self) -> str:
        """A few lines: systems, chips, ranks, links and EFA, for `trnsim ls` and reports."""
        s, net = self.system, self.network
        kinds = sorted({ln.kind for ln in s.topology.links})
        lines = [
            f"{self.name}: {self.chips:,} x {s.chip.name} in {self.nodes:,} x {s.name} "
            f"({s.topology_kind} {'x'.join(map(str, s.topology_shape))})",
            f"  ranks: {self.ranks:,} (LNC {self.lnc}: {self.ranks_per_chip} per chip, {self.ranks_per_node} per node; "
            f"rank r -> node r // {self.ranks_per_node}, chip (r mod {self.ranks_per_node}) // {self.ranks_per_chip})",
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
