"""GpSimd instructions (iota, affine_select, tensor_partition_reduce, local_gather, gather_flattened) and the random number
generator (rand, set_rng_seed, dropout) on Vector/GpSimd, seeded per core and deterministic.
"""
from __future__ import annotations

import numpy as np

from trnsim import specs
from trnsim.core.errors import FreeSizeError, GenerationError, MemorySpaceError, OutOfBoundsError, ShapeError
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


def _startup_cost(rec, spec, inputs=None):
    """~150 + N GpSimd cycles: iota, affine_select and local_gather start up before they stream (the nki.isa
    cost notes, reference 1.12)."""
    c = stream_cost(rec, spec, inputs)
    c.startup = spec.cycles["gpsimd_startup"]
    return c


define(Op.IOTA, Engine.GPSIMD, lambda ins, nc: _pattern_check(ins), _iota_semantics,
       lambda r, s: _startup_cost(r, s, inputs=0))


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


define(Op.AFFINE_SELECT, Engine.GPSIMD, _affine_select_check, _affine_select_semantics, _startup_cost)


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
# nki/api/nki/isa/__init__.py: local_gather, with the equivalent numpy of SDK nki/test/test_nki_isa_local_gather.py:
# a core flattens its 16-partition slice of `index` partition dim first (column-major) and keeps the first
# num_valid_indices; every partition of the core then reads, for each index i, the num_elem_per_idx consecutive
# elements of its own partition of src_buffer starting at free element i, and writes them in index order.
def _local_gather_check(ins, nc):
    same_partitions(ins, "dst", "src_buffer", "index")
    k = int(ins.attrs.get("num_elem_per_idx", 1))
    if k not in (1, 2, 4, 8, 16, 32):
        raise ShapeError(f"local_gather: num_elem_per_idx {k} must be 1, 2, 4, 8, 16 or 32")
    if ins.index.dtype.name != "uint16":
        raise ShapeError(f"local_gather: index must be uint16; got {ins.index.dtype.name}")
    per_core, most = nc.limit("gpsimd_core_partitions"), nc.limit("local_gather_max_indices")
    if ins.src_buffer.partitions % per_core:
        raise ShapeError(f"local_gather: src_buffer has {ins.src_buffer.partitions} partitions; it must be a multiple "
                         f"of the {per_core} partitions of a GpSimd core")
    slice_indices = ins.index.free_size * min(per_core, ins.index.partitions)
    valid = ins.attrs.get("num_valid_indices")
    n = slice_indices if valid is None else int(valid)
    if n > slice_indices:
        raise ShapeError(f"local_gather: num_valid_indices {n} exceeds the {slice_indices} indices of a core's "
                         f"{per_core}-partition index slice")
    if n > most:
        raise FreeSizeError(f"local_gather: {n} indices per GpSimd core exceed {most}")
    if ins.dst.free_size != n * k:
        raise ShapeError(f"local_gather: dst {list(ins.dst.shape)} must hold {n} indices x {k} elements = {n * k} "
                         f"per partition; it holds {ins.dst.free_size}")
    ins.attrs["num_valid_indices"] = n


def _local_gather_semantics(ins, nc):
    src, idx, dst = ins.src_buffer, ins.index, ins.dst
    k, n = int(ins.attrs.get("num_elem_per_idx", 1)), ins.attrs["num_valid_indices"]
    a, m = src.array().reshape(src.partitions, -1), src.mask().reshape(src.partitions, -1)
    ix = idx.array().reshape(idx.partitions, -1).astype(np.int64)
    out, om = np.empty((dst.partitions, n * k), a.dtype), np.empty((dst.partitions, n * k), bool)
    c = nc.limit("gpsimd_core_partitions")
    for base in range(0, src.partitions, c):
        picks = ix[base:base + c].reshape(-1, order="F")[:n]
        sel = (picks[:, None] + np.arange(k)[None, :]).reshape(-1)
        if sel.size and sel.max() >= a.shape[1]:
            raise OutOfBoundsError(f"local_gather: index {int(picks.max())} + {k} elements reaches free element "
                                   f"{int(sel.max())} of the {a.shape[1]} of each partition of {src.name!r} "
                                   f"(GpSimd core {base // c})")
        out[base:base + c], om[base:base + c] = a[base:base + c][:, sel], m[base:base + c][:, sel]
    dst.store(out.reshape(dst.shape), om.reshape(dst.shape) if om.any() else None)


define(Op.LOCAL_GATHER, Engine.GPSIMD, _local_gather_check, _local_gather_semantics, _startup_cost)


