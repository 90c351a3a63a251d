"""Collectives with values: per-rank numpy arrays in, per-rank arrays out, with the time they took.

    >>> import numpy as np, trnsim.fabric as tf
    >>> c = tf.cluster("trn2.48xlarge")
    >>> xs = [np.full(1024, i, np.float32) for i in range(8)]
    >>> r = tf.all_reduce(xs, cluster=c)
    >>> float(r[0][0]), r.algorithm
    (28.0, 'mesh')

Reductions follow the chosen algorithm's schedule chunk by chunk: every reduction a rank performs
is computed in FP32 and rounded to the data's dtype (RNE, or stochastic with `rounding=
"stochastic"`), as the DMA engines write each partial sum back in the buffer's type. A bf16 ring
all-reduce therefore rounds once per hop. Integer reductions run through FP32 as on the hardware
(no integer datapath): exact up to 2**24.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trnsim import numerics
from trnsim.errors import TrnsimError, UnknownNameError
from trnsim.fabric import algorithms as A
from trnsim.fabric import runtime as R
from trnsim.fabric import timing as T
from trnsim.fabric.cluster import Cluster, cluster as make_cluster, where

REDUCE_OPS = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}


class CollectiveShapeError(TrnsimError, ValueError):
    """Per-rank arrays whose shapes or dtypes disagree, or that the operation cannot split."""

    exit_code = 2



@dataclass(frozen=True)
class CollectiveResult:
    """The per-rank outputs, plus what the collective cost: `result[i]` is rank i's output."""

    outputs: list
    time_ns: float
    algorithm: str
    steps: int

    def __getitem__(self, i):
        return self.outputs[i]

    def __len__(self) -> int:
        return len(self.outputs)

    def __iter__(self):
        return iter(self.outputs)


def _inputs(arrays, what: str, dtype=None, same_shape: bool = True):
    """Check the per-rank arrays and resolve their trnsim dtype."""
    if isinstance(arrays, np.ndarray) or not hasattr(arrays, "__len__") or len(arrays) == 0:
        raise CollectiveShapeError(f"{what} takes a non-empty list of per-rank arrays, got {type(arrays).__name__}{where()}")
    xs = [np.asarray(a) for a in arrays]
    dts = {x.dtype for x in xs}
    if len(dts) > 1 and dtype is None:
        raise CollectiveShapeError(f"{what}: per-rank arrays disagree in dtype ({', '.join(sorted(map(str, dts)))}); "
                         f"cast them to one type{where()}")
    try:
        dt = numerics.dtype(dtype if dtype is not None else xs[0].dtype)
    except (KeyError, TrnsimError):
        raise UnknownNameError("collective dtype", str(dtype if dtype is not None else xs[0].dtype),
                               [t.name for t in numerics.ALL if t.kind in ("float", "int", "uint")]) from None
    if dt.kind not in ("float", "int", "uint"):
        raise CollectiveShapeError(f"{what}: dtype {dt.name} cannot be reduced or moved by collectives; use an unpacked "
                         f"float or integer type{where()}")
    if dtype is not None:
        xs = [numerics.cast(x, dt, rounding="rne") if x.dtype != dt.np else x for x in xs]
    if same_shape:
        for i, x in enumerate(xs):
            if x.shape != xs[0].shape:
                raise CollectiveShapeError(f"{what}: rank {i} has shape {x.shape}, rank 0 has {xs[0].shape}; "
                                 f"every rank must pass the same shape{where()}")
    return xs, dt


