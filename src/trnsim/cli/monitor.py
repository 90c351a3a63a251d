"""`trnsim monitor`: neuron-monitor's role, a JSON document per interval on stdout, for scripts and dashboards.

Each document follows neuron-monitor's layout and field names (tools/neuron-sys-tools/neuron-monitor-user-guide),
so its companion scripts read it: `neuron_runtime_data` holds one entry per trnsim process that simulates
(its metric groups neuroncore_counters, memory_used with the per-core breakdown, neuron_runtime_vcpu_usage,
execution_stats: the kernel launches since the last document by outcome, the simulated latencies of those
timed, and each core's FLOP/s over them), `system_data` the host's vCPUs, memory and the devices' (zero) ECC counters,
`instance_info` and `neuron_hardware_info` the simulated instance. trnsim's additions (a core's engines, what
a process runs) are extra keys. The figures come from the files the processes publish (trnsim.live) and
from /proc; `trnsim top --json` prints the same document.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import time
from pathlib import Path

import click

from trnsim import live
from trnsim.cli import cli
from trnsim.errors import TrnsimError
from trnsim.specs import DEFAULT_INSTANCE


def _stat() -> tuple[list[int], dict[str, list[int]], int]:
    """/proc/stat: the aggregate jiffies (user, nice, system, idle, iowait, irq, softirq, steal), each vCPU's,
    and the context switches so far."""
    total, per, ctxt = [], {}, 0
    for line in Path("/proc/stat").read_text().splitlines():
        f = line.split()
        if f[0] == "cpu":
            total = [int(x) for x in f[1:9]]
        elif f[0].startswith("cpu"):
            per[f[0][3:]] = [int(x) for x in f[1:9]]
        elif f[0] == "ctxt":
            ctxt = int(f[1])
    return total, per, ctxt


def _proc_ticks(pid: int) -> tuple[int, int] | None:
    """utime and stime of a process, in clock ticks."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    f = stat[stat.rindex(")") + 2:].split()
    return int(f[11]), int(f[12])


