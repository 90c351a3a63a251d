"""Index grids of the beta API: `nl.arange`, `nl.mgrid`, affine index expressions and masks.

`nl.arange(128)[:, None]` is one axis of a 2-d grid. Arithmetic keeps expressions affine
(`const + sum(coef * index)`); comparisons make predicates, and `&` joins them into a mask. A mask is
evaluated over an instruction's tile shape (axes matched by position, as the compiler matches them)
and the True cells are cut into exact boxes, so a masked instruction is issued on exactly the elements
the compiler would keep: one box for a rectangle, a few per-partition-range boxes otherwise.
"""
from __future__ import annotations

import dis
import sys
import warnings

import numpy as np

from trnsim.core.errors import KernelError, ShapeError
from trnsim.errors import user_location

_CMP = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal, "!=": np.not_equal}
ALU_CMP = {"<": "less", "<=": "less_equal", ">": "greater", ">=": "greater_equal", "==": "equal", "!=": "not_equal"}


class MaskExpressionError(KernelError):
    """err_unsupported_expression_in_mask: a mask or index that is not an affine expression of grids."""

    def __init__(self, message: str, location: str | None = None):
        super().__init__(f"err_unsupported_expression_in_mask: {message}", location)


class Expr:
    """An affine expression of grid axes: `const + sum(coefs[a] * index_a)` over a grid of `ndim` axes."""

    __slots__ = ("const", "coefs", "sizes", "ndim")
    __hash__ = None  # comparisons build predicates, so expressions are not dict keys

    def __init__(self, const=0, coefs=None, sizes=None, ndim=0):
        self.const, self.coefs, self.sizes, self.ndim = int(const), dict(coefs or {}), dict(sizes or {}), ndim

    @property
    def shape(self) -> tuple:
        return tuple(self.sizes.get(a, 1) for a in range(self.ndim))

    def __repr__(self):
        terms = " + ".join(f"{c}*i{a}[{self.sizes[a]}]" for a, c in sorted(self.coefs.items()))
        return f"<index {terms or ''}{' + ' if terms else ''}{self.const}>"

    # -- arithmetic: stays affine ------------------------------------------------------------------
    @staticmethod
    def lift(x) -> Expr:
        if isinstance(x, Expr):
            return x
        if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
            return Expr(int(x))
        raise MaskExpressionError(f"{x!r} in an index or mask expression: only affine expressions of nl.arange, "
                                  f"loop indices and program_id are allowed")

    def _shifted(self, ndim):
        k = ndim - self.ndim
        return ({a + k: c for a, c in self.coefs.items()}, {a + k: n for a, n in self.sizes.items()})

    def __add__(self, other):
        o = Expr.lift(other)
        nd = max(self.ndim, o.ndim)
        (c1, s1), (c2, s2) = self._shifted(nd), o._shifted(nd)
        coefs = dict(c1)
        for a, c in c2.items():
            coefs[a] = coefs.get(a, 0) + c
        sizes = dict(s1)
        for a, n in s2.items():
            if sizes.get(a, n) != n and 1 not in (n, sizes[a]):
                raise ShapeError(f"index grids of sizes {sizes[a]} and {n} on axis {a} do not broadcast")
            sizes[a] = max(sizes.get(a, 1), n)
        return Expr(self.const + o.const, coefs, sizes, nd)

    __radd__ = __add__

    def __neg__(self):
        return self * -1

    def __sub__(self, other):
        return self + (-Expr.lift(other))

    def __rsub__(self, other):
        return Expr.lift(other) + (-self)

    def __mul__(self, k):
        if isinstance(k, Expr):
            if not k.coefs:
                k = k.const
            elif not self.coefs:
                return k * self.const
            else:
                raise MaskExpressionError("the product of two index grids is not affine")
        k = int(Expr.lift(k).const)
        return Expr(self.const * k, {a: c * k for a, c in self.coefs.items()}, self.sizes, self.ndim)

    __rmul__ = __mul__

    def __getitem__(self, key):
        """`nl.arange(n)[:, None]`: place a 1-d grid on one axis of a wider grid."""
        key = key if isinstance(key, tuple) else (key,)
        if self.ndim != 1 or sum(k is not None for k in key) != 1:
            raise ShapeError(f"grid indexing {key!r}: only a 1-d nl.arange can be placed, with one ':' and Nones")
        pos = next(i for i, k in enumerate(key) if k is not None)
        coefs = {pos: self.coefs[0]} if 0 in self.coefs else {}
        return Expr(self.const, coefs, {pos: self.sizes.get(0, 1)}, len(key))

    # -- comparisons: predicates -----------------------------------------------------------------
    def _cmp(self, other, op):
        return Cond(self - Expr.lift(other), op)

    def __lt__(self, o):
        return self._cmp(o, "<")

    def __le__(self, o):
        return self._cmp(o, "<=")

    def __gt__(self, o):
        return self._cmp(o, ">")

    def __ge__(self, o):
        return self._cmp(o, ">=")

    def __eq__(self, o):  # noqa: D105 - a predicate, as in the beta API
        return self._cmp(o, "==")

    def __ne__(self, o):
        return self._cmp(o, "!=")

    def __bool__(self):
        raise KernelError("err_control_flow_condition_depending_on_arange: an index grid cannot decide a Python "
                          "`if`; use mask= instead")

    def values(self, shape) -> np.ndarray:
        """The expression's value at every cell of `shape` (axes aligned from the right)."""
        out = np.full((1,) * len(shape), self.const, np.int64)
        k = len(shape) - self.ndim
        for a, c in self.coefs.items():
            idx = [1] * len(shape)
            idx[a + k] = shape[a + k]
            out = out + c * np.arange(shape[a + k], dtype=np.int64).reshape(idx)
        return np.broadcast_to(out, shape)


