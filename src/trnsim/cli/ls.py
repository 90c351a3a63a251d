"""`trnsim ls`: the Neuron devices of a catalog system, as neuron-ls shows them on the real instance.

Device d of a Trn1 holds NeuronCores 2d, 2d+1; on Trn2/Trn3 it holds logical cores 4d..4d+3 at
logical-neuroncore-config 2 (8d..8d+7 at 1). NEURON MEMORY is the device's HBM, printed in GiB (the
number neuron-ls labels "GB"); the JSON gives it in bytes. The columns and JSON keys are neuron-ls's
(tools/neuron-sys-tools/neuron-ls.rst). The PCI BDF, CPU affinity and NUMA node describe a simulated
host: each server has two NUMA nodes, the first half of its devices on node 0, and each node owns a
quarter of the vCPUs plus their hyperthread siblings; every device sits on its own PCI bus. No
process uses a simulated device, so neuron_processes is empty.
"""
from __future__ import annotations

import itertools
import os
import sys

import click
from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

import trnsim.specs as specs
from trnsim.cli import cli, emit_json
from trnsim.cli.monitor import device_processes, logical_nc_config, short_command
from trnsim.errors import ConfigError
from trnsim.specs import DEFAULT_INSTANCE
from trnsim.specs.records import SystemSpec
from trnsim.specs.units import human

_CHIP, _LINK, _WRAP, _SWITCH = "bold cyan", "grey50", "yellow", "bold magenta"


def neuron_system(system: SystemSpec) -> SystemSpec:
    """`system`, or ConfigError when it has GPUs: neuron-ls lists Neuron devices only."""
    if not system.chip.is_neuron:
        raise ConfigError(f"{system.name} has {system.chips} {system.chip.vendor} {system.chip.name} GPUs and no "
                          f"Neuron devices; ls lists Trainium instances and UltraServers (see trnsim specs --list)")
    return system


def _host(system: SystemSpec, d: int) -> tuple[str, int, str]:
    """(PCI BDF, NUMA node, CPU affinity) of device d on the simulated host (see the module docstring)."""
    per_server = system.chips // max(1, system.servers)
    local = d % per_server
    numa = 2 * local // per_server
    vcpus = system.vcpus // max(1, system.servers)
    q = vcpus // 4
    affinity = f"{numa * q}-{(numa + 1) * q - 1},{vcpus // 2 + numa * q}-{vcpus // 2 + (numa + 1) * q - 1}"
    return f"0000:{0x10 + local:02x}:00.0", numa, affinity


def devices(system: SystemSpec, lnc: int | None = None, all_procs: bool = False) -> list[dict]:
    """neuron-ls's JSON: one object per device, NeuronCore ids numbered device by device.

    `lnc` defaults to NEURON_LOGICAL_NC_CONFIG, else the chip's logical-neuroncore-config; one the chip lacks
    raises ConfigError. `all_procs` adds, as neuron-ls --show-all-procs does, the process asking (runtime "NA").
    """
    neuron_system(system)
    lnc = lnc or logical_nc_config(system.chip)
    per = system.chip.logical_cores(lnc)  # refuses an LNC the chip lacks
    out = []
    for d in range(system.chips):
        bdf, numa, affinity = _host(system, d)
        out.append({
            "instance_type": system.name,
            "neuron_device": d,
            "bdf": bdf,
            "cpu_affinity": affinity,
            "numa_node": str(numa),
            "connected_to": list(system.topology.connected_chips(d)),
            "nc_count": per,
            "logical_neuroncore_config": lnc,
            "memory_size": system.chip.hbm_bytes,
            "neuroncore_ids": list(range(d * per, (d + 1) * per)),
            "neuron_processes": device_processes(system.name, d, per) + (
                [{"pid": os.getpid(), "command": _own_command(), "neuron_runtime_version": "NA"}] if all_procs else []),
        })
    return out


def _own_command() -> str:
    return short_command(" ".join([sys.executable, *sys.argv]))


def _ranges(ids: list[int]) -> str:
    """`[0, 1, 2, 3, 7]` -> "0-3, 7"."""
    runs = [[x for _, x in g] for _, g in itertools.groupby(enumerate(sorted(ids)), lambda p: p[1] - p[0])]
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


COMMAND_WIDTH = 40  # neuron-ls cuts the command line unless --wide


