"""How long one op takes on one rank: the compute seam of the step model.

A ComputeModel answers `op_time(op, cluster, dtype)` in ns.

`SimulatedCompute` (the default) times Trainium ops with the core timing model: each op's shape is
rounded to a bucket whose representative kernel was simulated on that chip's NeuronCore generation
(trnsim.plan.efficiency, shipped as efficiency.json), and the op runs at that bucket's efficiency:

    matmul       FLOPs at the bucket's fraction of the rank's Tensor-engine peak (MX formats: the bf16
                 bucket's time at the MX datapath's rate, or the operands' bytes through DMA if slower)
    attention    QK^T, softmax exponentials and PV at the bucket's efficiency of a simulated
                 flash-attention head (TensorE and ScalarE overlapped, scores kept on chip), or its
                 Q, K, V, O traffic through DMA if that is slower
    elementwise  the slower of its results on the Vector engine and its HBM bytes through DMA

GPUs have no NeuronCore to simulate: they keep `Roofline`, the declared `matmul_efficiency` of
training.toml (a measured GEMM figure with its source) over the catalog's peak.
"""
from __future__ import annotations

from typing import Protocol

from trnsim import specs
from trnsim.pure import pure
from trnsim.specs import training
from trnsim.plan import efficiency as eff
from trnsim.plan.layout import Cluster
from trnsim.plan.workload import StepOp


MX = ("mxfp8", "mxfp4")  # block-scaled formats: no simulated bucket of their own


class ComputeModel(Protocol):
    name: str
    interim: bool

    def op_time(self, op: StepOp, cluster: Cluster, dtype: str) -> float:
        """Time of `op` on one rank of `cluster`, in ns."""


@pure(64)
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
    """max(FLOPs / efficient peak, bytes / HBM bandwidth, elements / lanes) at a declared matmul efficiency."""

    name = "roofline at declared efficiency"
    interim = False

    def op_time(self, op: StepOp, cluster: Cluster, dtype: str) -> float:
        return _op_time(op, cluster.system.key, cluster.lnc, dtype)


@pure(65536)
def _op_time(op: StepOp, system_key: str, lnc: int, dtype: str) -> float:
    flops, hbm, vector, scalar = _rates(system_key, lnc, dtype)
    # softmax exponentials run on the Scalar (activation) engine, other elementwise work on Vector
    lanes = scalar if op.kind == "attention" else vector
    return 1e9 * max(op.flops / flops, op.bytes / hbm, op.elems / lanes)


class SimulatedCompute:
    """Per-op efficiencies from simulated kernels on Trainium; the declared roofline on GPUs."""

    name = "simulated"
    interim = False

    def which(self, cluster: Cluster):
        """The model that times ops on `cluster`: this one, or Roofline where there is no NeuronCore."""
        return self if cluster.system.chip.core is not None else Roofline()

    def op_time(self, op: StepOp, cluster: Cluster, dtype: str) -> float:
        if cluster.system.chip.core is None:
            return _op_time(op, cluster.system.key, cluster.lnc, dtype)
        return _simulated_time(op, cluster.system.chip.core.target, cluster.lnc, dtype)


def _rate(target: str, kernel: str, shape: tuple, dtype: str, lnc: int) -> float:
    """Achieved rate of one rank (lnc physical cores) on a bucket: the simulated efficiency x the core's peak."""
    return eff.efficiency(target, kernel, shape, dtype) * eff.peak(specs.neuroncore(target), kernel, dtype) * lnc


@pure(65536)
def _simulated_time(op: StepOp, target: str, lnc: int, dtype: str) -> float:
    # An LNC 2 rank splits each op over its two physical cores: matmul rows (tokens), attention heads
    # (or queries when there is one head), elementwise work evenly. Buckets are the per-core shapes.
    partitions = specs.neuroncore(target).partitions
    stream = op.bytes / _rate(target, "stream", eff.elementwise_bucket(op.bytes / lnc / 2, partitions), "bf16", lnc)
    if op.kind == "matmul" and dtype in MX:
        # MX matmuls: the bf16 bucket's TensorE schedule at the MX datapath's rate, the operands through DMA
        core = specs.neuroncore(target)
        bf16 = op.flops / _rate(target, "matmul", eff.matmul_bucket(op.m / lnc, op.n, op.k), "bf16", lnc)
        return 1e9 * max(bf16 * core.peak_flops("bf16") / core.peak_flops(dtype), stream)
    dtype = "bf16" if dtype in MX else dtype  # attention stays in bf16 beside MX matmuls
    if op.kind == "matmul":
        return 1e9 * op.flops / _rate(target, "matmul", eff.matmul_bucket(op.m / lnc, op.n, op.k), dtype, lnc)
    if op.kind == "attention":  # batch heads of QK^T [m, k] x [k, n] then PV, fused on chip
        queries = op.m if op.batch >= lnc else op.m / lnc
        bucket = eff.attention_bucket(queries, op.n, op.k)
        return 1e9 * max(op.flops / _rate(target, "attention", bucket, dtype, lnc), stream)
    work = op.elems / _rate(target, "vector", eff.elementwise_bucket(op.elems / lnc, partitions), "bf16", lnc)
    return 1e9 * max(work, stream)