def _rss(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


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


# neuron-monitor's metric groups (its user guide): per Neuron application, and system-wide
RUNTIME_GROUPS = ("neuroncore_counters", "memory_used", "neuron_runtime_vcpu_usage", "execution_stats")
SYSTEM_GROUPS = ("vcpu_usage", "memory_info", "neuron_hw_counters")
DEFAULT_PERIOD_S = 5.0  # neuron-monitor's period for a group no configuration times
_USAGE = ("user", "nice", "system", "idle", "io_wait", "irq", "soft_irq")
PERCENTILES = (0, 1, 25, 50, 75, 99, 100)  # latency_stats' percentiles
_seen: dict[tuple, dict] = {}  # per process (pid, start): its cumulative execution figures at the last document


@dataclasses.dataclass
class Config:
    """A neuron-monitor configuration (`-c FILE`): the groups to report, for which runtime tags, how often."""

    period_s: float = DEFAULT_PERIOD_S
    runtimes: list = dataclasses.field(default_factory=lambda: [(re.compile(".*"), set(RUNTIME_GROUPS))])
    system: set = dataclasses.field(default_factory=lambda: set(SYSTEM_GROUPS))

    def groups_for(self, tag: str) -> set[str]:
        out = set()
        for pattern, groups in self.runtimes:
            if pattern.search(tag):
                out |= groups
        return out


class MonitorConfigError(TrnsimError):
    """A neuron-monitor configuration file that cannot be used."""

    exit_code = 2


def _period(value, where: str) -> float:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", str(value))
    if not m or float(m.group(1)) <= 0:
        raise MonitorConfigError(f"{where}: period {value!r} is not a duration like \"1s\" or \"500ms\"")
    return float(m.group(1)) * {"ms": 1e-3, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]


def read_config(path: str) -> Config:
    """neuron-monitor's JSON configuration: "period", "neuron_runtimes" ([{"tag_filter", "period", "metrics":
    [{"type", "period"}]}]), "system_metrics" ([{"type", "period"}]). Reports come at the shortest period."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise MonitorConfigError(f"-c {path}: {e.strerror}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise MonitorConfigError(f"{path}:{e.lineno}: not JSON: {e.msg}") from None
    if not isinstance(doc, dict):
        raise MonitorConfigError(f"{path}: the configuration is a JSON object, not {type(doc).__name__}")
    unknown = set(doc) - {"period", "neuron_runtimes", "system_metrics"}
    if unknown:
        raise MonitorConfigError(f"{path}: unknown key {sorted(unknown)[0]!r}; known: period, neuron_runtimes, "
                                 "system_metrics")
    base = _period(doc.get("period", DEFAULT_PERIOD_S), path)
    periods, runtimes, system = [], [], set()

    def metrics(items, known, where, inherited):
        out = set()
        for i, m in enumerate(items or []):
            kind = m.get("type") if isinstance(m, dict) else None
            if kind not in known:
                raise MonitorConfigError(f"{path}: {where}[{i}]: unknown metric group type {kind!r}; known: "
                                         + ", ".join(known))
            periods.append(_period(m.get("period", inherited), f"{path}: {where}[{i}]"))
            out.add(kind)
        return out

    for i, rt in enumerate(doc.get("neuron_runtimes") or []):
        where = f"neuron_runtimes[{i}]"
        try:
            pattern = re.compile(rt.get("tag_filter", ".*"))
        except re.error as e:
            raise MonitorConfigError(f"{path}: {where}: tag_filter is not a regular expression: {e}") from None
        inherited = rt.get("period", doc.get("period", DEFAULT_PERIOD_S))
        runtimes.append((pattern, metrics(rt.get("metrics"), RUNTIME_GROUPS, f"{where}.metrics", inherited)))
    system = metrics(doc.get("system_metrics"), SYSTEM_GROUPS, "system_metrics", doc.get("period", DEFAULT_PERIOD_S))
    return Config(min(periods, default=base), runtimes, system)


def hardware_info(instance: str) -> dict:
    """neuron_hardware_info of a simulated instance; NEURON_LOGICAL_NC_CONFIG sets the LNC, as on the device."""
    import trnsim.specs as specs

    s = specs.system(instance)
    chip = s.chip
    lnc = logical_nc_config(chip)
    per_device = chip.logical_cores(lnc) if chip.core else 0
    version = chip.core.name.removeprefix("NeuronCore-") if chip.core else ""
    return {"neuron_device_type": chip.name.lower(), "neuroncore_version": version + ("d" if lnc > 1 else ""),
            "neuron_device_count": s.chips, "neuron_device_memory_size": chip.hbm_bytes,
            "neuroncore_per_device_count": per_device, "logical_neuroncore_config": lnc, "error": ""}


def logical_nc_config(chip) -> int:
    """The LNC a Neuron tool reports: NEURON_LOGICAL_NC_CONFIG when set (and valid for the chip), else the default."""
    value = os.environ.get("NEURON_LOGICAL_NC_CONFIG")
    if value is None:
        return chip.lnc_default
    try:
        lnc = int(value)
    except ValueError:
        lnc = -1
    if lnc not in chip.lnc_configs:
        from trnsim.errors import ConfigError

        raise ConfigError(f"NEURON_LOGICAL_NC_CONFIG={value}: {chip.name} takes "
                          f"{' or '.join(map(str, chip.lnc_configs))}")
    return lnc


def _percentiles(values: list[float]) -> dict | None:
    """Nearest-rank percentiles p0..p100 in seconds; None when nothing ran (neuron-monitor's null)."""
    if not values:
        return None
    v = sorted(values)
    return {f"p{q}": v[max(0, math.ceil(q / 100 * len(v)) - 1)] for q in PERCENTILES}


def _period_figures(p: dict) -> dict:
    """What a process did since the last document (since it started, for the first): execution counts by
    outcome and error type, the latencies of the executions timed since, each core's FLOPs and the simulated
    seconds they took. The process publishes running totals; a document reports the difference."""
    key = (p["pid"], p["start"])
    last = _seen.get(key, {})
    if p.get("timed", 0) < last.get("timed", 0):  # not the same totals (a reused state): count from zero
        last = {}
    _seen[key] = {k: p.get(k, {}) for k in ("executions", "errors", "flops", "flop_seconds")} | {
        "timed": p.get("timed", 0)}

    def delta(group, names):
        now, then = p.get(group, {}), last.get(group, {})
        return {n: now.get(n, 0) - then.get(n, 0) for n in names}

    new = [x for x in p.get("latencies", []) if x[0] > last.get("timed", 0)]
    cores = set(p.get("flops", {}))
    return {"executions": delta("executions", live.EXECUTION_OUTCOMES), "errors": delta("errors", live.ERROR_TYPES),
            "total": [x[1] for x in new], "device": [x[2] for x in new],
            "flops": delta("flops", cores), "flop_seconds": delta("flop_seconds", cores)}


def _runtime(p: dict, wall: float, before, groups: set[str]) -> dict:
    """One neuron_runtime_data entry: the process's tag is its pid (neuron-monitor's tag without NEURON_PROCESS_TAG)."""
    hz = os.sysconf("SC_CLK_TCK")
    after = _proc_ticks(p["pid"])
    user, system = ((100 * (a - b) / hz / wall for a, b in zip(after, before)) if before and after else (0.0, 0.0))
    util = p.get("utilisation", {})
    period = _period_figures(p)
    flops, seconds = period["flops"], period["flop_seconds"]
    # flops: FLOP/s over the period's executions on that core, in simulated time (0 when none ran)
    cores = {str(c): {"neuroncore_utilization": round(100 * util.get(str(c), 0.0), 2),
                      "flops": round(flops.get(str(c), 0) / seconds[str(c)]) if seconds.get(str(c)) else 0,
                      "engines": {e: round(100 * v, 2) for e, v in p.get("busy", {}).get(str(c), {}).items()}}
             for c in p.get("cores", [])}
    memory = p.get("memory", {})
    device = sum(memory.values())
    ids = [str(c) for c in p.get("cores", [])] or ["0"]
    # trnsim knows a process's device tensors, not which core holds them: spread evenly over its cores
    per_core = {c: {"constants": 0, "model_code": 0, "model_shared_scratchpad": 0, "runtime_memory": 0,
                    "tensors": device // len(ids) + (device % len(ids) if i == 0 else 0)} for i, c in enumerate(ids)}
    rss = _rss(p["pid"])
    report = {
        "neuroncore_counters": {"period": wall, "neuroncores_in_use": cores, "error": ""},
        "memory_used": {"period": wall, "neuron_runtime_used_bytes": {
            "host": rss, "neuron_device": device,
            "usage_breakdown": {"host": {"application_memory": rss, "constants": 0, "dma_buffers": 0, "tensors": 0},
                                "neuroncore_memory_usage": per_core, "by_memory": memory}},
            "loaded_models": [], "error": ""},
        "neuron_runtime_vcpu_usage": {"period": wall, "vcpu_usage": {"user": round(user, 2),
                                                                     "system": round(system, 2)}, "error": ""},
        "execution_stats": {"period": wall, "error_summary": period["errors"],
                            "execution_summary": period["executions"],
                            "latency_stats": {"total_latency": _percentiles(period["total"]),
                                              "device_latency": _percentiles(period["device"])}, "error": ""},
    }
    return {"pid": p["pid"], "address": "", "neuron_runtime_tag": str(p["pid"]), "error": "",
            "command": p.get("command", ""), "instance_type": _instance(p),
            "running": {"kind": p.get("kind"), "name": p.get("name"), "phase": p.get("phase"),
                        "simulated_time_ns": p.get("sim_time_ns")},
            "report": {k: v for k, v in report.items() if k in groups}}


def _usage(a: list[int], b: list[int]) -> dict:
    delta = [y - x for x, y in zip(a, b)]
    total = sum(delta) or 1
    return {n: round(100 * d / total, 2) for n, d in zip(_USAGE, delta)}


def snapshot(period_s: float = 0.25, config: Config | None = None) -> dict:
    """One neuron-monitor document: host and per-process vCPU measured over `period_s` of wall time."""
    config = config or Config()
    procs0 = live.processes()
    (cpu0, per0, ctxt0), t0 = _stat(), time.monotonic()
    ticks0 = {p["pid"]: _proc_ticks(p["pid"]) for p in procs0}
    time.sleep(period_s)
    (cpu1, per1, ctxt1), wall = _stat(), time.monotonic() - t0
    procs = live.processes()  # the newest state, read after the wait
    for gone in set(_seen) - {(p["pid"], p["start"]) for p in procs}:
        del _seen[gone]
    runtimes = [_runtime(p, wall, ticks0.get(p["pid"]), config.groups_for(str(p["pid"])))
                for p in procs if config.groups_for(str(p["pid"]))]
    instances = {r["instance_type"] for r in runtimes} - {"-"}
    instance = next(iter(instances)) if len(instances) == 1 else DEFAULT_INSTANCE
    hw = hardware_info(instance)
    hw["neuroncores_in_use"] = sum(len(r["report"].get("neuroncore_counters", {}).get("neuroncores_in_use", {}))
                                   for r in runtimes)
    system = {
        "vcpu_usage": {"period": wall, "average_usage": _usage(cpu0, cpu1),
                       "usage_data": {c: _usage(per0[c], v) for c, v in per1.items() if c in per0},
                       "context_switch_count": ctxt1 - ctxt0, "vcpu_count": len(per1) or os.cpu_count() or 1,
                       "error": ""},
        "memory_info": {"period": wall, **_memory(), "error": ""},
        "neuron_hw_counters": {"period": wall, "neuron_devices": [  # a simulated device has no ECC events
            {"neuron_device_index": i, "mem_ecc_corrected": 0, "mem_ecc_uncorrected": 0, "sram_ecc_corrected": 0,
             "sram_ecc_uncorrected": 0} for i in range(hw["neuron_device_count"])], "error": ""},
    }
    return {
        "neuron_runtime_data": runtimes,
        "system_data": {k: v for k, v in system.items() if k in config.system},
        "instance_info": {"instance_name": "", "instance_id": "", "instance_type": ", ".join(sorted(instances)) or "-",
                          "instance_availability_zone": "", "instance_availability_zone_id": "",
                          "instance_region": "", "ami_id": "", "subnet_id": "", "simulated": True, "error": ""},
        "neuron_hardware_info": hw,
        "timestamp": time.time(),
    }


@cli.command()
@click.option("-c", "--config-file", "config_file", type=click.Path(dir_okay=False),
              help="neuron-monitor's JSON configuration: metric groups, tag filters, periods.")
@click.option("--interval", type=click.FloatRange(min=0.05), default=None,
              help="Seconds between documents [1; with -c, the configuration's shortest period].")
@click.option("--count", type=click.IntRange(min=0), default=0, help="Stop after this many documents (0: run until "
              "interrupted).")
@click.option("--json", "as_json", is_flag=True, help="JSON documents: monitor's only output, accepted as every "
              "command's flag.")
def monitor(config_file, interval, count, as_json):
    """Print a JSON document of the simulated devices in use at every interval (like neuron-monitor).

    The document follows neuron-monitor's (its companion scripts, such as the Prometheus exporter, read it):
    neuron_runtime_data per simulating process (tag: its pid), system_data, instance_info,
    neuron_hardware_info of the instance the processes simulate (trn2.48xlarge when none)."""
    config = read_config(config_file) if config_file else Config()
    period = interval or (config.period_s if config_file else 1.0)
    n = 0
    try:
        while True:
            click.echo(json.dumps(snapshot(period, config)))
            n += 1
            if count and n >= count:
                return
    except KeyboardInterrupt:
        pass


def device_processes(system: str, device: int, cores_per_device: int) -> list[dict]:
    """The live trnsim processes simulating NeuronCores of `device` on a `system` instance, as `trnsim ls`
    lists them (pid and command line); a process's core ids are numbered from device 0, as in neuron-ls."""
    per = max(cores_per_device, 1)
    return [{"pid": p["pid"], "command": p.get("command", ""), "neuron_runtime_version": runtime_version()}
            for p in live.processes() if _instance(p) == system and any(c // per == device for c in p.get("cores", ()))]


def runtime_version() -> str:
    """What stands for the Neuron Runtime's version of a simulating process: trnsim's own."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("trnsim")
    except PackageNotFoundError:
        return "NA"


def short_command(cmd: str) -> str:
    """The command line without the interpreter's path: `trnsim profile k.py` rather than `/…/python /…/trnsim …`."""
    words = cmd.split()
    if words and "python" in words[0].rsplit("/", 1)[-1] and len(words) > 1:
        words = words[1:]
    if words:
        words[0] = words[0].rsplit("/", 1)[-1]
    return " ".join(words)