def table(system: SystemSpec, lnc: int | None = None, wide: bool = False, all_procs: bool = False) -> Group:
    """The header and the device table of neuron-ls: each device's processes with PID, COMMAND and RUNTIME
    VERSION (trnsim's version for a simulating process), the command cut to 40 characters unless `wide`."""
    rows = devices(system, lnc, all_procs)
    lnc = rows[0]["logical_neuroncore_config"] if rows else None
    head = Text.assemble(("instance-type: ", "bold"), system.name)
    if lnc:
        head.append("\n").append("logical-neuroncore-config: ", "bold").append(str(lnc))
    t = Table(box=box.SQUARE, header_style="bold", show_lines=all_procs, pad_edge=True)
    for col in ("NEURON\nDEVICE", "NEURON\nCORES", "NEURON\nCORE IDS", "NEURON\nMEMORY", "CONNECTED\nDEVICES",
                "PCI\nBDF", "CPU\nAFFINITY", "NUMA\nNODE", "PID", "COMMAND", "RUNTIME\nVERSION"):
        t.add_column(col, justify="left", no_wrap=True)

    def command(cmd: str) -> str:
        cmd = short_command(cmd)
        return cmd if wide or len(cmd) <= COMMAND_WIDTH else cmd[:COMMAND_WIDTH - 3] + "..."

    for r in rows:
        linked = r["connected_to"]
        shown = ", ".join(map(str, linked)) if len(linked) <= 8 else _ranges(linked)
        ids = r["neuroncore_ids"]
        procs = r["neuron_processes"]
        t.add_row(str(r["neuron_device"]), str(r["nc_count"]), f"{ids[0]}-{ids[-1]}" if ids else "-",
                  f"{r['memory_size'] / 2**30:g} GiB", shown or "-", r["bdf"], r["cpu_affinity"], r["numa_node"],
                  "\n".join(str(p["pid"]) for p in procs) or "-",
                  "\n".join(command(p["command"]) for p in procs) or "-",
                  "\n".join(p["neuron_runtime_version"] for p in procs) or "-")
    return Group(head, t)


# ---------------------------------------------------------------------------------------------
# Topology pictures: a 4x4 torus with its wrap-around, the UltraServer's planes and Z ring,
# NeuronSwitch servers under their switches.

def _plane(first: int, rows: int, cols: int) -> list[Text]:
    """One torus plane: chips joined along rows and columns, wrap-around marked at the edges."""
    centre = [2 + 7 * c + 1 for c in range(cols)]
    width = 2 + 7 * cols - 3 + 2

    def ticks(mark: str, style: str) -> Text:
        line = Text(" " * width)
        for x in centre:
            line = line[:x] + Text(mark, style) + line[x + 1:]
        return line

    lines = [ticks("╎", _WRAP)]
    for r in range(rows):
        row = Text("╌╌", _WRAP)
        for c in range(cols):
            row.append(f"[{first + r * cols + c:>2}]", _CHIP)
            row.append("───" if c < cols - 1 else "", _LINK)
        row.append("╌╌", _WRAP)
        lines.append(row)
        lines.append(ticks("│", _LINK) if r < rows - 1 else ticks("╎", _WRAP))
    return lines


def _bw(v: float) -> str:
    return human(v, "bytes/s")


def _draw_torus(system: SystemSpec) -> list[Text]:
    *ring, rows, cols = system.topology_shape
    topo, per = system.topology, rows * cols
    per_link = next(ln.bandwidth for ln in topo.links if ln.kind == "torus")
    out = []
    if not ring:
        out += _plane(0, rows, cols)
    else:
        planes = [_plane(i * per, rows, cols) for i in range(ring[0])]
        for pair in range(0, len(planes), 2):
            labels = Text("   ".join(f"instance {i}".center(len(planes[0][0])) for i in range(pair, min(pair + 2, len(planes)))), "bold")
            out.append(labels)
            for lines in zip(*planes[pair:pair + 2]):
                out.append(Text("   ").join(lines))
    out.append(Text.assemble(("╌╌ ╎", _WRAP), f" wrap-around: each row and column is a ring of {cols}"))
    out.append(Text(f"{system.chip.link}: {_bw(system.intra_link_bandwidth)} per chip, {_bw(per_link)} per link"))
    if ring:
        z = next(ln.bandwidth for ln in topo.links if ln.kind == "ring")
        out.append(Text(f"Z ring across instances: chip k -> k+{per} -> k+{2 * per} -> k+{3 * per} -> k"))
        out.append(Text(f"  {_bw(system.inter_link_bandwidth)} per chip, {_bw(z)} per link"))
    return out


def _chips(first: int, n: int) -> Text:
    w = len(str(first + n - 1))
    return Text("".join(f"[{c:>{max(w, 2)}}]" for c in range(first, first + n)), _CHIP)


