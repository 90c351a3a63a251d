"""Typed, immutable records of the catalog: NeuronCore generations, chips and systems.

Each record is built from one TOML table (see data/). Figures are read in their published
units and stored in base units (bytes, bytes/s, Hz, FLOP/s, ns); `sources` maps each figure to
where it was published, `alternatives` keeps the figures other sources give for the same field,
and `notes` says which source a figure follows where sources disagree.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Mapping

from trnsim.errors import ConfigError, TrnsimError, UnknownNameError
from trnsim.specs.topology import Topology, build

# The dtype keys of peak-FLOPS tables, in the order spec sheets list them.
FLOPS_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "mxfp8", "mxfp4", "int8", "sparse")


class UnsupportedDTypeError(TrnsimError, ValueError):
    """A dtype the hardware has no datapath for (MXFP8 on Trainium2, say)."""


def _freeze(d: Mapping) -> Mapping:
    return MappingProxyType(dict(d))


_NONE: Mapping = MappingProxyType({})


class _Published:
    """A catalog record: printed by name (the figures are one `trnsim specs NAME` away), and where
    sources disagree, every published figure of a field keyed by its source."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def published(self, name: str) -> dict[str, float]:
        """`{source: value}` for field `name`: the figure trnsim uses first, then the alternatives."""
        used = {self.sources.get(name, "uncited"): getattr(self, name)}
        return used | dict(self.alternatives.get(name, {}))


def _peak(table: Mapping[str, float], dtype: str, what: str) -> float:
    if dtype not in FLOPS_DTYPES:
        raise UnknownNameError("peak-FLOPS dtype", dtype, FLOPS_DTYPES)
    if table.get(dtype, 0.0) <= 0.0:
        have = ", ".join(k for k in FLOPS_DTYPES if table.get(k, 0) > 0)
        raise UnsupportedDTypeError(f"{what} has no {dtype} datapath (it has: {have})")
    return table[dtype]


@dataclass(frozen=True, repr=False)
class NeuronCoreSpec(_Published):
    """One NeuronCore generation: engine clocks, memories, DMA and the Tensor engine's rates."""

    key: str  # "v2"
    name: str  # "NeuronCore-v2"
    target: str  # "trn1": the NKI platform target whose chips carry this core
    clocks: Mapping[str, float]  # engine -> Hz (tensor, vector, scalar, gpsimd, base)
    pe_rows: int
    pe_cols: int
    macs_per_pe_cycle: Mapping[str, float]  # dtype -> MACs per PE per TensorE cycle
    partitions: int
    sbuf_partition_bytes: int
    sbuf_reserved_bytes: int  # per partition, kept by the compiler
    psum_partition_bytes: int
    psum_banks: int
    dma_engines: int
    dma_engine_bandwidth: float  # bytes/s, achievable per engine (the DMA guide's table)
    dma_engine_bandwidth_peak: float  # bytes/s, theoretical per engine
    dma_fixed_latency: float  # ns per DMA: descriptor setup and semaphore to start
    hbm_bytes: int  # this core's share of the chip's HBM
    hbm_bandwidth: float  # bytes/s, this core's share
    limits: Mapping[str, int]  # nl.tile_size-style limits (pmax, gemm_moving_fmax, ...)
    cycles: Mapping[str, float]  # documented fixed costs in engine cycles (min_ii, ...)
    capabilities: Mapping[str, object]  # what its instructions can do: name -> true/false or the allowed values
    engines: Mapping[str, Mapping[str, tuple]]  # engine -> reads, writes (memories), dtypes (absent: any), mx_dtypes
    sources: Mapping[str, str] = field(repr=False)
    notes: tuple[str, ...] = field(default=(), repr=False)
    alternatives: Mapping[str, Mapping[str, float]] = field(default_factory=lambda: _NONE, repr=False)

    @property
    def version(self) -> int:
        return int(self.key[1:])

    def can(self, name: str):
        """Capability `name` of this generation (catalog `capabilities`): false, true, or the values allowed."""
        return self.capabilities[name]

    @cached_property
    def wiring(self) -> Mapping[str, tuple[frozenset, frozenset, frozenset | None]]:
        """engine -> (memories it reads, memories it writes, dtypes it takes or None for any), as sets; the MX
        dtypes count where the core has MX data paths."""
        mx = bool(self.capabilities.get("mx"))
        return {e: (frozenset(w["reads"]), frozenset(w["writes"]),
                    frozenset(w["dtypes"] + (w.get("mx_dtypes", ()) if mx else ())) if "dtypes" in w else None)
                for e, w in self.engines.items()}

    @property
    def sbuf_bytes(self) -> int:
        return self.partitions * self.sbuf_partition_bytes

    @property
    def sbuf_usable_partition_bytes(self) -> int:
        return self.sbuf_partition_bytes - self.sbuf_reserved_bytes

    @property
    def psum_bytes(self) -> int:
        return self.partitions * self.psum_partition_bytes

    @property
    def psum_bank_bytes(self) -> int:
        return self.psum_partition_bytes // self.psum_banks

    @property
    def dma_bandwidth(self) -> float:
        """Achievable DMA bandwidth of the whole core, bytes/s (16 engines together)."""
        return self.dma_engines * self.dma_engine_bandwidth

    def peak_flops(self, dtype: str = "bf16") -> float:
        """Dense Tensor-engine FLOP/s: 2 FLOP per MAC x PEs x MACs per PE-cycle x clock."""
        macs = _peak(self.macs_per_pe_cycle, dtype, self.name)
        return 2.0 * self.pe_rows * self.pe_cols * macs * self.clocks["tensor"]


