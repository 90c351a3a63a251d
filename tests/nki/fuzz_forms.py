"""Hypothesis strategies for random calls of every `nki.isa` function of both API generations, and the launch
that runs them. Used by test_fuzz_api.py (a CI slice) and benchmarks/fuzz_api.py (10^5 calls in slices).

A call is drawn as plain data: the function's name and, per parameter, a spec of the kind the parameter's name
and default suggest (a tile of some shape, dtype and memory, most often like the call's other tiles so that
many calls are valid; a scalar among NaN, infinities and huge numbers; an ALU op; an axis; an access pattern;
an enum member), or now and then a value of another kind altogether (None, text, a tuple). Inside one launch
each spec becomes its object and the function is called: it must return or raise a named error
(`TrnsimError`) whose message names the line of this file that made the call (or the tile); anything else is
an internal exception.
"""
from __future__ import annotations

import inspect
import os
import warnings
from collections import Counter
from typing import NamedTuple

from hypothesis import strategies as st

from trnsim.errors import TrnsimError

HERE = os.path.abspath(__file__)
APIS = ("current", "beta")
SHAPES = ((128, 64), (128, 1), (64, 512), (1, 8), (32, 16), (2, 3), (129, 8), (128, 8, 4), (128, 0))
DTYPES = ("float32", "bfloat16", "float16", "int32", "uint8", "float8_e4m3")
BUFFERS = ("sbuf", "sbuf", "sbuf", "psum", "shared_hbm")
OPS = ("add", "multiply", "subtract", "maximum", "minimum", "exp", "tanh", "equal", "bitwise_and", "rsqrt",
       "divide")
SCALARS = (0.0, 1.5, -2, 7, float("nan"), float("inf"), -float("inf"), 10**30, 2**40, -(2**63))
WRONG = (None, "x", (1, 2), [1.0], True, {}, -1)  # not the kind a parameter takes
# a parameter's kind by the last word of its name (digits dropped): on_true_tile, reduce_res, operand0 ...
TILE_WORDS = {"dst", "data", "src", "stationary", "moving", "tile", "predicate", "true", "false", "bias", "res",
              "indices", "index", "buffer", "vals", "ids", "initial", "scale", "seeds"}
SCALAR_WORDS = {"operand", "value", "prob", "bound", "offset", "param", "multiplier", "start", "imm", "min", "max",
                "init", "elem", "rank", "id", "val", "x"}
OP_WORDS = {"op", "fn"}
REGISTER_PARAMS = {"register_move": ("dst", "src"), "register_load": ("dst",), "register_store": ("src",)}
SKIP = {"get_nc_version", "get_nc_sub_version", "register_alloc", "loop_value"}  # no operand forms


def modules(api: str):
    """(nki, nisa, nl) of an API generation."""
    if api == "current":
        import trnsim.nki as nki
        import trnsim.nki.isa as nisa
        import trnsim.nki.language as nl
    else:
        import trnsim.nki.legacy as nki
        import trnsim.nki.legacy.isa as nisa
        import trnsim.nki.legacy.language as nl
    return nki, nisa, nl


def functions(api: str) -> list[str]:
    """The public functions of the API's nki.isa, by name."""
    _, nisa, _ = modules(api)
    return sorted(n for n, f in vars(nisa).items() if callable(f) and not isinstance(f, type)  # compiled ones too
                  and not n.startswith("_") and getattr(f, "__module__", None) == nisa.__name__ and n not in SKIP)


class Tile(NamedTuple):
    shape: tuple
    dtype: str
    buffer: str


class Op(NamedTuple):
    name: str


class Grid(NamedTuple):
    """A beta index expression over a [P, F] grid: `nl.arange(F)[None, :]` (iota), or `i_p - i_f >= 0` (pred)."""
    kind: str
    P: int
    F: int


# -- the strategies ----------------------------------------------------------------------------------------------
def _tile(base: Tile):
    """Like the call's base tile most of the time (its memory, dtype or free size may differ), else anything."""
    anything = st.builds(Tile, st.sampled_from(SHAPES), st.sampled_from(DTYPES), st.sampled_from(BUFFERS))
    return st.one_of(st.just(base), st.just(base), st.just(base._replace(buffer="psum")),
                     st.just(base._replace(dtype="float32")), st.just(base._replace(shape=(base.shape[0], 1))),
                     anything)


def _value(name: str, default, base: Tile, register: bool, wrong: bool):
    word = name.rsplit("_", 1)[-1].rstrip("0123456789")
    if register:
        kind = st.integers(-3, 100).map(lambda v: ("register", v))
    elif word == "srcs":
        kind = st.lists(_tile(base), min_size=1, max_size=3)
    elif word == "pred" or name == "expr":
        kind = st.builds(Grid, st.just("pred" if word == "pred" else "expr"), st.sampled_from((128, 64, 1, 200)),
                         st.sampled_from((64, 8, 1)))
    elif word in TILE_WORDS:
        kind = _tile(base)
    elif word in SCALAR_WORDS or word in ("value",):
        kind = st.one_of(st.sampled_from(SCALARS), st.floats(-4, 4, width=32))
    elif word in OP_WORDS:
        kind = st.sampled_from(OPS).map(Op)
    elif "axis" in name or word == "axes":
        kind = st.sampled_from((0, 1, -1, (1,), 5, (0, 1), (1, 0)))
    elif "pattern" in name:
        kind = st.sampled_from(([[1, 8]], [[0, 1]], [[1, -1]], [[1, 64]], [[64, 2], [1, 4]], [[-1, 128]]))
    elif word == "shape":
        kind = st.sampled_from(SHAPES)
    elif word == "dtype":
        kind = st.sampled_from(DTYPES).map(lambda d: ("dtype", d))
    elif word == "mask":
        kind = st.just(None)
    elif isinstance(default, bool):
        kind = st.booleans()
    elif default is not inspect.Parameter.empty and hasattr(type(default), "__members__"):
        kind = st.sampled_from(list(type(default)))  # an enum: any member
    elif isinstance(default, int):
        kind = st.sampled_from((0, 1, 8, -1, 1000, default))
    elif isinstance(default, tuple):
        kind = st.sampled_from(((), (0, 0), (128, 128), (64, 32), (1,), default))
    else:
        kind = st.one_of(st.sampled_from(SCALARS), st.sampled_from(OPS).map(Op))
    return st.sampled_from(WRONG) if wrong else kind


