"""`trnsim top`: a live terminal view of the simulated Neuron devices in use on this machine, like neuron-top.

Per NeuronCore: its utilisation and each engine's busy share over the last interval of simulated time
(from the timing model, as each process publishes it); per process: pid, command line, instance, cores,
what it runs (kernel, graph, collective) and device memory; then the host's vCPU and memory. The
figures are `trnsim monitor`'s document (`--json` prints it), drawn with rich.
"""
from __future__ import annotations

import json
import socket
import time

import click
from rich import box
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from trnsim.cli import cli
from trnsim.cli.monitor import short_command, snapshot
from trnsim.report.summary import format_bytes, format_time

ENGINES = ("TensorE", "VectorE", "ScalarE", "GpSimdE", "Sync", "DMA")


def _bar(pct: float, width: int = 12) -> Text:
    full = round(width * min(pct, 100.0) / 100)
    style = "green" if pct < 50 else "yellow" if pct < 85 else "red"
    return Text.assemble(("█" * full, style), ("·" * (width - full), "grey30"), f" {pct:5.1f}%")


def _cores(k: list) -> str:
    return ", ".join(map(str, k)) if k else "-"


def core_tflops(run: dict, engines: dict) -> float | None:
    """A core's TFLOPS in the FLOPS view: TensorE's busy share times the core's dense BF16 peak, an upper
    bound (a busy PE array need not be full); None when the process's instance is not in the catalog."""
    import trnsim.specs as specs
    from trnsim.errors import TrnsimError

    try:
        core = specs.system(run["instance_type"]).chip.core
    except TrnsimError:
        return None
    return engines.get("TensorE", 0.0) / 100 * core.peak_flops("bf16") / 1e12 if core else None


def view(doc: dict, width: int = 120, tab: int = 0, flops: bool = False) -> Group:
    """The screen for one monitor document; a terminal under 110 columns gets the essential columns only.
    `tab` 0 shows every process, k the k-th; `flops` shows TFLOPS instead of utilisation (neuron-top's F)."""
    wide = width >= 110
    every = doc["neuron_runtime_data"]
    tab = tab % (len(every) + 1)
    runs = every if tab == 0 else [every[tab - 1]]
    tabs = Text("tabs: ")
    for i, name in enumerate(["all"] + [str(r["pid"]) for r in every]):
        tabs.append(f" {name} ", "reverse bold" if i == tab else "")
    tabs.append("   ←/→ or Tab: switch   F: utilisation/TFLOPS   q: quit", "grey50")
    head = Text.assemble(("trnsim top", "bold"), f"  simulated Neuron devices on {socket.gethostname()}  ",
                         ("instance: ", "bold"), doc["instance_info"]["instance_type"],
                         f"  ({len(every)} process{'es' if len(every) != 1 else ''})")
    head = Text("\n").join([head, tabs])
    engines = ENGINES if wide else ("TensorE", "VectorE", "DMA")
    title = ("NeuronCore TFLOPS (TensorE busy share x the core's dense BF16 peak: an upper bound)" if flops else
             "NeuronCore utilisation (share of the last interval of simulated time)")
    cores = Table(title=title, box=box.SIMPLE_HEAD,
                  title_justify="left", header_style="bold", padding=(0, 1), pad_edge=False)
    for col in ("PID", "NC", "TFLOPS" if flops else "UTILISATION", *engines):
        cores.add_column(col, justify="left" if col == "UTILISATION" else "right", no_wrap=True,
                         min_width=19 if col == "UTILISATION" else max(len(col), 4))
    for r in runs:
        for nc, c in r["report"]["neuroncore_counters"]["neuroncores_in_use"].items():
            eng = c["engines"]
            if flops:
                tf = core_tflops(r, eng)
                first = f"{tf:,.1f}" if tf is not None else "-"
            else:
                first = _bar(c["neuroncore_utilization"])
            cores.add_row(str(r["pid"]), nc, first, *(f"{eng[e]:.0f}%" if e in eng else "-" for e in engines))
    procs = Table(title="Processes", box=box.SIMPLE_HEAD, title_justify="left", header_style="bold", padding=(0, 1),
                  pad_edge=False, expand=True)
    cols = {"PID": 7, "INSTANCE": 13, "CORES": 5, "RUNNING": 24, "SIM TIME": 8, "DEVICE MEM": 10, "vCPU": 4,
            "COMMAND": 10}
    if not wide:
        cols = {k: cols[k] for k in ("PID", "CORES", "RUNNING", "DEVICE MEM", "COMMAND")}
    for col, w in cols.items():
        procs.add_column(col, justify="right" if col in ("PID", "SIM TIME", "DEVICE MEM", "vCPU") else "left",
                         overflow="ellipsis", no_wrap=True, width=None if col == "COMMAND" else w,
                         min_width=w, ratio=1 if col == "COMMAND" else None)
    for r in runs:
        rep, run = r["report"], r["running"]
        what = f"{run['kind']} {run['name']}" + (f" ({run['phase']})" if run.get("phase") else "")
        sim = run.get("simulated_time_ns")
        cells = {"PID": str(r["pid"]), "INSTANCE": r["instance_type"],
                 "CORES": _cores(list(rep["neuroncore_counters"]["neuroncores_in_use"])), "RUNNING": what,
                 "SIM TIME": format_time(sim) if sim is not None else "-",
                 "DEVICE MEM": format_bytes(rep["memory_used"]["neuron_runtime_used_bytes"]["neuron_device"]),
                 "vCPU": f"{rep['neuron_runtime_vcpu_usage']['vcpu_usage']['user']:.0f}%",
                 "COMMAND": short_command(r["command"])}
        procs.add_row(*(Text(cells[c]) for c in cols))  # plain text: a name's brackets are not markup
    sysd = doc["system_data"]
    cpu, mem = sysd["vcpu_usage"], sysd["memory_info"]
    busy = 100 - cpu["average_usage"]["idle"]
    host = Text.assemble(("host vCPU ", "bold"), _bar(busy), f" of {cpu['vcpu_count']} vCPUs   ",
                         ("memory ", "bold"), f"{format_bytes(mem['memory_used_bytes'])} / "
                         f"{format_bytes(mem['memory_total_bytes'])}")
    if not runs:
        return Group(head, Text("no trnsim process is simulating on this machine", style="italic"), host)
    return Group(head, cores, procs, host)


