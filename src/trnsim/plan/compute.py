"""How long one op takes on one rank: the compute seam of the step model.

A ComputeModel answers `op_time(op, cluster, dtype)` in ns. `Roofline` is the interim answer: the
slowest of matmul FLOPs at a declared fraction of the catalog's peak (training.toml's
`matmul_efficiency`, the one named efficiency parameter), HBM bytes at the catalog's bandwidth, and
elementwise results at one per partition per engine cycle. The core timing model replaces it with
per-shape, per-generation efficiencies from cached simulations of representative kernels.
"""
from __future__ import annotations

import functools
from typing import Protocol

from trnsim import specs
from trnsim.specs import training
from trnsim.plan.layout import Cluster
from trnsim.plan.workload import Op


class ComputeModel(Protocol):
    name: str
    interim: bool

    def op_time(self, op: Op, cluster: Cluster, dtype: str) -> float:
        """Time of `op` on one rank of `cluster`, in ns."""


@functools.lru_cache(maxsize=64)
def _rates(system_key: str, lnc: int, dtype: str) -> tuple[float, float, float, float]:
    """(matmul FLOP/s, HBM bytes/s, vector elements/s, scalar elements/s) of one rank."""
    system = specs.catalog.systems()[system_key]
    chip = system.chip
    per_chip = Cluster(system, 1, lnc).ranks_per_chip
    flops = chip.peak_flops(dtype) * training.matmul_efficiency(chip) / per_chip
    hbm = chip.hbm_bandwidth / per_chip
    if chip.core is None:  # GPUs: elementwise work is bound by HBM alone in this model
        return flops, hbm, float("inf"), float("inf")
    lanes = chip.core.partitions * lnc  # one result per partition per cycle on each physical core
    return flops, hbm, lanes * chip.core.clocks["vector"], lanes * chip.core.clocks["scalar"]


class Roofline:
    """Interim compute model: max(FLOPs / efficient peak, bytes / HBM bandwidth, elements / lanes)."""

    name = "roofline"
    interim = True

    def op_time(self, op: Op, cluster: Cluster, dtype: str) -> float:
        return _op_time(op, cluster.system.key, cluster.lnc, dtype)


@functools.lru_cache(maxsize=65536)
def _op_time(op: Op, system_key: str, lnc: int, dtype: str) -> float:
    flops, hbm, vector, scalar = _rates(system_key, lnc, dtype)
    # softmax exponentials run on the Scalar (activation) engine, other elementwise work on Vector
    lanes = scalar if op.kind == "attention" else vector
    return 1e9 * max(op.flops / flops, op.bytes / hbm, op.elems / lanes)
