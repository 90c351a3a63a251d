"""`trnsim collective`: nccom-test on a simulated cluster.

    trnsim collective all_reduce --instance trn1.32xlarge -N 2 -r 64 -b 8 -e 1G -f 4 --show-algorithm -c

Flags follow nccom-test (tools/neuron-sys-tools/nccom-test.rst): -r/--nworkers, -N/--nnodes,
-b/-e/-f/-i sizes, -d/--datatype, -c/--check [random|all_ones] with --seed, -n/--iters,
-w/--warmup_iters, -t/--stats, -s/--hosts, --report-to-json-file, --show-algorithm.
Bandwidths follow nccom-test: algbw = size / time, busbw = algbw x the operation's bus factor
(all_reduce 2(r-1)/r; all_gather, reduce_scatter, all_to_all (r-1)/r; permute, send/recv 1),
printed in GB/s of 2^30 bytes, the unit in which the published Trn1 tables (reference 2.6 A, E) add up.
The simulated clock is deterministic: every iteration takes the same time, so avg and every
percentile are equal.
"""
from __future__ import annotations

import re

import click

from trnsim import live
from trnsim.cli import cli, emit_json, output_file
from trnsim.errors import OptionError, UnknownNameError

# nccom-test's names and its short forms -> trnsim.fabric operations
OP_NAMES = {
    "all_reduce": "all_reduce", "allr": "all_reduce", "all_gather": "all_gather", "allg": "all_gather",
    "reduce_scatter": "reduce_scatter", "redsct": "reduce_scatter", "alltoall": "all_to_all",
    "all_to_all": "all_to_all", "alltoallv": "all_to_allv", "all_to_allv": "all_to_allv",
    "permute": "permute", "sendrecv": "send_recv", "send_recv": "send_recv", "broadcast": "broadcast",
}
# nccom-test's dtype names -> trnsim.numerics names; printed back under nccom-test's names
DTYPE_NAMES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp8": "float8_e4m3", "fp8e4": "float8_e4m3",
               "fp8_e4m3": "float8_e4m3", "fp8_e5m2": "float8_e5m2", "uint8": "uint8", "int8": "int8",
               "uint16": "uint16", "int16": "int16", "uint32": "uint32", "int32": "int32"}
NCCOM_NAME = {v: k for k, v in reversed(DTYPE_NAMES.items())}
GIB = 2**30
CHECK_ELEMS = 2**22  # values checked per row at most (all ranks together); larger rows check a prefix


