"""`trnsim tune FILE.py --param NAME=V1,V2,...`: time every configuration of a kernel and rank them.

A parameter reaches the kernel in one of two ways, decided by its name:

- a keyword argument of the kernel function (`def matmul(a, b, TILE_N=512)`): the value is passed in
  the call, so the kernel's default is what an untuned run uses;
- otherwise a module-level constant of FILE (`TILE_N = 512` at the top): the value replaces the
  constant in the module's namespace before the kernel runs. Constants computed from it at import
  time (`HALF = TILE_N // 2`) keep their first value: make them kernel arguments, or compute them
  inside the kernel.

Each configuration runs in timing-only mode (shapes alone, no values) in its own worker: a process
pool sized to the CPUs, or a local Ray cluster with `--ray` (trnsim.plan.sweep's backends). A
configuration the rules refuse (a KernelError such as CapacityError, or the kernel's own assert) is
listed with its reason instead of a latency. The best one is profiled again (trace, HTML page, summary,
as `trnsim profile` writes them) under --out, with `tune.json` (the ranking) and `tune.png` (a chart).
"""
from __future__ import annotations

import ast
import itertools
import os
import time
from pathlib import Path

import click

from trnsim import flags
from trnsim.cli import CHARTS_MISSING, charts_installed, cli, emit_json, output_folder
from trnsim.cli.profile import TARGETS, _Progress, load_kernel, parse_arg, run_profile
from trnsim.errors import ConfigError, OptionError, TrnsimError, UserCodeError


def parse_param(text: str) -> tuple[str, list]:
    """`NAME=V1,V2,...` -> (NAME, [values]): each value a Python literal (`128`, `'bf16'`, `(2, 2)`), a
    bare word staying a string."""
    name, sep, values = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier() or not values.strip():
        raise OptionError("--param", f"{text!r}: write NAME=V1,V2,... (e.g. TILE_M=128,256,512)")
    try:
        got = ast.literal_eval(f"[{values}]")
    except (ValueError, SyntaxError):
        got = [v.strip() for v in values.split(",")]
    if not got:
        raise OptionError("--param", f"{text!r}: give at least one value")
    return name, got


def configurations(params: list[tuple[str, list]]) -> list[dict]:
    """Every combination of the parameters' values, the first parameter varying slowest."""
    names = [n for n, _ in params]
    return [dict(zip(names, combo)) for combo in itertools.product(*(v for _, v in params))]


def bind(kernel, config: dict, taken=()) -> dict:
    """Apply a configuration to a loaded kernel: module constants are set in place; the kernel keyword
    arguments are returned. A name that is neither (or is an argument already given) is a ConfigError."""
    code = kernel.fn.__code__
    params = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    kwargs = {}
    for name, value in config.items():
        if name in taken:
            raise OptionError("--param", f"{name} is also given with --arg; give it once")
        if name in params:
            kwargs[name] = value
        elif name in kernel.fn.__globals__:
            kernel.fn.__globals__[name] = value
        else:
            raise OptionError("--param", f"{name}: {kernel.__name__} has no argument {name!r} and its file no "
                                         f"module-level constant {name!r}; its arguments: {', '.join(params)}")
    return kwargs


def _inputs(kernel, inputs, argv, file):
    """The kernel's arguments: from --arg (zeros: a timing-only run never reads them), else inputs()."""
    if argv:
        return (), dict(parse_arg(a, values=False) for a in argv)
    try:
        given = inputs()
    except Exception as e:
        raise UserCodeError.from_exception(e, file) from None
    return ((), dict(given)) if isinstance(given, dict) else (tuple(given), {})


def _prepare(file, name, argv, config, lnc):
    """Load FILE afresh, bind `config`: (kernel to launch, args, kwargs)."""
    kernel, inputs = load_kernel(file, name, need_inputs=not argv)
    args, kwargs = _inputs(kernel, inputs, argv, file)
    kwargs.update(bind(kernel, config, kwargs))
    return (kernel[lnc] if lnc > 1 else kernel), args, kwargs


