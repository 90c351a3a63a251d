"""GpSimd instructions (iota, affine_select, tensor_partition_reduce, local_gather) and the random number
generator (rand, set_rng_seed, dropout) on Vector/GpSimd, seeded per core and deterministic.
"""
from __future__ import annotations

import numpy as np

from trnsim.core.errors import FreeSizeError, MemorySpaceError, OutOfBoundsError, ShapeError
from trnsim.core.isa.alu import alu, op_name
from trnsim.core.isa.opcodes import Engine, Op
from trnsim.core.isa.registry import define, masks, pf, put, same_free, same_partitions, stream_cost
from trnsim.core.isa.vector import check_scalar_operand, scalar_operand
from trnsim.core.memory import Space


def affine(p: int, pattern, offset=0, channel_multiplier=0) -> np.ndarray:
    """offset + partition * channel_multiplier + sum(step_i * index_i), as int64 [P, F]."""
    v = np.full((p, 1), int(offset), np.int64) + np.arange(p, dtype=np.int64)[:, None] * int(channel_multiplier)
    free = np.zeros(1, np.int64)
    for step, num in pattern:
        free = (free[:, None] + np.arange(int(num), dtype=np.int64)[None, :] * int(step)).reshape(-1)
    return v + free[None, :]


def _sbuf_dst(ins):
    if ins.dst.space is not Space.SBUF:
        raise MemorySpaceError(f"{ins.op.value} writes SBUF; dst {ins.dst.name!r} is in {ins.dst.space.value}")


def _pattern_check(ins):
    _sbuf_dst(ins)
    n = int(np.prod([int(num) for _, num in ins.attrs["pattern"]]))
    if n != ins.dst.free_size:
        raise ShapeError(f"{ins.op.value}: pattern {ins.attrs['pattern']} gives {n} elements per partition; "
                         f"dst {list(ins.dst.shape)} holds {ins.dst.free_size}")


# -- iota -----------------------------------------------------------------------------------------------------------
def _iota_semantics(ins, nc):
    v = affine(ins.dst.partitions, ins.attrs["pattern"], ins.attrs.get("offset", 0), ins.attrs.get("channel_multiplier", 0))
    v = v.astype(np.int32)  # computed in int32, then cast to dst
    put(ins.dst, v.reshape(ins.dst.shape) if ins.dst.dtype.is_int else v.astype(np.float32).reshape(ins.dst.shape))


define(Op.IOTA, Engine.GPSIMD, lambda ins, nc: _pattern_check(ins), _iota_semantics, lambda r, s: stream_cost(r, s, inputs=0))


# -- affine_select: cmp_op(affine value, 0) ? on_true : on_false_value ----------------------------------------------------
def _affine_select_check(ins, nc):
    _pattern_check(ins)
    same_partitions(ins, "dst", "on_true_tile")
    same_free(ins, "dst", "on_true_tile")


def _affine_select_semantics(ins, nc):
    dst, src = ins.dst, ins.on_true_tile
    v = affine(dst.partitions, ins.attrs["pattern"], ins.attrs.get("offset", 0), ins.attrs.get("channel_multiplier", 0))
    keep = alu(ins.attrs.get("cmp_op") or "equal").fn(v.astype(np.float32), np.float32(0)) != 0
    out = np.where(keep, pf(src), np.float32(ins.attrs.get("on_false_value", 0.0)))
    m = src.mask()
    put(dst, out.reshape(dst.shape), (m.reshape(keep.shape) & keep).reshape(dst.shape) if m.any() else None)


define(Op.AFFINE_SELECT, Engine.GPSIMD, _affine_select_check, _affine_select_semantics, stream_cost)


# -- tensor_partition_reduce: reduce across partitions ----------------------------------------------------------------
_PREDUCE = ("add", "average", "maximum", "minimum", "bitwise_or", "bitwise_and")


def _partition_reduce_check(ins, nc):
    name = op_name(ins.attrs.get("op"))
    if name not in _PREDUCE and name not in ("max", "min"):
        raise ShapeError(f"tensor_partition_reduce: op {name} is not one of {', '.join(_PREDUCE)}")
    same_free(ins, "dst", "data")
    if ins.dst.partitions != 1:
        raise ShapeError(f"tensor_partition_reduce: dst {list(ins.dst.shape)} must have 1 partition")


def _partition_reduce_semantics(ins, nc):
    name, data = op_name(ins.attrs.get("op")), ins.data
    if name.startswith("bitwise"):
        out = alu(name).reduce.reduce(data.array().reshape(data.partitions, -1).astype(np.int64), axis=0)
    elif name == "average":
        out = pf(data).sum(0, dtype=np.float32) / np.float32(data.partitions)
    else:
        out = alu(name).reduce.reduce(pf(data), axis=0)
    m = data.mask()
    put(ins.dst, np.asarray(out).reshape(ins.dst.shape), m.reshape(data.partitions, -1).any(0).reshape(ins.dst.shape) if m.any() else None)


define(Op.TENSOR_PARTITION_REDUCE, Engine.GPSIMD, _partition_reduce_check, _partition_reduce_semantics, stream_cost)


