"""A pytest plugin that runs every kernel launch of a test session a second way and compares the two.

Loaded by tests/replay/test_replay.py in a pytest subprocess (`-p replay_plugin`) with TRNSIM_REPLAY set to
the modes (comma-separated) and TRNSIM_REPLAY_OUT to the JSON file it writes at the end:

- `values`: each launch with values on is run again on copies of its inputs in timing-only mode
  (values=False); both must record the same instruction stream and give the same latency.
- `fast`: each launch is run again with the speed layer off (TRNSIM_FAST=0); outputs must match bit for
  bit, the streams must be the same, and so must the latency the stream is scheduled to with the layer off.

A launch is checked once per kernel, input shapes and target (the same kernel over many inputs adds nothing).
"""
from __future__ import annotations

import json
import os

import numpy as np

from trnsim.core.errors import ValueUnknownError
from trnsim.core.timing import simulate, summarize
from trnsim.nki import _frontend

MODES, OUT = os.environ.get("TRNSIM_REPLAY", "values").split(","), os.environ.get("TRNSIM_REPLAY_OUT")
RESULTS = {"checked": [], "mismatches": []}


def signature(cores) -> list:
    """Each core's stream as (op, engine or engines to choose from, operands), memories numbered by first use so
    two runs compare."""
    out = []
    for nc in cores:
        ids: dict = {}
        rows = []
        for rec in nc.stream:
            ops = []
            for name, r in sorted(rec.operands.items()):
                mem = ids.setdefault((r.space, r.memory), len(ids))
                ops.append((name, r.space, mem, r.partition, r.partitions, r.byte_lo, r.byte_hi, tuple(r.shape),
                            r.dtype, r.contiguous))
            # an instruction the compiler places by workload: its engines to choose from (the one chosen is set
            # when the stream is scheduled, and the latencies compared follow from it)
            choices = rec.attrs.get("choices")
            engine = tuple(e.value for e in choices) if choices else rec.engine.value
            rows.append((rec.op.value, engine, tuple(ops)))
        out.append(rows)
    return out


def latency(cores) -> float:
    spec = cores[0].spec
    return summarize("k", [simulate(nc.stream, spec.target) for nc in cores], spec).latency


def _copy(x):
    if isinstance(x, np.ndarray):
        return x.copy()
    if type(x).__module__.startswith("torch"):
        return x.clone()
    return x


def _key(kernel, args, kwargs):
    shapes = tuple((getattr(a, "shape", None) and tuple(a.shape), str(getattr(a, "dtype", type(a).__name__)))
                   for a in list(args) + list(kwargs.values()))
    return (kernel.fn.__module__, kernel.fn.__qualname__, getattr(kernel, "lnc", 1), str(getattr(kernel, "grid", "")),
            shapes, os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE"))


def _bits(x):
    if isinstance(x, (tuple, list)):
        return [_bits(v) for v in x]
    if isinstance(x, dict):
        return {k: _bits(v) for k, v in sorted(x.items())}
    if isinstance(x, np.ndarray):
        return (x.shape, str(x.dtype), x.tobytes())
    if type(x).__module__.startswith("torch"):
        return _bits(_frontend._to_numpy(x)[0])
    return x


def _checked(original):
    seen = set()

    def launch(kernel, args, kwargs, target=None, values=True, order=None):
        if not values or order:
            return original(kernel, args, kwargs, target=target, values=values, order=order)
        key = _key(kernel, args, kwargs)
        again = None if key in seen else ([_copy(a) for a in args], {k: _copy(v) for k, v in kwargs.items()})
        out = original(kernel, args, kwargs, target=target, values=values)  # an error here is the test's business
        if again is None:
            return out
        seen.add(key)
        first = kernel.last_cores
        name = f"{kernel.fn.__module__}.{kernel.fn.__qualname__} {key[4]}"
        RESULTS["checked"].append(name)
        try:
            problem = _compare(original, kernel, first, out, again, target)
        except Exception as e:  # noqa: BLE001 - the second way failed where the first did not
            problem = f"{type(e).__name__}: {e}"
        if problem:
            RESULTS["mismatches"].append(f"{name}: {problem}")
        kernel.last_cores = first
        return out

    return launch


def _compare(original, kernel, first, out, again, target):
    problems = [p for mode in MODES if (p := _CHECKS[mode](original, kernel, first, out, _fresh(again), target))]
    return "; ".join(problems) or None


def _fresh(again):
    args, kwargs = again
    return [_copy(a) for a in args], {k: _copy(v) for k, v in kwargs.items()}


def _timing_only(original, kernel, first, out, again, target):
    args, kwargs = again
    try:
        original(kernel, args, kwargs, target=target, values=False)
    except ValueUnknownError:  # only values could decide (a loop on a loaded register): said by name
        return None
    second = kernel.last_cores
    if signature(first) != signature(second):
        return "timing-only: " + _first_difference(signature(first), signature(second))
    a, b = latency(first), latency(second)
    return None if a == b else f"latency {a} ns with values, {b} ns timing-only"


def _slow(original, kernel, first, out, again, target):
    args, kwargs = again
    old = os.environ.get("TRNSIM_FAST")
    os.environ["TRNSIM_FAST"] = "0"
    try:
        slow = original(kernel, args, kwargs, target=target, values=True)
        second = kernel.last_cores
        slow_latency = latency(second)  # scheduled with the speed layer off too
    finally:
        os.environ.pop("TRNSIM_FAST") if old is None else os.environ.__setitem__("TRNSIM_FAST", old)
    if _bits(out) != _bits(slow):
        return "output bits differ with TRNSIM_FAST=0"
    if signature(first) != signature(second):
        return "TRNSIM_FAST=0: " + _first_difference(signature(first), signature(second))
    fast_latency = latency(first)
    return None if fast_latency == slow_latency else f"latency {fast_latency} ns, {slow_latency} ns with TRNSIM_FAST=0"


_CHECKS = {"values": _timing_only, "fast": _slow}


def _first_difference(a, b) -> str:
    for c, (x, y) in enumerate(zip(a, b)):
        for i, (r, s) in enumerate(zip(x, y)):
            if r != s:
                return f"core {c} instruction {i}: {r} vs {s}"
        if len(x) != len(y):
            return f"core {c}: {len(x)} vs {len(y)} instructions"
    return "different numbers of cores"


def pytest_configure(config):
    _frontend.launch = _checked(_frontend.launch)  # the one launch of both front ends


def pytest_unconfigure(config):
    if OUT:
        with open(OUT, "w") as f:
            json.dump(RESULTS, f)