def run_config(task) -> dict:
    """One configuration, timed on shapes alone (runs in a worker): a row with its latency, or its reason."""
    index, file, name, argv, config, target, lnc = task
    from trnsim import specs
    from trnsim.core.errors import KernelError
    from trnsim.core.timing import benchmark

    hw = flags.HARDWARE.raw()
    if hw and specs.active() is None:  # a worker that did not inherit the what-if chip
        specs.hardware(hw).use()
    row = {"index": index, "config": config, "ok": False}
    start = time.perf_counter()
    try:
        kernel, args, kwargs = _prepare(file, name, argv, config, lnc)
        r = benchmark(kernel, *args, target=target, timing_only=True, **kwargs)
    except KernelError as e:  # the rules refuse this configuration
        row.update(refused=type(e).__name__, reason=str(e))
    except ConfigError:
        raise  # the command itself is wrong (no such parameter, a bad --arg): stop the sweep
    except TrnsimError as e:
        row.update(refused=type(e).__name__, reason=str(e))
    except Exception as e:  # the kernel's own check (an assert on the tile sizes, say)
        row.update(refused=type(e).__name__, reason=str(UserCodeError.from_exception(e, file)))
    else:
        count = sum(len(t.events) for t in r.timelines)
        if count == 0:  # a loop with no iterations at these sizes: fastest, and useless
            row.update(refused="NoWork", reason="the kernel issued no instruction with these parameters")
        else:
            row.update(ok=True, latency_ns=r.latency, bound=r.bound, hfu=r.hfu, mfu=r.mfu, instructions=count,
                       sbuf_peak_bytes=r.sbuf_peak_bytes)
    row["seconds"] = round(time.perf_counter() - start, 3)
    return row


def rank(rows: list[dict]) -> list[dict]:
    """Timed configurations by latency (ties: the order given), then the refused ones."""
    ok = sorted((r for r in rows if r["ok"]), key=lambda r: r["latency_ns"])
    return ok + [r for r in rows if not r["ok"]]


def sweep(file: str, params: list[tuple[str, list]], argv=(), name: str | None = None, target: str | None = None,
          lnc: int = 1, workers: int | None = None, ray: bool = False, progress=None) -> list[dict]:
    """Time every configuration of FILE's kernel in parallel and rank them (see the module docstring).

    progress: called as `progress(done, total)` as configurations finish."""
    from trnsim.plan.sweep import backend

    configs = configurations(params)
    kernel, inputs = load_kernel(file, name, need_inputs=not argv)  # fail fast on a wrong name or --arg
    bind(kernel, dict(configs[0]), dict(parse_arg(a, values=False, target=target) for a in argv))
    tasks = [(i, os.path.abspath(file), kernel.__name__, tuple(argv), c, target, lnc) for i, c in enumerate(configs)]
    rows = []
    pool = backend(min(workers or os.cpu_count() or 1, len(tasks)), "local" if ray else None)
    for row in pool.imap(run_config, tasks):
        rows.append(row)
        if progress is not None:
            progress(len(rows), len(tasks))
    rows.sort(key=lambda r: r["index"])  # Ray returns them as they finish
    return rank(rows)


def label(config: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items())


