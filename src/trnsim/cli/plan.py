"""`trnsim plan`: step time, MFU, memory and cost of a training layout; `plan sweep` ranks layouts."""
from __future__ import annotations

import click

from trnsim.cli import CHARTS_MISSING, charts_installed, cli, emit_json, output_file
from trnsim.errors import OptionError
from trnsim.specs import DEFAULT_INSTANCE

GiB = 2.0**30


class _PlanGroup(click.Group):
    """`trnsim plan MODEL ...` runs the hidden `one` command; `plan sweep` and `plan compare` are subcommands."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["one", *args]
        return super().parse_args(ctx, args)

    def format_options(self, ctx, formatter):
        """`plan --help` lists the options of `plan MODEL` as well as the subcommands."""
        super().format_options(ctx, formatter)
        one = self.commands["one"]
        rows = [r for p in one.get_params(ctx) if (r := p.get_help_record(ctx)) and "--help" not in r[0]]
        with formatter.section("Options of plan MODEL"):
            formatter.write_dl(rows)


class _PlanOne(click.Command):
    """`plan MODEL`: its usage line names the form a user types, not the hidden command's name."""

    def format_usage(self, ctx, formatter):
        formatter.write_usage(ctx.parent.command_path, "MODEL [OPTIONS]")


def _console():
    """The terminal's console: tables fit its width, wrapping text columns, never cutting numbers."""
    from rich.console import Console

    return Console()