@cli.command()
@click.option("--once", is_flag=True, help="Print one snapshot and exit.")
@click.option("--json", "as_json", is_flag=True, help="Print one snapshot as JSON (trnsim monitor's document).")
@click.option("--interval", type=click.FloatRange(min=0.1), default=1.0, show_default=True,
              help="Seconds between refreshes.")
def top(once, as_json, interval):
    """Live view of the simulated NeuronCores in use on this machine (like neuron-top).

    Keys as in neuron-top: q quits, Tab or the arrow keys move between the 'all' tab and one tab per
    process, F toggles utilisation and TFLOPS. Ctrl-C quits too."""
    if as_json:  # one document, as `trnsim monitor --count 1` prints it
        click.echo(json.dumps(snapshot(min(interval, 0.5))))
        return
    console = Console()
    if once:
        console.print(view(snapshot(min(interval, 0.5)), console.width))
        return
    tab, flops = 0, False
    try:
        with _Keys() as keys, Live(view(snapshot(0.1), console.width), console=console, screen=True,
                                   auto_refresh=False) as lv:
            doc = snapshot(0.1)
            deadline = time.monotonic() + interval
            while True:
                key = keys.read(max(0.0, deadline - time.monotonic()))
                if key in ("q", "Q"):
                    return
                if key in ("\t", "right", "l"):
                    tab += 1
                elif key in ("left", "h", "shift-tab"):
                    tab -= 1
                elif key in ("f", "F"):
                    flops = not flops
                elif key is None:  # the interval is over: a new document
                    doc = snapshot(min(interval, 0.25))
                    deadline = time.monotonic() + interval
                tab %= len(doc["neuron_runtime_data"]) + 1
                lv.update(view(doc, console.width, tab, flops), refresh=True)
    except KeyboardInterrupt:
        pass


class _Keys:
    """Single key presses from a terminal (cbreak mode, restored on exit); none when stdin is not one."""

    def __enter__(self):
        import sys

        self.fd, self.saved = None, None
        if sys.stdin.isatty():
            import termios
            import tty

            self.fd = sys.stdin.fileno()
            self.saved = termios.tcgetattr(self.fd)
            tty.setcbreak(self.fd)
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            import termios

            termios.tcsetattr(self.fd, termios.TCSADRAIN, self.saved)

    def read(self, timeout: float) -> str | None:
        """The next key within `timeout` seconds: a character, or "left", "right", "shift-tab"; None if none."""
        import os
        import select

        if self.fd is None:
            time.sleep(timeout)
            return None
        if not select.select([self.fd], [], [], timeout)[0]:
            return None
        ch = os.read(self.fd, 1).decode(errors="replace")
        if ch != "\x1b":
            return ch
        seq = os.read(self.fd, 2).decode(errors="replace") if select.select([self.fd], [], [], 0.05)[0] else ""
        return {"[C": "right", "[D": "left", "[Z": "shift-tab"}.get(seq, "escape")
