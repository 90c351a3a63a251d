"""`trnsim plan serve`: TTFT, TPOT, memory and cost of a serving layout; `plan serve sweep` ranks layouts."""
from __future__ import annotations

import click

from trnsim.cli import cli, emit_json
from trnsim.cli.plan import PRICE_HELP, _PlanGroup, _console, _ints, _nonempty, _words, plan, tco_line
from trnsim.errors import OptionError

GiB = 2.0**30
WEIGHTS = ["bf16", "fp8", "int8", "mxfp8", "mxfp4"]


def _serve_options(f):
    opts = [
        click.option("--ep", type=int, default=1, show_default=True, help="Expert parallel degree (inside the TP group)."),
        click.option("--cp", type=int, default=1, show_default=True, help="Context parallel degree."),
        click.option("--lnc", type=int, help="Logical NeuronCore size [2 on Trn2/Trn3, 1 on Trn1]."),
        click.option("--input-len", type=int, default=1024, show_default=True, help="Prompt tokens per request."),
        click.option("--output-len", type=int, default=256, show_default=True, help="Output tokens per request."),
        click.option("--weights", type=click.Choice(WEIGHTS), default="bf16", show_default=True, help="Weight dtype."),
        click.option("--kv-dtype", type=click.Choice(["bf16", "fp8"]), default="bf16", show_default=True,
                     help="KV-cache dtype."),
        click.option("--speculation", metavar="DRAFT:K:ACCEPT",
                     help="Speculative decoding: eagle:5:0.74 (an EAGLE head) or a draft MODEL:K:ACCEPT."),
        click.option("--prefix-hit", type=click.FloatRange(0, 1, max_open=True), default=0.0, show_default=True,
                     help="Share of each prompt found in the prefix cache."),
        click.option("--engine", type=click.Choice(["vllm-neuron", "transformers-neuronx"]), default="vllm-neuron",
                     show_default=True, help="Serving engine whose fixed costs apply."),
        click.option("--json", "as_json", is_flag=True, help="Print JSON."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def tco_options(f):
    """--tco and --tco-figures, shared by training and serving plans."""
    f = click.option("--tco-figures", metavar="NAME=VALUE,...",
                     help="Override TCO figures: capex_usd, power_w, pue, usd_per_kwh, lifetime_years.")(f)
    return click.option("--tco", is_flag=True, help="Also cost the chips as owned: capex over their life, power x PUE.")(f)


def _tco(cluster, wanted: bool, figures: str | None):
    """The cluster's TCO when asked for (--tco, or any --tco-figures), else None."""
    if not (wanted or figures):
        return None
    from trnsim.plan import tco

    return tco.tco(cluster.system, cluster.nodes, tco.parse(figures))


def _knobs(ep, cp, lnc, input_len, output_len, weights, kv_dtype, speculation, prefix_hit, engine) -> dict:
    from trnsim.plan.serve import Speculation

    return dict(ep=ep, cp=cp, lnc=lnc, input_len=input_len, output_len=output_len, weights=weights, kv_dtype=kv_dtype,
                speculation=Speculation.parse(speculation) if speculation else None, prefix_hit=prefix_hit,
                engine=engine)


@plan.group(cls=_PlanGroup)
def serve():
    """Plan inference serving: `trnsim plan serve MODEL --instance trn2.48xlarge --tp 8 --batch 4`.

    MODEL is a preset (llama3-8b, llama3-70b, mixtral-8x7b, ...) or a Hugging Face config.json.
    Prefill and decode are priced per op by the simulated kernels, the TP all-reduces and MoE
    all-to-alls on the fabric (see docs/serving.md). `plan serve sweep` ranks layouts under SLOs.
    """


@serve.command("one", hidden=True)
@click.argument("model")
@click.option("--instance", default="trn2.48xlarge", show_default=True, help="Instance, UltraServer or GPU baseline.")
@click.option("--tp", type=int, help="Tensor parallel degree [the lowest TPOT that fits].")
@click.option("--dp", type=int, default=0, show_default=True, help="Model replicas (0: as many as the instance holds).")
@click.option("--batch", type=int, default=1, show_default=True, help="Concurrent sequences per replica.")
@click.option("--price", "prices", multiple=True, metavar="[SYSTEM=]USD", help=PRICE_HELP)
@click.option("--ops", "show_ops", is_flag=True, help="Also list one decode step's ops per layer: shapes, bytes, times.")
@tco_options
@_serve_options
def one(model, instance, tp, dp, batch, prices, show_ops, tco, tco_figures, as_json, **knobs):
    """One serving layout of MODEL: TTFT, TPOT, throughput, memory per rank, buckets, cost."""
    from trnsim.cli.plan import _priced_system

    system = _priced_system(instance, prices)
    p = _best(model, system, tp, dp, batch, _knobs(**knobs))
    owned = _tco(p.cluster, tco, tco_figures)
    if as_json:
        d = p.to_dict()
        if owned:
            d["tco"] = {**owned.to_dict(), "usd_per_million_output_tokens": owned.usd_per_million(p.output_tokens_per_s)}
        click.echo(emit_json(d))
        return
    con = _console()
    con.print(_table(p, chosen=tp is None))
    if owned:
        con.print(tco_line(owned, owned.usd_per_million(p.output_tokens_per_s), "output tokens"))
    if show_ops:
        con.print(_ops_table(p))


def _best(model, system, tp, dp, batch, knobs):
    """The given TP degree, or the one with the lowest TPOT among those that fit."""
    from trnsim.plan.layout import Cluster
    from trnsim.plan.serve import ServeError, load
    from trnsim.plan.serve import plan as run

    m = load(model)
    if tp is not None:
        return run(m, system, tp=tp, dp=dp, batch=batch, **knobs)
    R = Cluster(system, 1, knobs["lnc"]).ranks_per_node
    best, last = None, None
    for t in (d for d in range(1, R + 1) if R % d == 0):
        try:
            p = run(m, system, tp=t, dp=dp, batch=batch, **knobs)
        except ServeError as e:
            last = e  # the widest layout's reason is the one to show
            continue
        if best is None or p.tpot_ns < best.tpot_ns:
            best = p
    if best is None:
        raise last
    return best


def _table(p, chosen: bool = False):
    from rich.table import Table

    s, d = p.setup, p.to_dict()
    lay = f"TP{s.tp} DP{s.dp}" + (f" EP{s.ep}" if s.ep > 1 else "") + (f" CP{s.cp}" if s.cp > 1 else "")
    t = Table(title=f"{p.model.name} served on {p.cluster.short()}: {lay}" + (" (lowest TPOT that fits)" if chosen else ""),
              show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold")
    t.add_column()
    spec = f", speculation {s.speculation.draft} x{s.speculation.tokens} at {s.speculation.acceptance:.0%} " \
           f"({s.speculation.accepted_per_step:.2f} tokens/step)" if s.speculation else ""
    t.add_row("requests", f"batch {s.batch}, {s.input_len} in / {s.output_len} out, {s.weights} weights, {s.kv_dtype} KV, "
                          f"{s.engine}{spec}" + (f", prefix hit {s.prefix_hit:.0%}" if s.prefix_hit else ""))
    parts = lambda k: ", ".join(f"{n} {v:.3g}" for n, v in d[k].items() if v > 0)
    t.add_row("TTFT", f"{p.ttft_ms:.2f} ms  (prefill {parts('prefill_ms')} ms)")
    t.add_row("TPOT", f"{p.tpot_ms:.2f} ms  (decode step at {d['buckets']['decode'][-1]} tokens: {parts('decode_ms')} ms)")
    t.add_row("throughput", f"{p.output_tokens_per_s:,.0f} output tokens/s over {s.dp} replica(s); "
                            f"request {p.request_ns * 1e-9:.2f} s end to end")
    mem = ", ".join(f"{k} {v / GiB:.2f}" for k, v in p.memory.items())
    t.add_row("memory/rank", f"{sum(p.memory.values()) / GiB:.2f} of {p.capacity / GiB:.1f} GiB usable ({mem}); "
                             f"{p.kv_tokens:,} tokens of KV fit")
    b = p.buckets
    t.add_row("buckets", f"compiled {', '.join(map(str, b['compiled']))}; prompt padded to {b['prefill']} "
                         f"({b['prefill_padding']:.0%} waste), decode KV padding {b['decode_padding']:.0%}")
    if p.usd_per_hour:
        t.add_row("cost", f"${p.usd_per_hour:,.2f}/h, ${p.usd_per_million_output_tokens:.3f} per million output tokens "
                          f"(price: {p.cluster.system.price_status})")
    else:
        t.add_row("cost", f"no price for {p.cluster.system.name} in the catalog (--price USD gives one)")
    t.add_row("timed by", ", ".join(f"{k}: {v}" for k, v in p.timed_by.items()))
    return t


def _ops_table(p):
    from rich import box
    from rich.table import Table

    t = Table(title="one decode step at the largest bucket, one rank, per layer", box=box.SIMPLE_HEAD)
    for col in ("op", "kind", "shape", "layers", "MB", "us"):
        t.add_column(col, justify="left" if col in ("op", "kind", "shape") else "right", no_wrap=True)
    for o in p.decode.ops:
        batch = f"{o['batch']}x" if o["batch"] > 1 else ""
        shape = f"{batch}[{o['m']},{o['k']}]x[{o['k']},{o['n']}]" if o["kind"] in ("matmul", "attention") else "-"
        t.add_row(o["name"], o["kind"], shape, str(o["layers"]), f"{o['bytes'] / 1e6:,.2f}", f"{o['ns'] / 1e3:,.1f}")
    return t


def tour(console) -> None:
    """One serving plan: Llama-3.1-8B on a trn2.48xlarge at TP8, as the vLLM Neuron tutorial serves it."""
    from trnsim.plan.serve import plan as run

    console.print(_table(run("llama3-8b", "trn2.48xlarge", tp=8, dp=0, batch=2, input_len=512, output_len=128)))
    _tour_engine(console)


def _tour_engine(console) -> None:
    """`trnsim serve`: the engine simulated request by request at rising load, TTFT's knee drawn as bars."""
    from trnsim.plan.serve import engine as E

    console.print("[bold]trnsim serve[/] llama3-8b --rate 2,6,18 (one TP8 replica, 8 sequences at once, "
                  "60 requests of 512 in / 128 out):")
    runs = [(rate, E.simulate("llama3-8b", "trn2.48xlarge", E.requests(60, rate, 512, 128, 0), max_num_seqs=8,
                              tp=8, dp=1, ep=1, lnc=None, weights="bf16", kv_dtype="bf16").summary(None, None))
            for rate in (2, 6, 18)]
    worst = max(s["ttft_ms"]["p50"] for _, s in runs)
    for rate, s in runs:
        bar = "█" * max(1, round(16 * s["ttft_ms"]["p50"] / worst))
        console.print(f"  {rate:>2} req/s {s['output_tokens_per_s']:5,.0f} tok/s  "
                      f"TPOT p50 {s['tpot_ms']['p50']:4.1f} ms  TTFT p50 {s['ttft_ms']['p50']:6,.0f} ms [magenta]{bar}[/]")


def _floats(text: str, option: str) -> list[float]:
    try:
        out = [float(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise OptionError(option, f"expected comma-separated numbers, got {text!r}") from None
    if any(not x > 0 for x in out):
        raise OptionError(option, f"rates must be positive, got {text!r}")
    return out


def _load_table(runs, model, instance, tp, max_num_seqs):
    from rich import box
    from rich.table import Table

    t = Table(title=f"{model} on {instance} TP{tp}, max {max_num_seqs} sequences: throughput against load",
              box=box.SIMPLE_HEAD, title_justify="left")
    for col in ("arrivals/s", "tokens/s", "goodput tok/s", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "E2E p50"):
        t.add_column(col, justify="right")
    for r in runs:
        t.add_row(f"{r['rate']:g}", f"{r['output_tokens_per_s']:,.0f}", f"{r['goodput_tokens_per_s']:,.0f}",
                  *(f"{r[k][p]:,.1f}" for k, p in (("ttft_ms", "p50"), ("ttft_ms", "p99"), ("tpot_ms", "p50"),
                                                   ("tpot_ms", "p99"), ("e2e_ms", "p50"))))
    return t


def _lengths(text: str, option: str):
    """`512` or `128:1024` (a uniform range)."""
    lo, _, hi = str(text).partition(":")
    try:
        a, b = int(lo), int(hi or lo)
    except ValueError:
        raise OptionError(option, f"expected N or LOW:HIGH token counts, got {text!r}") from None
    return a if a == b else (a, b)


@cli.command("serve")
@click.argument("model")
@click.option("--instance", default="trn2.48xlarge", show_default=True, help="Instance, UltraServer or GPU baseline.")
@click.option("--tp", type=int, default=8, show_default=True, help="Tensor parallel degree.")
@click.option("--dp", type=int, default=1, show_default=True, help="Replicas (requests dealt round-robin).")
@click.option("--ep", type=int, default=1, show_default=True, help="Expert parallel degree of MoE models.")
@click.option("--max-num-seqs", type=click.IntRange(min=1), default=8, show_default=True,
              help="Most sequences a replica runs at once (the compiled batch).")
@click.option("--rate", "rates", default="1", show_default=True,
              help="Arrivals per second (Poisson); several, comma-separated, for throughput against load.")
@click.option("--requests", "n", type=click.IntRange(min=1), default=200, show_default=True, help="Requests to send.")
@click.option("--input-len", default="1024", show_default=True, help="Prompt tokens: N or LOW:HIGH (uniform).")
@click.option("--output-len", default="256", show_default=True, help="Output tokens: N or LOW:HIGH (uniform).")
@click.option("--trace", type=click.Path(dir_okay=False), help="CSV or JSONL of arrival_s,input_len,output_len instead.")
@click.option("--concurrency", type=click.IntRange(min=1),
              help="A closed loop of this many users instead of arrivals, each sending its next request when "
                   "its last one finishes (as benchmark clients do).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of arrivals and lengths.")
@click.option("--chunk", type=click.IntRange(min=0), default=0, show_default=True,
              help="Chunked prefill: prompt tokens per step beside the decodes (0: whole prompts).")
@click.option("--kv-blocks", type=click.IntRange(min=1), help="Cap the KV blocks per replica [all that fit].")
@click.option("--prefill-replicas", type=click.IntRange(min=0), default=0, show_default=True,
              help="Disaggregate: this many of the --dp replicas only encode prompts, the rest only decode.")
@click.option("--ttft-slo", type=click.FloatRange(min=0, min_open=True), help="TTFT objective in ms, for goodput.")
@click.option("--tpot-slo", type=click.FloatRange(min=0, min_open=True), help="TPOT objective in ms, for goodput.")
@click.option("--lnc", type=int, help="Logical NeuronCore size [2 on Trn2/Trn3, 1 on Trn1].")
@click.option("--weights", type=click.Choice(WEIGHTS), default="bf16", show_default=True, help="Weight dtype.")
@click.option("--kv-dtype", type=click.Choice(["bf16", "fp8"]), default="bf16", show_default=True, help="KV dtype.")
@click.option("--engine", type=click.Choice(["vllm-neuron", "transformers-neuronx"]), default="vllm-neuron",
              show_default=True, help="Serving engine whose fixed costs apply.")
@click.option("--chart", type=click.Path(dir_okay=False), help="Write a PNG of throughput and latency against load.")
@click.option("--progress/--no-progress", default=True, help="Show a progress bar.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def serve_cmd(model, instance, tp, dp, ep, max_num_seqs, rates, n, input_len, output_len, trace, concurrency, seed,
              chunk, kv_blocks,
              prefill_replicas, ttft_slo, tpot_slo, lnc, weights, kv_dtype, engine, chart, progress, as_json):
    """Simulate a vLLM-Neuron-style engine serving MODEL: TTFT, TPOT and end-to-end percentiles, throughput,
    goodput under SLOs, from arrival rates (seeded) or a request trace."""
    from trnsim.cli import output_file
    from trnsim.plan.serve import engine as E

    output_file("--chart", chart)
    if concurrency and trace:
        raise OptionError("--concurrency", "a closed loop makes its own arrivals: give it or --trace, not both")
    loads = [None] if trace or concurrency else _nonempty("--rate", _floats(rates, "--rate"))
    if chart and len(loads) < 2:
        raise OptionError("--chart", "plots throughput and latency against load: give several --rate values")
    lengths = None if trace else (_lengths(input_len, "--input-len"), _lengths(output_len, "--output-len"))
    todos = [E.read_trace(trace)] if trace else [E.requests(n, r or 1.0, *lengths, seed) for r in loads]
    knobs = dict(tp=tp, dp=dp, ep=ep, lnc=lnc, weights=weights, kv_dtype=kv_dtype, engine=engine)
    run = lambda todo, cb: E.simulate(model, instance, todo, max_num_seqs=max_num_seqs, chunk=chunk,
                                      kv_blocks=kv_blocks, prefill_replicas=prefill_replicas, users=concurrency or 0,
                                      progress=cb, **knobs)
    if progress and not as_json:
        from rich.progress import Progress

        with Progress(transient=True) as bar:
            job = bar.add_task(f"{sum(map(len, todos))} requests", total=sum(map(len, todos)))
            results = [run(todo, lambda k: bar.advance(job, k)) for todo in todos]
    else:
        results = [run(todo, None) for todo in todos]
    runs = [{"rate": r, **res.summary(ttft_slo, tpot_slo)} for r, res in zip(loads, results)]
    if chart:
        E.chart(runs, chart, f"{model} on {instance} TP{tp}, max {max_num_seqs} sequences")
    head = {"model": model, "system": instance, "layout": {"tp": tp, "dp": dp, "ep": ep}, "seed": seed,
            "concurrency": concurrency}
    if as_json:
        click.echo(emit_json({**head, **runs[0]} if len(runs) == 1 else {**head, "runs": runs}))
        return
    if len(runs) > 1:
        _console().print(_load_table(runs, model, instance, tp, max_num_seqs))
        return
    s = runs[0]
    from rich import box
    from rich.table import Table

    t = Table(title=f"{model} on {instance} TP{tp} x{dp}: {s['requests']} requests, max {max_num_seqs} sequences, "
                    f"{s['kv_blocks']:,} KV blocks per replica", box=box.SIMPLE_HEAD, title_justify="left")
    for col in ("ms", "mean", "p50", "p90", "p99"):
        t.add_column(col, justify="right")
    for k in ("ttft_ms", "tpot_ms", "e2e_ms"):
        t.add_row(k[:-3].upper(), *(f"{s[k][p]:,.2f}" for p in ("mean", "p50", "p90", "p99")))
    con = _console()
    con.print(t)
    slo = " and ".join(x for x in (ttft_slo and f"TTFT <= {ttft_slo} ms", tpot_slo and f"TPOT <= {tpot_slo} ms") if x)
    con.print(f"throughput {s['output_tokens_per_s']:,.0f} output tokens/s, {s['requests_per_s']:.2f} requests/s over "
              f"{s['duration_s']:.1f} s; steps {s['steps']}, preemptions {s['preemptions']}")
    if slo:
        con.print(f"goodput ({slo}): {s['goodput_requests_per_s']:.2f} requests/s, "
                  f"{s['goodput_tokens_per_s']:,.0f} tokens/s, {s['slo_attainment']:.0%} of requests")


@serve.command("sweep")
@click.argument("model")
@click.option("--instances", default="trn1.32xlarge,trn2.48xlarge,Trn3 Gen2 UltraServer,p5.48xlarge", show_default=True,
              help="Comma-separated systems.")
@click.option("--batches", default="1,2,4,8,16,32,64", show_default=True, help="Comma-separated batch sizes.")
@click.option("--ttft-slo", type=click.FloatRange(min=0, min_open=True), help="Reject layouts whose TTFT exceeds this (ms).")
@click.option("--tpot-slo", type=click.FloatRange(min=0, min_open=True), help="Reject layouts whose TPOT exceeds this (ms).")
@click.option("--by", type=click.Choice(["dollar", "chip"]), default="dollar", show_default=True,
              help="Rank by output tokens per dollar or per chip-second.")
@click.option("--max-tp", type=click.IntRange(min=1), default=64, show_default=True, help="Largest TP degree tried.")
@click.option("--top", type=int, default=10, show_default=True, help="Rows to print.")
@click.option("--price", "prices", multiple=True, metavar="[SYSTEM=]USD", help=PRICE_HELP)
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), help="Write every row to this CSV.")
@click.option("--progress/--no-progress", default=True, help="Show a progress bar.")
@_serve_options
def serve_sweep(model, instances, batches, ttft_slo, tpot_slo, by, max_tp, top, prices, csv_path, progress, as_json,
                ep, **knobs):
    """Rank serving layouts and batches of MODEL over instance types under TTFT/TPOT objectives."""
    from trnsim.cli import output_file
    from trnsim.cli.plan import _prices
    from trnsim.plan.serve import load
    from trnsim.plan.serve import sweep as S

    if ep != 1:
        raise OptionError("--ep", "the sweep tries every EP degree that divides the experts; leave --ep out")
    output_file("--csv", csv_path)
    systems = _nonempty("--instances", _words(instances))
    sizes = _nonempty("--batches", _ints(batches, "--batches"))
    kw = {k: v for k, v in _knobs(ep=1, **knobs).items() if k != "ep"}
    lnc = kw.pop("lnc")
    m = load(model)
    args = dict(ttft_slo=ttft_slo, tpot_slo=tpot_slo, by=by, max_tp=max_tp, lnc=lnc, prices=_prices(prices, systems), **kw)
    if progress and not as_json:
        from rich.progress import Progress

        total = len(S.candidates(m, systems, sizes, max_tp, lnc))
        with Progress(transient=True) as bar:
            job = bar.add_task(f"{total} layouts", total=total)
            result = S.sweep(m, systems, sizes, progress=lambda n: bar.advance(job, n), **args)
    else:
        result = S.sweep(m, systems, sizes, **args)
    if csv_path:
        result.write_csv(csv_path)
    if as_json:
        click.echo(emit_json(result.to_dict()))
        return
    from rich import box
    from rich.table import Table

    slo = " and ".join(x for x in (ttft_slo and f"TTFT <= {ttft_slo:g} ms", tpot_slo and f"TPOT <= {tpot_slo:g} ms") if x)
    t = Table(title=f"{m.name}: {len(result.ranked)} of {len(result.rows)} layouts" + (f" meet {slo}" if slo else " fit")
                    + f", by tokens per {by}", box=box.SIMPLE_HEAD, title_justify="left")
    for col in ("#", "system", "layout", "batch", "TTFT ms", "TPOT ms", "tokens/s", "tok/chip/s", "tokens/$", "$/Mtok"):
        t.add_column(col, justify="left" if col in ("system", "layout") else "right", no_wrap=True)
    shown = result.ranked[:top] + [r for r in result.best_per_system().values() if r["rank"] > top]
    for r in shown:
        lay = f"TP{r['tp']}" + (f" EP{r['ep']}" if r["ep"] > 1 else "") + f" x{r['dp']}"
        usd = r["usd_per_million_output_tokens"]
        t.add_row(str(r["rank"]), r["system"], lay, str(r["batch"]), f"{r['ttft_ms']:,.1f}", f"{r['tpot_ms']:.2f}",
                  f"{r['output_tokens_per_s']:,.0f}", f"{r['output_tokens_per_chip_s']:,.1f}",
                  f"{r['output_tokens_per_usd']:,.0f}" if usd else "-", f"{usd:.3f}" if usd else "-")
    from rich.console import Console

    con = Console(width=max(Console().width, 140))
    con.print(t)
    for system in dict.fromkeys(r["system"] for r in shown):
        status = next(r["price_status"] for r in result.ranked if r["system"] == system)
        con.print(f"price of {system}: {status}")
    missing = [s for s in systems if s not in result.best_per_system()]
    for s in missing:
        why = next((r["reason"] for r in result.rejected if r["system"] == s), "no candidate")
        con.print(f"{s}: no layout qualifies; e.g. {why}")
    if result.rejected:
        con.print("rejected: " + ", ".join(f"{rule} {n}" for rule, n in result.rejections().items())
                  + "  (--json or --csv for each layout's reason)")
