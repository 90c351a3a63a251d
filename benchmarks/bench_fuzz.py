"""Fuzz: random valid and invalid calls of every `nki.isa` instruction and every `nki.language` op of both API
generations (the current `nki` and the beta `neuronxcc.nki`), inside kernel launches.

A call is drawn as plain data: a function and, per parameter, a spec of the kind the parameter's name and
default suggest (a tile of some shape, dtype and memory, most often like the call's other tiles so that many
calls are valid, sometimes filled, sometimes a part of a bigger tile; a scalar among NaN, infinities and huge
numbers; an ALU op; an axis; an access pattern; an enum member), or now and then (`--wrong`) a value of
another kind altogether (None, text, a tuple). Inside the launch each spec becomes its object and the function
is called: it must return or raise a named error (a TrnsimError) whose message names the line of this file
that made the call or the operand; anything else is an internal exception, counted by kind with the trnsim
file:line it came from. One launch in four ends on its last call's named error, so failed launches are
exercised too, and resident memory is sampled after every launch: it must stay flat.

Prints one JSON object: calls, valid calls, named errors, unlocated named errors, internal exceptions (by
kind, with a first message), launches, resident memory after 1 %, 10 %, 50 %, 90 % and 100 % of the launches,
its growth over the second half (the first fills the caches, which are bounded), peak RSS.

    .venv/bin/python benchmarks/bench_fuzz.py [--calls 100000] [--seed 0] [--batch 50] [--wrong 0.05]
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import inspect
import io
import itertools
import json
import os
import pathlib
import resource
import sys
import time
import warnings
from collections import Counter
from typing import NamedTuple

import numpy as np

from trnsim.core.limits import _rss
from trnsim.errors import TrnsimError

HERE = os.path.abspath(__file__)
ROOT = pathlib.Path(HERE).parents[1]
APIS = ("current", "beta")
SHAPES = ((128, 64), (128, 1), (64, 512), (1, 8), (32, 16), (2, 3), (129, 8), (128, 8, 4), (128, 0), (64,),
          (-1, 4))
DTYPES = ("float32", "bfloat16", "float16", "int32", "uint8", "float8_e4m3")
BUFFERS = ("sbuf", "sbuf", "sbuf", "psum", "shared_hbm")
OPS = ("add", "multiply", "subtract", "maximum", "minimum", "exp", "tanh", "equal", "bitwise_and", "rsqrt",
       "divide", "power", "left_shift")
SCALARS = (0.0, 1.5, -2, 7, float("nan"), float("inf"), -float("inf"), 10**30, 2**40, -(2**63))
FILLS = (0, 1, 3, -2, 0.5, 2**31 - 1)
BOUNDS = (0, 1, 3, -1, 2.5, float("nan"), float("inf"), 2**70)  # loop bounds and sizes: never a long loop
WRONG = (None, "x", (1, 2), [1.0], True, {}, -1)  # not the kind a parameter takes
AXES = (0, 1, -1, (1,), 5, (0, 1), (1, 0), 2, -3)
PATTERNS = ([[1, 8]], [[0, 1]], [[1, -1]], [[1, 64]], [[64, 2], [1, 4]], [[-1, 128]])
# a parameter's kind by the last word of its name (digits dropped): on_true_tile, reduce_res, operand0 ...
TILE_WORDS = {"dst", "data", "src", "stationary", "moving", "tile", "predicate", "true", "false", "bias", "res",
              "indices", "index", "buffer", "vals", "ids", "initial", "scale", "seeds", "condition", "w", "a",
              "tensor", "source"}
SCALAR_WORDS = {"operand", "prob", "bound", "offset", "param", "multiplier", "imm", "min", "max", "init", "elem",
                "rank", "id", "val", "rate", "epsilon", "seed"}
BOUND_WORDS = {"start", "stop", "step", "lower", "upper", "size", "n", "axes", "dims"}
SHAPE_WORDS = {"shape"}
FLAG_WORDS = {"keepdims", "negate", "transpose_x", "parallel_reduce", "asynchronous"}
REGISTER_PARAMS = {"register_move": ("dst", "src"), "register_load": ("dst",), "register_store": ("src",)}
SKIP = {"get_nc_version", "get_nc_sub_version", "loop_value"}  # no operands; loop_value is fori_loop's


# -- what is fuzzed ----------------------------------------------------------------------------------------------
def modules(api: str):
    """(nki, nisa, nl) of an API generation."""
    if api == "current":
        import trnsim.nki as nki
        import trnsim.nki.isa as nisa
        import trnsim.nki.language as nl
    else:
        import trnsim.nki.beta as nki
        import trnsim.nki.beta.isa as nisa
        import trnsim.nki.beta.language as nl
    return nki, nisa, nl


def _reference_names() -> dict:
    """The function names of each module of the NKI API reference (tests/test_api_reference_names.py), less
    the constants, dtypes and enums it lists too (benchmarks/api_coverage.py)."""
    spec = importlib.util.spec_from_file_location("_fuzz_api_names", ROOT / "tests" / "test_api_reference_names.py")
    names = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(names)
    spec = importlib.util.spec_from_file_location("_fuzz_api_coverage", ROOT / "benchmarks" / "api_coverage.py")
    coverage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(coverage)
    return {module: [n for n in listed if n not in coverage.NOT_FUNCTIONS] for module, listed in names.MODULES}


def functions(api: str, layer: str) -> list[str]:
    """The functions fuzzed: every public function of the API's nki.isa (documented or not), and every function
    of its nki.language that the API reference lists."""
    _, nisa, nl = modules(api)
    if layer == "isa":
        return sorted(n for n, f in vars(nisa).items() if callable(f) and not isinstance(f, type)  # compiled too
                      and not n.startswith("_") and getattr(f, "__module__", None) == nisa.__name__
                      and n not in SKIP)
    listed = _reference_names()["nki.language" if api == "current" else "neuronxcc.nki.language"]
    return sorted(n for n in listed if callable(getattr(nl, n, None)) and not isinstance(getattr(nl, n), type)
                  and n not in ("mgrid", "no_reorder"))  # an index grid and a context manager: no call forms


class Tile(NamedTuple):
    shape: tuple
    dtype: str
    buffer: str
    fill: object = None  # a value the tile is filled with (nl.full), or None: never written
    part: tuple = ()  # (start, stop) per dim: the call gets that part of the tile


class Op(NamedTuple):
    name: str


class Grid(NamedTuple):
    """A beta index expression over a [P, F] grid: `nl.arange(F)[None, :]` (expr), or `i_p - i_f >= 0` (pred)."""
    kind: str
    P: int
    F: int


class Body(NamedTuple):
    """A loop body for fori_loop / while_loop: it ends a while loop (returns 0)."""


# -- drawing calls -----------------------------------------------------------------------------------------------
class Draw:
    """Random call specs from one seeded generator."""

    def __init__(self, seed: int, wrong: float):
        self.rng, self.wrong = np.random.default_rng(seed), wrong

    def pick(self, options):
        return options[int(self.rng.integers(len(options)))]

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def tile(self, base: Tile) -> Tile:
        """Like the call's base tile most of the time (its memory, dtype or free size may differ), else anything;
        now and then filled with a value, now and then a part of a bigger tile."""
        r = self.rng.random()
        if r < 0.45:
            t = base
        elif r < 0.55:
            t = base._replace(buffer="psum")
        elif r < 0.65:
            t = base._replace(dtype="float32")
        elif r < 0.75:
            t = base._replace(shape=(base.shape[0], 1))
        else:
            t = Tile(self.pick(SHAPES), self.pick(DTYPES), self.pick(BUFFERS))
        if self.chance(0.5):
            fill = self.pick(FILLS)
            t = t._replace(fill=abs(int(fill)) if t.dtype == "uint8" else int(fill) if "int" in t.dtype else fill)
        if self.chance(0.2) and all(isinstance(d, int) and d > 0 for d in t.shape):
            part = tuple((lo := int(self.rng.integers(0, d)), int(self.rng.integers(lo + 1, d + 2)))
                         for d in t.shape)  # a stop past the end now and then
            t = t._replace(part=part)
        return t

    def scalar(self):
        return self.pick(SCALARS) if self.chance(0.5) else float(np.float32(self.rng.normal() * 4))

    def value(self, fn: str, name: str, default, base: Tile, register: bool):
        """A spec for parameter `name` of `fn`: of the kind the name and default suggest, or of another kind."""
        if self.chance(self.wrong):
            return self.pick(WRONG)
        word = name.rsplit("_", 1)[-1].rstrip("0123456789")
        if register:
            return ("register", int(self.rng.integers(-3, 100)))
        if word == "srcs":
            return [self.tile(base) for _ in range(int(self.rng.integers(1, 4)))]
        if word == "pred" or name in ("expr", "mask"):  # a beta mask: most often none
            if name == "mask" and self.chance(0.7):
                return None
            return Grid("pred" if name != "expr" else "expr", self.pick((128, 64, 1, 200)), self.pick((64, 8, 1)))
        if name == "shuffle_mask":
            return self.tile(base) if self.chance(0.3) else self.pick(((1, 0), [3, 2, 1, 0], list(range(32))))
        if name == "value" or name in ("x", "y", "fill_value", "constant"):
            # a tile or a number: binary ops take either (nl.add(t, 2.0)); memset's value is a number
            tile_share = {"x": 0.9, "y": 0.7, "value": 0.5}.get(name, 0.1)
            return self.tile(base) if self.chance(tile_share) else self.scalar()
        if word in TILE_WORDS:
            return self.tile(base)
        if word in SCALAR_WORDS:
            return self.scalar()
        if word in BOUND_WORDS:
            return self.pick(BOUNDS)
        if word in ("op", "fn") and name != "body_fun":
            return Op(self.pick(OPS))
        if name == "body_fun":
            return Body()
        if "axis" in name or word == "axes":
            return self.pick(AXES)
        if "pattern" in name:
            return self.pick(PATTERNS)
        if word in SHAPE_WORDS:
            return self.pick(SHAPES)
        if word == "dtype":
            return ("dtype", self.pick(DTYPES))
        if name == "buffer" or word == "b":
            return ("buffer", self.pick(BUFFERS))
        if name in ("prefix", "print_prefix", "name"):
            return self.pick(("t", "", "x" * 300))
        if word in FLAG_WORDS or isinstance(default, bool):
            return self.chance(0.5)
        if default is not inspect.Parameter.empty and hasattr(type(default), "__members__"):
            return self.pick(list(type(default)))  # an enum: any member
        if isinstance(default, int):
            return self.pick((0, 1, 8, -1, 1000, default))
        if isinstance(default, tuple):
            return self.pick(((), (0, 0), (128, 128), (64, 32), (1,), default))
        if name in ("program_axes", "loop_indices", "cores"):
            return self.pick(((0,), (), 0, (0, 1)))
        return self.scalar() if self.chance(0.6) else Op(self.pick(OPS))

    def call(self, api: str, layer: str, names: list[str], nisa, nl) -> tuple:
        """(layer, function name, {parameter: spec}): required parameters always, optional ones at random."""
        name = self.pick(names)
        fn = getattr(nisa if layer == "isa" else nl, name)
        base = Tile(self.pick(SHAPES[:5]), self.pick(DTYPES[:3]), "sbuf")
        if layer == "language" and self.chance(0.3):
            base = base._replace(fill=self.pick(FILLS[:4]))
        registers = REGISTER_PARAMS.get(name, ()) if layer == "isa" else ()
        args = {}
        for p in _parameters(fn):
            if p.default is inspect.Parameter.empty or self.chance(0.5):
                args[p.name] = self.value(name, p.name, p.default, base, p.name in registers)
        return layer, name, args


_SIGNATURES: dict = {}


def _parameters(fn) -> list:
    """The parameters a call can name (not *args, **kwargs or the instruction's `name`)."""
    got = _SIGNATURES.get(fn)
    if got is None:
        got = _SIGNATURES[fn] = [p for p in inspect.signature(fn).parameters.values()
                                 if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "name"]
    return got


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
        self.first.setdefault(key, text[:400])

    @property
    def failures(self) -> int:
        return sum(self.internal.values()) + sum(self.unlocated.values())


def _make(spec, api, nisa, nl):
    """The object a spec stands for, made inside the launch."""
    if isinstance(spec, Tile):
        shape = spec.shape
        if api == "beta" and spec.buffer != "shared_hbm" and len(shape) > 1:
            shape = (nl.par_dim(shape[0]),) + shape[1:]
        dtype, buffer = getattr(nl, spec.dtype), getattr(nl, spec.buffer)
        if spec.fill is not None and spec.buffer == "sbuf":
            t = nl.full(shape, spec.fill, dtype, buffer=buffer)  # MAKE_LINE
        else:
            t = nl.ndarray(shape, dtype, buffer=buffer)  # MAKE_LINE
        return t[tuple(slice(a, b) for a, b in spec.part)] if spec.part else t  # MAKE_LINE
    if isinstance(spec, Op):
        return getattr(nl, spec.name)
    if isinstance(spec, Grid):
        if spec.kind == "expr":
            return nl.arange(spec.F)[None, :] if api == "beta" else spec.F
        if api == "beta":
            i_p, i_f = nl.mgrid[0:spec.P, 0:spec.F]
            return i_p - i_f >= 0
        return spec.P
    if isinstance(spec, Body):
        return lambda *a: 0
    if isinstance(spec, list):
        return [_make(s, api, nisa, nl) for s in spec]
    if isinstance(spec, tuple) and spec[:1] == ("register",):
        return nisa.register_alloc(spec[1])  # MAKE_LINE
    if isinstance(spec, tuple) and spec[:1] in (("dtype",), ("buffer",)):
        return getattr(nl, spec[1])
    return spec


def _call(tally: Tally, api: str, layer: str, name: str, args: dict, nisa, nl, catch: bool) -> None:
    """One call; a named error propagates unless `catch` (a launch that fails)."""
    tally.calls += 1
    fn = getattr(nisa if layer == "isa" else nl, name)
    try:
        made = {k: _make(v, api, nisa, nl) for k, v in args.items()}  # MAKE_LINE
        out = fn(**made)  # CALL_LINE
        if name.endswith("range") and hasattr(out, "__iter__"):
            list(itertools.islice(out, 4))  # CALL_LINE: a loop's first iterations
        tally.ran += 1
    except TrnsimError as e:
        if any(f"{_call.__code__.co_filename}:{n}" in str(e) for n in LINES):  # the name errors give
            tally.named += 1
        else:
            tally.failure(tally.unlocated, f"{api} {layer}.{name}: {type(e).__name__}", f"{e} with {args}")
        if not catch:
            raise
    except Exception as e:  # noqa: BLE001 - what the fuzz looks for
        tally.failure(tally.internal, f"{api} {layer}.{name}: {type(e).__name__} at {_raised_at(e)}",
                      f"{e!r} with {args}")


def _lines() -> set[int]:
    """The lines of this file that make operands or calls: a named error must name one of them."""
    out = set()
    for fn in (_make, _call):
        src, first = inspect.getsourcelines(fn)
        out |= {first + i for i, line in enumerate(src) if "MAKE_LINE" in line or "CALL_LINE" in line}
    return out


def _raised_at(e: BaseException) -> str:
    """Where an internal exception was raised: its innermost frame (trnsim's, or numpy's under it)."""
    tb, inner = e.__traceback__, None
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if "trnsim" in name or inner is None:
            inner = f"{os.path.relpath(name, ROOT / 'src') if 'trnsim' in name else name}:{tb.tb_lineno}"
        tb = tb.tb_next
    return inner


LINES = _lines()


def run(calls: int, seed: int = 0, batch: int = 50, wrong: float = 0.05, apis=APIS, layers=("isa", "language"),
        progress=None) -> dict:
    """`calls` random calls in launches of `batch`, the generations and layers in turn."""
    draw, tally = Draw(seed, wrong), Tally()
    names = {(api, layer): functions(api, layer) for api in apis for layer in layers}
    state = {"todo": [], "fail": False}
    kernels = {}
    for api in apis:
        nki, nisa, nl = modules(api)

        def body(x, api=api, nisa=nisa, nl=nl):
            todo = state["todo"]
            for i, (layer, name, args) in enumerate(todo):
                _call(tally, api, layer, name, args, nisa, nl, catch=not state["fail"] or i < len(todo) - 1)

        kernels[api] = nki.jit(body)
    x = np.zeros((128, 64), np.float32)
    launches = failed = 0
    rss = []
    start = time.perf_counter()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()) as printed:  # device_print's
        warnings.simplefilter("ignore")
        while tally.calls < calls:
            api = apis[launches % len(apis)]
            _, nisa, nl = modules(api)
            state["todo"] = [draw.call(api, layer, names[api, layer], nisa, nl)
                             for layer in [draw.pick(layers) for _ in range(min(batch, calls - tally.calls))]]
            state["fail"] = launches % 4 == 3
            launches += 1
            try:
                kernels[api](x)
            except TrnsimError:
                failed += 1
            except Exception as e:  # noqa: BLE001 - the launch itself failed inside trnsim
                tally.failure(tally.internal, f"{api} launch: {type(e).__name__} at {_raised_at(e)}",
                              f"{e!r} after {state['todo']}")
            rss.append(_rss())
            printed.seek(0)
            printed.truncate()
            if progress and launches % 100 == 0:
                progress(tally, rss[-1])
    mib, half = 2**20, rss[max(0, len(rss) // 2 - 1)]
    return {"benchmark": "fuzz", "seed": seed, "wrong_kind_share": wrong,
            "functions": {f"{api} {layer}": len(n) for (api, layer), n in names.items()},
            "calls": tally.calls, "valid_calls": tally.ran, "named_errors": tally.named,
            "unlocated_named_errors": sum(tally.unlocated.values()),
            "internal_exceptions": sum(tally.internal.values()),
            "by_kind": dict(tally.internal.most_common() + tally.unlocated.most_common()),
            "first_message": tally.first, "launches": launches, "failed_launches": failed,
            "rss_mib_after_launch": {f"{q}%": round(rss[max(0, len(rss) * q // 100 - 1)] / mib, 1)
                                     for q in (1, 10, 50, 90, 100)},
            "rss_growth_mib_second_half": round((max(rss[len(rss) // 2:]) - half) / mib, 1),  # after warm-up
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "wall_s": round(time.perf_counter() - start, 1)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=50, help="calls a launch")
    ap.add_argument("--wrong", type=float, default=0.05, help="share of arguments of another kind (None, text, ...)")
    args = ap.parse_args(argv)

    def progress(t: Tally, rss: int):
        print(f"{t.calls} calls, {t.failures} failures, RSS {rss / 2**20:.0f} MiB", file=sys.stderr, flush=True)

    print(json.dumps(run(args.calls, args.seed, args.batch, args.wrong, progress=progress)))


if __name__ == "__main__":
    main()
