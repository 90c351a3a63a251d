"""Tensor Indirection (NeuronCore-v4+): an engine reads or writes columns of an on-chip tensor at free offsets
held in an index tile (`t.indirect(index, num_elem)`, nki.language.NkiTensor.indirect; each nki.isa page's
"Tensor indirection" section).

Column i of the indirect view is column `off_i` of the tensor on every partition, where the offsets lie in
the index tile in a snake across a group of G partitions: `off_i = index[i % G, i // G]` (G = 16 for the
Vector, Scalar and GpSimd engines, 32 for the Tensor engine). An instruction that reads such a view gathers
its columns; one that writes it scatters into them. The gather and the scatter are the instructions here:
the front end issues the gather before (the scatter after) the instruction on its engine, so both are timed
as one more pass over the columns there.
"""
from __future__ import annotations

import math

import numpy as np

from trnsim.core.errors import DTypeError, OutOfBoundsError, PartitionStartError, ShapeError
from trnsim.core.isa.opcodes import Engine, Op
from trnsim.core.isa.registry import define, stream_cost

ENGINES = (Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD)


def _group(ins, nc) -> int:
    return nc.limit("ti_group_partitions")


def _check(ins, nc, tile: str):
    """The rules of an indirect operand: v4+, an integer index in SBUF on a quadrant boundary with the data on
    the same partition, enough index columns for num_elem offsets, and a plain column tile to move."""
    base, index, n = ins.operands["base"], ins.index, int(ins.attrs["num_elem"])
    other = ins.operands[tile]
    if not index.dtype.is_int or index.space.value != "sbuf":
        raise DTypeError(f"{ins.op.value}: index {index.name!r} is {index.dtype.name} in {index.space.value}; "
                         f"free offsets are integers in SBUF")
    quadrant = nc.limit("quadrant_partitions")
    start, data_start = index.region().partition, base.region().partition
    if start % quadrant:
        raise PartitionStartError(f"{ins.op.value}: index {index.name!r} starts at partition {start}; an indirect "
                                  f"view's index starts on a quadrant boundary (a multiple of {quadrant})")
    if data_start != start:
        raise PartitionStartError(f"{ins.op.value}: {base.name!r} starts at partition {data_start} and its index at "
                                  f"{start}; an indirect operand starts on its index's partition")
    g = _group(ins, nc)
    cols = index.free_size
    if n > g * cols:
        raise ShapeError(f"{ins.op.value}: {n} offsets read index[i % {g}, i // {g}]: they need "
                         f"{math.ceil(n / g)} index columns; {index.name!r} {list(index.shape)} has {cols}")
    if other.partitions != base.partitions or other.free_size != n:
        raise ShapeError(f"{ins.op.value}: {other.name!r} {list(other.shape)} must hold [{base.partitions}, {n}]")


def _offsets(ins, nc) -> np.ndarray:
    """The free offsets, checked against the tensor's columns (an offset outside is an error, as oob_mode)."""
    g, n, base = _group(ins, nc), int(ins.attrs["num_elem"]), ins.operands["base"]
    idx = ins.index.array().reshape(ins.index.partitions, -1)
    i = np.arange(n)
    off = idx[i % g, i // g].astype(np.int64)
    if ins.index.poisoned() and ins.index.mask().reshape(idx.shape)[i % g, i // g].any():
        nc.never_written(f"{ins.op.value} offsets", ins.index, ins.index.mask())
    bad = (off < 0) | (off >= base.free_size)
    if bad.any():
        k = int(np.argmax(bad))
        raise OutOfBoundsError(f"{ins.op.value}: offset {int(off[k])} (offset {k}, index[{k % g}, {k // g}]) is "
                               f"outside the {base.free_size} columns of {base.name!r}")
    return off


def _gather_semantics(ins, nc):
    base, dst = ins.operands["base"], ins.dst
    off = _offsets(ins, nc)
    values = base.array().reshape(base.partitions, -1)[:, off]
    m = base.mask().reshape(base.partitions, -1)[:, off] if base.poisoned() else None
    dst.store(values.reshape(dst.shape), m.reshape(dst.shape) if m is not None and m.any() else None)


def _scatter_semantics(ins, nc):
    """Columns of src land at their offsets (an offset named twice keeps the later column)."""
    base, src = ins.operands["base"], ins.src
    off = _offsets(ins, nc)
    values = base.array().reshape(base.partitions, -1).copy()
    values[:, off] = src.array().reshape(src.partitions, -1)
    m = base.mask().reshape(base.partitions, -1).copy()
    m[:, off] = src.mask().reshape(src.partitions, -1)
    base.store(values.reshape(base.shape), m.reshape(base.shape) if m.any() else None)


def _columns_cost(rec, spec):
    """One pass over the moved columns on the engine (the tile side holds exactly them)."""
    tile = rec.operands["dst" if "dst" in rec.operands else "src"]
    w = stream_cost(rec, spec, inputs=1)
    w.elements, w.partitions = math.prod(tile.shape[1:]), tile.partitions
    return w


define(Op.TI_GATHER, ENGINES, lambda ins, nc: _check(ins, nc, "dst"), _gather_semantics, _columns_cost,
       needs="tensor_indirection")
define(Op.TI_SCATTER, ENGINES, lambda ins, nc: _check(ins, nc, "src"), _scatter_semantics, _columns_cost,
       writes=("base",), needs="tensor_indirection")
