"""`trnsim demo`: the newcomer's tour, a few real runs of what trnsim does."""
from __future__ import annotations

import click

from trnsim.cli import cli


@cli.command()
def demo():
    """A short tour of trnsim."""
    from rich.console import Console
    from rich.rule import Rule

    con = Console()
    con.print(Rule("[bold]trnsim: a software Trainium"))
    con.print("Nothing to show yet.")
