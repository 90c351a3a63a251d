"""`trnsim monitor`: neuron-monitor's role, a JSON document per interval on stdout, for scripts and dashboards.

Each document follows neuron-monitor's layout (tools/neuron-sys-tools/neuron-monitor-user-guide):
`neuron_runtime_data` holds one entry per trnsim process that simulates (pid, what it runs, its
NeuronCores' utilisation in percent, device memory, vCPU use), `system_data` the host's vCPU and
memory, `instance_info` and `neuron_hardware_info` the simulated instance. The figures come from the
files the processes publish (trnsim.live) and from /proc; `trnsim top --json` prints the same document.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import click

from trnsim import live
from trnsim.cli import cli


def _cpu_times() -> list[int]:
    """Aggregate jiffies from /proc/stat: user, nice, system, idle, iowait, irq, softirq, steal."""
    line = Path("/proc/stat").read_text().splitlines()[0].split()
    return [int(x) for x in line[1:9]]


def _proc_ticks(pid: int) -> int | None:
    """utime + stime of a process, in clock ticks."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    f = stat[stat.rindex(")") + 2:].split()
    return int(f[11]) + int(f[12])


def _memory() -> dict:
    info = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        k, v = line.split(":", 1)
        info[k] = int(v.split()[0]) * 1024
    return {"memory_total_bytes": info["MemTotal"], "memory_used_bytes": info["MemTotal"] - info["MemAvailable"],
            "swap_total_bytes": info.get("SwapTotal", 0),
            "swap_used_bytes": info.get("SwapTotal", 0) - info.get("SwapFree", 0)}


def instance_of(target: str | None) -> str:
    """The catalog's largest instance of a target's chip (trn2 -> trn2.48xlarge); the target if none."""
    import trnsim.specs as specs

    if not target:
        return "-"
    names = [i for i in specs.instances() if i.name.startswith(f"{target}.")]
    return max(names, key=lambda i: i.chips).name if names else target


def _instance(p: dict) -> str:
    """The instance a process simulates: the one it names, else its target's."""
    return p.get("instance") or instance_of(p.get("target"))


def snapshot(period_s: float = 0.25) -> dict:
    """One neuron-monitor document: host and per-process vCPU measured over `period_s` of wall time."""
    procs0 = live.processes()
    cpu0, t0 = _cpu_times(), time.monotonic()
    ticks0 = {p["pid"]: _proc_ticks(p["pid"]) for p in procs0}
    time.sleep(period_s)
    cpu1, wall = _cpu_times(), time.monotonic() - t0
    procs = live.processes()  # the newest state, read after the wait
    hz, ncpu = os.sysconf("SC_CLK_TCK"), os.cpu_count() or 1
    delta = [b - a for a, b in zip(cpu0, cpu1)]
    total = sum(delta) or 1
    names = ("user", "nice", "system", "idle", "io_wait", "irq", "soft_irq", "steal")
    runtimes, targets = [], set()
    for p in procs:
        before, after = ticks0.get(p["pid"]), _proc_ticks(p["pid"])
        vcpu = 100 * (after - before) / hz / wall if before is not None and after is not None else 0.0
        util = p.get("utilisation", {})
        targets.add(_instance(p))
        cores = {str(c): {"neuroncore_utilization": round(100 * util.get(str(c), 0.0), 2),
                          "engines": {e: round(100 * v, 2) for e, v in p.get("busy", {}).get(str(c), {}).items()}}
                 for c in p.get("cores", [])}
        runtimes.append({
            "pid": p["pid"], "neuron_runtime_tag": p.get("name", ""), "error": "",
            "command": p.get("command", ""), "instance_type": _instance(p),
            "running": {"kind": p.get("kind"), "name": p.get("name"), "phase": p.get("phase"),
                        "simulated_time_ns": p.get("sim_time_ns")},
            "report": {
                "neuroncore_counters": {"period": wall, "neuroncores_in_use": cores, "error": ""},
                "memory_used": {"period": wall, "neuron_runtime_used_bytes": {
                    "neuron_device": sum(p.get("memory", {}).values()), "usage_breakdown": p.get("memory", {})},
                    "error": ""},
                "neuron_runtime_vcpu_usage": {"period": wall, "vcpu_usage": {"user": round(vcpu, 2)}, "error": ""},
            },
        })
    targets.discard("-")
    return {
        "neuron_runtime_data": runtimes,
        "system_data": {
            "vcpu_usage": {"period": wall, "average_usage": {n: round(100 * d / total, 2) for n, d in zip(names, delta)},
                           "vcpu_count": ncpu, "error": ""},
            "memory_info": {"period": wall, **_memory(), "error": ""},
        },
        "instance_info": {"instance_type": ", ".join(sorted(targets)) or "-",
                          "simulated": True, "error": ""},
        "neuron_hardware_info": {"neuroncores_in_use": sum(len(r["report"]["neuroncore_counters"]["neuroncores_in_use"])
                                                           for r in runtimes), "error": ""},
        "timestamp": time.time(),
    }


@cli.command()
@click.option("--interval", type=click.FloatRange(min=0.05), default=1.0, show_default=True,
              help="Seconds between documents.")
@click.option("--count", type=click.IntRange(min=0), default=0, help="Stop after this many documents (0: run until "
              "interrupted).")
@click.option("--json", "as_json", is_flag=True, help="JSON documents: monitor's only output, accepted as every "
              "command's flag.")
def monitor(interval, count, as_json):
    """Print a JSON document of the simulated devices in use at every interval (like neuron-monitor)."""
    n = 0
    try:
        while True:
            click.echo(json.dumps(snapshot(interval)))
            n += 1
            if count and n >= count:
                return
    except KeyboardInterrupt:
        pass


def device_processes(system: str, device: int, cores_per_device: int) -> list[dict]:
    """The live trnsim processes simulating NeuronCores of `device` on a `system` instance, as `trnsim ls`
    lists them (pid and command line); a process's core ids are numbered from device 0, as in neuron-ls."""
    per = max(cores_per_device, 1)
    return [{"pid": p["pid"], "command": p.get("command", "")} for p in live.processes()
            if _instance(p) == system and any(c // per == device for c in p.get("cores", ()))]


def short_command(cmd: str) -> str:
    """The command line without the interpreter's path: `trnsim profile k.py` rather than `/…/python /…/trnsim …`."""
    words = cmd.split()
    if words and "python" in words[0].rsplit("/", 1)[-1] and len(words) > 1:
        words = words[1:]
    if words:
        words[0] = words[0].rsplit("/", 1)[-1]
    return " ".join(words)

