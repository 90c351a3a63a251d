"""The kinds of value the `nl.*` ops of both front ends take, checked by parameter name before an op runs.

A value of another kind (a number where a tile goes, text where a count goes, NaN as a loop bound) is refused
with an `OperandTypeError` naming the op, the parameter, the rule and the kernel line, as the instructions'
own operand check does (core/isa/registry.py: generic_check), instead of failing deep inside the lowering.
Each front end wraps its public functions once (`Kinds.check_all`); the kinds are the same for both.
"""
from __future__ import annotations

import functools
import inspect
import math

import numpy as np

from trnsim.core.errors import OperandTypeError

TILES = frozenset({"x", "y", "condition", "data", "indices", "src", "dst", "w", "a", "tensor", "stationary",
                   "moving", "value"})
INTS = frozenset({"n", "size", "start", "stop", "lower", "upper", "init"})  # counts, bounds: ints or registers
SHAPES = frozenset({"shape", "tile_shape", "block_shape", "element_shape", "loop_indices", "program_axes"})  # int(s)
NUMBERS = frozenset({"fill_value"})
FINITE = frozenset({"epsilon"})
EITHER = frozenset({"nl.where y"})  # besides an element-wise op's x and y: a tile or a number
OWN = frozenset({"nl.dynamic_range step"})  # checked by the op itself, with its own rule
BUFFERS = ("sbuf", "psum", "hbm", "private_hbm", "shared_hbm")
OPTIONAL = frozenset({"stop", "buffer", "address"})  # None there: not given


def _shown(v) -> str:
    return f"{type(v).__name__} {str(v)[:40]!r}"


def _number(v) -> bool:
    return (hasattr(type(v), "__float__") or hasattr(type(v), "__index__")) and not isinstance(v, (tuple, list))


def _count(v) -> bool:
    return hasattr(type(v), "__index__") and not isinstance(v, bool)  # an int, a numpy integer, a register


def _kind(op: str, name: str, either: frozenset, pair: bool) -> str | None:
    """What parameter `name` of `op` takes: 'tile', 'either' (a tile or a number), 'int', 'shape', 'number',
    'finite', 'rate', 'buffer', 'address', 'step', 'host', 'body', or None (checked by the op itself)."""
    if f"{op} {name}" in OWN:
        return None
    if name in either or f"{op} {name}" in EITHER or pair and name in ("x", "y"):
        return "either"
    for kind, names in (("tile", TILES), ("int", INTS), ("shape", SHAPES), ("number", NUMBERS), ("finite", FINITE)):
        if name in names:
            return kind
    return {"buffer": "buffer", "body_fun": "body", "address": "address", "step": "step", "constant": "host",
            "rate": "rate"}.get(name)


def _refused(kind: str, v, tiles: tuple) -> str | None:
    """The rule `v` breaks as a value of `kind`, or None."""
    if kind == "tile":
        return None if isinstance(v, tiles) else "is a tile (an nl.ndarray or a view of one)"
    if kind == "either":
        return None if isinstance(v, tiles) or _number(v) else "is a tile or a number"
    if kind == "int":  # a count or a loop bound, which a 32-bit register holds (a register is read when used)
        return None if _count(v) and (not isinstance(v, (int, np.integer)) or -2**31 <= v < 2**31) else (
            "is a 32-bit integer (or a register)")
    if kind == "rate":  # a dropout rate: a [P, 1] tile of them, or a probability
        return None if isinstance(v, tiles) or _number(v) and 0 <= float(v) <= 1 else (
            "is a tile or a probability in 0..1")
    if kind == "step":
        return None if isinstance(v, (int, np.integer)) and v != 0 and -2**31 <= v < 2**31 else (
            "is a non-zero 32-bit integer")
    if kind == "host":  # data the compiler embeds: an array, numbers, or a .npy path
        return None if isinstance(v, (str, np.ndarray, list, tuple)) or _number(v) and not isinstance(v, tiles) \
            else "is host data (a numpy array or a .npy path)"
    if kind == "shape":
        dims = (v,) if _count(v) else v if isinstance(v, (tuple, list)) else None
        return None if dims is not None and all(_count(d) for d in dims) else "is an int or a tuple of ints"
    if kind in ("number", "finite"):
        if not _number(v):
            return "is a number"
        return None if kind == "number" or math.isfinite(float(v)) else "is a finite number"
    if kind == "address":
        ok = isinstance(v, (tuple, list)) and len(v) == 2 and all(_count(d) for d in v)
        return None if ok else "is a (start partition, byte offset) pair of ints"
    if kind == "buffer":
        return None if str(getattr(v, "value", v)) in BUFFERS or hasattr(v, "allocate") else (  # or a placement
            f"is a buffer ({', '.join(f'nl.{b}' for b in BUFFERS)})")
    return None if callable(v) else "is a function (the loop body)"


class Kinds:
    """The checks of one front end: `tiles`, the types it takes for a tile; `either`, the parameters that take
    a tile or a number besides an element-wise op's two operands (one of which must be a tile); `optional`,
    'op parameter' pairs that take None besides OPTIONAL."""

    def __init__(self, tiles: tuple, either=frozenset(), optional=frozenset()):
        self.tiles, self.either, self.optional = tiles, frozenset(either), OPTIONAL | frozenset(optional)

    def wrap(self, fn, op: str):
        """`fn` (the op `op`) checking its arguments' kinds first."""
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        pair = params[:2] == ["x", "y"] and op != "nl.matmul"  # an element-wise op: one operand may be a number
        checked = [(i, n, k) for i, n in enumerate(params) if (k := _kind(op, n, self.either, pair))]
        if not checked:
            return fn
        tiles, missing = self.tiles, object()
        optional = {n.split()[-1] for n in self.optional if " " not in n or n.startswith(f"{op} ")}

        @functools.wraps(fn)
        def call(*args, **kwargs):
            for i, name, kind in checked:
                v = args[i] if i < len(args) else kwargs.get(name, missing)
                if v is missing or v is None and name in optional:
                    continue
                rule = _refused(kind, v, tiles)
                if rule:
                    raise OperandTypeError(f"{op} parameter {name!r} {rule}; got {_shown(v)}")
            if pair:
                x = args[0] if args else kwargs.get("x")
                y = args[1] if len(args) > 1 else kwargs.get("y")
                if not isinstance(x, tiles) and not isinstance(y, tiles):
                    raise OperandTypeError(f"{op}: x or y is a tile; got two numbers, {x!r} and {y!r}")
            return fn(*args, **kwargs)
        return call

    def check_all(self, namespace: dict, names) -> None:
        """Every function named in `names` made to check its arguments' kinds."""
        for name in names:
            fn = namespace.get(name)
            if inspect.isfunction(fn):
                namespace[name] = self.wrap(fn, f"nl.{name}")