def _draw_switch(system: SystemSpec) -> list[Text]:
    servers, per = system.topology_shape
    topo = system.topology
    out = []
    if servers <= 4:
        for k, name in enumerate(topo.switches):
            out.append(Text(f"{name} (NeuronSwitch-v1)", _SWITCH))
            mine = [s for s in range(servers) if s // 2 == k]
            for i, s in enumerate(mine):
                out.append(Text.assemble((" └─ " if i == len(mine) - 1 else " ├─ ", _LINK), f"server {s} ", _chips(s * per, per)))
        out.append(Text(f"direct {system.chip.link}: chip i of server 0 <-> server 2, server 1 <-> server 3"))
    else:
        l2 = [n for n in topo.switches if n.startswith("l2")]
        out.append(Text.assemble((" ══ ".join(l2), _SWITCH), f"  second-level NeuronSwitch-v1: every server's switch uplinks to both"))
        for first in range(0, servers, 6):
            row = Text(" ├─ " if first + 6 < servers else " └─ ", _LINK)
            for s in range(first, min(first + 6, servers)):
                row.append(f"s{s:02}", _SWITCH).append(f"[{s * per:>3}-{s * per + per - 1:>3}]", _CHIP).append("  ")
            out.append(row)
        out.append(Text(f"s## [chips]: {servers} servers of {per} chips, each under its own first-level switch"))
    out.append(Text(f"all-to-all over {system.chip.link}: {_bw(system.intra_link_bandwidth)} per chip"))
    return out


def draw(system: SystemSpec) -> Group:
    """An ASCII picture of the system's chip graph."""
    kind = system.topology_kind
    if kind == "torus":
        lines = _draw_torus(system)
    elif kind == "switch":
        lines = _draw_switch(system)
    else:
        lines = [Text.assemble(_chips(0, system.chips), f"  one {system.chip.name}: no chip-to-chip links")]
    return Group(*lines)


@cli.command("ls")
@click.option("--instance", "name", default=DEFAULT_INSTANCE, show_default=True, help="Instance or UltraServer.")
@click.option("--lnc", type=click.IntRange(1, 2), default=None,
              help="logical-neuroncore-config: 1 or 2 (default 2 on Trn2/Trn3, 1 on Trn1).")
@click.option("-t", "--topology", is_flag=True, help="Draw the chip graph (torus, switches, NVSwitch).")
@click.option("-w", "--wide", is_flag=True, help="Show whole command lines.")
@click.option("-a", "--show-all-procs", "all_procs", is_flag=True,
              help="Also list processes that only look at the devices (this one), with runtime version NA.")
@click.option("-j", "--json-output", "--json", "as_json", is_flag=True, help="neuron-ls-style JSON, one object per device.")
@click.option("--output-format", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="neuron-ls's newer spelling of -j.")
def ls(name, lnc, topology, wide, all_procs, as_json, output_format):
    """List the Neuron devices of an instance, as neuron-ls does (LNC from --lnc, else NEURON_LOGICAL_NC_CONFIG)."""
    system = neuron_system(specs.system(name))
    if as_json or output_format == "json":
        click.echo(emit_json(devices(system, lnc, all_procs)))
        return
    con = Console(width=max(Console().width, 1000))  # the table at its own width, one row per device, as neuron-ls
    con.print(table(system, lnc, wide, all_procs))
    if topology:
        con.print(draw(system))


def tour(console: Console) -> None:
    """`ls` of a Trn1, a Trn2 and a Trn3 Gen2 UltraServer beside the Trn2 torus, and a spec-sheet excerpt."""
    from trnsim.cli.specs import summary

    t = Table(box=None, pad_edge=False, header_style="bold", title="trnsim ls", title_justify="left", title_style="bold green")
    for col in ("", "devices", "cores", "memory", "peers"):
        t.add_column(col, justify="right" if col else "left")
    for name in ("trn1.32xlarge", "trn2.48xlarge", "Trn3 Gen2 UltraServer"):
        s = specs.system(name)
        d = devices(s)[0]
        t.add_row(s.name, str(s.chips), str(d["nc_count"]), f"{d['memory_size'] / 2**30:g} GiB",
                  f"{len(d['connected_to'])} ({s.topology_kind})")
    right = Group(t, Text(""), Text("trnsim specs 'Trn3 Gen2 UltraServer'", "bold green"),
                  summary(specs.system("Trn3 Gen2 UltraServer")))
    left = Group(Text("trn2.48xlarge --topology", "bold green"), *_plane(0, 4, 4))
    grid = Table.grid(padding=(0, 3))
    grid.add_row(left, right)
    console.print(grid)