# -- local_gather: each GpSimd core gathers inside its own 16 partitions ---------------------------------------------
# Elements of a core's 16 partitions are numbered partition-major; index i (uint16) picks
# num_elem_per_idx consecutive elements starting at element i * num_elem_per_idx; results fill the core's
# dst partitions in the same order. [UNCERTAIN: the exact element numbering is not documented.]
def _local_gather_check(ins, nc):
    same_partitions(ins, "dst", "src_buffer", "index")
    k = int(ins.attrs.get("num_elem_per_idx", 1))
    if k not in (1, 2, 4, 8, 16, 32):
        raise ShapeError(f"local_gather: num_elem_per_idx {k} must be 1, 2, 4, 8, 16 or 32")
    if ins.index.dtype.name != "uint16":
        raise ShapeError(f"local_gather: index must be uint16; got {ins.index.dtype.name}")
    per_core, most = nc.limit("gpsimd_core_partitions"), nc.limit("local_gather_max_indices")
    if ins.index.free_size * per_core > most:
        raise FreeSizeError(f"local_gather: {ins.index.free_size * per_core} indices per GpSimd core exceed {most}")


def _local_gather_semantics(ins, nc):
    src, idx, dst = ins.src_buffer, ins.index, ins.dst
    k = int(ins.attrs.get("num_elem_per_idx", 1))
    a, m = src.array().reshape(src.partitions, -1), src.mask().reshape(src.partitions, -1)
    ix = idx.array().reshape(idx.partitions, -1).astype(np.int64)
    out, om = dst.array().reshape(dst.partitions, -1).copy(), dst.mask().reshape(dst.partitions, -1).copy()
    valid = ins.attrs.get("num_valid_indices")
    c = nc.limit("gpsimd_core_partitions")
    for base in range(0, src.partitions, c):
        block, bmask = a[base:base + c].reshape(-1), m[base:base + c].reshape(-1)
        picks = ix[base:base + c].reshape(-1)[: None if valid is None else int(valid)]
        sel = (picks[:, None] * k + np.arange(k)[None, :]).reshape(-1)
        if sel.size and sel.max() >= block.size:
            raise OutOfBoundsError(f"local_gather: index {int(picks.max())} x {k} reaches element {int(sel.max())} of the "
                                   f"{block.size} elements of GpSimd core {base // c}")
        flat, fm = out[base:base + c].reshape(-1), om[base:base + c].reshape(-1)
        flat[: sel.size], fm[: sel.size] = block[sel], bmask[sel]
        out[base:base + c], om[base:base + c] = flat.reshape(-1, out.shape[1]), fm.reshape(-1, out.shape[1])
    dst.store(out.reshape(dst.shape), om.reshape(dst.shape) if om.any() else None)


define(Op.LOCAL_GATHER, Engine.GPSIMD, _local_gather_check, _local_gather_semantics, stream_cost)


# -- random numbers: rand (bits or uniform), set_rng_seed, dropout --------------------------------------------------
def _rand_check(ins, nc):
    if ins.attrs.get("kind", "bits") == "uniform" and ins.dst.dtype.is_int:
        raise ShapeError(f"rand (uniform) writes floats; dst {ins.dst.name!r} is {ins.dst.dtype.name}")


def _rand_semantics(ins, nc):
    dst = ins.dst
    if ins.attrs.get("kind", "bits") == "uniform":
        lo, hi = float(ins.attrs.get("min", 0.0)), float(ins.attrs.get("max", 1.0))
        put(dst, (lo + (hi - lo) * nc.rng.random(dst.shape, dtype=np.float32)).astype(np.float32))
    else:  # 32 random bits per element, truncated to the integer dtype
        bits = nc.rng.integers(0, 2 ** 32, dst.shape, dtype=np.uint64).astype(np.uint32)
        dst.store(bits.astype(np.dtype(f"u{dst.dtype.itemsize}")).view(dst.dtype.np))


define(Op.RAND, (Engine.VECTOR, Engine.GPSIMD), _rand_check, _rand_semantics, lambda r, s: stream_cost(r, s, inputs=0))


def _seed_check(ins, nc):
    if ins.src_seeds.size < 1 or ins.src_seeds.dtype.itemsize != 4:
        raise ShapeError(f"set_rng_seed takes a [1, 1] 32-bit tensor; got {list(ins.src_seeds.shape)} {ins.src_seeds.dtype.name}")


def _seed_semantics(ins, nc):
    v = ins.src_seeds
    if v.poisoned():
        nc.never_written("seed the random number generator", v, v.mask(), ins.location)
    nc.rng = np.random.Generator(np.random.Philox(int(v.array().reshape(-1)[0].view(np.uint32))))


define(Op.SET_RNG_SEED, (Engine.VECTOR, Engine.GPSIMD), _seed_check, _seed_semantics, stream_cost, writes=())


def _dropout_check(ins, nc):
    same_partitions(ins, "dst", "data")
    same_free(ins, "dst", "data")
    check_scalar_operand(ins, "prob", ins.data.partitions)
    if ins.dst.dtype != ins.data.dtype:
        raise ShapeError(f"dropout keeps the dtype: data {ins.data.dtype.name}, dst {ins.dst.dtype.name}")


def _dropout_semantics(ins, nc):
    x = pf(ins.data)
    prob = scalar_operand(ins.operands.get("prob", ins.attrs.get("prob")), ins.data.partitions)
    drop = nc.rng.random(x.shape, dtype=np.float32) < prob
    m = masks(x.shape, ins.data, ins.operands.get("prob"))
    put(ins.dst, np.where(drop, np.float32(0), x).reshape(ins.dst.shape), None if m is None else m.reshape(ins.dst.shape))


define(Op.DROPOUT, Engine.VECTOR, _dropout_check, _dropout_semantics, stream_cost)
