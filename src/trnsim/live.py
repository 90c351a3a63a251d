"""Live state of the trnsim processes on this machine: what `trnsim top`, `monitor` and `ls` show.

Every process that simulates writes one small JSON file, `<pid>.json`, under the runtime directory
(`$TRNSIM_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR/trnsim`, else `/tmp/trnsim-<uid>`): what it runs (a
kernel, a graph, a collective), on which NeuronCores, each core's engine busy shares over the last
interval of simulated time, its device memory, and its executions so far (counts by outcome, the latest
latencies, each core's FLOPs and the simulated seconds they took). Writes are rate-limited and atomic (write, then
rename); the file goes when the process exits, and readers skip files whose process is gone. There is
no server. This module sits below every layer (standard library only) so that any layer can publish.

The directory is shared with nobody: it is made with mode 0700 and used only while it is a real
directory owned by this user that no other user can reach (else `StateDirError`); files are written
0600 to a fresh temporary (O_EXCL, O_NOFOLLOW) renamed into place. Readers trust nothing they read:
only regular files owned by this user, at most MAX_FILE_BYTES, checked field by field against the
schema, text stripped of control characters.

    >>> from trnsim import live
    >>> live.publish(kind="collective", name="all_reduce", cores=[0, 1], busy={0: {"DMA": 0.7}})
"""
from __future__ import annotations

import atexit
import json
import math
import os
import re
import secrets
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from trnsim import flags
from trnsim.errors import TrnsimError

INTERVAL_S = 0.25  # at most this often a process rewrites its file (unless forced)
MAX_FILE_BYTES = 1 << 20  # a state file larger than this is not one trnsim wrote
MAX_CORES = 1 << 16  # NeuronCore ids a reader accepts per process
MAX_TEXT = 4096  # characters kept of a command line or name
LISTED_CORES = 4096  # core ids a file lists (the first; cores_total counts them all): more than one instance holds,
# which is what top and monitor show, and a 400,000-chip collective would otherwise write megabytes
LATENCIES_KEPT = 256  # the latest executions' latencies a file keeps (numbered: a reader takes those it has not seen)
EXECUTION_OUTCOMES = ("completed", "completed_with_err", "completed_with_num_err", "timed_out", "incorrect_input",
                      "failed_to_queue")  # neuron-monitor's execution_summary
ERROR_TYPES = ("generic", "numerical", "transient", "model", "runtime", "hardware")  # its error_summary
_lock = threading.Lock()
_state: dict = {}
_last_write = 0.0
_registered = False
_warned = False


class StateDirError(TrnsimError):
    """The live-state directory is not safely this user's: another user could read or replace its files."""


def runtime_dir() -> Path:
    """Where the per-process files live (created on first publish)."""
    if flags.RUNTIME_DIR.raw():
        return Path(flags.RUNTIME_DIR.raw())
    if os.environ.get("XDG_RUNTIME_DIR"):
        return Path(os.environ["XDG_RUNTIME_DIR"]) / "trnsim"
    return Path(tempfile.gettempdir()) / f"trnsim-{os.getuid()}"


def _checked_dir(create: bool) -> int | None:
    """An open descriptor of the runtime directory once it is verified ours (made 0700 when `create`);
    None when it does not exist. Checked on the open descriptor, so it cannot be swapped after the check."""
    d = runtime_dir()
    if create:
        d.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass
    try:
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as e:  # a symbolic link (ELOOP), a file where the directory should be (ENOTDIR), ...
        raise _refused(d, f"cannot be opened as a directory without following links ({e.strerror})") from None
    st, me = os.fstat(fd), os.geteuid()
    if st.st_uid == me and st.st_mode & 0o077 and not flags.RUNTIME_DIR.raw():
        os.fchmod(fd, 0o700)  # our own default folder, made open by an older trnsim: its files are checked one by one
        st = os.fstat(fd)
    problem = (f"is owned by uid {st.st_uid}, not by you (uid {me})" if st.st_uid != me else
               f"has mode {stat.S_IMODE(st.st_mode):04o}: other users can reach it (0700 needed)"
               if st.st_mode & 0o077 else None)
    if problem:
        os.close(fd)
        raise _refused(d, problem)
    return fd


