"""Write efficiency.json: simulate every bucket the preset models need on every Trainium generation.

    python -m trnsim.plan.calibrate [--workers N] [--check]

Which buckets: every candidate layout of every preset model on the Trainium systems at 1-64 nodes,
micro-batches 1 and 2, selective and full recompute (the sweeps `trnsim plan` runs by default),
evaluated once with placeholder efficiencies to collect the buckets they ask for. Each entry
records only inputs that do not depend on the trnsim version (generation, kernel, dtype, bucket
shape) and what the timing model measured (latency, efficiency, bound). `--check` re-simulates
the table and lists the entries that moved.
"""
from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from importlib import resources

from trnsim import specs
from trnsim.plan import compute, efficiency, sweep, workload

SYSTEMS = ("trn1.32xlarge", "trn2.48xlarge", "Trn3 Gen2 UltraServer")
NODES = (1, 2, 4, 8, 16, 32, 64)


def wanted() -> list[tuple]:
    """The buckets the preset sweeps ask for, sorted."""
    compute._simulated_time.cache_clear()  # times cached from the table would skip the lookups
    try:
        with efficiency.collecting() as keys:
            for name in workload.presets():
                m = workload.model(name)
                for t in sweep.tasks(m, SYSTEMS, NODES, micro_batches=(1, 2), checkpointing=("selective", "full")):
                    sweep.row(t)
        return sorted(keys)
    finally:
        compute._simulated_time.cache_clear()  # and the placeholder times must not outlive the block


def _simulate(key: tuple) -> dict:
    target, kernel, dtype, shape = key
    return efficiency.simulate(target, kernel, shape, dtype)


def write(path: str, entries: list[dict]) -> None:
    """The table as JSON, one entry per line so that a regenerated table diffs by bucket."""
    cores = {e["target"]: specs.neuroncore(e["target"]).name for e in entries}
    about = ("efficiency of representative kernels per bucket, simulated by the core timing model "
             "(trnsim.plan.efficiency); regenerate with python -m trnsim.plan.calibrate")
    lines = ",\n".join(json.dumps(e) for e in entries)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(f'{{"about": {json.dumps(about)},\n"cores": {json.dumps(cores)},\n"entries": [\n{lines}\n]}}\n')


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m trnsim.plan.calibrate", description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=str(resources.files("trnsim.plan").joinpath(efficiency.TABLE)))
    ap.add_argument("--check", action="store_true", help="re-simulate the shipped table and report differences")
    args = ap.parse_args(argv)
    keys = sorted(efficiency._table()) if args.check else wanted()
    print(f"{len(keys)} buckets on {', '.join(sorted({k[0] for k in keys}))}", file=sys.stderr)
    with ProcessPoolExecutor(args.workers) as pool:
        entries = list(pool.map(_simulate, keys, chunksize=4))
    if args.check:
        moved = [e for e in entries if abs(e["latency_ns"] / efficiency._table()[
            (e["target"], e["kernel"], e["dtype"], tuple(e["shape"]))]["latency_ns"] - 1) > 1e-6]
        print(json.dumps({"checked": len(entries), "moved": moved}, indent=1))
        return 1 if moved else 0
    write(args.out, entries)
    print(f"wrote {len(entries)} entries to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
