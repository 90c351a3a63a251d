"""The work an instruction does, as its cost rule states it: the contract between the instruction set and the
clock.

Each instruction's `cost(rec, spec)` (registry.define) returns one of three kinds of work, one per physical cost
class, and the timing model (core/timing/rules.py) turns work into time reading these fields and the operands'
layouts, never the opcode: what an opcode means for time is said here, beside its definition.
"""
from __future__ import annotations


class Stream:
    """Elements streamed through an engine's lanes (Vector, Scalar, GpSimd; Sync streams none).

    engine: the engine whose clock paces it; partitions, elements: lanes and elements per partition of its
    first input; inputs: inputs streamed one after another (0: it only writes); factor: cycles per element;
    dtype: the first input's; perf: its performance class, which of the engine's perf modes it may use
    ("copy", "two_tensor", the engine's generic "vector" or "scalar", None where it has none); reduce:
    whether it reads its accumulator registers out too (a fixed step after the stream); startup: cycles its cost
    note states before the stream (GpSimd's pattern-generating instructions)."""

    __slots__ = ("engine", "partitions", "elements", "inputs", "factor", "dtype", "perf", "reduce", "startup")

    def __init__(self, engine: str, partitions: int, elements: int, inputs: int = 1, factor: float = 1.0,
                 dtype: str | None = None, perf: str | None = None, reduce: bool = False, startup: int = 0):
        self.engine, self.partitions, self.elements, self.inputs = engine, partitions, elements, inputs
        self.factor, self.dtype, self.perf, self.reduce, self.startup = factor, dtype, perf, reduce, startup

    def __repr__(self):
        return f"Stream({self.engine}, {self.partitions}x{self.elements}, perf={self.perf})"


class PE:
    """Work on the PE array: stationary [k, m] against moving [k, n] (a transpose: the data against the identity).

    kind: "matmul" or "transpose" (what the instruction is); packing: values per element along K (4 for MX,
    2 for FP8 double row); perf: its performance class ("fp32", "fp32_transpose", None at the full rate);
    model: whether its FLOPs are the model's (a transpose's move data, they compute nothing)."""

    __slots__ = ("kind", "k", "m", "n", "packing", "perf", "model")
    engine = "tensor"

    def __init__(self, kind: str, k: int, m: int, n: int, packing: int = 1, perf: str | None = None,
                 model: bool = True):
        self.kind, self.k, self.m, self.n, self.packing, self.perf, self.model = kind, k, m, n, packing, perf, model

    @property
    def flops(self) -> float:
        """Every multiply and add the array does."""
        return 2.0 * (self.k * self.packing) * self.m * self.n

    def __repr__(self):
        return f"PE({self.kind}, k={self.k}x{self.packing}, m={self.m}, n={self.n}, perf={self.perf})"


class Transfer:
    """Bytes the DMA engines move: partitions and bytes of the destination, the shortest contiguous run (one
    descriptor each), whether the engines transpose on the way (DMA transpose), the DGE mode and the two
    memories."""

    __slots__ = ("partitions", "bytes", "chunk_bytes", "transpose", "dge_mode", "src", "dst")
    engine = "dma"

    def __init__(self, partitions: int, nbytes: int, chunk_bytes: int, transpose: bool = False,
                 dge_mode: str = "unknown", src: str | None = None, dst: str | None = None):
        self.partitions, self.bytes, self.chunk_bytes, self.transpose = partitions, nbytes, chunk_bytes, transpose
        self.dge_mode, self.src, self.dst = dge_mode, src, dst

    def __repr__(self):
        return f"Transfer({self.bytes} B over {self.partitions} partitions{', transposed' if self.transpose else ''})"
