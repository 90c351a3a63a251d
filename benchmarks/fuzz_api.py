"""API fuzz at scale: N random calls (default 10^5) of every `nki.isa` function of both generations, drawn by
hypothesis from tests/nki/fuzz_forms.py in slices (each slice its own seed, the two generations in turn).

Each call must run or raise a named error naming the kernel line of the call; prints one JSON object: calls,
internal_exceptions (and unlocated named errors), by function and kind with the first message, calls that
ran, peak RSS and wall time.

    .venv/bin/python benchmarks/fuzz_api.py [--calls 100000] [--slice 200] [--seed 0]
"""
from __future__ import annotations

import argparse
import json
import pathlib
import resource
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "nki"))

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402

import fuzz_forms  # noqa: E402


def fuzz(calls: int, examples: int = 200, first_seed: int = 0, progress=None) -> dict:
    tally, start, n = fuzz_forms.Tally(), time.perf_counter(), 0
    while tally.calls < calls:
        api = fuzz_forms.APIS[n % len(fuzz_forms.APIS)]

        @seed(first_seed + n)
        @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(fuzz_forms.batches(api))
        def one_slice(batch):
            if tally.calls < calls:
                fuzz_forms.run(api, batch, tally)

        one_slice()
        n += 1
        if progress:
            progress(tally)
    return {"benchmark": "fuzz_api", "calls": tally.calls, "ran": tally.ran, "named_errors": tally.named,
            "internal_exceptions": sum(tally.internal.values()), "unlocated_errors": sum(tally.unlocated.values()),
            "by_kind": {**tally.internal, **tally.unlocated}, "first_message": tally.first, "slices": n,
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "wall_s": round(time.perf_counter() - start, 1)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--slice", type=int, default=200, help="hypothesis examples (launches of up to 8 calls) a slice")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    def progress(t):
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{t.calls} calls, {t.failures} failures, peak RSS {rss:.0f} MB", file=sys.stderr, flush=True)

    print(json.dumps(fuzz(args.calls, args.slice, args.seed, progress)))


if __name__ == "__main__":
    main()
