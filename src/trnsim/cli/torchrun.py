"""`trnsim torchrun`: an unmodified torch-xla training script on a simulated Trainium instance."""
from __future__ import annotations

import json

import click

from trnsim.cli import cli, emit_json, output_file, output_folder
from trnsim.specs import DEFAULT_INSTANCE


def _nnodes(value: str) -> int:
    """torchrun's --nnodes N or MIN:MAX; a simulated cluster has every node it asks for, so MAX join."""
    from trnsim.errors import OptionError

    try:
        lo, _, hi = value.partition(":")
        lo, hi = int(lo), int(hi or lo)
    except ValueError:
        raise OptionError("--nnodes", f"{value!r} is neither N nor MIN:MAX") from None
    if not 1 <= lo <= hi:
        raise OptionError("--nnodes", f"{value!r}: need 1 <= MIN <= MAX")
    return hi


def _nproc(value: str) -> int | str:
    from trnsim.errors import OptionError

    if value == "auto":
        return value
    if value in ("cpu", "gpu"):
        raise OptionError("--nproc_per_node", f"{value!r} names a device a Trainium instance lacks; give a number of "
                          "NeuronCores or 'auto' (all of the instance's NeuronCores)")
    try:
        return int(value)
    except ValueError:
        raise OptionError("--nproc_per_node", f"{value!r} is neither a number nor 'auto'") from None


def _unclaimed_options(script: str, script_args: tuple[str, ...], own: set[str]) -> list[str]:
    """trnsim torchrun options written after the script that the script never mentions: torchrun hands
    everything after the script to it, so these would end every rank with an argparse error."""
    import re

    try:
        with open(script, errors="replace") as f:
            text = f.read()
    except OSError:
        return []
    out = []
    for arg in script_args:
        name = arg.split("=", 1)[0]
        if name in own and name not in text and not re.search(rf"\b{name.lstrip('-').replace('-', '_')}\b", text):
            out.append(name)
    return out


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--nproc_per_node", "--nproc-per-node", "nproc", default="1", show_default=True, envvar="PET_NPROC_PER_NODE",
              help="Ranks (NeuronCores) per instance, or 'auto' for every NeuronCore of the instance.")
@click.option("--nnodes", default="1", show_default=True, envvar="PET_NNODES",
              help="Instances: N, or torchrun's elastic MIN:MAX (a simulation has all MAX).")
@click.option("--node_rank", "--node-rank", type=int, default=0, envvar="PET_NODE_RANK",
              help="Accepted as torchrun's; one launcher simulates every node.")
@click.option("--master_addr", "--master-addr", default=None, hidden=True)
@click.option("--master_port", "--master-port", default=None, hidden=True)
@click.option("--local_addr", "--local-addr", default=None, hidden=True)
@click.option("--rdzv_backend", "--rdzv-backend", default=None, hidden=True)
@click.option("--rdzv_endpoint", "--rdzv-endpoint", default=None, hidden=True)
@click.option("--rdzv_conf", "--rdzv-conf", default=None, hidden=True)
@click.option("--rdzv_id", "--rdzv-id", "run_id", default="none", hidden=True)
@click.option("--standalone", is_flag=True, hidden=True)
@click.option("--max_restarts", "--max-restarts", type=int, default=0, hidden=True)
@click.option("--monitor_interval", "--monitor-interval", type=float, default=0.1, hidden=True)
@click.option("--start_method", "--start-method", type=click.Choice(["spawn", "fork", "forkserver"]), default="spawn",
              hidden=True)
@click.option("-m", "--module", is_flag=True, help="SCRIPT is a module name (not supported: give its file).")
@click.option("--no_python", "--no-python", is_flag=True, help="SCRIPT is not Python (not supported).")
@click.option("--log_dir", "--log-dir", "log_dir", type=click.Path(file_okay=False), envvar="PET_LOG_DIR",
              help="Folder for the ranks' logs: LOG_DIR/RUN_*/attempt_0/RANK/{stdout,stderr}.log, as torchrun.")
@click.option("-r", "--redirects", default="0", show_default=True,
              help="Ranks' streams into the log files only: 1 stdout, 2 stderr, 3 both, or per rank 0:1,1:2.")
@click.option("-t", "--tee", default="0", show_default=True,
              help="Ranks' streams into the log files and the console, prefixed [defaultN]: (same forms as -r).")
