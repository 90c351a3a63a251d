"""`trnsim collective`: nccom-test on a simulated cluster.

    trnsim collective all_reduce --instance trn1.32xlarge -N 2 -r 64 -b 8 -e 1G -f 4 --show-algorithm -c

Flags follow nccom-test (tools/neuron-sys-tools/nccom-test.rst): -r/--nworkers, -N/--nnodes,
-b/-e/-f/-i sizes, -d/--datatype, -c/--check [random|all_ones] with --seed, -n/--iters,
-w/--warmup_iters, -t/--stats, -s/--hosts, --report-to-json-file, --show-algorithm, the replica groups
(--data-parallel-dimension, --custom-replica-group) and permute's --custom-src-target-pairs.
Bandwidths follow nccom-test: algbw = size / time, busbw = algbw x the operation's bus factor
(all_reduce 2(r-1)/r; all_gather, reduce_scatter, all_to_all (r-1)/r; permute, send/recv 1),
printed in GB/s of 2^30 bytes, the unit in which the published Trn1 tables (reference 2.6 A, E) add up.
The simulated clock is deterministic: every iteration takes the same time, so avg and every
percentile are equal.
"""
from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

import click

from trnsim import live, specs
from trnsim.cli import cli, emit_json, output_file
from trnsim.errors import OptionError, UnknownNameError
from trnsim.specs import DEFAULT_INSTANCE

if TYPE_CHECKING:
    import numpy as np

# nccom-test's names and its short forms -> trnsim.fabric operations
OP_NAMES = {
    "all_reduce": "all_reduce", "allr": "all_reduce", "all_gather": "all_gather", "allg": "all_gather",
    "reduce_scatter": "reduce_scatter", "redsct": "reduce_scatter", "alltoall": "all_to_all",
    "all_to_all": "all_to_all", "alltoallv": "all_to_allv", "all_to_allv": "all_to_allv",
    "permute": "permute", "sendrecv": "send_recv", "send_recv": "send_recv", "broadcast": "broadcast",
}
GIB = 2**30
CHECK_ELEMS = 2**22  # values checked per row at most (all ranks together); larger rows check a prefix
MAX_ROWS = 10_000  # sizes in one sweep: a table, not a scan of every byte count
MAX_CHIPS = 2**19  # the largest cluster simulated: beyond any built (tens of thousands of chips), in bounded memory


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
    if (end - begin) // step + 1 > MAX_ROWS:
        raise OptionError("-i/--stepbytes", f"{step} B steps from {begin} B to {end} B make {(end - begin) // step + 1:,} "
                                            f"rows; at most {MAX_ROWS:,}: take a larger step, or -f")
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


def io_bytes(op: str, size: int, n: int) -> tuple[int, int]:
    """Each rank's input and output bytes for a collective of nccom-test's size (all_gather's size is the
    gathered output, reduce_scatter's the input; the others' in and out are both the size)."""
    if op == "all_gather":
        return size // n, size
    if op == "reduce_scatter":
        return size, size // n
    return size, size


