"""Collective algorithms as schedules: which rank sends which chunk to whom, step by step.

One schedule drives both the values (trnsim.fabric.collectives executes it, rounding every
reduction to the dtype) and the time (trnsim.fabric.timing prices its phases on the links).

Layout. A rank's buffer is cut into `n * ch` chunks: memory block r (the part reduce_scatter leaves
on group position r, the part all_gather takes from it) is cut into `ch` parts, one per channel
(concurrent rings on different wires). Algorithms see the group as a grid of Y rows of X
members (position r = y*X + x): rows are nodes for `hierarchical`, torus rows for `torus`, one
row for the flat algorithms. Chunk id of block (y, x), part c is `c*X*Y + x*Y + y`, so a row
member's block is a contiguous run of Y ids and a column's sub-block is one id.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Phase:
    """`repeat` rounds of the same transfers (src -> dst group positions) of `count` chunks each
    (one count for all, or one per transfer)."""

    name: str
    src: np.ndarray
    dst: np.ndarray
    count: int | np.ndarray
    reduce: bool
    repeat: int = 1
    starts: Callable[[int], np.ndarray] | None = None  # first chunk id of each transfer in round s
    uniform: bool = True  # every node of a uniform group carries the same traffic (timing may price one)


@dataclass(frozen=True)
class Schedule:
    algorithm: str
    nchunks: int
    layout: np.ndarray  # memory chunk (r*ch + c) -> chunk id
    phases: tuple[Phase, ...]

    @property
    def steps(self) -> int:
        return sum(p.repeat for p in self.phases)


@dataclass(frozen=True)
class Level:
    """Independent groups (rows of `members`, group positions) doing one sub-collective on their blocks."""

    members: np.ndarray  # [G, M] group positions
    base: np.ndarray  # [ch, G, M] first chunk id of member m's block in group g, channel c
    block: int  # chunks per block
    orders: np.ndarray  # [ch, G, M] ring order (indices into the row) per channel


def _ring(lv: Level, kind: str) -> list[Phase]:
    """Ring reduce-scatter (block q ends reduced on member q) or all-gather, one ring per channel."""
    ch, G, M = lv.orders.shape
    if M < 2:
        return []
    mem = np.take_along_axis(np.broadcast_to(lv.members, (ch, G, M)), lv.orders, axis=2)
    base = np.take_along_axis(lv.base, lv.orders, axis=2)
    src, dst = mem.ravel(), np.roll(mem, -1, axis=2).ravel()
    shift = 1 if kind == "rs" else 0

    def starts(s):  # position p sends the block of the member s+shift places behind it
        return np.roll(base, s + shift, axis=2).ravel()

    return [Phase(f"ring-{kind}", src, dst, lv.block, kind == "rs", M - 1, starts)]


def _rdh(lv: Level, kind: str) -> list[Phase]:
    """Recursive halving (reduce-scatter) or doubling (all-gather) over a power-of-two row."""
    ch, G, M = lv.base.shape
    dists = [M >> (t + 1) for t in range(M.bit_length() - 1)]
    if kind == "ag":
        dists = dists[::-1]
    q = np.arange(M)
    out = []
    for d in dists:
        partner = q ^ d
        first = (q & ~(2 * d - 1)) | (partner & d) if kind == "rs" else q & ~(d - 1)
        src = np.broadcast_to(lv.members[:, q], (ch, G, M)).ravel()
        dst = np.broadcast_to(lv.members[:, partner], (ch, G, M)).ravel()
        st = lv.base[:, :, first].ravel()  # blocks of a row are contiguous ids: block b+1 follows b
        out.append(Phase(f"rdh-{kind}", src, dst, d * lv.block, kind == "rs", 1, lambda s, st=st: st))
    return out


def _rdh_folded(lv: Level) -> list[Phase]:
    """All-reduce by recursive halving and doubling on a row of any size (Rabenseifner's fold).

    The M - P members beyond the largest power of two P first hand their whole range to a partner
    among the first P, which run halving and doubling on the row's range (halves differ by at most
    a chunk, so transfer sizes vary), then hand the result back. Nodes carry uneven traffic, so
    timing prices every node (`uniform=False`).
    """
    ch, G, M = lv.base.shape
    P = 1 << (M.bit_length() - 1)
    E, total = M - P, M * lv.block
    start = lv.base[:, :, :1]  # the row's range begins at its first block's id
    bc = lambda a: np.broadcast_to(a, (ch, G, a.shape[-1])).ravel()  # noqa: E731
    out = []
    if E:
        first = np.broadcast_to(start, (ch, G, E)).ravel()
        out.append(Phase("rdh-fold", bc(lv.members[:, P:]), bc(lv.members[:, :E]), total, True, 1,
                         lambda s, st=first: st, False))
    q = np.arange(P)
    lo, hi, steps = np.zeros(P, dtype=np.int64), np.full(P, total, dtype=np.int64), []
    d = P >> 1
    while d:
        partner, mid, low = q ^ d, (lo + hi) // 2, (q & d) == 0
        steps.append((d, lo.copy(), hi.copy()))
        s_lo, s_hi = np.where(low, mid, lo), np.where(low, hi, mid)
        st = (start + s_lo).ravel()
        out.append(Phase("rdh-rs", bc(lv.members[:, q]), bc(lv.members[:, partner]),
                         np.broadcast_to(s_hi - s_lo, (ch, G, P)).ravel(), True, 1, lambda s, st=st: st, False))
        lo, hi = np.where(low, lo, mid), np.where(low, mid, hi)
        d >>= 1
    for d, lo_before, hi_before in reversed(steps):  # doubling: send what is held, receive the other half
        st = (start + lo).ravel()
        out.append(Phase("rdh-ag", bc(lv.members[:, q]), bc(lv.members[:, q ^ d]),
                         np.broadcast_to(hi - lo, (ch, G, P)).ravel(), False, 1, lambda s, st=st: st, False))
        lo, hi = lo_before, hi_before
    if E:
        out.append(Phase("rdh-unfold", bc(lv.members[:, :E]), bc(lv.members[:, P:]), total, False, 1,
                         lambda s, st=first: st, False))
    return out


def _mesh(lv: Level, kind: str) -> list[Phase]:
    """Direct writes: every member sends block b straight to member b (rs) or its block to all (ag)."""
    ch, G, M = lv.base.shape
    if M < 2:
        return []
    q, off = np.meshgrid(np.arange(M), np.arange(1, M), indexing="ij")
    peer = (q + off) % M  # incoming reductions are applied in order of distance
    src = np.broadcast_to(lv.members[:, q], (ch, G, M, M - 1))
    dst = np.broadcast_to(lv.members[:, peer], (ch, G, M, M - 1))
    st = lv.base[:, :, peer if kind == "rs" else np.broadcast_to(q, peer.shape)]
    # order transfers by distance, so duplicates on one destination chunk arrive nearest first
    perm = lambda a: np.moveaxis(a, 3, 0).ravel()  # noqa: E731
    return [Phase(f"mesh-{kind}", perm(src), perm(dst), lv.block, kind == "rs", 1, lambda s, st=perm(st): st)]


def _oneshot(lv: Level) -> list[Phase]:
    """Single-step all-reduce: every member sends its whole row range to every other and reduces locally."""
    ch, G, M = lv.base.shape
    if M < 2:
        return []
    q, off = np.meshgrid(np.arange(M), np.arange(1, M), indexing="ij")
    src = np.broadcast_to(lv.members[:, (q + off) % M], (ch, G, M, M - 1))
    dst = np.broadcast_to(lv.members[:, q], (ch, G, M, M - 1))
    st = np.broadcast_to(lv.base[:, :, :1, None], (ch, G, M, M - 1))
    perm = lambda a: np.moveaxis(a, 3, 0).ravel()  # noqa: E731
    return [Phase("oneshot", perm(src), perm(dst), M * lv.block, True, 1, lambda s, st=perm(st): st)]


def _pairs(lv: Level) -> tuple[Level, np.ndarray, np.ndarray]:
    """KangaRing's pairing: members 2i (primary) and 2i+1 of each row; a ring level over the primaries."""
    ch, G, M = lv.base.shape
    prim, sec = lv.members[:, 0::2], lv.members[:, 1::2]
    o = lv.orders
    keep = o[o % 2 == 0].reshape(ch, G, M // 2) // 2  # the primaries, in the ring order of the row
    ring = Level(prim, lv.base[:, :, 0::2], 2 * lv.block, keep)
    return ring, prim, sec


def _kangaring(lv: Level, kind: str) -> list[Phase]:
    """KangaRing: core pairs on a chip combine first, only the primary of each pair is on the ring."""
    ch, G, M = lv.base.shape
    if M < 2:
        return []
    ring, prim, sec = _pairs(lv)
    P = lambda a: np.broadcast_to(a, (ch,) + a.shape).ravel()  # noqa: E731
    row = lv.base[:, :, :1]  # the row's whole range starts at block 0
    own_sec = lv.base[:, :, 1::2].ravel()
    whole = np.broadcast_to(row, (ch, G, M // 2)).ravel()
    if kind == "rs":
        return ([Phase("pair-reduce", P(sec), P(prim), M * lv.block, True, 1, lambda s: whole)]
                + _ring(ring, "rs")
                + [Phase("pair-copy", P(prim), P(sec), lv.block, False, 1, lambda s: own_sec)])
    return ([Phase("pair-copy", P(sec), P(prim), lv.block, False, 1, lambda s: own_sec)]
            + _ring(ring, "ag")
            + [Phase("pair-copy", P(prim), P(sec), M * lv.block, False, 1, lambda s: whole)])


LEVEL_ALGORITHMS = {"ring": _ring, "rdh": _rdh, "mesh": _mesh, "kangaring": _kangaring}


def _level_phases(alg: str, lv: Level, kind: str) -> list[Phase]:
    """A level's reduce-scatter ("rs"), all-gather ("ag") or all-reduce ("ar") phases."""
    if kind == "ar":
        if alg == "oneshot":
            return _oneshot(lv)
        M = lv.base.shape[2]
        if alg == "rdh" and M & (M - 1):
            return _rdh_folded(lv)
        rs, ag = LEVEL_ALGORITHMS[alg](lv, "rs"), LEVEL_ALGORITHMS[alg](lv, "ag")
        if alg == "kangaring" and rs:  # the pair stays combined between the two rings
            rs, ag = rs[:-1], ag[1:]
        return rs + ag
    return LEVEL_ALGORITHMS[alg](lv, kind)


def grid_levels(Y: int, X: int, ch: int, row_orders: np.ndarray, col_orders: np.ndarray,
                rows=None, cols=None) -> tuple[Level, Level]:
    """The row level (Y rows of X members) and the column level (X columns of Y members) of a Y x X grid:
    every row and column, or the rows and columns listed (timing prices one of each where all are alike)."""
    rows = np.arange(Y) if rows is None else np.asarray(rows)
    cols = np.arange(X) if cols is None else np.asarray(cols)
    c = np.arange(ch)[:, None, None]
    x, y = np.arange(X)[None, :], np.arange(Y)[None, :]
    row_members = rows[:, None] * X + x  # position r = y*X + x
    col_members = y * X + cols[:, None]
    row_base = np.broadcast_to(c * X * Y + x * Y, (ch, len(rows), X)).copy()
    col_base = np.broadcast_to(c * X * Y + cols[:, None] * Y + y, (ch, len(cols), Y)).copy()
    return Level(row_members, row_base, Y, row_orders), Level(col_members, col_base, 1, col_orders)


def compose(kind: str, Y: int, row_alg: str, col_alg: str, rows: Level, cols: Level) -> list[tuple[str, Phase]]:
    """The phases of a two-level collective in order, each marked "row" or "column":
    all_reduce = row reduce-scatter, column all-reduce, row all-gather; reduce_scatter = row
    reduce-scatter then column reduce-scatter; all_gather = column all-gather then row all-gather."""
    row = lambda k: [("row", p) for p in _level_phases(row_alg, rows, k)]  # noqa: E731
    col = lambda k: [("column", p) for p in _level_phases(col_alg, cols, k)]  # noqa: E731
    if kind == "ar" and Y == 1:
        return row("ar")
    if kind == "ar":
        return row("rs") + col("ar") + row("ag")
    if kind == "rs":
        return row("rs") + col("rs")
    return col("ag") + row("ag")


def two_level(kind: str, Y: int, X: int, ch: int, row_alg: str, col_alg: str,
              row_orders: np.ndarray, col_orders: np.ndarray, name: str) -> Schedule:
    """Reduce-scatter / all-gather / all-reduce over a Y x X grid of group positions (`compose`).
    With Y = 1 (or X = 1) it is the flat algorithm over one row (or one column)."""
    rows, cols = grid_levels(Y, X, ch, row_orders, col_orders)
    phases = [p for _, p in compose(kind, Y, row_alg, col_alg, rows, cols)]
    c = np.arange(ch)[:, None, None]
    r = np.arange(Y * X)
    layout = ((c.ravel()[None, :] * X * Y) + (r % X * Y + r // X)[:, None]).ravel()  # memory (r, c) -> id
    return Schedule(name, Y * X * ch, layout, tuple(phases))


def pairwise(name: str, n: int, pairs: list[tuple[int, int]]) -> Schedule:
    """Point-to-point copies of the whole buffer (permute, send/recv, broadcast from a root)."""
    src = np.array([a for a, _ in pairs], dtype=np.int64)
    dst = np.array([b for _, b in pairs], dtype=np.int64)
    return Schedule(name, 1, np.zeros(1, dtype=np.int64),
                    (Phase(name, src, dst, 1, False, 1, lambda s: np.zeros(len(src), dtype=np.int64)),))
