"""`trnsim profile FILE.py`: time an NKI kernel on the emulator and write a profile to explore.

The kernel's inputs come from `--arg NAME=DTYPE[SHAPE]` (random values; `NAME=VALUE` for a Python
literal such as a shape tuple), else from the file's `inputs()` function, or `--main` runs the file's
own `__main__` and profiles the last kernel it launched. `--lnc 2` (or `--grid`) launches the kernel on
a grid, as `kernel[2](...)` would. The run is timed with a progress bar, then written out: a Perfetto
trace (`.trace.json.gz`, streamed to disk), an HTML page to explore (timeline, hotspots, occupancy,
instruction table) and a `.profile.json` summary that `--compare` sets beside another one.
"""
from __future__ import annotations

import ast
import contextlib
import json
import math
import re
import sys
import tempfile
import time
from pathlib import Path

import click

from trnsim import live, specs
from trnsim.cli import cli, emit_json, output_folder
from trnsim.cli.run import run_user_file
from trnsim.errors import ConfigError, TrnsimError, UserCodeError
from trnsim.report import files
from trnsim.report.profile import (dma_pieces, explorer_summary, hotspots, instruction_table, occupancy, pyarrow_or_error,
                                   schedule_of)

TARGETS = specs.targets()


# -- what to run ---------------------------------------------------------------------------------------
class ArgumentTooLargeError(ConfigError):
    """An --arg array larger than the memory this machine has free."""

    def __init__(self, text: str, elems: int, need: int, have: int | None):
        free = f"this machine has {have / 2**30:,.1f} GiB available" if have is not None else "the allocation failed"
        super().__init__(f"--arg {text!r}: {elems:,} elements need {need / 2**30:,.1f} GiB of host memory with their "
                         f"values, and {free}; a smaller shape, or --timing-only (no values), runs")


def _available_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (None where there is none)."""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def parse_arg(text: str, values: bool = True, target: str | None = None):
    """`NAME=DTYPE[D0,D1,...]` -> (NAME, numpy array of random values, or zeros when `values` is off: their
    pages are never touched on a timing-only run); `NAME=VALUE` -> (NAME, the literal). An array larger
    than `target`'s HBM per NeuronCore is refused before anything is built on the host."""
    import numpy as np

    from trnsim import numerics
    from trnsim.core.machine import resolve_target
    from trnsim.report.summary import format_bytes

    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise ConfigError(f"--arg {text!r}: write NAME=DTYPE[SHAPE] (e.g. a=bf16[4096,8192]) or NAME=VALUE")
    m = re.fullmatch(r"\s*([A-Za-z][\w]*)\s*\[([\d,\s]*)\]\s*", value)
    if m:
        dt = m.group(1)
        dt = numerics.dtype_name(dt)
        dims = [x for x in m.group(2).replace(" ", "").split(",") if x]
        if any(len(x) > 18 for x in dims):
            raise ConfigError(f"--arg {text[:60]!r}...: a dimension of {max(map(len, dims))} digits; no memory "
                              "holds that many elements")
        shape = tuple(int(x) for x in dims)
        try:
            npdt = numerics.dtype(dt).np
        except TrnsimError as e:
            raise ConfigError(f"--arg {text!r}: {e}") from None
        target = resolve_target(target)
        elems = math.prod(shape)
        nbytes, hbm = elems * npdt.itemsize, specs.neuroncore(target).hbm_bytes
        if nbytes > hbm:
            raise ConfigError(f"--arg {text!r}: {nbytes:,} bytes ({format_bytes(nbytes)}) do not fit the HBM of "
                              f"a {target} NeuronCore ({format_bytes(hbm)}); the device would refuse it")
        # drawing values needs the array and a 4- or 8-byte intermediate of the same shape
        need = elems * np.dtype(npdt).itemsize + (elems * 8 if values else 0)
        have = _available_bytes()
        if values and have is not None and need > have:
            raise ArgumentTooLargeError(text, elems, need, have)
        try:
            if not values:
                return name, np.zeros(shape, npdt)
            rng = np.random.default_rng(len(name))
            if np.issubdtype(npdt, np.integer):
                info = np.iinfo(npdt)
                return name, rng.integers(max(info.min, -100), min(info.max, 100), shape).astype(npdt)
            return name, rng.standard_normal(shape, np.float32).astype(npdt)
        except MemoryError:
            raise ArgumentTooLargeError(text, elems, need, have) from None
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        raise ConfigError(f"--arg {text!r}: {value!r} is neither DTYPE[SHAPE] nor a Python literal") from None


