"""`trnsim dtypes`: the NeuronCore's data types, and what a value becomes in each of them."""
from __future__ import annotations

import math

import click

from trnsim.cli import cli, emit_json


def _row(t, values, rounding, seed):
    """A type's format facts, and each value cast to it and read back as FP32."""
    import numpy as np

    from trnsim import numerics

    with np.errstate(over="ignore", invalid="ignore"):  # a value past FP32's range is inf: the table shows it
        got = numerics.cast(np.asarray(values, np.float32), t, rounding, rng=seed).astype(np.float32)
    return {"dtype": t.name, "layout": f"1-{t.exp}-{t.mant}" if t.name != "float8_e8m0fnu" else "0-8-0",
            "max": float(t.max), "overflow": t.overflow, "values": [float(v) for v in got]}


def _no_nan_notes(rows, values) -> list[str]:
    """For formats without a NaN (or Inf) encoding, say what a NaN or Inf input became."""
    notes = []
    for r in rows:
        odd = [(v, g) for v, g in zip(values, r["values"]) if not math.isfinite(v) and str(v) != str(g)]
        if odd:
            got = ", ".join(f"{v:g} -> {g:g}" for v, g in odd)
            notes.append(f"{r['dtype']} has no {'NaN' if any(math.isnan(v) for v, _ in odd) else 'Inf'} encoding: "
                         f"{got} (the cast trnsim applies, ml_dtypes' conversion)")
    return notes


# ignore_unknown_options: a negative value (`trnsim dtypes -5`) is a value, not an option
@cli.command(context_settings={"ignore_unknown_options": True})
@click.argument("values", nargs=-1, type=float)
@click.option("--rounding", type=click.Choice(["rne", "stochastic"]), default=None,
              help="Rounding for the casts (default: NEURON_RT_STOCHASTIC_ROUNDING_EN, else rne).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of stochastic rounding.")
@click.option("-j", "--json", "as_json", is_flag=True, help="Print JSON.")
def dtypes(values, rounding, seed, as_json):
    """Float types of the NeuronCore; with VALUES, what each value becomes in every type."""
    from trnsim import numerics

    rows = [_row(t, values, rounding, seed) for t in numerics.ALL if t.is_float]
    notes = _no_nan_notes(rows, values)
    if as_json:
        click.echo(emit_json({"rounding": rounding or numerics.rounding_mode(), "inputs": list(values), "types": rows,
                              "notes": notes}))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"rounding: {rounding or numerics.rounding_mode()}", title_justify="left")
    for col in ("dtype", "layout", "max", "overflow", *(f"{v:g}" for v in values)):
        table.add_column(col, justify="left" if col in ("dtype", "layout", "overflow") else "right", no_wrap=True)
    for r in rows:
        table.add_row(r["dtype"], r["layout"], f"{r['max']:.4g}", r["overflow"], *(f"{v:.5g}" for v in r["values"]))
    con = Console()
    con.print(table)
    for n in notes:
        con.print(f"[dim]note: {n}[/]")


def tour(con):
    """Why stochastic rounding exists: a bf16 accumulator fed 10,000 small increments."""
    import numpy as np

    from trnsim import numerics

    acc = {mode: np.zeros(64, numerics.bfloat16.np) for mode in ("rne", "stochastic")}
    exact, step, rng = np.float32(0), np.float32(1e-4), np.random.default_rng(7)
    for _ in range(10_000):
        exact += step
        for mode in acc:
            acc[mode] = numerics.cast(acc[mode].astype(np.float32) + step, "bfloat16", mode, rng=rng)
    con.print("Adding 1e-4 to a bf16 accumulator 10,000 times (64 accumulators):")
    con.print(f"  fp32 sum                 {exact:.4f}")
    con.print(f"  bf16, round-nearest-even {acc['rne'].astype(np.float32).mean():.4f}   [red]stalls: 1e-4 is under half a bf16 step[/]")
    con.print(f"  bf16, stochastic         {acc['stochastic'].astype(np.float32).mean():.4f}   [green]tracks fp32[/]"
              " (NEURON_RT_STOCHASTIC_ROUNDING_EN=1)", overflow="ignore", crop=False)
    con.print("  [dim]trnsim dtypes 0.1 300 1e-5: what values become in every Trainium float type[/]")