def _refused(d: Path, problem: str) -> StateDirError:
    return StateDirError(f"live-state directory {d} {problem}; trnsim keeps its live state only in a directory "
                         f"that is yours alone: remove {d} (or `chmod 700` it if it is yours), or set "
                         "TRNSIM_RUNTIME_DIR to a directory of yours with mode 0700")


def enabled() -> bool:
    """Publishing is on unless TRNSIM_PUBLISH=0."""
    return flags.PUBLISH.on()


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


def executed(ok: bool = True, error: str = "generic") -> None:
    """One execution (a kernel launch) ended: counted as "completed", or as "completed_with_err" with its error
    type (one of ERROR_TYPES), as neuron-monitor's execution_stats counts them."""
    if not enabled():
        return
    if error not in ERROR_TYPES:
        raise ValueError(f"error type {error!r} is not one of {', '.join(ERROR_TYPES)}")
    with _lock:
        _count("executions", "completed" if ok else "completed_with_err")
        if not ok:
            _count("errors", error)
        if time.monotonic() - _last_write >= INTERVAL_S:
            _write()


def timed(total_ns: float, device_ns: float, flops: Mapping[int, float]) -> None:
    """An execution's simulated latency (total: as the runtime measures it, start-up and tear-down included;
    device: its instructions' span) and the FLOPs each of its cores ran in that total."""
    if not enabled():
        return
    with _lock:
        n = _state["timed"] = _state.get("timed", 0) + 1
        kept = _state.setdefault("latencies", [])
        kept.append([n, total_ns * 1e-9, device_ns * 1e-9])
        del kept[:-LATENCIES_KEPT]
        for core, f in flops.items():
            _count("flops", str(core), float(f))
            _count("flop_seconds", str(core), total_ns * 1e-9)
        if time.monotonic() - _last_write >= INTERVAL_S:
            _write()


def _count(group: str, key: str, by: float = 1) -> None:
    counts = _state.setdefault(group, {})
    counts[key] = counts.get(key, 0) + by


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
    global _last_write, _registered, _warned
    try:
        dfd = _checked_dir(create=True)
    except StateDirError as e:  # a neighbour's squatted directory must not stop a simulation either
        if not _warned:
            print(f"trnsim: live state not published: {e}", file=sys.stderr)
            _warned = True
        _last_write = time.monotonic()
        return
    except OSError:
        return  # a read-only or full disk must not stop a simulation
    if dfd is None:
        return
    try:
        pid = os.getpid()
        doc = {"pid": pid, "start": _start_ticks(pid), "command": _cmdline(), "updated": time.time(), **_state}
        tmp = f".{pid}.{secrets.token_hex(8)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dfd)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps(doc))
            os.replace(tmp, f"{pid}.json", src_dir_fd=dfd, dst_dir_fd=dfd)
        except OSError:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            raise
    except OSError:
        return
    finally:
        os.close(dfd)
    _last_write = time.monotonic()
    if not _registered:
        atexit.register(remove)
        _registered = True


