"""`trnsim torchrun`: an unmodified torch-xla training script on a simulated Trainium instance."""
from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

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


# The tour's launches, each a real run of an example under trnsim: (label, command after `trnsim`, the modules it
# needs). `{out}` stands for the run's own temporary folder, where it saves its weights.
_EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
_TORCH = ("torchrun", "--nproc_per_node=2", "--quiet")
_LAUNCHES = {
    "fsdp": ("FSDP2 (fully_shard)", [*_TORCH, "train_fsdp.py", "--steps", "3", "--save-all", "{out}"],
             ("torch", "torch_xla")),
    "tp": ("DTensor tensor parallel", [*_TORCH, "train_tp.py", "--steps", "3", "--save-all", "{out}"],
           ("torch", "torch_xla")),
    "jax": ("JAX pmap, data parallel", ["jax", "--devices", "2", "train_jax.py", "{out}/weights.npz"], ("jax",)),
}


@contextlib.contextmanager
def tour_start():
    """Launch the examples the tour shows, each in its own processes, so they run while earlier sections print;
    yields {key: (process, its report, its folder)} and stops what is still running at the end."""
    import importlib.util
    import subprocess
    import sys
    import tempfile

    runs = {}
    try:
        for key, (_, argv, needs) in _LAUNCHES.items():
            if not _EXAMPLES.exists() or not all(importlib.util.find_spec(m) for m in needs):
                continue
            out = tempfile.mkdtemp(prefix=f"trnsim-{key}-")
            report = os.path.join(out, "report.json")
            cmd = [sys.executable, "-m", "trnsim", argv[0], "--report", report, *(a.format(out=out) for a in argv[1:])]
            runs[key] = (subprocess.Popen(cmd, cwd=_EXAMPLES, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True), report, out)
        yield runs
    finally:
        for proc, _, _ in runs.values():
            if proc.poll() is None:
                proc.terminate()  # the launchers stop their ranks on SIGTERM
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            proc.stdout.close()


def tour(console, started=None) -> None:
    """One MLP block's graph priced on a NeuronCore of each generation, then the training examples under
    `trnsim torchrun` and `trnsim jax` (with the torch extra; without it, what to install)."""
    from trnsim.xla import CostModel

    text = _mlp_hlo(4096, 4096, 16384)
    console.print("An MLP block's graph (4096 tokens, 4096->16384->4096, BF16) on one NeuronCore:")
    for inst in ("trn1.32xlarge", "trn2.48xlarge", "Trn3 Gen2 UltraServer"):
        m = CostModel(inst)
        g = m.cost(text)
        peak = m.cluster.system.chip.peak_flops("bf16") / m.cluster.ranks_per_chip
        console.print(f"  {inst:<22} {g.time_ns / 1e6:6.3f} ms  TensorE {g.engines['tensor'] / 1e6:6.3f} ms  "
                      f"MFU {100 * g.flops / (g.time_ns * 1e-9) / peak:4.1f}%  {g.memory_bytes / 2**30:.2f} GiB")
    started = started or {}
    missing = [label for key, (label, _, _) in _LAUNCHES.items() if key not in started]
    if not _EXAMPLES.exists():
        console.print("(the training examples are not next to this installation: run from a checkout to see them)")
    elif missing:
        console.print(f"The training examples under trnsim torchrun and trnsim jax ({', '.join(missing)}): "
                      f"pip install 'trnsim\\[torch]' to see them here")
    if not started:
        return
    console.print("examples/ trained on 2 NeuronCores of a trn2.48xlarge (real torch and JAX compute the values; "
                  "each step's graphs priced; [green]■[/] compute [yellow]■[/] memory [magenta]■[/] collective):")
    done = {key: _tour_launch(console, key, *run) for key, run in started.items()}
    if done.get("fsdp") and done.get("tp"):
        diff = _max_difference(started["fsdp"][2], started["tp"][2])
        console.print(f"  FSDP2 and tensor parallel {_same(diff)} (max |diff| {diff:.1e}): the same batches, "
                      f"split two ways")


def _tour_launch(console, key: str, proc, report: str, out: str) -> bool:
    """One launch's line: its simulated step time as a bar split by engine, and what its values show."""
    label, argv, _ = _LAUNCHES[key]
    text = proc.stdout.read()
    if proc.wait() != 0:
        last = text.strip().splitlines()[-1] if text.strip() else f"exit status {proc.returncode}"
        console.print(f"  {label}: [red]failed[/] (trnsim {' '.join(argv)}): {last}")
        return False
    with open(report) as f:
        rep = json.load(f)
    parts = rep["breakdown_ms"]
    total = sum(parts.values())
    colors = {"collective": "magenta", "hbm": "yellow", "dma": "yellow"}
    bar = "".join(f"[{colors.get(k, 'green')}]{'█' * round(20 * v / total)}[/]" for k, v in parts.items() if v > 0)
    shown = next((line.strip() for line in text.splitlines() if line.startswith("trained")), "")
    if key == "jax":
        shown = _jax_against_numpy(out)
    console.print(f"  {label:<24} {rep['step_time_ms']:.3f} ms/step {bar}  "
                  f"collective {100 * parts.get('collective', 0) / total:.0f}%\n    {shown}")
    return True


def _max_difference(a: str, b: str) -> float:
    """The largest difference between two runs' final weights (rank 0's, saved by --save-all)."""
    import torch

    x, y = (torch.load(os.path.join(d, "rank0.pt")) for d in (a, b))
    return max(float((x[k] - y[k]).abs().max()) for k in x)


def _jax_against_numpy(out: str) -> str:
    """The pmap example's weights against full-batch gradient descent in numpy: the mean of equal shards'
    gradients (pmean) is the whole batch's gradient."""
    import numpy as np

    d = np.load(os.path.join(out, "weights.npz"))
    w = d["w0"].astype(np.float64)
    for x, y in zip(d["xs"].astype(np.float64), d["ys"].astype(np.float64)):
        t = np.tanh(x @ w)
        w = w - float(d["lr"]) * x.T @ (2 * (t - y) * (1 - t * t)) / t.size
    diff = float(np.abs(d["w"] - w).max())
    return f"pmap on 2 devices and gradient descent on one in numpy {_same(diff)} (max |diff| {diff:.1e})"


def _same(diff: float) -> str:
    """The verdict on two trainings' weights, fp32 rounding apart at most."""
    return "end with the same weights" if diff < 1e-5 else "[red]end with DIFFERENT weights[/]"