@dataclass(frozen=True, repr=False)
class ChipSpec(_Published):
    """A device: Trainium, Trainium2, Trainium3 (or a GPU kept for comparison)."""

    key: str
    name: str
    vendor: str
    core: NeuronCoreSpec | None  # None for GPUs
    cores: int  # physical NeuronCores (0 on a GPU)
    hbm_bytes: int
    hbm_stacks: int
    hbm_bandwidth: float  # bytes/s
    dma_bandwidth: float  # bytes/s (0 where not published)
    dma_engines: int
    link: str  # "NeuronLink-v2", "NVLink-3", ...
    links: int  # chip-to-chip links per chip
    link_bandwidth: float  # bytes/s per chip, all links together
    cc_cores: int
    lnc_configs: tuple[int, ...]  # logical-NeuronCore configs the chip supports (empty on a GPU)
    lnc_default: int
    ratings: Mapping[str, Mapping[str, float]]  # rating -> dtype -> FLOP/s, as published
    rating: str  # the rating used unless asked otherwise
    price_usd: float  # purchase price per chip where a source gives one, else 0
    sources: Mapping[str, str] = field(repr=False)
    notes: tuple[str, ...] = field(default=(), repr=False)
    alternatives: Mapping[str, Mapping[str, float]] = field(default_factory=lambda: _NONE, repr=False)

    chips = 1  # a chip is a system of one, so chips and systems answer the same questions

    @property
    def is_neuron(self) -> bool:
        return self.core is not None

    @cached_property
    def topology(self) -> Topology:
        return Topology("single", (1,), 1, (), ())

    def logical_cores(self, lnc: int) -> int:
        """NeuronCores the runtime shows per chip at logical-NeuronCore config `lnc`."""
        if lnc not in self.lnc_configs:
            allowed = ", ".join(map(str, self.lnc_configs)) or "none"
            why = " (LNC applies to Trainium2 and Trainium3 only)" if self.is_neuron else " (it has no NeuronCores)"
            raise ConfigError(f"logical-neuroncore-config {lnc} is not supported on {self.name}{why}; supported: {allowed}")
        return self.cores // lnc

    def peak_flops(self, dtype: str = "bf16", rating: str | None = None) -> float:
        """Dense FLOP/s of the chip for `dtype` as published under `rating` (default: current)."""
        r = rating or self.rating
        if r not in self.ratings:
            raise UnknownNameError(f"rating of {self.name}", r, list(self.ratings))
        return _peak(self.ratings[r], dtype, self.name)


@dataclass(frozen=True, repr=False)
class SystemSpec(_Published):
    """An instance or UltraServer: chips, hosts, topology, network and price."""

    key: str
    name: str
    kind: str  # "instance" | "ultraserver"
    chip: ChipSpec
    chips: int
    servers: int  # hosts (instances) it is made of
    vcpus: int
    host_memory_bytes: int
    efa_bandwidth: float  # bytes/s for the whole system
    efa_bandwidth_is_upper_bound: bool  # "up to" figures
    local_storage_bytes: int
    price_usd_per_hour: float  # on-demand, 0 where no source gives one
    price_status: str  # "published ..." with its date, "placeholder ...", or "none"
    topology_kind: str  # "single" | "torus" | "switch" | "nvswitch"
    topology_shape: tuple[int, ...]
    intra_link_bandwidth: float  # bytes/s per chip inside one server
    inter_link_bandwidth: float  # bytes/s per chip between the servers of an UltraServer
    sources: Mapping[str, str] = field(repr=False)
    notes: tuple[str, ...] = field(default=(), repr=False)
    alternatives: Mapping[str, Mapping[str, float]] = field(default_factory=lambda: _NONE, repr=False)

    @property
    def cores(self) -> int:
        return self.chips * self.chip.cores

    @property
    def hbm_bytes(self) -> int:
        return self.chips * self.chip.hbm_bytes

    @property
    def hbm_bandwidth(self) -> float:
        return self.chips * self.chip.hbm_bandwidth

    def peak_flops(self, dtype: str = "bf16", rating: str | None = None) -> float:
        """Dense FLOP/s of all chips together for `dtype` under the chip's `rating`."""
        return self.chips * self.chip.peak_flops(dtype, rating)

    @cached_property
    def topology(self) -> Topology:
        """The chip-level graph (see topology.py); built once per record."""
        return build(self)