def remove() -> None:
    """Delete this process's file (at exit, or when it stops simulating)."""
    try:
        dfd = _checked_dir(create=False)
    except (StateDirError, OSError):
        return
    if dfd is None:
        return
    try:
        os.unlink(f"{os.getpid()}.json", dir_fd=dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


# Control characters (C0, DEL, C1) and the bidirectional overrides: a state file's text reaches a terminal.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def clean_text(value: object) -> str | None:
    """`value` as printable text (control characters dropped, at most MAX_TEXT characters); None if not text."""
    return _UNPRINTABLE.sub("", value)[:MAX_TEXT] if isinstance(value, str) else None


def _number(value: object, lo: float = 0.0, hi: float = math.inf) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and lo <= value <= hi
    return value if ok else None


def _shares(value: object) -> dict | None:
    """{name: share in 0..1}, names cleaned; None if anything is not."""
    if not isinstance(value, dict) or len(value) > MAX_CORES:
        return None
    out = {clean_text(k): _number(v, 0.0, 1.0) for k, v in value.items()}
    return None if None in out.values() else out


def valid_state(doc: object) -> dict | None:
    """A state document as `publish` writes it, every field checked and its text cleaned; None if it is not one."""
    if not isinstance(doc, dict):
        return None
    pid, start = doc.get("pid"), doc.get("start")
    if not (isinstance(pid, int) and not isinstance(pid, bool) and 0 < pid < 1 << 31
            and isinstance(start, str) and start.isascii() and start.isdigit()):
        return None
    out = {"pid": pid, "start": start}
    for key in ("command", "kind", "name", "target", "instance", "phase"):
        if key in doc:
            if (text := clean_text(doc[key])) is None:
                return None
            out[key] = text
    for key in ("updated", "sim_time_ns", "timed"):
        if key in doc:
            if _number(doc[key]) is None:
                return None
            out[key] = doc[key]
    if "cores" in doc:
        cores = doc["cores"]
        if not (isinstance(cores, list) and len(cores) <= MAX_CORES
                and all(_number(c, 0, 1 << 31) is not None and isinstance(c, int) for c in cores)):
            return None
        out["cores"] = cores
    if "memory" in doc:
        mem = doc["memory"]
        if not (isinstance(mem, dict) and len(mem) <= 16 and all(
                isinstance(v, int) and _number(v, 0, 1 << 62) is not None for v in mem.values())):
            return None
        out["memory"] = {clean_text(k): v for k, v in mem.items()}
    for key, names in (("executions", EXECUTION_OUTCOMES), ("errors", ERROR_TYPES), ("flops", None),
                       ("flop_seconds", None)):
        if key in doc:
            counts = doc[key]
            if not (isinstance(counts, dict) and len(counts) <= MAX_CORES and all(
                    (k in names if names else k.isascii() and k.isdigit()) and _number(v) is not None
                    for k, v in counts.items())):
                return None
            out[key] = dict(counts)
    if "latencies" in doc:
        kept = doc["latencies"]
        if not (isinstance(kept, list) and len(kept) <= LATENCIES_KEPT and all(
                isinstance(x, list) and len(x) == 3 and all(_number(v) is not None for v in x) for x in kept)):
            return None
        out["latencies"] = kept
    if "utilisation" in doc:
        if (util := _shares(doc["utilisation"])) is None:
            return None
        out["utilisation"] = util
    if "busy" in doc:
        busy = doc["busy"]
        if not isinstance(busy, dict) or len(busy) > MAX_CORES:
            return None
        out["busy"] = {clean_text(c): _shares(b) for c, b in busy.items()}
        if None in out["busy"].values():
            return None
    return out


def _read_own(name: str, dfd: int) -> bytes | None:
    """The bytes of `name` if it is a regular file of this user's under MAX_FILE_BYTES (never blocks on a FIFO)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_size > MAX_FILE_BYTES:
            return None
        data = os.read(fd, MAX_FILE_BYTES + 1)
        return data if len(data) <= MAX_FILE_BYTES else None
    except OSError:
        return None
    finally:
        os.close(fd)


def processes() -> list[dict]:
    """Every live trnsim process's state, by pid, validated (`valid_state`); files of processes that are gone
    are removed. Raises StateDirError when the directory is not safely this user's."""
    dfd = _checked_dir(create=False)
    if dfd is None:
        return []
    out = []
    try:
        for name in sorted(os.listdir(dfd)):
            if not name.endswith(".json") or (data := _read_own(name, dfd)) is None:
                continue
            try:
                doc = valid_state(json.loads(data))
            except (ValueError, RecursionError):
                continue  # being replaced, or not ours
            if doc is None:
                continue
            if _start_ticks(doc["pid"]) != doc["start"]:
                try:
                    os.unlink(name, dir_fd=dfd)  # stale: the process died without cleaning up, or its pid was reused
                except OSError:
                    pass
                continue
            out.append(doc)
    finally:
        os.close(dfd)
    return sorted(out, key=lambda p: p["pid"])

