"""Time and cost to train a model on several systems, each with its fastest valid layout.

Every figure traces to the catalog: the chip's peak and HBM (chips.toml), the system's chips,
links and on-demand price (systems.toml), the declared matmul efficiency (training.toml); time is
tokens / (tokens/s) and cost is hours x nodes x price per node-hour.
"""
from __future__ import annotations

from collections import Counter

from trnsim import specs
from trnsim.specs import training
from trnsim.plan import sweep as S
from trnsim.plan.layout import Layout
from trnsim.plan.step import with_price
from trnsim.plan.workload import Model


def compare(model: Model, pairs: list[tuple[str, int]], tokens: float, *, lnc: int | None = None,
            checkpointing=("selective", "full"), prices: dict[str, float] | None = None, **recipe) -> list[dict]:
    """One row per (system, nodes): the fastest valid layout and what training `tokens` costs
    (at the catalog's price, or the one `prices` gives by system name)."""
    rows = []
    prices = {specs.system(k).name: v for k, v in (prices or {}).items()}
    for name, nodes in pairs:
        system = with_price(specs.system(name), prices.get(specs.system(name).name))
        row = {"system": system.name, "nodes": nodes, "chips": nodes * system.chips, "chip": system.chip.name,
               "chip_bf16_tflops": system.chip.peak_flops("bf16") / 1e12,
               "matmul_efficiency": training.matmul_efficiency(system.chip),
               "usd_per_node_hour": system.price_usd_per_hour or None, "price_status": system.price_status,
               "tokens": tokens}
        result = S.sweep(model, [system.name], [nodes], workers=1, lnc=lnc, checkpointing=checkpointing,
                         prices={system.name: system.price_usd_per_hour} if system.name in prices else None,
                         **recipe)
        best = result.best
        if best is None:
            rows.append({**row, "layout": None, "reason": why_none(result.unranked)})
            continue
        hours = tokens / best["tokens_per_s"] / 3600
        price = system.price_usd_per_hour * nodes if system.price_usd_per_hour else None
        rows.append({**row, "layout": short(best), "micro_batch": best["micro_batch"],
                     "checkpointing": best["checkpointing"], "tokens_per_s": best["tokens_per_s"], "mfu": best["mfu"],
                     "hours": hours, "days": hours / 24, "usd_per_hour": price,
                     "usd": hours * price if price else None,
                     "usd_per_million_tokens": best["usd_per_million_tokens"]})
    return rows


def why_none(unranked: list[dict]) -> str:
    """What stopped every candidate: the rules broken, most frequent first (or the one reason)."""
    if len({r["reason"] for r in unranked}) == 1:
        return unranked[0]["reason"]
    fields = Counter(r["rule"] for r in unranked)
    return "no valid layout (" + ", ".join(f"{field} {n}x" for field, n in fields.most_common()) + ")"


def short(r: dict) -> str:
    """A sweep row's layout as `TP8 PP4x2 DP4 CP2`."""
    return Layout(**{k: r[k] for k in ("tp", "pp", "dp", "cp", "ep", "vpp")}).short()


def markdown(rows: list[dict]) -> str:
    """The comparison as a Markdown table (what docs/planning.md shows)."""
    head = ("| system | nodes | chips | layout | tokens/s | MFU | days | $/h | cost | price |\n"
            "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    lines = [head]
    for r in rows:
        if r["layout"] is None:
            lines.append(f"| {r['system']} | {r['nodes']} | {r['chips']} | none fits: {r['reason']} | | | | | | |")
            continue
        price = f"{r['usd_per_hour']:,.2f}" if r["usd_per_hour"] else "no price"
        cost = f"${r['usd'] / 1e6:,.2f}M" if r["usd"] else "-"
        lines.append(f"| {r['system']} | {r['nodes']} | {r['chips']} | {r['layout']} | {r['tokens_per_s']:,.0f} | "
                     f"{r['mfu']:.1%} | {r['days']:,.1f} | {price} | {cost} | {r['price_status']} |")
    return "\n".join(lines)
