"""Instruction fuzzing: random valid and invalid calls of every `nki.isa` instruction inside kernel launches.

Each call takes random operands: tiles of random shapes, dtypes and memories (most often all alike, so
that many calls are valid), scalars (NaN, infinities, huge and negative numbers), ops, axes, patterns
and enum values; with `--wrong P`, a share P of the arguments is of another kind altogether (None,
text, a list where a tile goes). A call may succeed or raise a named
error (a TrnsimError): anything else is an internal exception, counted by instruction and type with its
first message. Launches run `--batch` calls each; one launch in four re-raises its last named error so
that failed launches are exercised too, and resident memory is sampled after every launch: it must stay
flat (a failed launch frees what it made).

Prints one JSON object: calls, valid calls, named errors, internal exceptions (and where), launches
(failed ones), resident memory after 1 %, 10 %, ... 100 % of the launches, peak RSS, wall time.

    .venv/bin/python benchmarks/bench_fuzz.py [--calls 100000] [--seed 0] [--batch 50]
"""
from __future__ import annotations

import argparse
import inspect
import json
import math
import resource
import sys
import time
import warnings
from collections import Counter

import numpy as np

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.core.limits import _rss
from trnsim.errors import TrnsimError

# functions of the module, Python or compiled (a compiled build's functions are not inspect.isfunction)
INSTRUCTIONS = sorted(n for n, f in vars(nisa).items() if callable(f) and not isinstance(f, type) and not n.startswith("_")
                      and not n.startswith(("get_nc", "rand_", "set_rng")) and n not in ("issue", "warn", "core"))
DTYPES = (nl.float32, nl.bfloat16, nl.float16, nl.int32, nl.uint8, nl.float8_e4m3)
SHAPES = ((128, 64), (128, 1), (64, 512), (1, 8), (128, 512), (2, 3), (129, 8), (128, 8, 4))
BUFFERS = (nl.sbuf, nl.sbuf, nl.sbuf, nl.psum, nl.shared_hbm)
OPS = (nl.add, nl.multiply, nl.subtract, nl.maximum, nl.minimum, nl.exp, nl.tanh, nl.equal, nl.bitwise_and,
       nl.rsqrt, nl.divide)
SCALARS = (0.0, 1.5, -2, 7, float("nan"), float("inf"), -float("inf"), 10**30, 2**40)
WRONG = (None, "x", (1, 2), [1.0], True, nl.add, {}, object())  # not the kind a parameter takes
# a parameter's kind, by the last word of its name (digits dropped): on_true_tile, reduce_res, operand0, ...
TILE_WORDS = {"dst", "data", "src", "stationary", "moving", "tile", "predicate", "true", "false", "bias", "res",
              "indices", "index", "buffer", "vals", "ids", "initial", "mask"}
SCALAR_WORDS = {"operand", "scale", "value", "prob", "bound", "offset", "param", "multiplier", "start", "x", "n",
                "idx", "elem"}
OP_WORDS = {"op", "fn"}
REGISTERS = {"register_move": ("dst", "src"), "register_load": ("dst",), "register_store": ("src",)}  # not tiles


