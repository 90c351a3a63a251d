"""Work into time: the physical cost classes of a NeuronCore.

Each instruction's `cost(rec, spec)` (in core/isa) says what work it does (core/isa/work.py: Stream, PE or
Transfer, each with its performance class); this module turns that work into nanoseconds with the catalog's
figures, reading the work's fields and the operands' layouts, never the opcode, through three classes:

- engine streaming (Vector, Scalar, GpSimd): `max(MIN_II, N x inputs x factor / perf mode)` engine
  cycles, where N is elements per partition (lane count does not change the cost);
- the PE array (TensorE): an issue interval of `max(min(MM_INIT_LATENCY, N_stationary), N_moving)`
  TensorE cycles, 4x for FP32 inputs (LoadStationary is overlapped with the previous multiply);
- DMA transfer: per DMA engine, bytes / bandwidth plus a cost per descriptor (one contiguous run).
"""
from __future__ import annotations

import math

from trnsim import numerics

TRACKS = {"tensor": "TensorE", "vector": "VectorE", "scalar": "ScalarE", "gpsimd": "GpSimdE", "sync": "Sync"}
_HALF = {"bfloat16", "float16"}


class Rules:
    """Cost rules of one generation: `spec` from the catalog, `t` its timing constants."""

    def __init__(self, spec, t):
        self.spec, self.t = spec, t
        c = spec.cycles
        self.min_ii, self.overhead = c["min_ii"], c["small_instruction_overhead"]
        self.mm_init, self.act_read = c["mm_init_latency"], c["act_read_accumulator"]
        self.fp32_factor = 1.0 / spec.macs_per_pe_cycle["fp32"]
        # v3+ transpose mode moves FP32 through the PE array 2x faster than an FP32 matmul (trainium2_arch.rst,
        # built-in transpose support); before it a transpose is a matmul with the identity
        self.fp32_transpose = self.fp32_factor / (2 if spec.capabilities["matmul_transpose_mode"] else 1)
        self.ns_per_cycle = {e: 1e9 / spec.clocks[e if e != "sync" else "base"] for e in TRACKS}
        # Each DMA engine moves at its achievable rate, capped by its share of the core's HBM bandwidth.
        self.dma_ns_per_byte = 1e9 / min(spec.dma_engine_bandwidth, spec.hbm_bandwidth / spec.dma_engines)
        self.dma_engines = spec.dma_engines
        self.partitions_per_dma = spec.partitions // spec.dma_engines

    # -- TensorE ----------------------------------------------------------------------------------
    def matmul(self, w) -> tuple[float, float, float]:
        """(ns, FLOPs, model FLOPs) of PE work (a matmul, or a transpose: a matmul against the identity, ~max(P,
        min(64, F)) cycles). Its performance class sets the rate: FP32 data at the FP32 matmul rate, in
        transpose mode at the transpose rate (v2: the FP32 matmul rate; v3+: twice it)."""
        cycles = max(min(self.mm_init, w.m), w.n)
        if w.perf is not None:
            cycles *= self.fp32_transpose if w.perf == "fp32_transpose" else self.fp32_factor
        flops = w.flops
        return cycles * self.ns_per_cycle["tensor"], flops, flops if w.model else 0.0

    # -- Vector / Scalar / GpSimd -----------------------------------------------------------------
    def perf_mode(self, rec, w) -> float:
        """v3+ VectorE and v4 ScalarE speedups (reference 1.6); 1 elsewhere. All operands 16-bit: the documented perf modes.
        Otherwise a copy or tensor_scalar wholly in SBUF and contiguous streams at the datapath's width for
        other data types (256 elements a cycle on v3/v4 against 128 on v2, trainium2_arch.rst), halved, as
        the 16-bit modes are, when PSUM is read or written."""
        ops, perf = rec.operands.values(), w.perf
        if perf == "scalar":  # v4: 256 16-bit or FP8 elements a cycle, 128 of other types
            narrow = all(r.dtype in _HALF or r.dtype.startswith("float8") for r in ops)
            return self.t.scalar_perf_mode if narrow else 1.0
        if perf is None:  # the catalog's modes are 1 where a generation has none
            return 1.0
        modes = self.t.vector_perf_modes
        sbuf = all(r.space == "sbuf" for r in ops)
        copy = perf == "copy"
        dense = copy and all(r.contiguous >= math.prod(r.shape[1:]) * numerics.dtype(r.dtype).itemsize for r in ops)
        if not all(r.dtype in _HALF for r in ops):
            return modes["copy_sbuf_wide"] if sbuf and dense else 1.0
        if copy:
            return modes["copy_sbuf"] if sbuf and dense else modes["copy_psum"]
        if perf == "two_tensor" and sbuf:
            return modes["tensor_tensor"]
        return 1.0

    def access_rate(self, rec) -> float:
        """Share of SBUF/PSUM bandwidth an instruction's access patterns get: a most-minor free-dim stride
        over 16 B halves an interface (trainium_inferentia2_arch.rst, access pattern), and the slowest
        operand paces the stream."""
        sa = self.t.strided_access
        for place, dt, shape, strides, _o, _p, on_chip, indirect, _s in rec.placed.values():
            if not on_chip or indirect:
                continue
            inner = next((s for n, s in zip(reversed(shape[1:]), reversed(strides[1:])) if n > 1), 1)
            if abs(inner) * dt.itemsize > sa["bytes"]:
                return sa["rate"]
        return 1.0

    def stream(self, rec, w, dependent: bool) -> float:
        """ns of an instruction that streams N elements per partition through an engine's lanes."""
        work = w.elements * max(1, w.inputs) * w.factor / self.perf_mode(rec, w)
        work /= self.access_rate(rec)
        cycles = max(self.min_ii, w.startup + work)
        if dependent:  # a small or serially dependent instruction pays the static overhead
            cycles += self.overhead
        if w.reduce:  # reading the accumulators out: ACT's read on ScalarE, one more MIN_II elsewhere
            cycles += self.act_read if w.engine == "scalar" else self.min_ii
        return cycles * self.ns_per_cycle[w.engine]

    # -- DMA --------------------------------------------------------------------------------------
    def dma_pieces(self, rec, w) -> list[tuple[int, float]]:
        """(DMA engine, ns) per engine a transfer uses: partitions split 8 per engine (for 128)."""
        on_chip = [r for r in rec.operands.values() if r.space != "hbm"]
        first = on_chip[0].partition if on_chip else 0
        parts = max(1, w.partitions)
        per_part = w.bytes / parts
        chunks = math.ceil(per_part / max(1, w.chunk_bytes or per_part))
        ns_part = per_part * self.dma_ns_per_byte + chunks * self.t.dma_descriptor_latency
        per, blocks = self.partitions_per_dma, 0.0
        if w.transpose:
            ns_part, blocks = self._transpose(rec, per_part)
        out, p = [], first
        while p < first + parts:
            e = p // per
            take = min((e + 1) * per, first + parts) - p
            out.append((e % self.dma_engines, take * ns_part + blocks))
            p += take
        return out

    def _transpose(self, rec, per_part: float) -> tuple[float, float]:
        """(ns per partition, ns per engine) of a dma_transpose: the engines write the destination in
        blocks of 16 contiguous elements on each of their partitions, one descriptor per block, at 90% of
        the copy rate from HBM and 50% from SBUF (trainium2_arch.rst, DMA Transpose)."""
        tr = self.t.dma_transpose
        src = rec.operands.get("src")
        eff = tr["sbuf"] if src is not None and src.space != "hbm" else tr["hbm"]
        dst = next(r for n, r in rec.operands.items() if n in rec.writes)
        elems = per_part / numerics.dtype(dst.dtype).itemsize
        return per_part * self.dma_ns_per_byte / eff, math.ceil(elems / tr["block"]) * self.t.dma_descriptor_latency