def _in_value_expression(frame) -> bool:
    """Whether the truth test running in `frame` belongs to an `and`/`or` whose value is kept (an expression),
    not to an `if` or `while`: Python 3.11 tests with JUMP_IF_*_OR_POP there, 3.12+ with COPY 1 before the jump."""
    code = list(dis.get_instructions(frame.f_code))
    at = next((i for i, ins in enumerate(code) if ins.offset == frame.f_lasti), None)
    if at is None:
        return False
    if code[at].opname in ("JUMP_IF_FALSE_OR_POP", "JUMP_IF_TRUE_OR_POP"):
        return True
    back = [ins for ins in code[:at] if ins.opname not in ("CACHE", "EXTENDED_ARG", "TO_BOOL", "NOT_TAKEN")]
    return bool(back) and back[-1].opname == "COPY" and back[-1].arg == 1


class PredicateTruthWarning(UserWarning):
    """A mask predicate decided a Python `and`, `or` or `if`."""


class Cond:
    """`expr <op> 0`: one compile-time predicate of a mask."""

    __slots__ = ("expr", "op")

    def __init__(self, expr: Expr, op: str):
        self.expr, self.op = expr, op

    def __and__(self, other):
        return Mask([self]) & other

    __rand__ = __and__

    def __bool__(self):
        """`p and q` / `p or q` in an expression (a mask the beta API tests write this way, which the compiler,
        reading the source, accepts) keep Python's meaning with a warning: `&` applies both predicates. A
        predicate deciding an `if` is the compiler's err_control_flow_condition_depending_on_arange
        (nki/api/nki.errors.rst)."""
        if not _in_value_expression(sys._getframe(1)):
            raise KernelError("err_control_flow_condition_depending_on_arange: a predicate of index grids cannot "
                              "decide a Python `if`; pass it as mask=")
        warnings.warn(PredicateTruthWarning(
            f"a mask predicate joined with `and`/`or`: Python keeps one side; join predicates with `&` to apply "
            f"both at {user_location() or '?'}"), stacklevel=2)
        return True

    def evaluate(self, shape) -> np.ndarray:
        return _CMP[self.op](self.expr.values(shape), 0)