def chart(rows: list[dict], path: Path, title: str) -> Path:
    """A bar per timed configuration (the best first, highlighted), latency in microseconds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in rows if r["ok"]]
    fig, ax = plt.subplots(figsize=(8, 0.35 * max(len(ok), 1) + 1.2))
    ys = range(len(ok))
    ax.barh(list(ys), [r["latency_ns"] / 1e3 for r in ok],
            color=["tab:green" if i == 0 else "tab:blue" for i in ys])
    ax.set_yticks(list(ys), [label(r["config"]) for r in ok], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("simulated latency (us)")
    refused = len(rows) - len(ok)
    ax.set_title(title + (f" ({refused} refused, not shown)" if refused else ""), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


@cli.command(epilog="Parameters reach the kernel as keyword arguments of the kernel function when it has "
                    "one of that name, else as module-level constants of FILE (set before each run).")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--param", "params", multiple=True, required=True, metavar="NAME=V1,V2,...",
              help="A parameter and the values to try (Python literals). Repeat: every combination is run.")
@click.option("--arg", "argv", multiple=True, metavar="NAME=DTYPE[SHAPE]",
              help="A kernel argument, as in `trnsim profile` (default: the file's inputs()).")
@click.option("--kernel", "name", metavar="NAME", help="Which kernel of FILE (default: the last one defined).")
@click.option("--target", type=click.Choice(TARGETS), help="NKI target (default: NEURON_PLATFORM_TARGET_OVERRIDE, else trn2).")
@click.option("--lnc", type=click.IntRange(1, 2), default=1, show_default=True, help="Launch as kernel[2].")
@click.option("--workers", type=click.IntRange(min=1), help="Worker processes (default: one per CPU).")
@click.option("--ray", "use_ray", is_flag=True, help="Run the configurations on a local Ray cluster.")
@click.option("--out", type=click.Path(file_okay=False), default="trnsim-tune", show_default=True,
              help="Folder for tune.json, tune.png and the best configuration's profile.")
@click.option("--json", "as_json", is_flag=True, help="Print the ranking as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
def tune(file, params, argv, name, target, lnc, workers, use_ray, out, as_json, quiet):
    """Time every configuration of a kernel's parameters (timing only) and rank them by latency.

    `trnsim tune kernel.py --param TILE_M=128,256 --param BUFS=1,2 --arg a=bf16[4096,8192] ...` runs the
    4 configurations in parallel, shows the ranking and a chart, lists the configurations the rules
    refuse with their reason, and profiles the best one.
    """
    from rich.console import Console
    from rich.table import Table

    parsed = [parse_param(p) for p in params]
    dup = {n for n, _ in parsed if [m for m, _ in parsed].count(n) > 1}
    if dup:
        raise OptionError("--param", f"{sorted(dup)[0]} is given twice")
    out = output_folder("--out", out)
    total = len(configurations(parsed))
    with _Progress(quiet or as_json) as bar:
        bar.phase(f"timing {total} configurations" + (" on Ray" if use_ray else ""), total=total)
        rows = sweep(file, parsed, argv, name, target, lnc, workers, use_ray, progress=bar.step)
    best = rows[0] if rows[0]["ok"] else None
    if best is None:
        raise ConfigError(f"{file}: the rules refuse every one of the {total} configurations; the first: "
                          f"{label(rows[0]['config'])}: {rows[0]['reason']}")
    kernel, args, kwargs = _prepare(file, name, argv, best["config"], lnc)
    result, _, trace, page = run_profile(kernel, args, kwargs, target, True, out, quiet=True)
    png = chart(rows, out / "tune.png", f"{result.kernel} on {result.target}: {total} configurations") \
        if charts_installed() else None
    doc = {"kernel": result.kernel, "target": result.target, "configurations": rows, "best": best,
           "chart": str(png) if png else None, "profile": {"trace": str(trace), "html": str(page)}}
    (out / "tune.json").write_text(emit_json(doc))
    if as_json:
        click.echo(emit_json(doc))
        return
    con = Console()
    t = Table(title=f"{result.kernel} on {result.target}: {total} configurations, by simulated latency")
    for col in ("#", *[n for n, _ in parsed], "latency", "bound", "HFU", "note"):
        t.add_column(col, justify="right" if col in ("#", "latency", "HFU") else "left")
    for i, r in enumerate(rows, 1):
        vals = [str(r["config"][n]) for n, _ in parsed]
        if r["ok"]:
            t.add_row(str(i), *vals, f"{r['latency_ns'] / 1e3:,.2f} us", r["bound"], f"{r['hfu']:.1%}",
                      "best" if r is best else "")
        else:
            t.add_row("-", *vals, "refused", "", "", r["refused"], style="dim")
    con.print(t)
    for r in rows:  # whole lines, so a narrow terminal never cuts a reason's file:line
        if not r["ok"]:
            con.print(f"refused {label(r['config'])}: {r['refused']}: {r['reason']}", style="dim", soft_wrap=True)
    con.print(f"best: [bold]{label(best['config'])}[/] {best['latency_ns'] / 1e3:,.2f} us")
    con.print(f"chart: {png or CHARTS_MISSING}\nreport: {page}\ntrace: {trace}")


_RACY = '''
import numpy as np
import neuronxcc.nki as nki, neuronxcc.nki.language as nl

@nki.jit(race_check="error")  # refuse the dependency (by default it is a warning)
def running_sum(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.store(out[:, 0:128], nl.load(x[:, 0:128]))
    for j in nl.affine_range(1, x.shape[1] // 128):          # iterations promise independence...
        prev = nl.load(out[:, (j - 1) * 128:j * 128])        # ...but read the previous one's result
        nl.store(out[:, j * 128:(j + 1) * 128], nl.add(prev, nl.load(x[:, j * 128:(j + 1) * 128])))
    return out
'''


def tour(console):
    """What no hardware run shows: a loop-carried race, a what-if chip, and where tuning fits."""
    import os
    import tempfile

    import numpy as np

    import trnsim
    from trnsim import shim
    from trnsim.cli.profile import load_kernel
    from trnsim.core.timing import benchmark
    from trnsim.errors import TrnsimError

    shim.install()
    path = os.path.join(tempfile.mkdtemp(prefix="trnsim-race-"), "running_sum.py")
    with open(path, "w") as f:
        f.write(_RACY)
    kernel, _ = load_kernel(path, "running_sum", need_inputs=False)
    try:
        kernel(np.ones((128, 512), np.float32))
        console.print("race detector: no loop-carried dependency found")
    except TrnsimError as e:
        msg = str(e).replace(os.path.dirname(path) + os.sep, "")
        console.print(f"[bold]race detector[/] ({path.rsplit(os.sep, 1)[-1]}, nl.affine_range) caught "
                      f"{type(e).__name__}: {msg.split(': ', 1)[-1][:170]} ...")
    _order_line(console)
    file = Path(__file__).resolve().parents[3] / "examples" / "matmul_ladder.py"
    if file.exists():
        mm, inputs = load_kernel(str(file), "matmul_optimized")
        args = inputs(M=2048, N=1024, K=1024)
        base = benchmark(mm, *args, target="trn2", timing_only=True)
        with trnsim.hardware(base="trn2", name="trn2, TensorE at 2x", core={"clocks": {"tensor": "5.6 GHz"}}):
            fast = benchmark(mm, *args, target="trn2", timing_only=True)
        console.print(f"[bold]what-if chip[/] (trnsim --hardware chip.toml): matmul_optimized (2048x1024x1024) {base.latency / 1e3:.1f} us "
                      f"on trn2, {fast.latency / 1e3:.1f} us with TensorE at 2x clock (bound by {fast.bound})")
        _spill_line(console, file.with_name("mamba.py"))
    console.print("[bold]tuning[/]: trnsim tune kernel.py --param TILE_N=128,256,512 --arg a=bf16[4096,8192] "
                  "ranks every configuration by simulated latency")


def _order_line(console) -> None:
    """The value-based race check on a recurrence that reads the same reversed: only the interleaved run differs."""
    import numpy as np

    import trnsim.nki as nki
    import trnsim.nki.isa as nisa
    import trnsim.nki.language as nl
    from trnsim.core.races import LoopCarriedError

    @nki.jit(race_check="order")
    def horner(x):
        acc = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=acc, value=0.0)
        for j in nl.affine_range(x.shape[1] // 64):  # acc = 2 * acc + x_j, in one instruction
            t = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[:, j * 64:(j + 1) * 64])
            nisa.scalar_tensor_tensor(dst=acc, data=acc, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=t)
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=acc)
        return out

    x0 = np.ones((128, 64), np.float32)
    try:
        horner(np.concatenate([x0, 2 * x0, x0], axis=1))
        console.print("race check order: the iterations gave the same result in every order")
    except LoopCarriedError as e:
        how = str(e).split(" when ", 1)[-1].split(";", 1)[0]
        console.print(f"[bold]race check order[/]: acc = 2*acc + x_j over blocks x0, x1, x0 reads the same reversed, "
                      f"yet differs when {how}")


def _spill_line(console, file) -> None:
    """The compiler's answer to a kernel whose tiles outgrow SBUF, shown on a what-if chip with less of it."""
    import warnings

    import trnsim
    from trnsim.cli.profile import load_kernel
    from trnsim.core.timing import benchmark

    if not file.exists():
        return
    kernel, inputs = load_kernel(str(file), "mamba_v2")
    args = inputs(channels=256, seq=2048)
    full = benchmark(kernel, *args, target="trn1", timing_only=True)
    with warnings.catch_warnings(), trnsim.hardware(base="trn1", name="trn1, 48 KiB SBUF",
                                                     core={"sbuf_partition_bytes": "48 KiB"}):
        warnings.simplefilter("ignore")  # the SpillWarning: the line below says it
        small = benchmark(kernel, *args, target="trn1", timing_only=True)
    console.print(f"[bold]spills[/]: mamba_v2 (256 x 2048) {full.latency / 1e3:.0f} us on trn1; with 48 KiB of SBUF a "
                  f"partition the compiler spills ({small.spill_line.split(' (')[0]}): {small.latency / 1e3:.0f} us, "
                  f"bound by {small.bound}")