def _setup(n: int, cluster: Cluster | None, ranks):
    if cluster is None:
        cluster = make_cluster("trn2.48xlarge", nodes=max(1, -(-n // 64)))
    g = R.group_of(cluster, n if ranks is None else ranks)
    if g.n != n:
        raise CollectiveShapeError(f"{n} per-rank arrays for a group of {g.n} ranks; pass one array per rank{where()}")
    return g


def execute(sch: A.Schedule, data: np.ndarray, dt, op: str = "sum", rounding: str = "rne", rng=None) -> None:
    """Run a schedule in place on `data` [ranks, chunk ids, elements] (storage dtype of `dt`).

    Transfers of a round read their sources before any write; reductions that land on the same
    chunk in one round are applied in transfer order, each rounded to `dt`.
    """
    fn = REDUCE_OPS[op]
    for ph in sch.phases:
        counts = np.broadcast_to(ph.count, ph.src.shape)
        for s in range(ph.repeat):
            st = ph.starts(s)
            # transfers grouped by length; every source is read before anything is written
            moves = []
            for c in np.unique(counts[counts > 0]):
                m = np.flatnonzero(counts == c)
                idx = st[m, None] + np.arange(c)
                moves.append((ph.dst[m], idx, data[ph.src[m, None], idx]))
            for dst, idx, vals in moves:
                if ph.reduce:
                    _reduce_into(data, dst, idx, vals, sch.nchunks, fn, dt, rounding, rng)
                else:
                    data[dst[:, None], idx] = vals


def _reduce_into(data, dst, idx, vals, nchunks, fn, dt, rounding, rng) -> None:
    """data[dst, idx] = fn(data[dst, idx], vals) rounded to dt; repeats of one destination apply in order."""
    key = dst * nchunks + idx[:, 0]
    order = np.argsort(key, kind="stable")
    first = np.searchsorted(key[order], key[order], side="left")
    wave = np.empty(len(key), dtype=np.int64)
    wave[order] = np.arange(len(key)) - first
    for w in range(int(wave.max()) + 1):
        m = wave == w
        d, i = dst[m][:, None], idx[m]
        with np.errstate(over="ignore", invalid="ignore"):
            acc = fn(data[d, i].astype(np.float32), vals[m].astype(np.float32))
        data[d, i] = numerics.cast(acc, dt, rounding=rounding, rng=rng)


def _blocks(xs, n: int, ch: int, layout: np.ndarray, nchunks: int, dt):
    """Cut each rank's flat buffer into n blocks of ch parts and place them by chunk id."""
    size = xs[0].size
    B = -(-size // n)
    L = max(1, -(-B // ch))
    data = np.zeros((len(xs), nchunks, L), dtype=dt.np)
    flat = np.zeros((len(xs), n * ch * L), dtype=dt.np)
    for r, x in enumerate(xs):
        padded = np.zeros(n * B, dtype=dt.np)
        padded[:size] = x.ravel()
        per_block = np.zeros((n, ch * L), dtype=dt.np)
        per_block[:, :B] = padded.reshape(n, B)
        flat[r] = per_block.ravel()
    data[:, layout] = flat.reshape(len(xs), n * ch, L)
    return data, B


def _unblock(data: np.ndarray, layout: np.ndarray, n: int, ch: int, B: int) -> np.ndarray:
    """[ranks, n*B]: the memory-order buffers back out of the chunk-id layout."""
    R, _, L = data.shape
    return data[:, layout].reshape(R, n, ch * L)[:, :, :B].reshape(R, n * B)


def _reduction(kind: str, arrays, op, cluster, ranks, algorithm, model, rounding, rng, dtype, what):
    """Run a reduce-scatter / all-gather / all-reduce schedule on the ranks' arrays.

    Returns the ranks' whole buffers in memory order [n, n*B] (B elements per block), the
    checked inputs, B, and (time ns, algorithm, steps).
    """
    if op not in REDUCE_OPS:
        raise UnknownNameError("reduction", op, list(REDUCE_OPS))
    xs, dt = _inputs(arrays, what, dtype)
    n = len(xs)
    g = _setup(n, cluster, ranks)
    if kind in ("rs", "ag") and xs[0].ndim == 0 or kind == "rs" and xs[0].shape[0] % n:
        raise CollectiveShapeError(f"{what}: axis 0 of the per-rank arrays ({xs[0].shape}) must split into {n} equal "
                         f"blocks, one per rank{where()}")
    nbytes = xs[0].size * dt.itemsize * (n if kind == "ag" else 1)
    t, alg, steps = T.collective_time(what, nbytes, g, g.cluster, algorithm, model)
    if n == 1:
        return xs[0].ravel()[None].copy(), xs, xs[0].size, (t, alg, steps)
    alg, subs = (algorithm, None) if algorithm else T.pick(what, nbytes, g, model)
    sch = R.schedule(what, alg, g, nbytes, subs)
    ch = sch.nchunks // n
    if kind == "ag":
        data, B = _blocks([np.concatenate([np.zeros(x.size * r, dt.np), x.ravel(), np.zeros(x.size * (n - 1 - r), dt.np)])
                           for r, x in enumerate(xs)], n, ch, sch.layout, sch.nchunks, dt)
    else:
        data, B = _blocks(xs, n, ch, sch.layout, sch.nchunks, dt)
    execute(sch, data, dt, op, rounding, rng)
    return _unblock(data, sch.layout, n, ch, B), xs, B, (t, sch.algorithm, steps)


def all_reduce(arrays, op: str = "sum", *, cluster: Cluster | None = None, ranks=None, algorithm: str | None = None,
               model: str = "alpha-beta", rounding: str = "rne", rng=None, dtype=None) -> CollectiveResult:
    """Reduce the ranks' arrays element-wise (sum, max, min, prod); every rank gets the result.

    Args:
      arrays: one array per rank, same shape and dtype (any float or integer trnsim dtype).
      cluster, ranks: where the ranks run (default: trn2.48xlarge nodes enough for them; ranks 0..n-1).
      algorithm: force one of trnsim.fabric.ALGORITHMS; None chooses as the runtime does.
      model: timing model, "alpha-beta" or "flow". rounding, rng: how reductions round to the dtype.
    Returns: a CollectiveResult (result[i] is rank i's array; .time_ns, .algorithm, .steps).
    """
    full, xs, _, cost = _reduction("ar", arrays, op, cluster, ranks, algorithm, model, rounding, rng, dtype,
                                   "all_reduce")
    return CollectiveResult([f[:xs[0].size].reshape(xs[0].shape) for f in full], *cost)


def reduce_scatter(arrays, op: str = "sum", *, cluster: Cluster | None = None, ranks=None,
                   algorithm: str | None = None, model: str = "alpha-beta", rounding: str = "rne", rng=None,
                   dtype=None) -> CollectiveResult:
    """Reduce the ranks' arrays; rank i gets block i of the result (axis 0 split in len(arrays) parts)."""
    full, xs, B, cost = _reduction("rs", arrays, op, cluster, ranks, algorithm, model, rounding, rng, dtype,
                                   "reduce_scatter")
    n = len(xs)
    shape = (xs[0].shape[0] // n,) + xs[0].shape[1:]
    return CollectiveResult([full[r, r * B:(r + 1) * B].reshape(shape) for r in range(n)], *cost)


def all_gather(arrays, *, cluster: Cluster | None = None, ranks=None, algorithm: str | None = None,
               model: str = "alpha-beta", dtype=None) -> CollectiveResult:
    """Every rank gets the ranks' arrays concatenated along axis 0, in rank order."""
    full, xs, B, cost = _reduction("ag", arrays, "sum", cluster, ranks, algorithm, model, "rne", None, dtype,
                                   "all_gather")
    n, size = len(xs), xs[0].size
    shape = (n * xs[0].shape[0],) + xs[0].shape[1:]
    return CollectiveResult([np.concatenate([f[j * B:j * B + size] for j in range(n)]).reshape(shape) for f in full],
                            *cost)


def all_to_all(arrays, *, cluster: Cluster | None = None, ranks=None, model: str = "alpha-beta",
               dtype=None) -> CollectiveResult:
    """Rank j's block i (axis 0 in len(arrays) parts) goes to rank i, landing as its block j."""
    xs, dt = _inputs(arrays, "all_to_all", dtype)
    n = len(xs)
    g = _setup(n, cluster, ranks)
    if xs[0].ndim == 0 or xs[0].shape[0] % n:
        raise CollectiveShapeError(f"all_to_all: axis 0 of the per-rank arrays ({xs[0].shape}) must split into {n} "
                         f"equal blocks, one per destination rank{where()}")
    t, alg, steps = T.collective_time("all_to_all", xs[0].nbytes, g, g.cluster, None, model)
    parts = [np.split(x, n) for x in xs]
    return CollectiveResult([np.concatenate([parts[j][i] for j in range(n)]) for i in range(n)], t, alg, steps)


def all_to_allv(arrays, *, cluster: Cluster | None = None, ranks=None, model: str = "alpha-beta",
                dtype=None) -> CollectiveResult:
    """arrays[j][i] (any length) goes from rank j to rank i; rank i gets the list [arrays[0][i], ...]."""
    n = len(arrays)
    if any(not hasattr(a, "__len__") or len(a) != n for a in arrays):
        raise CollectiveShapeError(f"all_to_allv: every rank passes a list of {n} arrays, one per destination{where()}")
    flat, dt = _inputs([x for a in arrays for x in a], "all_to_allv", dtype, same_shape=False)
    g = _setup(n, cluster, ranks)
    sizes = np.array([x.nbytes for x in flat], dtype=float).reshape(n, n)
    j, i = np.nonzero(~np.eye(n, dtype=bool))
    ph = A.Phase("mesh", j, i, sizes[j, i], False)
    t = T.price_once(g, ph, model) if n > 1 else 0.0
    return CollectiveResult([[flat[j * n + i] for j in range(n)] for i in range(n)], t, "mesh", 1 if n > 1 else 0)


def permute(arrays, pairs=None, *, cluster: Cluster | None = None, ranks=None, model: str = "alpha-beta",
            dtype=None) -> CollectiveResult:
    """Rank a's array goes to rank b for each (a, b) in `pairs` (default: the ring i -> i+1).

    A rank that receives nothing gets zeros, as XLA's collective_permute gives.
    """
    xs, dt = _inputs(arrays, "permute", dtype)
    n = len(xs)
    g = _setup(n, cluster, ranks)
    pairs = [(i, (i + 1) % n) for i in range(n)] if pairs is None else [tuple(map(int, p)) for p in pairs]
    dsts = [b for _, b in pairs]
    bad = [p for p in pairs if not (0 <= p[0] < n and 0 <= p[1] < n)]
    if bad or len(set(dsts)) != len(dsts):
        raise CollectiveShapeError(f"permute: pairs must name ranks 0..{n - 1} and each destination once, got "
                         f"{bad[0] if bad else pairs}{where()}")
    out = [np.zeros_like(x) for x in xs]
    for a, b in pairs:
        out[b] = xs[a].copy()
    sch = A.pairwise("direct", n, [p for p in pairs if p[0] != p[1]])
    t = T.price_once(g, sch.phases[0], model, xs[0].nbytes) if len(sch.phases[0].src) else 0.0
    return CollectiveResult(out, t, "direct", 1)


def send_recv(array, src: int, dst: int, *, cluster: Cluster | None = None, n: int | None = None,
              model: str = "alpha-beta") -> CollectiveResult:
    """Send `array` from rank `src` to rank `dst` of an n-rank group; result[dst] is the received copy."""
    n = n or max(src, dst) + 1
    x = np.asarray(array)
    return permute([x] * n, [(src, dst)], cluster=cluster, model=model)


def broadcast(arrays, root: int = 0, *, cluster: Cluster | None = None, ranks=None, model: str = "alpha-beta",
              dtype=None) -> CollectiveResult:
    """Every rank gets rank `root`'s array. Timed as the runtime runs it (`timing.collective_time`: the
    root's direct writes, or scatter then ring all-gather for large messages), from the group's first
    rank; a copy rounds nothing, so the values do not depend on the algorithm."""
    xs, dt = _inputs(arrays, "broadcast", dtype)
    n = len(xs)
    if not 0 <= root < n:
        raise CollectiveShapeError(f"broadcast: root {root} is not a rank of this {n}-rank group{where()}")
    g = _setup(n, cluster, ranks)
    t, alg, steps = T.collective_time("broadcast", xs[0].nbytes, g, g.cluster, None, model)
    return CollectiveResult([xs[root].copy() for _ in xs], t, alg, steps)
