"""Independent numpy references, one per instruction (by opcode name) and per ALU / activation op.

Written from the documented semantics (reference/neuroncore-and-nki.md 3.4, 3.8, 3.9), not from the
emulator's code; the conformance tests compare each instruction with its entry here.
"""
import math

import ml_dtypes
import numpy as np

f32 = np.float32


def _sig(x):
    return 1 / (1 + np.exp(-x))


_erf = np.vectorize(math.erf, otypes=[np.float64])

ALU = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "power": np.power, "fmod": np.fmod, "mod": np.mod,
    "abs_max": lambda a, b: np.where(abs(a) > abs(b), a, b), "abs_min": lambda a, b: np.where(abs(a) < abs(b), a, b),
    "equal": lambda a, b: (a == b) * 1.0, "not_equal": lambda a, b: (a != b) * 1.0,
    "greater": lambda a, b: (a > b) * 1.0, "greater_equal": lambda a, b: (a >= b) * 1.0,
    "less": lambda a, b: (a < b) * 1.0, "less_equal": lambda a, b: (a <= b) * 1.0,
    "logical_and": lambda a, b: ((a != 0) & (b != 0)) * 1.0, "logical_or": lambda a, b: ((a != 0) | (b != 0)) * 1.0,
    "logical_xor": lambda a, b: ((a != 0) ^ (b != 0)) * 1.0,
}
BITVEC = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
          "left_shift": np.left_shift, "right_shift": lambda a, b: (a.astype(np.uint32) >> b.astype(np.uint32)).astype(a.dtype)}

ACT = {
    "copy": lambda x: x, "square": lambda x: x * x, "sigmoid": _sig, "relu": lambda x: np.maximum(x, 0),
    "gelu": lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))),
    "gelu_dx": lambda x: 0.5 * (1 + _erf(x / math.sqrt(2))) + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi),
    "gelu_apprx_tanh": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
    "gelu_apprx_sigmoid": lambda x: x * _sig(1.702 * x),
    "gelu_apprx_sigmoid_dx": lambda x: _sig(1.702 * x) * (1 + 1.702 * x * (1 - _sig(1.702 * x))),
    "silu": lambda x: x * _sig(x), "silu_dx": lambda x: _sig(x) * (1 + x * (1 - _sig(x))), "tanh": np.tanh,
    "softplus": lambda x: np.log1p(np.exp(x)), "mish": lambda x: x * np.tanh(np.log1p(np.exp(x))),
    "erf": _erf, "erf_dx": lambda x: 2 / math.sqrt(math.pi) * np.exp(-x * x), "exp": np.exp, "sign": np.sign,
    "abs": np.abs, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "reciprocal": lambda x: 1 / x,
    "sin": np.sin, "arctan": np.arctan, "cos": np.cos, "tan": np.tan, "negative": np.negative,
}
ACT_ALIASES = {"identity": "copy", "bypass": "copy"}
UNARY = {"abs": np.abs, "square": np.square, "relu": lambda x: np.maximum(x, 0), "rsqrt": lambda x: 1 / np.sqrt(x),
         "reciprocal": lambda x: 1 / x, "negative": np.negative, "bypass": lambda x: x}
UNARY_BITVEC = {"invert": np.invert}
ALU_ALIASES = {"max": "maximum", "min": "minimum"}


def matmul(st, mv):
    return st.astype(np.float64).T @ mv.astype(np.float64)


def transpose(x):
    return x.T


def bn(x):
    """(mean, population variance) per row."""
    return np.stack([x.mean(1), x.var(1)], 1)


def top8(x):
    return -np.sort(-x, axis=1)[:, :8]


def scan(a, b, initial):
    """r[i] = r[i-1] * a[i] + b[i] (op0 multiply, op1 add)."""
    r = np.full(a.shape[0], initial, np.float64)
    out = np.empty(a.shape)
    for i in range(a.shape[1]):
        r = a[:, i] * r + b[:, i]
        out[:, i] = r
    return out


def iota(p, pattern, offset, cm):
    free = np.zeros(1, np.int64)
    for step, num in pattern:
        free = (free[:, None] + np.arange(num)[None, :] * step).reshape(-1)
    return offset + np.arange(p)[:, None] * cm + free[None, :]


