"""`trnsim jax`: a JAX training script on N simulated NeuronCores, each step priced."""
from __future__ import annotations

import click

from trnsim.cli import cli, output_file
from trnsim.specs import DEFAULT_INSTANCE


@cli.command("jax", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--devices", type=int, default=1, show_default=True, help="Simulated NeuronCores, as JAX devices.")
@click.option("--instance", default=DEFAULT_INSTANCE, show_default=True, help="Instance or UltraServer of the catalog.")
@click.option("--lnc", type=int, help="Logical NeuronCore size [the generation's default].")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), help="Write the report as JSON.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of the summary.")
@click.argument("script", type=click.Path(dir_okay=False))
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
def jax_command(devices, instance, lnc, report_path, as_json, script, script_args):
    """Run a JAX SCRIPT with N simulated NeuronCores as its devices: `trnsim jax --devices 4 train.py`.

    JAX's CPU backend computes the values on N host devices (pmap, jit with shardings, psum); every call of a
    jit or pmap function is priced on a NeuronCore of the instance, its collectives on the fabric. Prints the
    step time, MFU and compilations as `trnsim torchrun` does. Needs `pip install 'trnsim[torch]'`.
    """
    from trnsim.cli.torchrun import show
    from trnsim.xla import jaxrun

    output_file("--report", report_path)
    rep = jaxrun.run(script, list(script_args), devices=devices, instance=instance, lnc=lnc, quiet_stdout=as_json)
    show(rep, as_json, report_path)