def _wrong():
    """Whether a parameter gets a value of another kind: 1 time in 20."""
    return st.integers(0, 19).map(lambda n: n == 0)


@st.composite
def calls(draw, api: str):
    """One call: (function name, {parameter: spec}); required parameters always, optional ones at random."""
    _, nisa, _ = modules(api)
    name = draw(st.sampled_from(functions(api)))
    base = Tile(draw(st.sampled_from(SHAPES[:5])), draw(st.sampled_from(DTYPES[:3])), "sbuf")
    registers = REGISTER_PARAMS.get(name, ())
    args = {}
    for p in inspect.signature(getattr(nisa, name)).parameters.values():
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) or p.name == "name":
            continue
        if p.default is inspect.Parameter.empty or draw(st.booleans()):
            args[p.name] = draw(_value(p.name, p.default, base, p.name in registers, draw(_wrong())))
    return name, args


def batches(api: str, size: int = 8):
    return st.lists(calls(api), min_size=1, max_size=size)


# -- running them ------------------------------------------------------------------------------------------------
class Tally:
    """What the calls did: ran, raised a named error naming the line, or not (by function and kind)."""

    def __init__(self):
        self.calls = self.ran = self.named = 0
        self.unlocated: Counter = Counter()  # named errors that do not name the line
        self.internal: Counter = Counter()
        self.first: dict = {}

    def failure(self, bucket: Counter, key: str, text: str):
        bucket[key] += 1
        self.first.setdefault(key, text[:300])

    @property
    def failures(self) -> int:
        return sum(self.internal.values()) + sum(self.unlocated.values())


def _make(spec, nki, nisa, nl, api):
    """The object a spec stands for, made inside the launch."""
    if isinstance(spec, Tile):
        shape = spec.shape
        if api == "beta" and spec.buffer != "shared_hbm" and len(shape) > 1:
            shape = (nl.par_dim(shape[0]),) + shape[1:]
        return nl.ndarray(shape, getattr(nl, spec.dtype), buffer=getattr(nl, spec.buffer))  # MAKE_LINE
    if isinstance(spec, Op):
        return getattr(nl, spec.name)
    if isinstance(spec, Grid):
        if spec.kind == "expr":
            return nl.arange(spec.F)[None, :] if api == "beta" else spec.F
        if api == "beta":
            i_p, i_f = nl.mgrid[0:spec.P, 0:spec.F]
            return i_p - i_f >= 0
        return spec.P
    if isinstance(spec, list):
        return [_make(s, nki, nisa, nl, api) for s in spec]
    if isinstance(spec, tuple) and spec[:1] == ("register",):
        return nisa.register_alloc(spec[1])
    if isinstance(spec, tuple) and spec[:1] == ("dtype",):
        return getattr(nl, spec[1])
    return spec


def _lines() -> set[int]:
    src, first = inspect.getsourcelines(_call)
    made, mfirst = inspect.getsourcelines(_make)
    return ({first + i for i, ln in enumerate(src) if "CALL_LINE" in ln or "MAKE" in ln}
            | {mfirst + i for i, ln in enumerate(made) if "MAKE_LINE" in ln or "register_alloc" in ln})


def _call(tally: Tally, api, name, args, nki, nisa, nl):
    tally.calls += 1
    try:
        made = {k: _make(v, nki, nisa, nl, api) for k, v in args.items()}  # MAKE
        getattr(nisa, name)(**made)  # CALL_LINE
        tally.ran += 1
    except TrnsimError as e:
        if any(f"{HERE}:{n}" in str(e) for n in LINES):
            tally.named += 1
        else:
            tally.failure(tally.unlocated, f"{api} {name}: {type(e).__name__}", str(e))
    except Exception as e:  # noqa: BLE001 - what the fuzz looks for
        tally.failure(tally.internal, f"{api} {name}: {type(e).__name__}", f"{e!r} at {_raised_at(e)} with {args}")


def _raised_at(e: BaseException) -> str:
    """Where in trnsim an internal exception was raised: its innermost frame."""
    tb = e.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    return f"{os.path.relpath(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"


def run(api: str, batch: list, tally: Tally) -> None:
    """Every call of `batch` in one launch of the API's front end."""
    nki, nisa, nl = modules(api)

    def body(x):
        for name, args in batch:
            _call(tally, api, name, args, nki, nisa, nl)

    kernel = nki.jit(body)
    x = __import__("numpy").zeros((128, 64), "float32")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            kernel(x)
        except TrnsimError:
            pass  # a launch may end on a named error of its own (a call's deferred check)
        except Exception as e:  # noqa: BLE001 - the launch itself failed inside trnsim
            tally.failure(tally.internal, f"{api} launch: {type(e).__name__}", f"{e!r} after {batch}")


LINES = _lines()