def _read_json(option: str, path: str):
    """The JSON document of an option's file; OptionError naming the file (and the line, when not JSON)."""
    import json

    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        raise OptionError(option, f"cannot read {path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise OptionError(option, f"{path}:{e.lineno}: not JSON: {e.msg}") from None


def replica_groups(c, base: list[int], dp: int | None, custom: str | None) -> list[list[int]] | None:
    """The replica groups the collective runs on at once: --data-parallel-dimension D splits the ranks into
    groups of D, rank i with i + n/D, i + 2n/D, ... (one rank per node when D is the node count);
    --custom-replica-group FILE gives them as JSON, [[0, 1], [2, 3]] or {"replica_groups": [...]}."""
    if dp is None and custom is None:
        return None
    if dp is not None and custom is not None:
        raise OptionError("--data-parallel-dimension", "give it or --custom-replica-group, not both")
    if dp is not None:
        if dp < 1 or len(base) % dp:
            raise OptionError("--data-parallel-dimension", f"{dp} does not divide the {len(base)} ranks")
        stride = len(base) // dp
        return [[base[k + j * stride] for j in range(dp)] for k in range(stride)]
    doc = _read_json("--custom-replica-group", custom)
    groups = doc.get("replica_groups") if isinstance(doc, dict) else doc
    if not (isinstance(groups, list) and groups and all(isinstance(g, list) and g and
                                                        all(isinstance(r, int) for r in g) for g in groups)):
        raise OptionError("--custom-replica-group", f"{custom}: expected a list of rank lists, [[0, 1], [2, 3]]")
    seen = [r for g in groups for r in g]
    bad = [r for r in seen if r not in range(len(base))]
    if bad:
        raise OptionError("--custom-replica-group", f"{custom}: rank {bad[0]} is not among the {len(base)} ranks")
    if len(set(seen)) != len(seen):
        raise OptionError("--custom-replica-group", f"{custom}: a rank is in two groups")
    if len({len(g) for g in groups}) != 1:
        raise OptionError("--custom-replica-group", f"{custom}: groups of different sizes "
                                                    f"{sorted({len(g) for g in groups})}")
    return [[base[r] for r in g] for g in groups]


def src_target_pairs(path: str, n: int) -> list[tuple[int, int]]:
    """nccom-test's --custom-src-target-pairs file -> the permute's (source, target) pairs. The file holds
    {"src_target_pairs": [[[0, 1], [1, 0], [2, 2]], ...]}: lists of [source, target] pairs over the n ranks of
    a group, which run together as one collective permute; as in XLA's collective-permute, a rank sends to
    at most one target and receives from at most one source ([r, r] keeps a rank's buffer in place)."""
    import json

    opt = "--custom-src-target-pairs"
    doc = _read_json(opt, path)
    lists = doc.get("src_target_pairs") if isinstance(doc, dict) else None
    if not (isinstance(lists, list) and lists and all(isinstance(x, list) for x in lists)):
        raise OptionError(opt, f'{path}: expected {{"src_target_pairs": [[[0, 1], [1, 0], ...]]}}: lists of '
                               "[source, target] pairs")
    pairs = []
    for k, group in enumerate(lists):
        for j, p in enumerate(group):
            if not (isinstance(p, list) and len(p) == 2 and all(isinstance(r, int) and not isinstance(r, bool)
                                                                  for r in p)):
                raise OptionError(opt, f"{path}: src_target_pairs[{k}][{j}] is {json.dumps(p)}, not a "
                                       "[source, target] pair of ranks")
            bad = [r for r in p if not 0 <= r < n]
            if bad:
                raise OptionError(opt, f"{path}: src_target_pairs[{k}][{j}] {p}: rank {bad[0]} is not among the "
                                       f"{n} ranks (0..{n - 1})")
            pairs.append((p[0], p[1]))
    for side, name in ((0, "source"), (1, "target")):
        seen: dict[int, tuple[int, int]] = {}
        for p in pairs:
            if p[side] in seen:
                raise OptionError(opt, f"{path}: rank {p[side]} is the {name} of both {list(seen[p[side]])} and "
                                       f"{list(p)}; a rank sends to one target and receives from one source")
            seen[p[side]] = p
    return pairs


def _pairs_time(pairs: list[tuple[int, int]], nbytes: int, g, c, model: str) -> tuple[float, str, int]:
    """One permute moving `nbytes` along each pair at once, priced on the fabric's links (pairs [r, r] move
    nothing); the same pricing as trnsim.fabric.permute, without the buffers."""
    from trnsim.fabric import algorithms as A
    from trnsim.fabric import runtime as R
    from trnsim.fabric import timing as T

    moves = [p for p in pairs if p[0] != p[1]]
    if not moves:
        return 0.0, "direct", 0
    group = R.group_of(c, g if g is not None else None)
    return T.price_once(group, A.pairwise("direct", group.n, moves).phases[0], model, nbytes), "direct", 1


def alltoallv_counts(path: str, n: int) -> np.ndarray:
    """nccom-test's --alltoallv-metadata file -> counts[j][i], the elements rank j sends rank i. The file holds
    {"alltoallv_metadata": [{"send_counts", "send_displs", "recv_counts", "recv_displs"}, ...]}: one entry for
    every rank, or one per rank; what each rank receives must be what the others send it."""
    import numpy as np

    opt = "--alltoallv-metadata"
    doc = _read_json(opt, path)
    entries = doc.get("alltoallv_metadata") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or len(entries) not in (1, n):
        raise OptionError(opt, f"{path}: expected {{\"alltoallv_metadata\": [...]}} with 1 or {n} entries")
    keys = ("send_counts", "send_displs", "recv_counts", "recv_displs")
    for k, e in enumerate(entries):
        for key in keys:
            v = e.get(key) if isinstance(e, dict) else None
            if not (isinstance(v, list) and len(v) == n and all(isinstance(x, int) and x >= 0 for x in v)):
                raise OptionError(opt, f"{path}: entry {k}: {key} must list {n} counts or offsets >= 0, one per rank")
        for counts, displs in (("send_counts", "send_displs"), ("recv_counts", "recv_displs")):
            spans = sorted(zip(e[displs], e[counts]))
            if any(a + c > b for (a, c), (b, _) in zip(spans, spans[1:])):
                raise OptionError(opt, f"{path}: entry {k}: the {counts} regions at {displs} overlap")
    per = [entries[r % len(entries)] for r in range(n)]
    send = np.array([e["send_counts"] for e in per])
    recv = np.array([e["recv_counts"] for e in per])
    if not np.array_equal(recv, send.T):
        j, i = map(int, np.argwhere(recv != send.T)[0])
        raise OptionError(opt, f"{path}: rank {j} expects {recv[j, i]} elements from rank {i}, which sends it "
                               f"{send[i, j]}")
    return send


def _alltoallv_row(counts: np.ndarray, dt, name: str, c, group, model: str, check: str | None, seed: int) -> dict:
    """The one row of an alltoallv whose counts come from the metadata: timed on the fabric with those
    exact per-pair sizes; size is the most bytes a rank sends."""
    import numpy as np

    import trnsim.fabric as tf

    n = len(counts)
    rng = np.random.default_rng(seed)
    arrays = [[_inputs(check or "random", 1, int(counts[j, i]), dt, "sum", rng)[0] for i in range(n)] for j in range(n)]
    res = tf.all_to_allv(arrays, cluster=c, ranks=group, model=model)
    size = int(counts.sum(axis=1).max()) * dt.itemsize
    t = res.time_ns
    algbw = size / (t * 1e-9) / GIB if t else 0.0
    row = {"size": size, "count": size // dt.itemsize, "type": name, "time_us": t / 1e3, "algbw": algbw,
           "busbw": algbw * tf.bus_factor("all_to_allv", n), "algorithm": res.algorithm, "steps": res.steps,
           "input_size": size, "output_size": int(counts.sum(axis=0).max()) * dt.itemsize}
    if check:
        ok = all(np.array_equal(res.outputs[i][j], arrays[j][i]) for i in range(n) for j in range(n))
        row.update(check="ok" if ok else "FAIL", checked_elems=row["count"], check_max_rel_error=0.0 if ok else 1.0)
    return row


def sweep(op: str, system: str, nodes: int, ranks: int | None, sizes_: list[int], dtype: str,
          algorithm: str | None, model: str, lnc: int | None, check: str | None = None, reduce: str = "sum",
          seed: int = 0, dp: int | None = None, custom_groups: str | None = None, metadata: str | None = None,
          pairs_file: str | None = None) -> dict:
    """The rows of one size sweep, as `--json` prints them. With replica groups, each group is timed on its
    own links and the slowest gives the row (groups sharing a link do not slow each other here)."""
    import trnsim.fabric as tf
    from trnsim import numerics

    operation = OP_NAMES.get(op)
    if operation is None:
        raise UnknownNameError("collective operation", op, list(OP_NAMES))
    try:
        dt = numerics.dtype(numerics.dtype_name(dtype))  # nccom-test's names (fp8, bf16) or trnsim's
    except UnknownNameError as e:
        raise OptionError("-d/--datatype", str(e)) from None
    name = numerics.SHORT.get(dt.name, dt.name)
    for s, opt in ((sizes_[0], "-b/--minbytes"), (sizes_[-1], "-e/--maxbytes")):
        if s % dt.itemsize:
            raise OptionError(opt, f"{s} B is not a whole number of {dt.itemsize}-byte {name} elements")
    if nodes < 1:
        raise OptionError("-N/--nnodes", f"must be at least 1, got {nodes}")
    chips = nodes * specs.system(system).chips
    if chips > MAX_CHIPS:
        raise OptionError("-N/--nnodes", f"{nodes:,} x {system} is {chips:,} chips; trnsim simulates clusters of at "
                                         f"most {MAX_CHIPS:,} chips")
    if lnc is None and os.environ.get("NEURON_LOGICAL_NC_CONFIG"):
        from trnsim.cli.monitor import logical_nc_config

        lnc = logical_nc_config(specs.system(system).chip)
    c = tf.cluster(system, nodes=nodes, lnc=lnc)
    group = _group(c, nodes, ranks)
    base = group or list(range(c.ranks))
    groups = replica_groups(c, base, dp, custom_groups) or [group]
    n = len(groups[0]) if groups[0] else c.ranks
    if metadata is not None and operation != "all_to_allv":
        raise OptionError("--alltoallv-metadata", f"applies to alltoallv, not {operation}")
    pairs = None
    if pairs_file is not None:
        if operation not in ("permute", "send_recv"):
            raise OptionError("--custom-src-target-pairs", f"applies to permute and sendrecv, not {operation}")
        pairs = src_target_pairs(pairs_file, n)
    _fits(operation, sizes_[-1], n, c)
    rows = []
    if metadata is not None:  # the counts fix the traffic: one row, -b/-e/-f do not apply
        counts = alltoallv_counts(metadata, n)
        rows = [_alltoallv_row(counts, dt, name, c, g, model, check, seed) for g in groups]
        rows = [max(rows, key=lambda r: r["time_us"])]
        sizes_ = []
    for size in sizes_:
        count = size // dt.itemsize
        live.publish(kind="collective", name=f"{operation} {size} B", cores=range(len(base)), instance=c.system.name)
        if pairs is not None:
            if algorithm not in (None, "direct"):
                raise OptionError("--algorithm", f"a permute of custom pairs moves buffers directly, not by {algorithm}")
            t, alg, steps = max(_pairs_time(pairs, count * dt.itemsize, g, c, model) for g in groups)
        else:
            t, alg, steps = max(tf.collective_time(operation, count * dt.itemsize, g, c, algorithm, model)
                                for g in groups)
        algbw = count * dt.itemsize / (t * 1e-9) / GIB if t else 0.0
        rin, rout = io_bytes(operation, count * dt.itemsize, n)
        row = {"size": size, "count": count, "type": name, "time_us": t / 1e3, "algbw": algbw,
               "busbw": algbw * tf.bus_factor(operation, n), "algorithm": alg, "steps": steps,
               "input_size": rin, "output_size": rout}
        if check:
            for g in groups:  # every group's values are checked
                res = check_values(operation, count, n, dt, c, g, algorithm, model, check, reduce, seed, pairs)
                if row.get("check") != "FAIL":
                    row.update(res)
        rows.append(row)
    return {"operation": operation, "system": c.system.name, "nodes": nodes, "ranks": n, "lnc": c.lnc,
            "replica_groups": groups if groups != [group] else None, "src_target_pairs": pairs,
            "datatype": name, "model": model, "unit": "GB/s = 2^30 bytes/s", "rows": rows,
            "avg_busbw": sum(r["busbw"] for r in rows) / len(rows)}


def _fits(op: str, size: int, n: int, c) -> None:
    """The largest size's input and output buffers must fit in a rank's HBM, as on the device."""
    rin, rout = io_bytes(op, size, n)
    cap = c.hbm_bytes_per_rank
    if rin + rout > cap:
        raise OptionError("-e/--maxbytes", f"{size:,} B {op} needs {rin:,} B in + {rout:,} B out = {rin + rout:,} B "
                                           f"per rank, but a rank (logical NeuronCore at LNC {c.lnc}) of "
                                           f"{c.system.name} has {cap:,} B of HBM")


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


def check_values(op: str, count: int, n: int, dt, c, group, algorithm, model, mode: str, reduce: str, seed: int,
                 pairs: list[tuple[int, int]] | None = None) -> dict:
    """Run the collective with values and compare every rank's output with numpy's golden result, in float64
    for floats with a tolerance of the dtype's rounding per hop. A row of more than CHECK_ELEMS elements over
    all ranks is checked on the first CHECK_ELEMS / ranks elements of each rank (checked_elems says how many)."""
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
    else:  # the custom pairs, else permute's ring shift and send_recv's position 2i to 2i+1
        if pairs is None:
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
@click.option("--instance", "system", default=DEFAULT_INSTANCE,
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
              default=None, help="Move real values and compare every rank's output with numpy [random]; rows of "
              f"more than {CHECK_ELEMS // 2**20} Mi elements over all ranks are checked on the first "
              f"{CHECK_ELEMS // 2**20} Mi / ranks elements of each rank (the table says so).")
@click.option("--seed", type=int, default=0, help="Seed of --check random.")
@click.option("-n", "--iters", type=int, default=20, help="Measured operations per size (each takes the same simulated time).")
@click.option("-w", "--warmup_iters", "--warmup-iters", "warmups", type=int, default=5, help="Warm-up operations per size.")
@click.option("-I", "--neff_iters", "--neff-iters", "neff_iters", type=int, default=None,
              help="NEFF executions measured (-n operations each); recorded, the clock is deterministic.")
@click.option("-W", "--neff_warmup_iters", "--neff-warmup-iters", "neff_warmups", type=int, default=None,
              help="NEFF executions as warm-up; recorded.")
@click.option("-t", "--stats", "stats", multiple=True, default=["avg"], help="Time statistics: avg and percentiles "
              "such as p50 (comma-separated or repeated; equal here: the clock is deterministic).")
@click.option("-s", "--hosts", multiple=True, help="Hosts (one per node; comma-separated or repeated).")
@click.option("--hosts-file", type=click.Path(dir_okay=False), help="A file of hosts, one per line.")
@click.option("--data-parallel-dimension", "dp", type=int, default=None,
              help="Run in parallel groups of this many ranks (rank i with i + r/D, ...); the slowest group times the row.")
@click.option("--custom-replica-group", "--custom-replica-groups", "custom_groups", type=click.Path(dir_okay=False),
              help="JSON file of replica groups, [[0, 1], [2, 3]]; each is timed and checked, the slowest times the row.")
@click.option("--custom-src-target-pairs", "pairs_file", type=click.Path(dir_okay=False),
              help='permute, sendrecv: JSON of [source, target] rank pairs, {"src_target_pairs": [[[0, 1], [1, 0]]]} '
                   "(nccom-test's format); each rank sends to one target and receives from one source at most.")
@click.option("--alltoallv-metadata", "metadata", type=click.Path(dir_okay=False),
              help="alltoallv: JSON of send/recv counts and displacements per rank (nccom-test's format); the counts "
                   "set the traffic, one row.")
@click.option("--show-input-output-size", "show_io", is_flag=True, help="Add each rank's input and output bytes.")
@click.option("--non-interactive", is_flag=True, help="No animation or progress indicator (trnsim shows none).")
@click.option("--algorithm", default=None, help="Force ring, torus, mesh, rdh, kangaring, hierarchical, oneshot.")
@click.option("--model", type=click.Choice(["alpha-beta", "flow"]), default="alpha-beta")
@click.option("--lnc", type=int, default=None, help="Logical NeuronCore size [1 on Trn1, 2 on Trn2/3].")
@click.option("--show-algorithm", is_flag=True, help="Add the algorithm the runtime would run.")
@click.option("--report-to-json-file", "report", type=click.Path(dir_okay=False), help="Also write the JSON here.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def collective(operation, system, nodes, ranks, minbytes, maxbytes, stepfactor, stepbytes, dtype, reduce, check, seed,
               iters, warmups, neff_iters, neff_warmups, stats, hosts, hosts_file, dp, custom_groups, pairs_file,
               metadata, show_io, non_interactive, algorithm, model, lnc, show_algorithm, report, as_json):
    """Simulated nccom-test: time one collective over a size sweep (and check its values with -c).

    OPERATION: all_reduce (allr), all_gather (allg), reduce_scatter (redsct), alltoall, alltoallv,
    permute, sendrecv, broadcast.
    """
    hosts = [h.strip() for item in hosts for h in item.split(",") if h.strip()]
    if hosts_file:
        try:
            with open(hosts_file) as f:
                hosts += [h.strip() for h in f if h.strip() and not h.lstrip().startswith("#")]
        except OSError as e:
            raise OptionError("--hosts-file", f"cannot read {hosts_file}: {e.strerror}") from None
    if hosts and nodes is not None and nodes != len(hosts):
        raise OptionError("-s/--hosts", f"{len(hosts)} hosts for -N {nodes} nodes; give one host per node")
    nodes = nodes if nodes is not None else max(1, len(hosts))
    if iters < 1:
        raise OptionError("-n/--iters", f"must be at least 1, got {iters}")
    if warmups < 0:
        raise OptionError("-w/--warmup_iters", f"must be 0 or more, got {warmups}")
    stat_list = [x.strip() for item in stats for x in item.split(",") if x.strip()]
    bad = [x for x in stat_list if not re.fullmatch(r"avg|p(100|\d{1,2})", x)] or ([] if stat_list else [""])
    if bad:
        raise OptionError("-t/--stats", f"expected avg or percentiles p0..p100, comma-separated, got {bad[0]!r}")
    for opt, v in (("-I/--neff_iters", neff_iters), ("-W/--neff_warmup_iters", neff_warmups)):
        if v is not None and v < 0:
            raise OptionError(opt, f"must be 0 or more, got {v}")
    output_file("--report-to-json-file", report)
    step = parse_size(stepbytes, "-i/--stepbytes") if stepbytes is not None else None
    todo = sizes(parse_size(minbytes, "-b/--minbytes"), parse_size(maxbytes, "-e/--maxbytes"),
                 stepfactor if stepfactor is not None or step is not None else 2, step)
    out = sweep(operation, system, nodes, ranks, todo, dtype, algorithm, model, lnc, check, reduce, seed, dp,
                custom_groups, metadata, pairs_file)
    out.update(iters=iters, warmup_iters=warmups, neff_iters=neff_iters, neff_warmup_iters=neff_warmups,
               stats=stat_list, hosts=hosts, check=check, op=reduce)
    # the report file also carries nccom-test's own layout, for the scripts that read that file:
    # {"results": [{"size(B)": ..., "time:avg(us)": ...}]} (its keys, not trnsim's lowercase ones)
    results = [{"size(B)": r["size"], "count(elems)": r["count"], "type": r["type"], "algbw(GB/s)": r["algbw"],
                       "busbw(GB/s)": r["busbw"], **{f"time:{st}(us)": r["time_us"] for st in stat_list},
                       **({"total_input_size(B)": r["input_size"], "total_output_size(B)": r["output_size"]}
                          if show_io else {})} for r in out["rows"]]
    if report:
        with open(report, "w") as fh:
            fh.write(emit_json({**out, "results": results}) + "\n")
    failed = [r for r in out["rows"] if r.get("check") == "FAIL"]
    if as_json:
        click.echo(emit_json(out))
    else:
        _print_table(out, nodes, show_algorithm, check, show_io)
    if failed:
        raise click.exceptions.Exit(1)


def _print_table(out: dict, nodes: int, show_algorithm: bool, check: str | None, show_io: bool = False) -> None:
    groups = out.get("replica_groups")
    click.echo(f"# {out['operation']} on {out['ranks']} ranks of {nodes} x {out['system']} "
               + (f"in {len(groups)} replica groups at once " if groups else "")
               + f"(LNC {out['lnc']}, {out['model']} model, {out['iters']} iterations after {out['warmup_iters']} warm-up)")
    stats = out["stats"]
    times = ["time(us)"] if stats == ["avg"] else [f"time:{s}(us)" for s in stats]
    io = ["total_input_size(B)", "total_output_size(B)"] * show_io
    head = ["size(B)", "count(elems)"] + io + ["type"] + times + ["algbw(GB/s)", "busbw(GB/s)"]
    cols = head + ["check"] * bool(check) + ["algorithm"] * show_algorithm
    click.echo("".join(f"{c:>{max(14, len(c) + 2)}}" for c in head) + "".join(f"  {c}" for c in cols[len(head):]))
    for r in out["rows"]:
        cells = ([r["size"], r["count"]] + [r["input_size"], r["output_size"]] * show_io + [r["type"]]
                 + [f"{r['time_us']:.2f}"] * len(times) + [f"{r['algbw']:.2f}", f"{r['busbw']:.2f}"])
        extra = ([r["check"]] if check else []) + ([r["algorithm"]] if show_algorithm else [])
        click.echo("".join(f"{c:>{max(14, len(h) + 2)}}" for c, h in zip(cells, head)) + "".join(f"  {c}" for c in extra))
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
    _tour_all_to_all_v(console)


def _tour_all_to_all_v(console) -> None:
    """NKI 0.7's all_to_all_v and all_gather_v inside a kernel on the two cores of an LNC 2 launch: uneven
    chunks, as a mixture-of-experts layer dispatches tokens, against numpy."""
    import numpy as np

    import trnsim.nki as nki
    import trnsim.nki.collectives as cc
    import trnsim.nki.isa as nisa
    import trnsim.nki.language as nl
    from trnsim.cli.run import target_env

    slot = 16  # each receiver keeps a slot of this many elements per sender

    @nki.jit
    def exchange(x, metadata):
        r = cc.rank_id()
        out = nl.ndarray((2, 2, 1, 2 * slot), x.dtype, buffer=nl.shared_hbm)  # [kind, rank]
        for k, kind in enumerate((cc.all_to_all_v, cc.all_gather_v)):
            dst = nl.ndarray((1, 2 * slot), x.dtype, buffer=nl.hbm)
            nisa.memset(zeros := nl.ndarray((1, 2 * slot), x.dtype, buffer=nl.sbuf), 0.0)
            nisa.dma_copy(dst, zeros)
            meta = nl.ndarray(metadata.shape[2:], metadata.dtype, buffer=nl.hbm)
            nisa.dma_copy(meta, metadata[k, r])
            kind([x[r]], [dst.reshape((2 * slot,))], cc.ReplicaGroup([[0, 1]]), meta)
            nisa.dma_copy(out[k, r], dst)
        return out

    x = np.random.default_rng(2).standard_normal((2, 64)).astype(np.float32)
    md = np.zeros((2, 2, 3, 2), np.uint32)  # [kind, rank]: rows of counts and offsets per receiver (row 2: received)
    md[0, 0, :2] = [[5, 11], [0, 20]]  # all_to_all_v: rank 0 keeps 5 elements and sends 11 to rank 1
    md[0, 1, :2] = [[3, 14], [40, 50]]
    md[1, 0, :2] = [[7, 0], [8, 0]]  # all_gather_v: rank 0 broadcasts 7 elements, rank 1 13 (column 0 only)
    md[1, 1, :2] = [[13, 0], [30, 0]]
    want = np.zeros((2, 2, 2 * slot), np.float32)
    for i in range(2):  # sender
        for j in range(2):  # receiver
            c, d = md[0, i, 0, j], md[0, i, 1, j]
            want[0, j, i * slot:i * slot + c] = x[i, d:d + c]
            c, d = md[1, i, 0, 0], md[1, i, 1, 0]
            want[1, j, i * slot:i * slot + c] = x[i, d:d + c]
    with target_env("trn2"):
        got = exchange[2](x, md).reshape(want.shape)
    ok = lambda k: "matches numpy" if np.array_equal(got[k], want[k]) else "[red]DIFFERS from numpy[/]"  # noqa: E731
    console.print(f"  In a kernel on the 2 cores of an LNC 2 launch (NKI 0.7): all_to_all_v of uneven chunks "
                  f"({md[0, 0, 0, 0]}+{md[0, 0, 0, 1]} and {md[0, 1, 0, 0]}+{md[0, 1, 0, 1]} elements, as an MoE layer "
                  f"dispatches tokens) {ok(0)}; all_gather_v of {md[1, 0, 0, 0]} and {md[1, 1, 0, 0]} {ok(1)}")
