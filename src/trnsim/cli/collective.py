"""`trnsim collective`: nccom-test on a simulated cluster.

    trnsim collective all_reduce --instance trn1.32xlarge -N 2 -r 64 -b 8 -e 1G -f 4 --show-algorithm

Bandwidths follow nccom-test: algbw = size / time, busbw = algbw x the operation's bus factor
(all_reduce 2(r-1)/r; all_gather, reduce_scatter, all_to_all (r-1)/r; permute, send/recv 1),
printed in GB/s of 2^30 bytes, the unit in which the published Trn1 tables (reference 2.6 A, E) add up.
"""
from __future__ import annotations

import json
import re

import click

from trnsim import live
from trnsim.cli import cli
from trnsim.errors import ConfigError, UnknownNameError

# nccom-test's names and its short forms -> trnsim.fabric operations
OP_NAMES = {
    "all_reduce": "all_reduce", "allr": "all_reduce", "all_gather": "all_gather", "allg": "all_gather",
    "reduce_scatter": "reduce_scatter", "redsct": "reduce_scatter", "alltoall": "all_to_all",
    "all_to_all": "all_to_all", "alltoallv": "all_to_allv", "all_to_allv": "all_to_allv",
    "permute": "permute", "sendrecv": "send_recv", "send_recv": "send_recv", "broadcast": "broadcast",
}
# nccom-test's dtype names -> trnsim.numerics names
DTYPE_NAMES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp8": "float8_e4m3",
               "fp8_e4m3": "float8_e4m3", "fp8_e5m2": "float8_e5m2"}
GIB = 2**30


