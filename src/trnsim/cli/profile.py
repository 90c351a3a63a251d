"""`trnsim profile FILE.py`: time an NKI kernel on the emulator and write its profile.

FILE.py defines `@nki.jit` kernels and an `inputs()` function returning the kernel's arguments (a
tuple, or a dict of keyword arguments). The chosen kernel (`--kernel`, default the last one defined)
runs on the target, with values or on shapes alone (`--timing-only`); the timing model's schedule
becomes a Perfetto trace (open it at ui.perfetto.dev), a terminal summary and an HTML report.
"""
from __future__ import annotations

import json
import runpy
import sys
import tempfile
import time
from pathlib import Path

import click

from trnsim import specs
from trnsim.cli import cli
from trnsim.core.timing import BenchmarkResult, benchmark
from trnsim.errors import ConfigError

TARGETS = specs.targets()


def _operands(rec) -> str:
    """Each operand as the profiler shows it: memory, partitions (on chip), byte range, dtype and shape."""
    def one(r):
        parts = f"[{r.partition}:{r.partition + r.partitions}]" if r.space != "hbm" else ""
        return f"{r.space}{parts}@{r.byte_lo}..{r.byte_hi} {r.dtype}{list(r.shape)}"
    return ", ".join(f"{n}={one(r)}" for n, r in rec.operands.items())


def schedule_of(result: BenchmarkResult):
    """The slowest core's timeline as a report Schedule: a span per instruction, a span per DMA engine's
    share of each transfer (on tracks "DMA q0".."DMA q15"), and the dependencies as flow arrows."""
    from trnsim.report import Schedule, Span

    tl = max(result.timelines, key=lambda t: max((e.end for e in t.events), default=0.0))
    spans, rep, next_id = [], {}, len(tl.events)
    for e in tl.events:  # a DMA is represented, for those who wait on it, by its piece that ends last
        if e.pieces:
            rep[e.index] = next_id + max(range(len(e.pieces)), key=lambda j: e.pieces[j][2])
            next_id += len(e.pieces)
    next_id = len(tl.events)
    for e in tl.events:
        args = {"operands": _operands(e.rec), "source": e.rec.location, "instruction": e.index}
        deps = tuple(rep.get(d, d) for d in e.deps)
        if not e.pieces:
            spans.append(Span(e.index, e.track, e.rec.op.value, e.start, e.end - e.start, args, deps))
            continue
        for j, (q, s, f) in enumerate(e.pieces):
            spans.append(Span(next_id, f"DMA q{q}", e.rec.op.value, s, f - s, args, deps if j == 0 else ()))
            next_id += 1
    meta = result.meta()
    meta.pop("hardware_flops")
    meta["HFU (TensorE)"] = f"{100 * meta.pop('hfu'):.1f} %"
    return Schedule(spans, result.target, result.kernel, meta)


def load_kernel(file: str, name: str | None):
    """The kernel named `name` (or the last one) defined in FILE, and its `inputs()`; FILE's
    `import nki` (or `neuronxcc.nki`) resolves to trnsim, as under `trnsim run`."""
    from trnsim import shim
    from trnsim.nki import Kernel

    shim.install()
    sys.path.insert(0, str(Path(file).resolve().parent))
    try:
        ns = runpy.run_path(file, run_name="__trnsim_profile__")
    finally:
        sys.path.pop(0)
    kernels = {k: v for k, v in ns.items() if isinstance(v, Kernel)}
    if not kernels:
        raise ConfigError(f"{file}: defines no @nki.jit kernel to profile")
    if name is not None and name not in kernels:
        raise ConfigError(f"{file}: no kernel named {name!r}; kernels: {', '.join(kernels)}")
    if "inputs" not in ns:
        raise ConfigError(f"{file}: define inputs() returning the kernel's arguments (a tuple or a dict)")
    return kernels[name or list(kernels)[-1]], ns["inputs"]


def run_profile(kernel, args, kwargs, target, timing_only, out: Path):
    """Benchmark, then write `<kernel>.trace.json` and `<kernel>.html` under `out`."""
    from trnsim.report import render_html, write_trace

    result = benchmark(kernel, *args, target=target, timing_only=timing_only, **kwargs)
    schedule = schedule_of(result)
    out.mkdir(parents=True, exist_ok=True)
    trace = write_trace(schedule, out / f"{result.kernel}.trace.json")
    page = render_html(schedule, out / f"{result.kernel}.html", trace_path=trace)
    return result, schedule, trace, page


@cli.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--target", type=click.Choice(TARGETS), help="NKI target (default: NEURON_PLATFORM_TARGET_OVERRIDE, else trn2).")
@click.option("--timing-only", is_flag=True, help="Run on shapes alone, no values (fast for full-size kernels).")
@click.option("--kernel", "name", metavar="NAME", help="Which kernel of FILE (default: the last one defined).")
@click.option("--out", type=click.Path(file_okay=False), default="trnsim-profile", show_default=True,
              help="Folder for the trace and the HTML report.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def profile(file, target, timing_only, name, out, as_json):
    """Time an NKI kernel and write a Perfetto trace and an HTML report."""
    from rich.console import Console

    from trnsim.report import print_summary

    kernel, inputs = load_kernel(file, name)
    given = inputs()
    args, kwargs = ((), given) if isinstance(given, dict) else (tuple(given), {})
    result, schedule, trace, page = run_profile(kernel, args, kwargs, target, timing_only, Path(out))
    if as_json:
        click.echo(json.dumps({**result.to_dict(), "trace": str(trace), "html": str(page)}, indent=2, default=str))
        return
    con = Console()
    print_summary(schedule, con)
    con.print(f"HFU {result.hfu:.1%}, MFU {result.mfu:.1%}; bound by {result.bound}")
    con.print(f"trace: {trace} (open at https://ui.perfetto.dev)\nreport: {page}")


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
    shares = ", ".join(f"{k} {v:.0%}" for k, v in r.share.items() if not k.startswith("DMA q"))
    console.print(f"engine active: {shares}")
    console.print(f"DMA moved {r.dma_bytes / 2**20:.1f} MiB at {r.dma_bandwidth / 1e9:.0f} GB/s; "
                  f"SBUF peak {r.sbuf_peak_bytes / 2**20:.2f} MiB")
    console.print(f"trace: {trace}\nreport: {page}  [dim]({time.perf_counter() - start:.1f} s)[/]")