# -- gather_flattened: per partition, pick elements of the flattened free dims by uint32 index ---------------------
# nki/api/nki/language/__init__.py (beta, SDK 2.26): gather_flattened. Up to 128 gathers in parallel, one per
# partition; 2- to 4-d operands; an out-of-bounds index gives garbage, here marked never-written.
def _gather_flattened_check(ins, nc):
    _sbuf_dst(ins)
    same_partitions(ins, "dst", "data", "indices")
    if ins.indices.dtype.name not in ("uint32", "int32"):
        raise ShapeError(f"gather_flattened: indices must be uint32; got {ins.indices.dtype.name}")
    for name in ("data", "indices"):
        if not 2 <= ins.operands[name].ndim <= 4:
            raise ShapeError(f"gather_flattened: {name} must be 2-, 3- or 4-d; got {list(ins.operands[name].shape)}")
    if ins.dst.free_size != ins.indices.free_size:
        raise ShapeError(f"gather_flattened: dst {list(ins.dst.shape)} must hold one element per index "
                         f"{list(ins.indices.shape)}")


def _gather_flattened_semantics(ins, nc):
    data, idx, dst = ins.data, ins.indices, ins.dst
    p = data.partitions
    a, m = data.array().reshape(p, -1), data.mask().reshape(p, -1)
    ix = idx.array().reshape(p, -1).astype(np.int64)
    bad = (ix < 0) | (ix >= a.shape[1])
    safe = np.where(bad, 0, ix)
    vals = np.take_along_axis(a, safe, axis=1)
    poison = np.take_along_axis(m, safe, axis=1) | bad | idx.mask().reshape(p, -1)
    put(dst, vals.reshape(dst.shape), poison.reshape(dst.shape) if poison.any() else None)


define(Op.GATHER_FLATTENED, Engine.GPSIMD, _gather_flattened_check, _gather_flattened_semantics, stream_cost)


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


# -- rand_set_state / rand_get_state: the engine's generator state in SBUF -----------------------------------------
# nki/api/nki/isa/__init__.py: rand_set_state, rand_get_state (v3+; GpSimd, or Vector on v4+; uint32 state of
# 6 words per lane on GpSimd, 24 on Vector). trnsim's generator is one Philox stream per core, not per-lane
# XORWOW: the words rand_get_state writes name the stream's position, and rand_set_state given those words
# resumes exactly there; other words seed a new stream deterministically.
def _rng_state_check(ins, nc):
    v = ins.operands.get("src_seeds", ins.operands.get("dst"))
    if ins.engine is Engine.VECTOR and not nc.can("vector_rng_state"):
        raise GenerationError(f"{ins.op.value} on the vector engine needs {specs.having('vector_rng_state')}; this "
                              f"core is v{nc.gen}")
    if v.dtype.name != "uint32":
        raise ShapeError(f"{ins.op.value}: the state tensor {v.name!r} must be uint32; got {v.dtype.name}")
    words = nc.limit(f"rng_state_words_{ins.engine.value}")
    if v.free_size != words:
        raise ShapeError(f"{ins.op.value}: {v.name!r} {list(v.shape)} holds {v.free_size} words per lane; the "
                         f"{ins.engine.value} engine's generator state is {words}")
    if "src_seeds" in ins.operands and v.space is not Space.SBUF:
        raise MemorySpaceError(f"rand_set_state reads its seeds from SBUF; {v.name!r} is in {v.space.value}")


def _state_words(nc, shape) -> np.ndarray:
    """Words naming the generator's current position, remembered so rand_set_state can resume it."""
    st = nc.rng.bit_generator.state
    key = np.random.SeedSequence([int(x) for x in st["state"]["counter"]] + [int(x) for x in st["state"]["key"]]
                                 + [int(st["buffer_pos"])])
    words = key.generate_state(int(np.prod(shape)), np.uint32).reshape(shape)
    nc.rng_states[words.tobytes()] = st
    return words


def _rand_get_state_semantics(ins, nc):
    ins.dst.store(_state_words(nc, ins.dst.shape))


def _rand_set_state_semantics(ins, nc):
    v = ins.src_seeds
    if v.poisoned():
        nc.never_written("seed the random number generator", v, v.mask(), ins.location)
    words = np.ascontiguousarray(v.array())
    known = nc.rng_states.get(words.tobytes())
    if known is not None:
        nc.rng = np.random.Generator(np.random.Philox(0))
        nc.rng.bit_generator.state = known
    else:
        nc.rng = np.random.Generator(np.random.Philox(np.random.SeedSequence(words.reshape(-1).tolist())))


define(Op.RAND_SET_STATE, (Engine.GPSIMD, Engine.VECTOR), _rng_state_check, _rand_set_state_semantics,
       lambda r, s: stream_cost(r, s, inputs=1), writes=(), needs="rng_state")
