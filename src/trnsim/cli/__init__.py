"""The `trnsim` command line: one click group, one module per command."""
from __future__ import annotations

import os
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
@click.option("--hardware", metavar="CHIP.toml", envvar="TRNSIM_HARDWARE",
              help="Run every command on a what-if chip: a catalog chip (base = \"trn2\") with changed figures.")
@click.option("--race-check", type=click.Choice(["auto", "off", "warn", "error"]), envvar="TRNSIM_RACE_CHECK",
              help="Loop-carried dependencies in affine_range loops: auto (default) refuses them where the "
                   "compiler would reorder the loop (beta API); warn or error checks every affine loop.")
def cli(hardware, race_check):
    """trnsim: a software Trainium. Run NKI kernels, time them, simulate collectives, plan training."""
    if hardware:
        from trnsim import specs

        specs.hardware(hardware).use()
        os.environ["TRNSIM_HARDWARE"] = os.path.abspath(hardware)  # worker processes run on it too
    if race_check:
        os.environ["TRNSIM_RACE_CHECK"] = race_check


def _register():
    """Import every module of this package: each adds its own command to `cli`."""
    import importlib
    import pkgutil

    for mod in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{mod.name}")


_register()


def main():
    cli(prog_name="trnsim")