def mx_quantize(x):
    """MXFP8 e4m3fn with Trainium's scale 2^(floor(log2 amax) - 7) over blocks of 32 along axis 0."""
    b = x.astype(np.float32).reshape(-1, 32, *x.shape[1:])
    amax = np.abs(b).max(1, keepdims=True)
    scale = np.exp2(np.floor(np.log2(amax)) - 7)
    q = np.clip(b / scale, -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    return (q * scale).reshape(x.shape)


# One numpy reference per opcode (the conformance suite checks this table covers the whole ISA).
INSTRUCTIONS = {
    "nc_matmul": matmul, "nc_matmul_mx": lambda a, b: mx_quantize(a).T @ mx_quantize(b),
    "nc_transpose": transpose, "dma_transpose": transpose,
    "activation": lambda op, x, scale, bias: ACT[op](x * scale + bias),
    "activate2": lambda op, x, imm0, imm1: ACT[op](x * imm0 + imm1),
    "tensor_tensor": lambda op, a, b: ALU[op](a, b), "tensor_scalar": lambda x, s0, s1: x * s0 + s1,
    "scalar_tensor_tensor": lambda x, s, t: (x - s) * t, "tensor_copy": lambda x, dt: x.astype(dt),
    "tensor_copy_predicated": lambda p, src, dst: np.where(p != 0, src, dst),
    "reciprocal": lambda x: 1 / x, "exponential": lambda x, m: np.exp(x - m), "memset": np.full,
    "select_reduce": lambda p, a, b: np.where(p != 0, a, b), "range_select": None,
    "tensor_reduce": lambda x, axes: x.sum(axis=axes), "tensor_scalar_reduce": lambda x, s: (x * s).sum(1),
    "tensor_tensor_scan": scan, "bn_stats": bn, "bn_aggr": bn, "max8": top8, "nc_find_index8": None,
    "nc_match_replace8": None, "nc_stream_shuffle": None, "quantize_mx": mx_quantize, "rand": None,
    "set_rng_seed": None, "dropout": None, "iota": iota, "affine_select": None,
    "tensor_partition_reduce": lambda x: x.sum(0), "local_gather": None, "dma_copy": lambda x, dt: x.astype(dt),
    "sendrecv": None, "register_alloc": None, "register_move": None, "register_load": None,
    "register_store": None, "core_barrier": None,
}


def range_select(x, lo, hi, fill):
    i = np.arange(x.shape[1])[None, :]
    return np.where((i >= lo) & (i < hi), x, fill)


def find8(x, vals):
    """The j-th searched value is found at its (k+1)-th position in the row, k counting equal values searched
    before it in the same row (a repeated value advances); a value not there gives all ones."""
    out = np.full(vals.shape, 0xFFFFFFFF, np.uint64)
    for r, j in np.ndindex(vals.shape):
        k = int(np.count_nonzero(vals[r, :j] == vals[r, j]))
        where = np.flatnonzero(x[r] == vals[r, j])
        if k < where.size:
            out[r, j] = where[k]
    return out


def match_replace8(x, vals, imm):
    out = x.copy()
    for r in range(x.shape[0]):
        for v in vals[r]:
            hits = np.flatnonzero(out[r] == v)
            if hits.size:
                out[r, hits[0]] = imm
    return out


def shuffle(src, dst, mask):
    out = dst.copy()
    for i, j in enumerate(mask):
        if j != 255:
            out[i] = src[j]
    return out


def affine_select(x, p_mult, step, offset, fill):
    v = offset + np.arange(x.shape[0])[:, None] * p_mult + np.arange(x.shape[1])[None, :] * step
    return np.where(v >= 0, x, fill)


def local_gather(src, idx, k, n):
    """Per 16-partition block: the block's indices read column by column, each picking k elements of every
    partition of the block starting at that element offset."""
    out = np.empty((src.shape[0], n * k), src.dtype)
    for base in range(0, src.shape[0], 16):
        picks = idx[base:base + 16].T.reshape(-1)[:n]
        for j, i in enumerate(picks):
            out[base:base + 16, j * k:(j + 1) * k] = src[base:base + 16, int(i):int(i) + k]
    return out


def cumulative(x, op, start):
    """A running fold of the free axis from `start` (per partition)."""
    out, reg = np.empty_like(x), np.asarray(start, np.float64).reshape(-1).copy()
    for i in range(x.shape[1]):
        reg = {"add": reg + x[:, i], "multiply": reg * x[:, i], "maximum": np.fmax(reg, x[:, i]),
               "minimum": np.fmin(reg, x[:, i])}[op]
        out[:, i] = reg
    return out


def sequence_bounds(ids):
    """[2, n]: for each element, where its run of equal ids starts and ends; id 0 gets (n, -1)."""
    n = len(ids)
    out = np.empty((2, n))
    for i in range(n):
        if ids[i] == 0:
            out[:, i] = (n, -1)
            continue
        lo, hi = i, i + 1
        while lo > 0 and ids[lo - 1] == ids[i]:
            lo -= 1
        while hi < n and ids[hi] == ids[i]:
            hi += 1
        out[:, i] = (lo, hi)
    return out


def nonzero_with_count(row, offset, pad):
    hits = [i + offset for i, v in enumerate(row) if v != 0]
    return np.array(hits + [pad] * (len(row) - len(hits)) + [len(hits)])


def topk_snake(src16, n, k):
    """The k largest of a 16-row snake (element e at row e % 16, column e // 16), ascending, with indices."""
    snake = [(float(src16[e % 16, e // 16]), e) for e in range(n)]
    best = sorted(snake, key=lambda t: (-t[0], t[1]))[:k][::-1]
    return np.array([v for v, _ in best]), np.array([i for _, i in best])


INSTRUCTIONS.update({"tensor_scalar_cumulative": cumulative, "sequence_bounds": sequence_bounds,
                     "nc_n_gather": lambda data, idx: np.take_along_axis(data, idx.astype(np.int64), 1),
                     "nonzero_with_count": nonzero_with_count, "topk": topk_snake,
                     "dma_compute": lambda *srcs: np.sum([s.astype(np.float64) for s in srcs], axis=0),
                     "rand_set_state": lambda words: words, "rand_get_state": lambda words: words})


def gather_flattened(data, idx):
    """Per partition: elements of the flattened free dims picked by index."""
    p = data.shape[0]
    return np.take_along_axis(data.reshape(p, -1), idx.reshape(p, -1).astype(np.int64), axis=1).reshape(idx.shape)


def uniform_moments(lo, hi):
    """rand (uniform): the mean and variance of values drawn evenly from [lo, hi)."""
    return (lo + hi) / 2, (hi - lo) ** 2 / 12


def seed_value(tile):
    """set_rng_seed: the generator's seed is the first element's 32 bits, read as an unsigned number."""
    return int(np.asarray(tile).reshape(-1)[:1].view(np.uint32)[0])


def register_load(tile):
    """A register takes the first element: integers as they are, floats truncated toward zero."""
    x = np.asarray(tile).reshape(-1)[0]
    return int(x) if np.issubdtype(x.dtype, np.integer) else int(np.trunc(np.float64(x)))


def register_store(value, dtype):
    """A register's value written into a [1, 1] tile of `dtype`."""
    return np.array([[value]]).astype(dtype)


def after_barrier(writes):
    """core_barrier: after it every core reads what every core wrote before it (each core's rows merged)."""
    out = {}
    for rows in writes:
        out.update(rows)
    return out


def indirect_offsets(index, num_elem, group=16):
    """Tensor Indirection: offset i lies at index[i % group, i // group] (a snake down the group's partitions)."""
    index = np.asarray(index)
    return np.array([index[i % group, i // group] for i in range(num_elem)], np.int64)


def indirect_gather(base, index, num_elem):
    """Column i of the result is column offset_i of `base` on every partition."""
    return np.asarray(base).reshape(len(base), -1)[:, indirect_offsets(index, num_elem)]


def indirect_scatter(base, index, src):
    """Column i of `src` lands at column offset_i of `base` (a later column wins an offset named twice)."""
    out = np.array(base).reshape(len(base), -1)
    for i, o in enumerate(indirect_offsets(index, np.asarray(src).shape[1])):
        out[:, o] = np.asarray(src)[:, i]
    return out


INSTRUCTIONS.update({"tensor_indirection_gather": indirect_gather, "tensor_indirection_scatter": indirect_scatter})
INSTRUCTIONS.update({"gather_flattened": gather_flattened, "range_select": range_select, "nc_find_index8": find8, "nc_match_replace8": match_replace8,
                     "nc_stream_shuffle": shuffle, "affine_select": affine_select, "local_gather": local_gather,
                     "rand": uniform_moments, "set_rng_seed": seed_value, "dropout": lambda x, keep: x * keep,
                     "sendrecv": lambda a, b: (b, a), "register_alloc": lambda value=0: value,
                     "register_move": lambda src_value: src_value, "register_load": register_load,
                     "register_store": register_store, "core_barrier": after_barrier})