def kernel_arguments(kernel, argv, values: bool = True, target: str | None = None) -> dict:
    """The kernel's keyword arguments from `--arg` texts (parse_arg), each one of its parameters."""
    kwargs = dict(parse_arg(a, values=values, target=target) for a in argv)
    params = kernel.fn.__code__.co_varnames[:kernel.fn.__code__.co_argcount]
    unknown = [k for k in kwargs if k not in params]
    if unknown:
        raise ConfigError(f"--arg {unknown[0]}: {kernel.__name__} has no argument {unknown[0]!r}; "
                          f"its arguments: {', '.join(params)}")
    return kwargs


def load_kernel(file: str, name: str | None, need_inputs: bool = True):
    """The kernel named `name` (or the last one) defined in FILE, and its `inputs()` (None when FILE has
    none and `need_inputs` is false); FILE's `import nki` (or `neuronxcc.nki`) resolves to trnsim."""
    from trnsim import shim
    from trnsim.nki import Kernel

    shim.install()
    sys.path.insert(0, str(Path(file).resolve().parent))
    try:
        ns = run_user_file(file, "__trnsim_profile__")
    finally:
        sys.path.pop(0)
    kernels = {k: v for k, v in ns.items() if isinstance(v, Kernel)}
    if not kernels:
        raise ConfigError(f"{file}: defines no @nki.jit kernel to profile")
    if name is not None and name not in kernels:
        raise ConfigError(f"{file}: no kernel named {name!r}; kernels: {', '.join(kernels)}")
    if need_inputs and "inputs" not in ns:
        raise ConfigError(f"{file}: give the kernel's inputs with --arg NAME=DTYPE[SHAPE] (one per argument), "
                          "define inputs() returning them (a tuple or a dict), or run the file's own __main__ "
                          "with --main")
    return kernels[name or list(kernels)[-1]], ns.get("inputs")


class _Progress:
    """A progress bar on stderr when it is a terminal: the kernel's run, then its timing."""

    def __init__(self, quiet: bool):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        console = Console(stderr=True)
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            console=console, disable=quiet or not console.is_terminal, transient=False)
        self.task = None

    def __enter__(self):
        self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        self.bar.__exit__(*exc)

    def phase(self, text: str, total: float | None = None):
        if self.task is not None:
            self.bar.update(self.task, completed=self.bar.tasks[self.task].total or 1, total=self.bar.tasks[self.task].total or 1)
        self.task = self.bar.add_task(text, total=total)

    def step(self, done: int, total: int):
        self.bar.update(self.task, completed=done, total=total)