define(Op.RAND_GET_STATE, (Engine.GPSIMD, Engine.VECTOR), _rng_state_check, _rand_get_state_semantics,
       lambda r, s: stream_cost(r, s, inputs=0), needs="rng_state")


# -- nc_n_gather: a gather inside each partition ------------------------------------------------------------------
# nki/api/nki/isa/__init__.py: nc_n_gather: dst[p, j] = data[p].flat[indices[p, j]]; uint32 indices, all in SBUF.
def _n_gather_check(ins, nc):
    same_partitions(ins, "dst", "data", "indices")
    same_free(ins, "dst", "indices")
    _sbuf_dst(ins)
    for n in ("data", "indices"):
        if ins.operands[n].space is not Space.SBUF:
            raise MemorySpaceError(f"nc_n_gather: {n} {ins.operands[n].name!r} must be in SBUF")
    if ins.indices.dtype.name != "uint32":
        raise ShapeError(f"nc_n_gather: indices must be uint32; got {ins.indices.dtype.name}")
    if ins.dst.dtype != ins.data.dtype:
        raise ShapeError(f"nc_n_gather: dst {ins.dst.dtype.name} must have data's dtype {ins.data.dtype.name}")


def _n_gather_semantics(ins, nc):
    data, dst = ins.data, ins.dst
    a, m = data.array().reshape(data.partitions, -1), data.mask().reshape(data.partitions, -1)
    ix = ins.indices.array().reshape(data.partitions, -1).astype(np.int64)
    if ix.size and ix.max() >= a.shape[1]:
        raise OutOfBoundsError(f"nc_n_gather: index {int(ix.max())} outside the {a.shape[1]} elements of each "
                               f"partition of {data.name!r}")
    om = np.take_along_axis(m, ix, 1) | ins.indices.mask().reshape(ix.shape)
    dst.store(np.take_along_axis(a, ix, 1).reshape(dst.shape), om.reshape(dst.shape) if om.any() else None)


define(Op.NC_N_GATHER, Engine.GPSIMD, _n_gather_check, _n_gather_semantics, stream_cost)


# -- sequence_bounds: [start, end) of the segment of each element -------------------------------------------------
# nki/api/nki/isa/__init__.py: sequence_bounds: segment_ids [1, n] -> dst [1, 2, n]; id 0 is padding, which gets
# start n and end -1; float32 or int32.
def _sequence_bounds_check(ins, nc):
    ids, dst = ins.segment_ids, ins.dst
    _sbuf_dst(ins)
    if ids.partitions != 1:
        raise ShapeError(f"sequence_bounds: segment_ids {list(ids.shape)} must have 1 partition")
    if dst.partitions != 1 or dst.free_size != 2 * ids.free_size:
        raise ShapeError(f"sequence_bounds: dst {list(dst.shape)} must be [1, 2, {ids.free_size}] for segment_ids "
                         f"{list(ids.shape)}")
    for v in (ids, dst):
        if v.dtype.name not in ("float32", "int32"):
            raise ShapeError(f"sequence_bounds: {v.name!r} is {v.dtype.name}; it must be float32 or int32")


def _sequence_bounds_semantics(ins, nc):
    x = ins.segment_ids.array().reshape(-1)
    n = x.size
    i = np.arange(n)
    first = np.r_[True, x[1:] != x[:-1]]  # where a run of equal ids starts
    last = np.r_[x[:-1] != x[1:], True]
    start = np.maximum.accumulate(np.where(first, i, 0))
    end = np.minimum.accumulate(np.where(last, i + 1, n)[::-1])[::-1]
    pad = x == 0
    out = np.stack([np.where(pad, n, start), np.where(pad, -1, end)]).astype(np.int64)
    m = ins.segment_ids.mask().reshape(-1)
    mask = None
    if m.any():  # an element's bounds depend on its whole run; mark the runs that hold a never-written id
        run = np.cumsum(first) - 1
        mask = np.broadcast_to(np.isin(run, run[m])[None, :], (2, n)).reshape(ins.dst.shape)
    put(ins.dst, out.reshape(ins.dst.shape) if ins.dst.dtype.is_int else out.astype(np.float32).reshape(ins.dst.shape),
        mask)


define(Op.SEQUENCE_BOUNDS, Engine.GPSIMD, _sequence_bounds_check, _sequence_bounds_semantics, stream_cost)