def parse_size(text: str, option: str = "size") -> int:
    """'8', '64K', '1M', '1GB', '32MiB' -> bytes; K/M/G are powers of 1024, as nccom-test reads them."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)(i?B)?\s*", str(text), re.IGNORECASE)
    if not m:
        raise OptionError(option, f"cannot read size {text!r}: expected a byte count such as 8, 64K, 32M or 1G")
    return int(m.group(1)) * 1024 ** " KMGT".index(m.group(2).upper() or " ")


def sizes(begin: int, end: int, factor: int | None, step: int | None) -> list[int]:
    """The sweep's sizes: -b to -e, times -f or plus -i (default (e - b) / 10, as nccom-test)."""
    if begin < 1:
        raise OptionError("-b/--minbytes", f"must be at least 1 byte, got {begin}")
    if end < begin:
        raise OptionError("-e/--maxbytes", f"{end} is below -b/--minbytes {begin}")
    if factor is not None:
        if factor < 2:
            raise OptionError("-f/--stepfactor", f"must be 2 or more, got {factor}")
        out, s = [], begin
        while s <= end:
            out.append(s)
            s *= factor
        return out
    step = step if step is not None else max(1, (end - begin) // 10)
    if step < 1:
        raise OptionError("-i/--stepbytes", f"must be at least 1 byte, got {step}")
    return list(range(begin, end + 1, step))


def _group(c, nodes: int, ranks: int | None) -> list[int] | None:
    """nccom-test spreads -r workers equally over the -N nodes: the first r/N logical cores of each."""
    if ranks is None:
        return None
    if ranks < 1:
        raise OptionError("-r/--nworkers", f"must be at least 1, got {ranks}")
    if ranks % nodes:
        raise OptionError("-r/--nworkers", f"{ranks} workers do not divide equally over -N {nodes} nodes")
    per = ranks // nodes
    if per > c.ranks_per_node:
        raise OptionError("-r/--nworkers", f"{ranks} workers over {nodes} x {c.system.name} is {per} per node; "
                                           f"each holds {c.ranks_per_node} (logical cores at LNC {c.lnc})")
    return [node * c.ranks_per_node + i for node in range(nodes) for i in range(per)]


def sweep(op: str, system: str, nodes: int, ranks: int | None, sizes_: list[int], dtype: str,
          algorithm: str | None, model: str, lnc: int | None, check: str | None = None, reduce: str = "sum",
          seed: int = 0) -> dict:
    """The rows of one size sweep, as `--json` prints them."""
    import trnsim.fabric as tf
    from trnsim import numerics

    operation = OP_NAMES.get(op)
    if operation is None:
        raise UnknownNameError("collective operation", op, list(OP_NAMES))
    try:
        dt = numerics.dtype(DTYPE_NAMES.get(dtype, dtype))
    except UnknownNameError as e:
        raise OptionError("-d/--datatype", str(e)) from None
    name = NCCOM_NAME.get(dt.name, dt.name)
    for s, opt in ((sizes_[0], "-b/--minbytes"), (sizes_[-1], "-e/--maxbytes")):
        if s % dt.itemsize:
            raise OptionError(opt, f"{s} B is not a whole number of {dt.itemsize}-byte {name} elements")
    if nodes < 1:
        raise OptionError("-N/--nnodes", f"must be at least 1, got {nodes}")
    c = tf.cluster(system, nodes=nodes, lnc=lnc)
    group = _group(c, nodes, ranks)
    n = len(group) if group else c.ranks
    rows = []
    for size in sizes_:
        count = size // dt.itemsize
        live.publish(kind="collective", name=f"{operation} {size} B", cores=range(n), instance=c.system.name)
        t, alg, steps = tf.collective_time(operation, count * dt.itemsize, group, c, algorithm, model)
        algbw = count * dt.itemsize / (t * 1e-9) / GIB if t else 0.0
        row = {"size": size, "count": count, "type": name, "time_us": t / 1e3, "algbw": algbw,
               "busbw": algbw * tf.bus_factor(operation, n), "algorithm": alg, "steps": steps}
        if check:
            row.update(check_values(operation, count, n, dt, c, group, algorithm, model, check, reduce, seed))
        rows.append(row)
    return {"operation": operation, "system": c.system.name, "nodes": nodes, "ranks": n, "lnc": c.lnc,
            "datatype": name, "model": model, "unit": "GB/s = 2^30 bytes/s", "rows": rows,
            "avg_busbw": sum(r["busbw"] for r in rows) / len(rows)}


def _inputs(mode: str, n: int, count: int, dt, reduce: str, rng) -> list[np.ndarray]:
    """Each rank's input: ones, or pseudo-random values whose reduction stays exact in integers and in range."""
    import numpy as np

    if mode == "all_ones":
        return [np.ones(count, dt.np) for _ in range(n)]
    if dt.is_float:
        lo, hi = (0.5, 1.5) if reduce == "prod" else (-1.0, 1.0)
        return [rng.uniform(lo, hi, count).astype(np.float32).astype(dt.np) for _ in range(n)]
    top = 2 if reduce == "prod" else max(2, min(int(np.iinfo(dt.np).max) // n, 100))
    return [rng.integers(1 if reduce == "prod" else 0, top, count).astype(dt.np) for _ in range(n)]


def check_values(op: str, count: int, n: int, dt, c, group, algorithm, model, mode: str, reduce: str, seed: int) -> dict:
    """Run the collective with values (a prefix of at most CHECK_ELEMS in all) and compare every rank's
    output with numpy's golden result, in float64 for floats with a tolerance of the dtype's rounding per hop."""
    import numpy as np

    import trnsim.fabric as tf

    split = op in ("all_gather", "reduce_scatter", "all_to_all", "all_to_allv")
    elems = min(count, max(1, CHECK_ELEMS // n))
    if split:
        elems -= elems % n
        if elems == 0:
            return {"check": "n/a", "checked_elems": 0, "check_note": f"{count} elements do not split over {n} ranks"}
    xs = _inputs(mode, n, elems if op != "all_gather" else elems // n, dt, reduce, np.random.default_rng(seed))
    wide = [x.astype(np.float64) for x in xs]
    kw = dict(cluster=c, ranks=group, model=model)
    fn = tf.REDUCE_OPS[reduce]
    if op in ("all_reduce", "reduce_scatter"):
        red = wide[0]
        for x in wide[1:]:
            red = fn(red, x)
        f = tf.all_reduce if op == "all_reduce" else tf.reduce_scatter
        got = f(xs, reduce, algorithm=algorithm, **kw).outputs
        gold = [red] * n if op == "all_reduce" else list(np.split(red, n))
    elif op == "all_gather":
        got = tf.all_gather(xs, algorithm=algorithm, **kw).outputs
        gold = [np.concatenate(wide)] * n
    elif op == "all_to_all":
        got = tf.all_to_all(xs, **kw).outputs
        gold = [np.concatenate([np.split(w, n)[r] for w in wide]) for r in range(n)]
    elif op == "all_to_allv":
        got = [np.concatenate(o) for o in tf.all_to_allv([np.split(x, n) for x in xs], **kw).outputs]
        gold = [np.concatenate([np.split(w, n)[r] for w in wide]) for r in range(n)]
    elif op == "broadcast":
        got, gold = tf.broadcast(xs, 0, **kw).outputs, [wide[0]] * n
    else:  # permute: the ring shift; send_recv: position 2i to 2i+1
        pairs = [(i, (i + 1) % n) for i in range(n)] if op == "permute" else [(i, i + 1) for i in range(0, n - 1, 2)]
        got = tf.permute(xs, pairs, **kw).outputs
        gold = [np.zeros(elems)] * n
        for s, d in pairs:
            gold[d] = wide[s]
    tol = 0.0 if not dt.is_float else 2.0 ** -dt.mant * (n + 1)
    worst = 0.0
    for g, want in zip(got, gold):
        err = np.abs(np.asarray(g, np.float64).ravel() - np.ravel(want))
        worst = max(worst, float((err / np.maximum(np.abs(np.ravel(want)), 1.0)).max(initial=0.0)))
    ok = worst <= tol
    return {"check": "ok" if ok else "FAIL", "checked_elems": int(elems), "check_max_rel_error": worst}


@cli.command(context_settings={"show_default": True})
@click.argument("operation")
@click.option("--instance", "system", default="trn1.32xlarge",
              help="Instance or UltraServer (trn2.48xlarge, 'Trn2 UltraServer', 'Trn3 Gen2 UltraServer').")
@click.option("-N", "--nnodes", "--nodes", "nodes", type=int, default=None, help="Instances / UltraServers [1, or the number of -s hosts].")
@click.option("-r", "--nworkers", "--ranks", "ranks", type=int, default=None,
              help="Workers (ranks), spread equally over the nodes [every logical core].")
@click.option("-b", "--minbytes", default="32M", help="Smallest size (K/M/G = 1024^n).")
@click.option("-e", "--maxbytes", default="32M", help="Largest size.")
@click.option("-f", "--stepfactor", type=int, default=None, help="Size multiplier between rows [2 unless -i].")
@click.option("-i", "--stepbytes", default=None, help="Size increment between rows instead of -f.")
@click.option("-d", "--datatype", "--dtype", "dtype", default="uint8",
              help="uint8, int8, uint16, int16, fp8, fp16, bf16, uint32, int32, fp32.")
@click.option("-o", "--op", "reduce", type=click.Choice(["sum", "max", "min", "prod"]), default="sum",
              help="Reduction of all_reduce and reduce_scatter.")
@click.option("-c", "--check", type=click.Choice(["random", "all_ones"]), is_flag=False, flag_value="random",
              default=None, help="Move real values and compare every rank's output with numpy [random].")
@click.option("--seed", type=int, default=0, help="Seed of --check random.")
@click.option("-n", "--iters", type=int, default=20, help="Measured operations per size (each takes the same simulated time).")
@click.option("-w", "--warmup_iters", "--warmup-iters", "warmups", type=int, default=5, help="Warm-up operations per size.")
@click.option("-t", "--stats", default="avg", help="Time statistic: avg or a percentile such as p50 (equal here: the clock is deterministic).")
@click.option("-s", "--hosts", multiple=True, help="Hosts (one per node; comma-separated or repeated).")
@click.option("--algorithm", default=None, help="Force ring, torus, mesh, rdh, kangaring, hierarchical, oneshot.")
@click.option("--model", type=click.Choice(["alpha-beta", "flow"]), default="alpha-beta")
@click.option("--lnc", type=int, default=None, help="Logical NeuronCore size [1 on Trn1, 2 on Trn2/3].")
@click.option("--show-algorithm", is_flag=True, help="Add the algorithm the runtime would run.")
@click.option("--report-to-json-file", "report", type=click.Path(dir_okay=False), help="Also write the JSON here.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def collective(operation, system, nodes, ranks, minbytes, maxbytes, stepfactor, stepbytes, dtype, reduce, check, seed,
               iters, warmups, stats, hosts, algorithm, model, lnc, show_algorithm, report, as_json):
    """Simulated nccom-test: time one collective over a size sweep (and check its values with -c).

    OPERATION: all_reduce (allr), all_gather (allg), reduce_scatter (redsct), alltoall, alltoallv,
    permute, sendrecv, broadcast.
    """
    hosts = [h for item in hosts for h in item.split(",") if h.strip()]
    if hosts and nodes is not None and nodes != len(hosts):
        raise OptionError("-s/--hosts", f"{len(hosts)} hosts for -N {nodes} nodes; give one host per node")
    nodes = nodes if nodes is not None else max(1, len(hosts))
    if iters < 1:
        raise OptionError("-n/--iters", f"must be at least 1, got {iters}")
    if warmups < 0:
        raise OptionError("-w/--warmup_iters", f"must be 0 or more, got {warmups}")
    if not re.fullmatch(r"avg|p(100|\d{1,2})", stats):
        raise OptionError("-t/--stats", f"expected avg or a percentile p0..p100, got {stats!r}")
    output_file("--report-to-json-file", report)
    step = parse_size(stepbytes, "-i/--stepbytes") if stepbytes is not None else None
    todo = sizes(parse_size(minbytes, "-b/--minbytes"), parse_size(maxbytes, "-e/--maxbytes"),
                 stepfactor if stepfactor is not None or step is not None else 2, step)
    out = sweep(operation, system, nodes, ranks, todo, dtype, algorithm, model, lnc, check, reduce, seed)
    out.update(iters=iters, warmup_iters=warmups, stats=stats, hosts=hosts, check=check, op=reduce)
    if report:
        with open(report, "w") as fh:
            fh.write(emit_json(out) + "\n")
    failed = [r for r in out["rows"] if r.get("check") == "FAIL"]
    if as_json:
        click.echo(emit_json(out))
    else:
        _print_table(out, nodes, show_algorithm, check)
    if failed:
        raise click.exceptions.Exit(1)


def _print_table(out: dict, nodes: int, show_algorithm: bool, check: str | None) -> None:
    click.echo(f"# {out['operation']} on {out['ranks']} ranks of {nodes} x {out['system']} "
               f"(LNC {out['lnc']}, {out['model']} model, {out['iters']} iterations after {out['warmup_iters']} warm-up)")
    cols = ["size(B)", "count(elems)", "type", "time(us)", "algbw(GB/s)", "busbw(GB/s)"]
    cols += ["check"] * bool(check) + ["algorithm"] * show_algorithm
    click.echo("".join(f"{c:>14}" for c in cols[:6]) + "".join(f"  {c}" for c in cols[6:]))
    for r in out["rows"]:
        cells = [r["size"], r["count"], r["type"], f"{r['time_us']:.2f}", f"{r['algbw']:.2f}", f"{r['busbw']:.2f}"]
        extra = ([r["check"]] if check else []) + ([r["algorithm"]] if show_algorithm else [])
        click.echo("".join(f"{c:>14}" for c in cells) + "".join(f"  {c}" for c in extra))
    if check:
        bad = [r for r in out["rows"] if r["check"] == "FAIL"]
        partial = [r for r in out["rows"] if r["checked_elems"] < r["count"]]
        per = min(r["checked_elems"] for r in partial) if partial else 0
        note = f"; larger rows checked on their first {per:,} elements per rank" if partial else ""
        click.echo(f"Check ({check}, op {out['op']}): " + (f"{len(bad)} size(s) FAILED" if bad else "all passed") + note)
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