class Fuzzer:
    def __init__(self, seed: int, wrong: float = 0.0):
        self.rng, self.wrong = np.random.default_rng(seed), wrong
        self.calls = self.valid = self.named = 0
        self.internal: Counter = Counter()
        self.first: dict = {}

    def pick(self, options):
        return options[int(self.rng.integers(len(options)))]

    def tile(self, like):
        """A fresh tile: like the call's first tile with probability 0.7, else of a random shape/dtype/memory."""
        shape, dtype, buffer = like
        if self.rng.random() > 0.7:
            shape, dtype, buffer = self.pick(SHAPES), self.pick(DTYPES), self.pick(BUFFERS)
        return nl.ndarray(shape, dtype, buffer=buffer)

    def value(self, name: str, default, like):
        """A random argument for parameter `name`: of the kind its name and default suggest (with random
        shapes, dtypes, memories and values), or with probability `wrong` of another kind altogether."""
        r = self.rng.random()
        if r < self.wrong:
            return self.pick(WRONG)
        word = name.rsplit("_", 1)[-1].rstrip("0123456789")
        if word in SCALAR_WORDS:
            return self.pick(SCALARS) if r < 0.5 else float(self.rng.normal())
        if word == "srcs":
            return [self.tile(like) for _ in range(int(self.rng.integers(1, 4)))]
        if word in TILE_WORDS:
            return nisa.register_alloc(int(self.rng.integers(-3, 100))) if name in self.registers else self.tile(like)
        if word in OP_WORDS:
            return self.pick(OPS)
        if "axis" in name:
            return self.pick((0, 1, -1, (1,), 5, (0, 1)))
        if "pattern" in name:
            return self.pick(([[1, 8]], [[0, 1]], [[1, -1]], [[1, 64]], [[64, 2], [1, 4]]))
        if isinstance(default, bool):
            return self.pick((True, False))
        if default is not inspect.Parameter.empty and hasattr(type(default), "__members__"):
            return self.pick(list(type(default)))  # an enum: any member
        if isinstance(default, int):
            return self.pick((0, 1, 8, -1, 1000, default))
        return default if default is not inspect.Parameter.empty else self.pick(SCALARS)

    def call(self, name: str, catch: bool = True) -> None:
        """One random call of instruction `name`; a named error propagates unless `catch`."""
        fn = getattr(nisa, name)
        like = (self.pick(SHAPES[:5]), self.pick(DTYPES[:3]), nl.sbuf)
        self.registers = REGISTERS.get(name, ())
        self.calls += 1
        try:
            kwargs = {p.name: self.value(p.name, p.default, like) for p in inspect.signature(fn).parameters.values()
                      if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "name"
                      and (p.default is inspect.Parameter.empty or self.rng.random() < 0.5)}
            fn(**kwargs)
            self.valid += 1
        except TrnsimError:
            self.named += 1
            if not catch:
                raise
        except Exception as e:  # noqa: BLE001 - what the fuzzer looks for
            key = f"{name}: {type(e).__name__}"
            self.internal[key] += 1
            self.first.setdefault(key, str(e)[:160])


def run(calls: int, seed: int = 0, batch: int = 50, wrong: float = 0.0) -> dict:
    fz = Fuzzer(seed, wrong)
    state = {"todo": []}

    @nki.jit
    def fuzz_batch(x, fail):
        for i, name in enumerate(state["todo"]):
            fz.call(name, catch=not fail or i < len(state["todo"]) - 1)  # a failing launch: its last call's error

    x = np.zeros((128, 64), np.float32)
    launches = failed = 0
    rss = []
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while fz.calls < calls:
            state["todo"] = [fz.pick(INSTRUCTIONS) for _ in range(min(batch, calls - fz.calls))]
            launches += 1
            try:
                fuzz_batch(x, launches % 4 == 0)
            except TrnsimError:
                failed += 1
            except Exception as e:  # noqa: BLE001 - the launch itself failed inside trnsim
                key = f"launch: {type(e).__name__}"
                fz.internal[key] += 1
                fz.first.setdefault(key, str(e)[:160])
            rss.append(_rss())
    return {"benchmark": "fuzz_isa", "seed": seed, "wrong_kind_share": wrong, "instructions": len(INSTRUCTIONS),
            "calls": fz.calls,
            "valid_calls": fz.valid, "named_errors": fz.named, "internal_exceptions": sum(fz.internal.values()),
            "internal_by_kind": dict(fz.internal), "internal_first_message": fz.first,
            "launches": launches, "failed_launches": failed,
            "rss_mib_after_launch": {f"{q}%": round(rss[max(0, len(rss) * q // 100 - 1)] / 2**20, 1)
                                     for q in (1, 10, 25, 50, 75, 100)},
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "wall_s": round(time.perf_counter() - start, 2)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--wrong", type=float, default=0.0, help="share of arguments of the wrong kind (None, text, ...)")
    args = ap.parse_args(argv)
    out = run(args.calls, args.seed, args.batch, args.wrong)
    json.dump(out, sys.stdout, allow_nan=False, default=lambda v: None if isinstance(v, float) and math.isnan(v) else v)
    print()


if __name__ == "__main__":
    main()
