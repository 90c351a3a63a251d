"""`trnsim torchrun`: an unmodified torch-xla training script on a simulated Trainium instance."""
from __future__ import annotations

import json

import click

from trnsim.cli import cli


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--nproc_per_node", "--nproc-per-node", "nproc", type=int, default=1, show_default=True,
              help="Ranks (NeuronCores) per instance, as torchrun's flag.")
@click.option("--nnodes", type=int, default=1, show_default=True, help="Instances.")
@click.option("--node_rank", "--node-rank", type=int, default=0, hidden=True)
@click.option("--master_addr", "--master-addr", default=None, hidden=True)
@click.option("--master_port", "--master-port", default=None, hidden=True)
@click.option("--standalone", is_flag=True, hidden=True)
@click.option("--instance", default="trn1.32xlarge", show_default=True, help="Instance or UltraServer of the catalog.")
@click.option("--lnc", type=int, help="Logical NeuronCore size [the generation's default].")
@click.option("--max-procs", type=int, default=8, show_default=True,
              help="Ranks run as processes; the rest are timed without running.")
@click.option("--batch-size", type=int, help="Samples per rank per step, for samples/s.")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), help="Write the report as JSON.")
@click.option("--tensorboard", "tb_dir", type=click.Path(file_okay=False), help="Write TensorBoard scalars here.")
@click.option("--quiet", is_flag=True, help="No live progress line.")
@click.argument("script", type=click.Path(dir_okay=False))
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
def torchrun(nproc, nnodes, node_rank, master_addr, master_port, standalone, instance, lnc, max_procs, batch_size,
             report_path, tb_dir, quiet, script, script_args):
    """Run a torch-xla training SCRIPT on a simulated instance: `trnsim torchrun --nproc_per_node=8 train.py`.

    Real torch-xla on the CPU computes the values, one process per rank, gradients reduced across
    them; each graph is priced on the simulated NeuronCore. Prints step time, MFU, memory per core
    and compilations (with the line and cause of each recompilation). Needs `pip install 'trnsim[torch]'`.
    """
    from rich.console import Console

    from trnsim.xla import launch, report

    rep = launch.torchrun(script, list(script_args), nproc_per_node=nproc, nnodes=nnodes, instance=instance, lnc=lnc,
                          max_procs=max_procs, batch_size=batch_size, progress=not quiet)
    report.render(rep, Console(width=max(Console().width, 110)))
    if report_path:
        with open(report_path, "w") as f:
            json.dump(rep, f, indent=1)
    if tb_dir:
        report.tensorboard(rep, tb_dir)


def _mlp_hlo(batch: int, d: int, h: int) -> str:
    """HLO text of a BF16 MLP block (dot, ReLU, dot), as torch-xla would hand it to the compiler."""
    x, w1, w2, y, o = f"bf16[{batch},{d}]", f"bf16[{d},{h}]", f"bf16[{h},{d}]", f"bf16[{batch},{h}]", f"bf16[{batch},{d}]"
    return "\n".join([
        "HloModule mlp", "ENTRY %mlp {",
        f"  %x = {x} parameter(0)", f"  %w1 = {w1} parameter(1)", f"  %w2 = {w2} parameter(2)",
        f"  %h = {y} dot({x} %x, {w1} %w1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}",
        "  %zero = bf16[] constant(0)", f"  %z = {y} broadcast(bf16[] %zero), dimensions={{}}",
        f"  %r = {y} maximum({y} %h, {y} %z)",
        f"  ROOT %o = {o} dot({y} %r, {w2} %w2), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}", "}"])


def tour(console) -> None:
    """One MLP block's graph priced on a NeuronCore of each generation; the torchrun command needs the extra."""
    import importlib.util

    from trnsim.xla import CostModel

    text = _mlp_hlo(4096, 4096, 16384)
    console.print("An MLP block's graph (4096 tokens, 4096 -> 16384 -> 4096, BF16) on one NeuronCore:")
    for inst in ("trn1.32xlarge", "trn2.48xlarge", "Trn3 Gen2 UltraServer"):
        m = CostModel(inst)
        g = m.cost(text)
        peak = m.cluster.system.chip.peak_flops("bf16") / m.cluster.ranks_per_chip
        console.print(f"  {inst:<22} {g.time_ns / 1e6:7.3f} ms  TensorE {g.engines['tensor'] / 1e6:7.3f} ms  "
                      f"MFU {100 * g.flops / (g.time_ns * 1e-9) / peak:5.1f}%  memory {g.memory_bytes / 2**30:.2f} GiB")
    if importlib.util.find_spec("torch_xla"):
        console.print("A whole torch-xla script: trnsim torchrun --nproc_per_node=8 examples/train_xla.py")
    else:
        console.print("A whole torch-xla script: pip install 'trnsim[torch]', then "
                      "trnsim torchrun --nproc_per_node=8 examples/train_xla.py")