def run_profile(kernel, args, kwargs, target, timing_only, out: Path, every: int = 1, quiet: bool = True,
                main: str | None = None):
    """Run (or take the last launch of `main`), time, and write `<kernel>.trace.json.gz`, `<kernel>.html`
    and `<kernel>.profile.json` under `out`."""
    from trnsim.report import render_html, write_trace

    with _Progress(quiet) as bar:
        if main is not None:
            from trnsim.cli.run import run_file
            from trnsim.nki import _frontend

            bar.phase(f"running {Path(main).name} (its __main__)")
            _frontend.LAST.clear()
            with contextlib.redirect_stdout(sys.stderr) if quiet else contextlib.nullcontext():
                run_file(main, (), target)  # with --json, stdout is the figures' alone
            if not _frontend.LAST:
                raise ConfigError(f"{main}: its __main__ launched no kernel")
            name, cores = _frontend.LAST["kernel"], _frontend.LAST["cores"]
        else:
            bar.phase(f"running {kernel.__name__}" + (" (shapes only)" if timing_only else ""))
            cores = kernel.trace(*args, target=target, values=not timing_only, **kwargs)
            name = kernel.__name__
        bar.phase(f"timing {sum(len(c.stream) for c in cores):,} instructions", total=sum(len(c.stream) for c in cores))
        from trnsim.core.timing import time_cores

        result = time_cores(name, cores, progress=bar.step)
        del cores
        live.idle()  # the timing is over: `trnsim top` shows the process idle while it writes
        bar.phase("writing the trace and the report", total=3)
        schedule = schedule_of(result, every)
        out.mkdir(parents=True, exist_ok=True)
        source = str(Path(main or kernel.fn.__code__.co_filename).resolve())
        stem = files.profile_stem(out, result.kernel, source)
        trace, page, summary = (out / f"{stem}{ext}" for ext in (".trace.json.gz", ".html", ".profile.json"))
        summary.unlink(missing_ok=True)  # written last: a run killed before its end leaves no stale summary
        with files.replacing(trace) as tmp:
            write_trace(schedule, tmp)
        bar.step(1, 3)
        note = f"every {every}th instruction is shown; the figures count them all" if every > 1 else ""
        hot = hotspots(result)
        with files.replacing(page) as tmp:
            render_html(schedule, tmp, trace_path=trace, dma_pieces=dma_pieces(result, every),
                        occupancy=occupancy(result), hotspots=hot, note=note)
        bar.step(2, 3)
        files.write_text(summary, json.dumps({**result.to_dict(), "instructions_total": sum(len(t.events) for t in result.timelines),
                                              "hotspots": hot[:100], "trace": str(trace), "html": str(page),
                                              "source_file": source}, default=str))
        bar.step(3, 3)
    return result, schedule, trace, page


def _launchable(kernel, lnc: int, grid: str | None):
    if grid:
        dims = tuple(int(x) for x in grid.split(","))
        return kernel[dims if len(dims) > 1 else dims[0]]
    return kernel[lnc] if lnc > 1 else kernel


@cli.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--arg", "argv", multiple=True, metavar="NAME=DTYPE[SHAPE]",
              help="A kernel argument: random values of a dtype and shape (a=bf16[4096,8192]), or NAME=VALUE for "
                   "a Python literal (shape2D=(3,4)). Repeat for each argument.")
@click.option("--main", "use_main", is_flag=True, help="Run FILE's own __main__ and profile the last kernel it launches.")
@click.option("--target", type=click.Choice(TARGETS), help="NKI target (default: NEURON_PLATFORM_TARGET_OVERRIDE, else trn2).")
@click.option("--timing-only", is_flag=True, help="Run on shapes alone, no values (fast for full-size kernels).")
@click.option("--kernel", "name", metavar="NAME", help="Which kernel of FILE (default: the last one defined).")
@click.option("--lnc", type=click.IntRange(1, 2), default=1, show_default=True,
              help="Launch on a logical NeuronCore of 2 cores (kernel[2]); Trn2 and Trn3.")
@click.option("--grid", metavar="X[,Y]", help="Launch grid, as kernel[X, Y] (beta API SPMD launches).")
@click.option("--every", type=click.IntRange(min=1), default=1, show_default=True,
              help="Keep every Nth instruction in the trace and the page (figures still count all).")
@click.option("--out", type=click.Path(file_okay=False), default="trnsim-profile", show_default=True,
              help="Folder for the trace, the HTML page and the summary.")
@click.option("--compare", type=click.Path(exists=True, dir_okay=False), metavar="B.profile.json",
              help="Set FILE (a .profile.json) beside another profile: before and after.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.option("--output-format", type=click.Choice(["text", "summary-json", "summary-text", "parquet"]), default="text",
              show_default=True, help="summary-json / summary-text: the figures under Neuron Explorer's summary keys, "
              "as `neuron-explorer view --output-format` prints them ({kernel: {key: value}}); parquet: also write "
              "the instruction table in Explorer's schema, OUT/KERNEL.tables/Instruction.parquet (needs pyarrow).")