class Mask:
    """Predicates joined with `&`."""

    __slots__ = ("conds",)

    def __init__(self, conds):
        self.conds = list(conds)

    def __and__(self, other):
        if isinstance(other, bool) or other is None:
            return self if other in (True, None) else False
        if isinstance(other, (np.bool_,)):
            return self if bool(other) else False
        more = other.conds if isinstance(other, Mask) else [other] if isinstance(other, Cond) else None
        if more is None:
            raise MaskExpressionError(f"cannot join {other!r} into a mask with `&`")
        return Mask(self.conds + more)

    __rand__ = __and__

    def __bool__(self):
        return Cond.__bool__(self)

    def evaluate(self, shape) -> np.ndarray:
        out = np.ones(shape, bool)
        for c in self.conds:
            out &= c.evaluate(shape)
        return out


def evaluate(mask, shape) -> np.ndarray | None:
    """The cells of `shape` a mask keeps; None means all of them (no mask)."""
    if mask is None or mask is True or (isinstance(mask, np.bool_) and mask):
        return None
    if mask is False or (isinstance(mask, np.bool_) and not mask):
        return np.zeros(shape, bool)
    if isinstance(mask, (Cond, Mask)):
        return mask.evaluate(shape)
    raise MaskExpressionError(f"mask={mask!r}: a mask is a comparison of nl.arange expressions, or several joined with &")


def boxes(keep: np.ndarray | None, shape) -> list[tuple]:
    """Exact cover of the kept cells by boxes ((lo, hi) per axis): one box when the mask is a rectangle."""
    if keep is None:
        return [tuple((0, n) for n in shape)]
    out: list[tuple] = []
    _cover(np.asarray(keep, bool), tuple((0, n) for n in shape), out)
    return out


def _cover(keep, region, out):
    sub = keep[tuple(slice(lo, hi) for lo, hi in region)]
    if not sub.any():
        return
    bound = []
    for k in range(sub.ndim):
        hit = np.flatnonzero(sub.any(axis=tuple(j for j in range(sub.ndim) if j != k)))
        bound.append((region[k][0] + int(hit[0]), region[k][0] + int(hit[-1]) + 1))
    sub = keep[tuple(slice(lo, hi) for lo, hi in bound)]
    if sub.all():
        out.append(tuple(bound))
        return
    k = next(j for j, (lo, hi) in enumerate(bound) if hi - lo > 1 and not _uniform(sub, j))
    start = 0
    for i in range(1, sub.shape[k] + 1):  # runs of identical slices along axis k
        if i == sub.shape[k] or not np.array_equal(np.take(sub, i, k), np.take(sub, start, k)):
            r = list(bound)
            r[k] = (bound[k][0] + start, bound[k][0] + i)
            _cover(keep, tuple(r), out)
            start = i


def _uniform(a, axis):
    first = np.take(a, [0], axis)
    return bool((a == first).all())


def arange(start, stop=None, step=1) -> Expr:
    """`nl.arange`: a 1-d index grid; place it with `[:, None]` / `[None, :]`."""
    start, stop = (0, start) if stop is None else (start, stop)
    n = len(range(int(start), int(stop), int(step)))
    return Expr(int(start), {0: int(step)}, {0: n}, 1)


class Grid(tuple):
    """What `nl.mgrid[...]` returns: one expression per axis, also as `.p`, `.x`, `.y`, `.z`."""

    p = property(lambda self: self[0])
    x = property(lambda self: self[1])
    y = property(lambda self: self[2])
    z = property(lambda self: self[3])


class _MGrid:
    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        nd = len(key)
        ranges = []
        for s in key:
            if not isinstance(s, slice):
                raise ShapeError(f"nl.mgrid takes slices (nl.mgrid[0:128, 0:512]); got {s!r}")
            ranges.append(range(s.start or 0, s.stop, s.step or 1))
        # a dense grid as numpy's mgrid: every component spans all axes, so an expression of some of them
        # (nisa.iota(3 * g.y + g.z)) still has the grid's whole shape
        sizes = {a: len(r) for a, r in enumerate(ranges)}
        return Grid([Expr(r.start, {a: r.step}, sizes, nd) for a, r in enumerate(ranges)])


mgrid = _MGrid()
