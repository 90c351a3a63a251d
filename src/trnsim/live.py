"""Live state of the trnsim processes on this machine: what `trnsim top`, `monitor` and `ls` show.

Every process that simulates writes one small JSON file, `<pid>.json`, under the runtime directory
(`$TRNSIM_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR/trnsim`, else `/tmp/trnsim-<uid>`): what it runs (a
kernel, a graph, a collective), on which NeuronCores, each core's engine busy shares over the last
interval of simulated time, and its device memory. Writes are rate-limited and atomic (write, then
rename); the file goes when the process exits, and readers skip files whose process is gone. There is
no server. This module sits below every layer (standard library only) so that any layer can publish.

    >>> from trnsim import live
    >>> live.publish(kind="collective", name="all_reduce", cores=[0, 1], busy={0: {"DMA": 0.7}})
"""
from __future__ import annotations

import atexit
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

INTERVAL_S = 0.25  # at most this often a process rewrites its file (unless forced)
LISTED_CORES = 4096  # core ids a file lists (the first; cores_total counts them all): more than one instance holds,
# which is what top and monitor show, and a 400,000-chip collective would otherwise write megabytes
_lock = threading.Lock()
_state: dict = {}
_last_write = 0.0
_registered = False


def runtime_dir() -> Path:
    """Where the per-process files live (created on first publish)."""
    if os.environ.get("TRNSIM_RUNTIME_DIR"):
        return Path(os.environ["TRNSIM_RUNTIME_DIR"])
    if os.environ.get("XDG_RUNTIME_DIR"):
        return Path(os.environ["XDG_RUNTIME_DIR"]) / "trnsim"
    return Path(tempfile.gettempdir()) / f"trnsim-{os.getuid()}"


def enabled() -> bool:
    """Publishing is on unless TRNSIM_PUBLISH=0."""
    return os.environ.get("TRNSIM_PUBLISH", "1") != "0"


def _start_ticks(pid: int) -> str | None:
    """The process's start time in clock ticks (field 22 of /proc/PID/stat): tells a reused pid apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()[19]


def _cmdline() -> str:
    try:
        return Path("/proc/self/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return " ".join([sys.executable, *sys.argv])


def publish(kind: str, name: str, *, cores: Iterable[int] | None = None,
            busy: Mapping[int, Mapping[str, float]] | None = None, utilisation: Mapping[int, float] | None = None,
            target: str | None = None, instance: str | None = None, memory: Mapping[str, int] | None = None,
            sim_time_ns: float | None = None, phase: str | None = None, force: bool = False) -> None:
    """Record what this process runs now; written to disk at most every INTERVAL_S unless `force`.

    kind: "kernel", "graph" or "collective"; name: the kernel's (graph's, collective's) name.
    cores: the NeuronCore ids in use. busy: per core, each engine's busy share (0..1) of the last
    interval of simulated time; utilisation: per core, the share of that interval with any engine busy
    (the busiest engine's share when not given). memory: bytes in use per memory ("hbm", "sbuf", "psum").
    Arguments left out keep their last value.
    """
    if not enabled():
        return
    with _lock:
        s = _state
        s.update(kind=kind, name=name)
        for key, value in (("target", target), ("instance", instance), ("phase", phase),
                           ("sim_time_ns", sim_time_ns)):
            if value is not None:
                s[key] = value
        if cores is not None:
            ids = cores if isinstance(cores, range) and cores.step > 0 else sorted(int(c) for c in cores)
            s["cores"], s["cores_total"] = list(ids[:LISTED_CORES]), len(ids)
        if memory is not None:
            s["memory"] = {k: int(v) for k, v in memory.items()}
        if busy is not None:
            s["busy"] = {str(c): {e: round(float(v), 4) for e, v in b.items()} for c, b in busy.items()}
            if utilisation is None:
                utilisation = {c: max(b.values(), default=0.0) for c, b in busy.items()}
        if utilisation is not None:
            s["utilisation"] = {str(c): round(min(1.0, float(v)), 4) for c, v in utilisation.items()}
        if force or time.monotonic() - _last_write >= INTERVAL_S:
            _write()


def due() -> bool:
    """Whether a publish now would reach the file: callers skip computing what only the file shows."""
    return enabled() and time.monotonic() - _last_write >= INTERVAL_S


def idle() -> None:
    """The process finished its work: it stays listed, running nothing, with no utilisation."""
    if _state:
        with _lock:
            _state.update(phase="idle", busy={}, utilisation={})
            _write()


def _write() -> None:
    global _last_write, _registered
    d = runtime_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        pid = os.getpid()
        doc = {"pid": pid, "start": _start_ticks(pid), "command": _cmdline(), "updated": time.time(), **_state}
        tmp = d / f".{pid}.tmp"
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, d / f"{pid}.json")
    except OSError:
        return  # a read-only or full disk must not stop a simulation
    _last_write = time.monotonic()
    if not _registered:
        atexit.register(remove)
        _registered = True


def remove() -> None:
    """Delete this process's file (at exit, or when it stops simulating)."""
    try:
        (runtime_dir() / f"{os.getpid()}.json").unlink()
    except OSError:
        pass


def processes() -> list[dict]:
    """Every live trnsim process's state, by pid; files of processes that are gone are removed."""
    out = []
    d = runtime_dir()
    for f in sorted(d.glob("*.json")) if d.is_dir() else ():
        try:
            doc = json.loads(f.read_text())
            pid = int(doc["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # being replaced, or not ours
        if _start_ticks(pid) != doc.get("start"):
            try:
                f.unlink()  # stale: the process died without cleaning up, or its pid was reused
            except OSError:
                pass
            continue
        out.append(doc)
    return sorted(out, key=lambda p: p["pid"])


def on_cores(ids: Iterable[int]) -> list[dict]:
    """The live processes using any of these NeuronCore ids (for `trnsim ls`'s process column)."""
    want = set(ids)
    return [p for p in processes() if want & set(p.get("cores", ()))]