@click.option("--explain", is_flag=True, help="Say why the kernel is bound where it is: its critical path by "
                                              "mechanism, how sure each figure is, the next one's headroom.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
def profile(file, argv, use_main, target, timing_only, name, lnc, grid, every, out, compare, as_json, output_format,
            explain, quiet):
    """Time an NKI kernel; write a Perfetto trace, an HTML profile to explore and a summary.

    FILE.py's kernel gets its arguments from --arg, from the file's inputs() function, or from its own
    __main__ (--main). `trnsim profile A.profile.json --compare B.profile.json` compares two profiles.
    """
    from rich.console import Console

    from trnsim.report import print_summary

    if compare or file.endswith(".json"):
        from trnsim.report.compare import compare_profiles
        if not compare:
            raise ConfigError(f"{file}: a .json profile is read with --compare B.profile.json")
        if output_format != "text":
            raise ConfigError(f"--output-format {output_format} describes one run; --compare writes a comparison "
                              "page only (profile each kernel with --output-format instead)")
        page = compare_profiles(file, compare, output_folder("--out", out), Console())
        if as_json:
            click.echo(emit_json({"html": str(page)}))
        return
    if output_format == "parquet":
        pyarrow_or_error()  # before the run: a missing library is said at once
    kernel, args, kwargs = None, (), {}
    if use_main:
        if argv:
            raise ConfigError("--main runs the file's own __main__, which chooses the inputs: drop --arg")
        main = file
    else:
        main = None
        kernel, inputs = load_kernel(file, name, need_inputs=not argv)
        if argv:
            kwargs = kernel_arguments(kernel, argv, values=not timing_only, target=target)
        else:
            try:
                given = inputs()
            except Exception as e:
                raise UserCodeError.from_exception(e, file) from None
            args, kwargs = ((), given) if isinstance(given, dict) else (tuple(given), {})
        kernel = _launchable(kernel, lnc, grid)
    out = output_folder("--out", out)
    try:
        result, schedule, trace, page = run_profile(kernel, args, kwargs, target, timing_only, out, every,
                                                    quiet or as_json or output_format != "text", main)
    except (TrnsimError, KeyboardInterrupt):
        raise
    except Exception as e:  # the kernel's own body raised (a NameError, say)
        raise UserCodeError.from_exception(e, file) from None
    tables = {}
    if output_format == "parquet":
        table = trace.parent / (trace.name.removesuffix(".trace.json.gz") + ".tables") / "Instruction.parquet"
        tables = {"instruction_table": str(table), "instruction_rows": instruction_table(result, table)}
    if output_format == "summary-json":
        click.echo(emit_json({result.kernel: explorer_summary(result)}))
        return
    if output_format == "summary-text":
        for key, value in explorer_summary(result).items():
            click.echo(f"{key} {value:.6g}" if isinstance(value, float) else f"{key} {value}")
        return
    from trnsim.core.timing import explain as why
    if as_json:
        extra = {"mechanisms": [vars(m) for m in why.mechanisms(result)]} if explain else {}
        click.echo(emit_json({**result.to_dict(), **extra, "trace": str(trace), "html": str(page), **tables}))
        return
    con = Console()
    print_summary(schedule, con)
    con.print(f"HFU {result.hfu:.1%}, MFU {result.mfu:.1%}; bound by {result.bound}")
    if result.spill_line:
        con.print(result.spill_line)
    if explain:
        con.print("\n".join(why.explain(result)), markup=False, highlight=False, soft_wrap=True)
    con.print(f"report: {page}\ntrace: {trace} (open at https://ui.perfetto.dev)")
    if tables:
        con.print(f"instruction table: {tables['instruction_table']} ({tables['instruction_rows']:,} rows)")


def tour(console):
    """Profile the blocked matmul on trn2 at a small shape: latency, bound engine, shares, HFU."""
    file = Path(__file__).resolve().parents[3] / "examples" / "matmul_ladder.py"
    if not file.exists():
        console.print("(examples/matmul_ladder.py is not next to this installation; run from a checkout)")
        return
    kernel, inputs = load_kernel(str(file), "matmul_blocked")
    start = time.perf_counter()
    out = Path(tempfile.mkdtemp(prefix="trnsim-profile-"))
    r, _, trace, page = run_profile(kernel, inputs(M=512, N=2048, K=2048), {}, "trn2", True, out)
    console.print(f"[bold]{r.kernel}[/] (M=512, N=2048, K=2048, bf16) on trn2, timing only: "
                  f"[bold]{r.latency / 1e3:.1f} us[/], HFU {r.hfu:.1%}, bound by [bold]{r.bound}[/]")
    console.print(f"latency = {r.period / 1e3:.1f} us timeline + {r.overhead / 1e3:.1f} us start-up and tear-down "
                  f"(every NEFF execution's; the shares below cover the timeline)")
    shares = ", ".join(f"{k} {v:.0%}" for k, v in r.share.items() if not k.startswith("DMA q"))
    console.print(f"engine active: {shares}")
    console.print(f"DMA moved {r.dma_bytes / 2**20:.1f} MiB at {r.dma_bandwidth / 1e9:.0f} GB/s; "
                  f"SBUF peak {r.sbuf_peak_bytes / 2**20:.2f} MiB allocated")
    console.print(f"trace: {trace}\nreport: {page}  [dim]({time.perf_counter() - start:.1f} s)[/]")
    _tour_explain(console, r)
    _tour_parquet(console, r, trace)
    _tour_speed(console, file)


def _tour_speed(console, file) -> None:
    """How fast the clock runs here: the fully optimised matmul at the published shape, timing only."""
    import numpy as np

    import trnsim
    kernel, _ = load_kernel(str(file), "matmul_optimized")
    lhsT, rhs = (np.zeros((8192, n), trnsim.nki.language.bfloat16.np) for n in (4096, 8192))
    start = time.process_time()
    r = trnsim.benchmark(kernel, lhsT, rhs, target="trn1", timing_only=True)
    cpu = time.process_time() - start
    n = sum(r.instructions.values())
    console.print(f"[bold]How fast the clock runs[/]: {kernel.__name__} (M=4096, N=8192, K=8192, bf16) on trn1 is "
                  f"{n:,} instructions and {r.latency / 1e6:.2f} ms simulated; traced and scheduled in "
                  f"[bold]{cpu:.2f} s[/] of CPU ({n / cpu:,.0f} instructions/s, the first run in this process)")


def _tour_explain(console, r) -> None:
    """`--explain` as a picture: the critical path and start-up by mechanism, and how sure each figure is."""
    from trnsim.core.timing import explain as why

    console.print("[bold]trnsim profile --explain[/]: its critical path by mechanism, and how sure each figure is")
    ms = why.mechanisms(r)
    longest = max(m.ns for m in ms)
    for m in ms:
        bar = "█" * max(1, round(20 * m.ns / longest))
        console.print(f"  {m.name:<32} {m.ns / 1e3:6.1f} us [cyan]{bar:<20}[/] [dim]{m.basis}[/]")


def _tour_parquet(console, r, trace: Path) -> None:
    """`--output-format parquet`: the instruction table in Neuron Explorer's schema, read back."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        console.print("[dim]trnsim profile --output-format parquet writes Neuron Explorer's instruction table: "
                      "pip install 'trnsim\\[parquet]' to see it here[/]")
        return
    path = trace.parent / "tables" / "Instruction.parquet"
    instruction_table(r, path)
    meta = pq.read_metadata(path)  # read back, as Neuron Explorer's tools would
    console.print(f"[bold]--output-format parquet[/]: Instruction.parquet, {meta.num_rows:,} instructions x "
                  f"{meta.num_columns} columns of Neuron Explorer's schema")