def _ints(text: str, option: str) -> list[int]:
    try:
        return [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise OptionError(option, f"expected comma-separated integers, got {text!r}") from None


def _nonempty(option: str, items: list) -> list:
    if not items:
        raise OptionError(option, "is empty: give at least one value")
    return items


PRICE_HELP = "USD per node-hour instead of the catalog's: USD (the only system) or SYSTEM=USD (repeatable)."


def tco_line(t, usd_per_million: float, what: str) -> str:
    """The owned-chips cost line of `--tco`, for training and serving plans alike."""
    return (f"[bold]TCO[/bold]  ${t.usd_per_hour:,.2f}/h for {t.chips} chips owned (${t.capex_usd:,.0f} each over "
            f"{t.lifetime_years:g} years, {t.power_w:g} W x PUE {t.pue:g} at ${t.usd_per_kwh:g}/kWh; chips only): "
            f"${usd_per_million:.3f} per million {what}")


def _priced_system(instance: str, prices):
    """The system of --instance with --price applied: USD, or SYSTEM=USD naming that system."""
    from trnsim import specs
    from trnsim.plan.step import with_price

    system = specs.system(instance)
    priced = _prices(prices, [system.name])
    if set(priced) - {system.name}:
        raise OptionError("--price", f"names {', '.join(set(priced) - {system.name})}; this plan is on {system.name}")
    return with_price(system, priced.get(system.name))


def _prices(items, systems: list[str]) -> dict[str, float]:
    """--price [SYSTEM=]USD, the one form of every plan command -> {system: USD per node-hour}; a bare USD
    needs a single system."""
    from trnsim import specs

    out = {}
    for item in items:
        name, _, usd = item.rpartition("=")
        try:
            price = float(usd)
        except ValueError:
            price = 0.0
        if not price > 0:
            raise OptionError("--price", f"expected USD or SYSTEM=USD with a positive price, got {item!r}")
        if not name.strip():
            if len(systems) != 1:
                raise OptionError("--price", f"{item!r} names no system and {len(systems)} are planned; "
                                             "write SYSTEM=USD")
            name = systems[0]
        out[specs.system(name.strip()).name] = price
    return out


def _words(text: str) -> list[str]:
    return [x.strip() for x in str(text).split(",") if x.strip()]


def _recipe_options(f):
    opts = [
        click.option("--seq", type=int, help="Sequence length [model's pretraining length]."),
        click.option("--global-batch", type=int, help="Sequences per step [1024]."),
        click.option("--zero1/--no-zero1", default=None, help="Shard optimizer states over DP [on]."),
        click.option("--sp/--no-sp", default=None, help="Sequence parallelism [on]."),
        click.option("--lnc", type=int, help="Logical NeuronCore size [2 on Trn2/Trn3, 1 on Trn1]."),
        click.option("--dtype", type=click.Choice(["bf16", "fp16", "fp8", "fp32", "mxfp8", "mxfp4"]),
                     help="Compute dtype [bf16]; MX formats on Trn3."),
        click.option("--json", "as_json", is_flag=True, help="Print JSON."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


@cli.group(cls=_PlanGroup)
def plan():
    """Plan a training run: `trnsim plan MODEL --instance trn2.48xlarge --nodes 8 --tp 32 --pp 4`.

    MODEL is a preset (llama3-8b, llama3-70b, mixtral-8x7b, ...) or a TOML/JSON/YAML model file.
    Every knob left out follows NxD training recipes. Collectives are timed by trnsim.fabric;
    Trainium compute by simulated kernels per op shape (core timing model), GPU compute at a
    declared matmul efficiency (see docs/planning.md).
    """


@plan.command("one", cls=_PlanOne, hidden=True)
@click.argument("model")
@click.option("--instance", default=DEFAULT_INSTANCE, show_default=True, help="Instance or UltraServer.")
@click.option("--nodes", type=int, default=1, show_default=True, help="How many of them.")
@click.option("--tp", type=int, help="Tensor parallel degree [fastest valid].")
@click.option("--pp", type=int, help="Pipeline stages [fastest valid].")
@click.option("--vpp", type=int, default=1, show_default=True, help="Virtual stages per rank (>1: interleaved).")
@click.option("--cp", type=int, default=1, show_default=True, help="Context parallel degree.")
@click.option("--ep", type=int, default=1, show_default=True, help="Expert parallel degree.")
@click.option("--micro-batch", type=int, help="Sequences per micro-batch [1].")
@click.option("--checkpointing", type=click.Choice(["none", "selective", "full"]), help="Activation recompute [selective].")
@click.option("--tokens", type=click.FloatRange(min=0, min_open=True), default=1e12, show_default=True,
              help="Tokens to train, for time and cost.")
@click.option("--price", "prices", multiple=True, metavar="[SYSTEM=]USD", help=PRICE_HELP)
@click.option("--ops", "show_ops", is_flag=True, help="Also list one layer's ops: shapes, FLOPs, bytes, times.")
@click.option("--tco", is_flag=True, help="Also cost the chips as owned: capex over their life, power x PUE.")
@click.option("--tco-figures", metavar="NAME=VALUE,...",
              help="Override TCO figures: capex_usd, power_w, pue, usd_per_kwh, lifetime_years.")
@_recipe_options
def one(model, instance, nodes, tp, pp, vpp, cp, ep, tokens, prices, show_ops, as_json, lnc, tco=False,
        tco_figures=None, **recipe):
    """One layout of MODEL (`trnsim plan MODEL ...`): step time, throughput, MFU, memory, cost."""
    from trnsim import plan as P

    m = P.model(model)
    cluster = P.Cluster(_priced_system(instance, prices), nodes, lnc)
    rec = P.Recipe.nxd(m, **recipe)
    p = _best(m, cluster, rec, tp, pp, vpp, cp, ep)
    owned = None
    if tco or tco_figures:
        from trnsim.plan import tco as T

        owned = T.tco(cluster.system, cluster.nodes, T.parse(tco_figures))
    if as_json:
        d = p.to_dict(tokens)
        if owned:
            d["tco"] = {**owned.to_dict(), "usd_per_million_tokens": owned.usd_per_million(p.tokens_per_s),
                        "train_usd": owned.usd_per_hour * p.hours_to_train(tokens)}
        click.echo(emit_json(d))
        return
    con = _console()
    con.print(_table(p, tokens, chosen=tp is None or pp is None))
    if owned:

        con.print(tco_line(owned, owned.usd_per_million(p.tokens_per_s), "tokens")
                  + f"; {tokens:.3g} tokens: ${owned.usd_per_hour * p.hours_to_train(tokens):,.0f}")
    if show_ops:
        con.print(_ops_table(p))


def _ops_table(p):
    from rich import box
    from rich.table import Table

    t = Table(title="one layer, one micro-batch, one rank (collectives: time left exposed after overlap)",
              box=box.SIMPLE_HEAD)
    for col in ("op", "kind", "shape", "GFLOP", "MB", "fwd us", "bwd us"):
        t.add_column(col, justify="left" if col in ("op", "kind", "shape") else "right", no_wrap=True)
    for o in p.ops:
        batch = f"{o['batch']}x" if o["batch"] > 1 else ""
        shape = f"{batch}[{o['m']},{o['k']}]x[{o['k']},{o['n']}]" if o["kind"] in ("matmul", "attention") else "-"
        if o["kind"] == "collective":  # exposed time after overlap, over the layer's group
            shape = f"{o['collective']} over {o['group']}"
        t.add_row(o["name"], o["kind"], shape, f"{o['flops'] / 1e9:,.1f}", f"{o['bytes'] / 1e6:,.1f}",
                  f"{o['forward_ns'] / 1e3:,.1f}", f"{o['backward_ns'] / 1e3:,.1f}")
    return t


def _best(m, cluster, rec, tp, pp, vpp, cp, ep):
    """The given layout, or the fastest valid one over the degrees left out."""
    from trnsim.plan import Layout, LayoutError, enumerate_layouts
    from trnsim.plan.layout import check_degree
    from trnsim.plan.step import DEFAULT

    for field, v in (("tp", tp), ("cp", cp), ("pp", pp), ("ep", ep), ("vpp", vpp)):
        if v is not None:  # a degree that breaks a rule on its own is named before any search
            check_degree(m, cluster, rec, field, v)
    if tp is not None and pp is not None:
        return DEFAULT.evaluate(m, cluster, Layout(tp, pp, 0, cp, ep, vpp), rec)
    best, first_error = None, None
    for lay in enumerate_layouts(m, cluster, rec, vpps=(vpp,), cps=(cp,)):
        if (tp is not None and lay.tp != tp) or (pp is not None and lay.pp != pp) or lay.ep != ep:
            continue
        try:
            p = DEFAULT.evaluate(m, cluster, lay, rec)
        except LayoutError as e:
            first_error = first_error or e
            continue
        if best is None or p.tokens_per_s > best.tokens_per_s:
            best = p
    if best is None:
        raise first_error or LayoutError("tp", f"no layout of {m.name} fits {cluster.short()}")
    return best


def _table(p, tokens: float, chosen: bool = False):
    from rich.table import Table

    t = Table(title=f"{p.model.name} on {p.cluster.short()}: {p.layout.short()}"
                    + (" (fastest valid)" if chosen else ""), show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold")
    t.add_column()
    r = p.recipe
    t.add_row("recipe", f"seq {r.seq}, global batch {r.global_batch}, micro-batch {r.micro_batch}, "
                        f"{p.layout.schedule}, ZeRO-1 {'on' if r.zero1 else 'off'}, SP {'on' if r.sp else 'off'}, "
                        f"{r.checkpointing} checkpointing, {r.dtype}")
    parts = ", ".join(f"{k} {v * 1e-9:.3g}" for k, v in p.breakdown.items() if v > 0)
    t.add_row("step", f"{p.step_ns * 1e-9:.3f} s  ({parts} s)")
    t.add_row("throughput", f"{p.seqs_per_s:.2f} seq/s, {p.tokens_per_s:,.0f} tokens/s, MFU {p.mfu:.1%}")
    mem = ", ".join(f"{k} {v / GiB:.2f}" for k, v in p.memory.items())
    t.add_row("memory/rank", f"{sum(p.memory.values()) / GiB:.2f} of {p.capacity / GiB:.0f} GiB  ({mem})")
    if p.price_per_hour:
        t.add_row("cost", f"${p.price_per_hour:,.2f}/h, ${p.usd_per_million_tokens:.3f} per million tokens; "
                          f"{tokens:.3g} tokens: {p.hours_to_train(tokens) / 24:,.1f} days, ${p.usd_to_train(tokens):,.0f}")
        t.add_row("price", f"{p.price_status} (--price USD sets your own)")
    else:
        t.add_row("cost", f"no price for {p.cluster.system.name} in the catalog; {tokens:.3g} tokens: "
                          f"{p.hours_to_train(tokens) / 24:,.1f} days")
    t.add_row("timed by", f"compute: {p.models['compute']}, communication: {p.models['comm']}")
    return t


@plan.command()
@click.argument("model")
@click.option("--instances", default="trn1.32xlarge,trn2.48xlarge", show_default=True, help="Comma-separated systems.")
@click.option("--nodes", default="8,16,32", show_default=True, help="Comma-separated cluster sizes.")
@click.option("--by", type=click.Choice(["tokens", "cost"]), default="tokens", show_default=True,
              help="Rank by tokens/s or by $ per token.")
@click.option("--micro-batch", "micro_batches", default="1", show_default=True, help="Comma-separated micro-batch sizes.")
@click.option("--checkpointing", default="selective", show_default=True, help="Comma-separated modes to try.")
@click.option("--top", type=int, default=10, show_default=True, help="Rows to print.")
@click.option("--workers", type=click.IntRange(min=1), help="Local processes [all cores].")
@click.option("--price", "prices", multiple=True, metavar="[SYSTEM=]USD", help=PRICE_HELP)
@click.option("--ray", "ray_address", help="Run on a Ray cluster: auto, local or host:port.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), help="Write every row to this CSV.")
@click.option("--chart", type=click.Path(dir_okay=False), help="Write a PNG of the cost/throughput frontier.")
@click.option("--progress/--no-progress", default=True, help="Show a progress bar.")
@_recipe_options
def sweep(model, instances, nodes, by, micro_batches, checkpointing, top, workers, prices, ray_address, csv_path,
          chart, progress, as_json, lnc, **recipe):
    """Rank every valid layout of MODEL over instance types and cluster sizes."""
    from trnsim.plan import model as load_model
    from trnsim.plan import sweep as S

    output_file("--csv", csv_path)
    output_file("--chart", chart)
    if chart and not charts_installed():
        raise OptionError("--chart", CHARTS_MISSING)
    m = load_model(model)
    systems = _nonempty("--instances", _words(instances))
    todo = S.tasks(m, systems, _nonempty("--nodes", _ints(nodes, "--nodes")),
                   lnc=lnc, micro_batches=_nonempty("--micro-batch", _ints(micro_batches, "--micro-batch")),
                   checkpointing=_nonempty("--checkpointing", _words(checkpointing)), prices=_prices(prices, systems),
                   **{k: v for k, v in recipe.items() if v is not None})
    kwargs = dict(by=by, workers=workers, ray=ray_address, candidates=todo)
    if progress and not as_json:
        from rich.progress import Progress

        with Progress(transient=True) as bar:
            job = bar.add_task(f"{len(todo)} layouts", total=len(todo))
            result = S.sweep(m, (), (), progress=lambda n: bar.advance(job, n), **kwargs)
    else:
        result = S.sweep(m, (), (), **kwargs)
    if csv_path:
        result.write_csv(csv_path)
    if chart:
        result.chart(chart)
    if as_json:
        click.echo(emit_json(result.to_dict()))
        return
    from rich import box
    from rich.table import Table

    from trnsim.plan.compare import short

    t = Table(title=f"{m.name}: {len(result.ranked)} valid of {len(todo)} layouts, by {by}", box=box.SIMPLE_HEAD)
    for col in ("#", "system", "nodes", "layout", "mb", "ckpt", "tokens/s", "MFU", "GiB", "$/Mtok"):
        t.add_column(col, justify="left" if col in ("system", "layout", "ckpt") else "right", no_wrap=True)
    for i, r in enumerate(result.ranked[:top], 1):
        cost = r["usd_per_million_tokens"]
        t.add_row(str(i), r["system"], str(r["nodes"]), short(r), str(r["micro_batch"]), r["checkpointing"],
                  f"{r['tokens_per_s']:,.0f}", f"{r['mfu']:.1%}", f"{r['memory_gib']:.1f}", f"{cost:.3f}" if cost else "-")
    con = _console()
    con.print(t)
    statuses = {r["system"]: r["price_status"] for r in result.ranked[:top]}
    for system, status in statuses.items():
        con.print(f"price of {system}: {status}")
    if result.unranked:
        con.print("rejected: " + ", ".join(f"{rule} {n}" for rule, n in result.rejections().items())
                  + "  (--json or --csv for each layout's reason)")


@plan.command()
@click.argument("model")
@click.option("--systems", "entries", default="trn1.32xlarge:32,trn2.48xlarge:8,Trn3 Gen2 UltraServer:1",
              show_default=True, help="Comma-separated SYSTEM:NODES.")
@click.option("--tokens", type=click.FloatRange(min=0, min_open=True), default=1e12, show_default=True,
              help="Tokens to train.")
@click.option("--price", "prices", multiple=True, metavar="[SYSTEM=]USD", help=PRICE_HELP)
@_recipe_options
def compare(model, entries, tokens, prices, as_json, lnc, **recipe):
    """Time and cost to train MODEL on several systems, each with its fastest valid layout."""
    from trnsim.plan import model as load_model
    from trnsim.plan.compare import compare as run

    pairs = []
    for e in _words(entries):
        name, _, n = e.rpartition(":")
        if not name or not n.isdigit() or int(n) < 1:
            raise OptionError("--systems", f"expected SYSTEM:NODES with NODES >= 1, got {e!r}")
        pairs.append((name, int(n)))
    _nonempty("--systems", pairs)
    rows = run(load_model(model), pairs, tokens, lnc=lnc, prices=_prices(prices, [n for n, _ in pairs]),
               **{k: v for k, v in recipe.items() if v is not None})
    if as_json:
        click.echo(emit_json(rows))
        return
    _console().print(_compare_table(model, tokens, rows))


def _compare_table(model: str, tokens: float, rows: list[dict]):
    from rich import box
    from rich.table import Table

    t = Table(title=f"{model}: {tokens:.3g} tokens, each system at its fastest valid layout", title_justify="left",
              collapse_padding=True, pad_edge=False, box=box.SIMPLE_HEAD, expand=True)
    cells = []
    for r in rows:
        if r["layout"] is None:
            cells.append([r["system"], str(r["nodes"]), str(r["chips"]), f"none fits: {r['reason']}", *[""] * 5])
            continue
        price = f"{r['usd_per_hour']:,.2f}" if r["usd_per_hour"] else "-"
        cost = f"${r['usd'] / 1e6:,.2f}M" if r["usd"] else "-"
        cells.append([r["system"], str(r["nodes"]), str(r["chips"]), r["layout"], f"{r['tokens_per_s']:,.0f}",
                      f"{r['mfu']:.1%}", f"{r['days']:,.1f}", price, cost])
    for i, col in enumerate(("system", "nodes", "chips", "layout", "tokens/s", "MFU", "days", "$/h", "cost")):
        words = [w for row in cells for w in row[i].split()] + [col]
        text = col in ("system", "layout")  # text wraps between words; numbers are never cut
        t.add_column(col, justify="left" if text else "right", no_wrap=not text, overflow="fold",
                     ratio={"system": 2, "layout": 1}.get(col),
                     min_width=max(map(len, words)) if text else max(len(row[i]) for row in cells + [[col] * 10]))
    for row in cells:
        t.add_row(*row)
    from rich.console import Group
    from rich.text import Text

    notes = [Text(f"price of {r['system']}: {r.get('price_status') or 'none'}") for r in rows]
    return Group(t, *notes)


@plan.command("models")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def models(as_json):
    """List the model presets MODEL can name, with their shapes and where they were published."""
    import dataclasses

    from trnsim.plan import model as load_model
    from trnsim.plan import presets

    rows = [{**dataclasses.asdict(m), "params": m.params} for m in map(load_model, presets())]
    if as_json:
        click.echo(emit_json(rows))
        return
    from rich import box
    from rich.table import Table

    t = Table(title="model presets (or give a TOML/JSON/YAML model file; --json adds each one's source)",
              title_justify="left", box=box.SIMPLE_HEAD)
    for col in ("name", "params", "layers", "hidden", "heads", "kv", "ffn", "experts", "vocab", "seq"):
        t.add_column(col, justify="left" if col == "name" else "right", no_wrap=True)
    for r in rows:
        experts = f"{r['experts']} (top {r['top_k']})" if r["experts"] > 1 else "-"
        t.add_row(r["name"], f"{r['params'] / 1e9:,.1f}B", *(str(r[k]) for k in ("layers", "hidden", "heads", "kv_heads", "ffn")),
                  experts, f"{r['vocab']:,}", f"{r['seq']:,}")
    _console().print(t)


def tour(console) -> None:
    """One plan: Llama-3-8B on 32 trn1.32xlarge, the layout of AWS's published benchmark."""
    from trnsim.plan import plan as run

    console.print(_table(run("llama3-8b", "trn1.32xlarge", 32, tp=32), 1e12))