# -- nonzero_with_count: indices of non-zero elements, padding, then the count -------------------------------------
# nki/api/nki/isa/__init__.py: nonzero_with_count (v3+): only partition 0 of each GpSimd core (0, 16, ..., 112) is
# read and written; dst has one more element per partition than src; src float32/int32, dst int32.
def _nonzero_check(ins, nc):
    same_partitions(ins, "dst", "src")
    _sbuf_dst(ins)
    if ins.src.space is not Space.SBUF:
        raise MemorySpaceError(f"nonzero_with_count: src {ins.src.name!r} must be in SBUF")
    if ins.dst.free_size != ins.src.free_size + 1:
        raise ShapeError(f"nonzero_with_count: dst {list(ins.dst.shape)} must hold one element more per partition "
                         f"than src {list(ins.src.shape)}")
    if ins.src.dtype.name not in ("float32", "int32") or ins.dst.dtype.name != "int32":
        raise ShapeError(f"nonzero_with_count: src must be float32 or int32 and dst int32; got {ins.src.dtype.name} "
                         f"and {ins.dst.dtype.name}")


def _nonzero_semantics(ins, nc):
    src, dst = ins.src, ins.dst
    a, m = src.array().reshape(src.partitions, -1), src.mask().reshape(src.partitions, -1)
    out = dst.array().reshape(dst.partitions, -1).copy()
    om = dst.mask().reshape(dst.partitions, -1).copy()
    off, pad = int(ins.attrs.get("index_offset", 0)), int(ins.attrs.get("padding_val", -1))
    for p in range(0, src.partitions, nc.limit("gpsimd_core_partitions")):
        hits = np.flatnonzero(a[p] != 0)
        out[p] = np.r_[hits + off, np.full(a.shape[1] - hits.size, pad), hits.size]
        om[p] = m[p].any()  # every output of the partition depends on every input
    dst.store(out.astype(np.int32).reshape(dst.shape), om.reshape(dst.shape) if om.any() else None)


define(Op.NONZERO_WITH_COUNT, Engine.GPSIMD, _nonzero_check, _nonzero_semantics, stream_cost, needs="nonzero_with_count")


# -- topk: the K largest of a 16-partition snake, ascending, with their indices -------------------------------------
# nki/api/nki/isa/__init__.py: topk: element e of a GpSimd core's snake is at partition e % 16, column e // 16
# of src (bf16); n elements are active; val_dst (bf16) and idx_dst (uint32) are [P, K], values ascending.
# [UNCERTAIN: the docs say each partition selects; trnsim writes each core's result to all 16 of its partitions.]
def _topk_check(ins, nc):
    src, val, idx = ins.src, ins.val_dst, ins.idx_dst
    same_partitions(ins, "val_dst", "idx_dst", "src")
    same_free(ins, "val_dst", "idx_dst")
    c = nc.limit("gpsimd_core_partitions")
    for v in (src, val, idx):
        if v.space is not Space.SBUF:
            raise MemorySpaceError(f"topk: {v.name!r} must be in SBUF")
    if src.dtype.name != "bfloat16" or val.dtype.name != "bfloat16" or idx.dtype.name != "uint32":
        raise ShapeError(f"topk: src and val_dst must be bfloat16 and idx_dst uint32; got {src.dtype.name}, "
                         f"{val.dtype.name}, {idx.dtype.name}")
    n, k = int(ins.attrs["n"]), val.free_size
    if src.partitions % c:
        raise ShapeError(f"topk: the partition dim {src.partitions} must be a multiple of {c}")
    if not 8 <= n < 65536 or not 1 <= k <= n or k >= 32768:
        raise ShapeError(f"topk: needs 8 <= n < 65536 and 1 <= K <= n, K < 32768; got n={n}, K={k}")
    if src.free_size * c < n:
        raise ShapeError(f"topk: src {list(src.shape)} holds {src.free_size * c} snake elements per core; n={n}")


def _topk_semantics(ins, nc):
    src, val, idx = ins.src, ins.val_dst, ins.idx_dst
    n, k, c = int(ins.attrs["n"]), val.free_size, nc.limit("gpsimd_core_partitions")
    a = src.array().reshape(src.partitions, -1).astype(np.float32)
    m = src.mask().reshape(src.partitions, -1)
    vals, ids, vm = (np.empty((src.partitions, k), np.float32), np.empty((src.partitions, k), np.uint32),
                     np.zeros((src.partitions, k), bool))
    for base in range(0, src.partitions, c):
        snake = a[base:base + c].reshape(-1, order="F")[:n]
        top = np.argsort(-snake, kind="stable")[:k][::-1]  # ascending values; ties keep the lower index last
        vals[base:base + c], ids[base:base + c] = snake[top], top
        vm[base:base + c] = m[base:base + c].reshape(-1, order="F")[:n].any()
    put(val, vals.reshape(val.shape), vm.reshape(val.shape) if vm.any() else None)
    idx.store(ids.reshape(idx.shape), vm.reshape(idx.shape) if vm.any() else None)


define(Op.TOPK, Engine.GPSIMD, _topk_check, _topk_semantics, stream_cost, writes=("val_dst", "idx_dst"))