def parse_size(text: str) -> int:
    """'8', '64K', '1M', '1GB', '32MiB' -> bytes; K/M/G are powers of 1024, as nccom-test reads them."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)(i?B)?\s*", str(text), re.IGNORECASE)
    if not m:
        raise ConfigError(f"cannot read size {text!r}: expected a byte count such as 8, 64K, 32M or 1G")
    return int(m.group(1)) * 1024 ** " KMGT".index(m.group(2).upper() or " ")


def sweep(op: str, system: str, nodes: int, ranks: int | None, begin: int, end: int, factor: int,
          dtype: str, algorithm: str | None, model: str, lnc: int | None) -> dict:
    """The rows of one size sweep, as `--json` prints them."""
    import trnsim.fabric as tf
    from trnsim import numerics

    operation = OP_NAMES.get(op)
    if operation is None:
        raise UnknownNameError("collective operation", op, list(OP_NAMES))
    dt = numerics.dtype(DTYPE_NAMES.get(dtype, dtype))
    if factor < 2 or begin < 1 or end < begin:
        raise ConfigError(f"sizes must satisfy 1 <= -b ({begin}) <= -e ({end}) and -f >= 2 (got {factor})")
    c = tf.cluster(system, nodes=nodes, lnc=lnc)
    n = ranks or c.ranks
    rows, size = [], begin
    while size <= end:
        live.publish(kind="collective", name=f"{operation} {size} B", cores=range(n), instance=c.system.name)
        t, alg, steps = tf.collective_time(operation, size, n, c, algorithm, model)
        algbw = size / (t * 1e-9) / GIB if t else 0.0
        rows.append({"size": size, "count": size // dt.itemsize, "type": dt.name, "time_us": t / 1e3,
                     "algbw": algbw, "busbw": algbw * tf.bus_factor(operation, n), "algorithm": alg, "steps": steps})
        size *= factor
    return {"operation": operation, "system": c.system.name, "nodes": nodes, "ranks": n, "lnc": c.lnc,
            "model": model, "unit": "GB/s = 2^30 bytes/s", "rows": rows,
            "avg_busbw": sum(r["busbw"] for r in rows) / len(rows)}


@cli.command()
@click.argument("operation")
@click.option("--instance", "system", default="trn1.32xlarge", show_default=True,
              help="Instance or UltraServer (trn2.48xlarge, 'Trn2 UltraServer', 'Trn3 Gen2 UltraServer').")
@click.option("-N", "--nodes", default=1, show_default=True, help="Number of instances / UltraServers.")
@click.option("-r", "--ranks", type=int, default=None, help="Ranks (default: every logical core).")
@click.option("-b", "--minbytes", default="32M", show_default=True, help="Smallest size (K/M/G = 1024^n).")
@click.option("-e", "--maxbytes", default="32M", show_default=True, help="Largest size.")
@click.option("-f", "--stepfactor", default=2, show_default=True, help="Size multiplier between rows.")
@click.option("-d", "--dtype", default="uint8", show_default=True, help="fp32, bf16, fp16, fp8, int8, uint8, ...")
@click.option("--algorithm", default=None, help="Force ring, torus, mesh, rdh, kangaring, hierarchical, oneshot.")
@click.option("--model", type=click.Choice(["alpha-beta", "flow"]), default="alpha-beta", show_default=True)
@click.option("--lnc", type=int, default=None, help="Logical NeuronCore size (default: 1 on Trn1, 2 on Trn2/3).")
@click.option("--show-algorithm", is_flag=True, help="Add the algorithm the runtime would run.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def collective(operation, system, nodes, ranks, minbytes, maxbytes, stepfactor, dtype, algorithm, model, lnc,
               show_algorithm, as_json):
    """Simulated nccom-test: time one collective over a size sweep.

    OPERATION: all_reduce (allr), all_gather (allg), reduce_scatter (redsct), alltoall, alltoallv,
    permute, sendrecv, broadcast.
    """
    out = sweep(operation, system, nodes, ranks, parse_size(minbytes), parse_size(maxbytes), stepfactor,
                dtype, algorithm, model, lnc)
    if as_json:
        click.echo(json.dumps(out, indent=1))
        return
    click.echo(f"# {out['operation']} on {out['ranks']} ranks of {nodes} x {out['system']} "
               f"(LNC {out['lnc']}, {model} model)")
    cols = ["size(B)", "count(elems)", "type", "time(us)", "algbw(GB/s)", "busbw(GB/s)"]
    cols += ["algorithm"] if show_algorithm else []
    click.echo("".join(f"{c:>14}" for c in cols[:-1]) + f"  {cols[-1]}")
    for r in out["rows"]:
        cells = [r["size"], r["count"], r["type"], f"{r['time_us']:.2f}", f"{r['algbw']:.2f}", f"{r['busbw']:.2f}"]
        line = "".join(f"{c:>14}" for c in cells)
        click.echo(line + (f"  {r['algorithm']}" if show_algorithm else ""))
    click.echo(f"Avg bus bandwidth:\t{out['avg_busbw']:.4f} GB/s (GB = 2^30 bytes, as nccom-test prints)")


def tour(console) -> None:
    """All-reduce on a Trn2 instance and a Trn3 Gen2 UltraServer, and what bf16 rounding per hop does."""
    import numpy as np

    import trnsim.fabric as tf
    from trnsim import numerics

    console.print("All-reduce bus bandwidth (GB/s) and the algorithm the runtime picks:")
    systems = [("trn2.48xlarge", tf.cluster("trn2.48xlarge")), ("Trn3 Gen2", tf.cluster("Trn3 Gen2 UltraServer"))]
    for size in (64 * 1024, 4 * 2**20, 256 * 2**20):
        cells = []
        for name, c in systems:
            t, alg, _ = tf.collective_time("all_reduce", size, None, c)
            cells.append(f"{name} {size / t * 1e9 / GIB * tf.bus_factor('all_reduce', c.ranks):7.1f} {alg:<11}")
        console.print(f"  {size / 2**20:8.2f} MiB  " + "   ".join(cells))
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(4096).astype(np.float32) for _ in range(16)]
    exact = np.sum(np.stack(xs).astype(np.float64), axis=0)
    c = tf.cluster("trn2.48xlarge", lnc=2)
    f32 = tf.all_reduce(xs, cluster=c, algorithm="ring")[0]
    b16 = tf.all_reduce([numerics.cast(x, "bfloat16") for x in xs], cluster=c, algorithm="ring")[0]
    err = lambda y: float(np.abs(y.astype(np.float64) - exact).mean())  # noqa: E731
    console.print(f"  16-rank ring all-reduce, mean |error| vs exact: fp32 {err(f32):.1e}, "
                  f"bf16 {err(b16):.1e} (a rounding per hop)")