@click.option("--local_ranks_filter", "--local-ranks-filter", default="",
              help="Show only these local ranks' output on the console (e.g. 0,1).")
@click.option("--instance", default=DEFAULT_INSTANCE, show_default=True, help="Instance or UltraServer of the catalog.")
@click.option("--lnc", type=int, help="Logical NeuronCore size [the generation's default].")
@click.option("--max-procs", type=int, default=8, show_default=True,
              help="Ranks run as processes; the rest are timed without running.")
@click.option("--batch-size", type=int, help="Samples per rank per step, for samples/s.")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), help="Write the report as JSON.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of the summary.")
@click.option("--tensorboard", "tb_dir", type=click.Path(file_okay=False), help="Write TensorBoard scalars here.")
@click.option("--quiet", is_flag=True, help="No live progress line.")
@click.option("--trace", "trace_dir", type=click.Path(file_okay=False),
              help="Write each rank's timeline here (Perfetto / Chrome trace JSON, rankN.trace.json).")
@click.argument("script", type=click.Path(dir_okay=False))
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def torchrun(ctx, nproc, nnodes, node_rank, master_addr, master_port, local_addr, rdzv_backend, rdzv_endpoint,
             rdzv_conf, run_id, standalone, max_restarts, monitor_interval, start_method, module, no_python, log_dir,
             redirects, tee, local_ranks_filter, instance, lnc, max_procs, batch_size, report_path, as_json, tb_dir,
             quiet, trace_dir, script, script_args):
    """Run a torch-xla training SCRIPT on a simulated instance:
    `trnsim torchrun --nproc_per_node=8 --report run.json train.py --lr 0.1`.

    As with torchrun, the launcher's options come before SCRIPT and everything after it goes to the
    script. Real torch-xla on the CPU computes the values, one process per rank, gradients reduced
    across them; each graph is priced on the simulated NeuronCore. Prints step time, MFU, memory per
    core and compilations (with the line and cause of each recompilation). A failing rank stops the
    others (exit 1); Ctrl-C or SIGTERM stops every rank (exit 130 or 143). Needs `pip install 'trnsim[torch]'`.
    """
    from trnsim.errors import OptionError
    from trnsim.xla import launch, report

    if module or no_python:
        raise OptionError("--module" if module else "--no-python", "not supported: give the path of a Python script")
    own = {o for p in ctx.command.params if isinstance(p, click.Option) for o in p.opts if o.startswith("--")}
    stray = _unclaimed_options(script, script_args, own)
    if stray:
        raise OptionError(stray[0], f"trnsim torchrun's option, written after the script: as with torchrun, "
                          f"everything after the script goes to it, and {script} never mentions {stray[0]}; "
                          f"put it before the script (trnsim torchrun [OPTIONS] {script} [SCRIPT ARGS])")
    output_file("--report", report_path)
    if tb_dir:
        output_folder("--tensorboard", tb_dir)
    if trace_dir:
        output_folder("--trace", trace_dir)
    try:
        only = {int(r) for r in local_ranks_filter.split(",") if r.strip()} or None
    except ValueError:
        raise OptionError("--local-ranks-filter", f"{local_ranks_filter!r} is not a list of local ranks like 0,1") from None
    rep = launch.torchrun(script, list(script_args), nproc_per_node=_nproc(nproc), nnodes=_nnodes(nnodes),
                          instance=instance, lnc=lnc, max_procs=max_procs, batch_size=batch_size,
                          progress=not (quiet or as_json), log_dir=log_dir, redirects=redirects, tee=tee,
                          local_ranks_filter=only, run_id=run_id, quiet_stdout=as_json, trace=trace_dir)
    show(rep, as_json, report_path)
    if tb_dir:
        report.tensorboard(rep, tb_dir)


def show(rep: dict, as_json: bool, report_path: str | None) -> None:
    """A run's report: the summary table (or JSON on stdout), and the JSON file `report_path` if given."""
    from rich.console import Console

    from trnsim.xla import report

    if as_json:
        click.echo(emit_json(rep))
    else:
        report.render(rep, Console(width=max(Console().width, 110)))
    if report_path:
        with open(report_path, "w") as f:
            json.dump(rep, f, indent=1)


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
