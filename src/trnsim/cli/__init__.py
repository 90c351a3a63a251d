"""The `trnsim` command line: one click group, one module per command."""
from __future__ import annotations

import sys

import click

from trnsim.errors import TrnsimError


class _Group(click.Group):
    """Turns every TrnsimError into its one-line message and exit code: no tracebacks for bad input."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except TrnsimError as e:
            click.secho(f"trnsim: error: {e}", fg="red", err=True)
            sys.exit(e.exit_code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="trnsim")
def cli():
    """trnsim: a software Trainium. Run NKI kernels, time them, simulate collectives, plan training."""


def _register():
    """Import every module of this package: each adds its own command to `cli`."""
    import importlib
    import pkgutil

    for mod in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{mod.name}")


_register()


def main():
    cli(prog_name="trnsim")
