"""`trnsim demo`: the newcomer's tour, a few real runs of what trnsim does."""
from __future__ import annotations

import contextlib
import functools
import importlib
import tempfile
import time

import click

from trnsim.cli import cli, emit_json
from trnsim.errors import OptionError

# (title, module with a `tour(console)` function), in the order a newcomer should meet them. A module may also
# have `tour_start()`, a context manager the demo enters before the first section (slow runs go on in other
# processes while the earlier sections print); what it yields is handed on as `tour(console, started)`.
SECTIONS: list[tuple[str, str]] = [
    ("The hardware: trnsim ls, trnsim specs", "trnsim.cli.ls"),
    ("Numerics: bf16, fp8, MX and stochastic rounding", "trnsim.cli.dtypes"),
    ("Kernels: an unmodified NKI file on the emulator", "trnsim.cli.run"),
    ("Checking a kernel before it runs: trnsim check", "trnsim.cli.check"),
    ("Profiling a kernel: trnsim profile", "trnsim.cli.profile"),
    ("Scheduling: how the compiler reorders a kernel", "trnsim.cli.demo_reorder"),
    ("Collectives: trnsim collective", "trnsim.cli.collective"),
    ("Training plans: trnsim plan", "trnsim.cli.plan"),
    ("Serving plans: trnsim plan serve", "trnsim.cli.serve"),
    ("Custom C++ operators on the GpSimd engine", "trnsim.cli.customop"),
    ("Beyond the hardware: races, what-if chips, tuning", "trnsim.cli.tune"),
    ("PyTorch and JAX: trnsim torchrun, trnsim jax", "trnsim.cli.torchrun"),  # last: its runs go on meanwhile
]


@cli.command()
@click.option("--only", metavar="TITLE", help="Run only the sections whose title contains this word.")
@click.option("--json", "as_json", is_flag=True, help="Print each section's title, text and seconds as JSON.")
def demo(only, as_json):
    """A short tour of trnsim: each section is a real run, not a recording (its files are removed at the end)."""
    chosen = [(t, m) for t, m in SECTIONS if not only or only.lower() in t.lower()]
    if not chosen:
        raise OptionError("--only", f"no section title contains {only!r}; titles: "
                                    + "; ".join(t for t, _ in SECTIONS))
    # what the sections write (profiles, a kernel file) goes to one temporary folder, removed at the end
    with tempfile.TemporaryDirectory(prefix="trnsim-demo-") as scratch:
        before, tempfile.tempdir = tempfile.tempdir, scratch
        try:
            _run(chosen, as_json)
        finally:
            tempfile.tempdir = before


def _run(chosen: list[tuple[str, str]], as_json: bool) -> None:
    with contextlib.ExitStack() as stack:
        modules = [(title, importlib.import_module(name)) for title, name in chosen]
        started = {m: stack.enter_context(m.tour_start()) for _, m in modules if hasattr(m, "tour_start")}
        tours = [(title, functools.partial(m.tour, started=started[m]) if m in started else m.tour)
                 for title, m in modules]
        _print(tours, as_json)


def _print(tours, as_json: bool) -> None:
    import io

    from rich.console import Console
    from rich.rule import Rule

    if as_json:
        out = []
        for title, tour in tours:
            start, buf = time.perf_counter(), io.StringIO()
            tour(Console(file=buf, width=120, color_system=None))
            out.append({"title": title, "text": buf.getvalue(), "seconds": round(time.perf_counter() - start, 3)})
        click.echo(emit_json({"sections": out}))
        return
    con = Console()
    con.print(Rule("[bold]trnsim: a software Trainium"))
    start = time.perf_counter()
    for title, tour in tours:
        con.print()
        con.print(Rule(f"[bold cyan]{title}", align="left"))
        tour(con)
    con.print()
    con.print(Rule(f"[dim]tour done in {time.perf_counter() - start:.1f} s (the files it wrote are removed); "
                   "`trnsim --help` for every command"))
