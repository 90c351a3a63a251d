"""`trnsim torchrun`: start one worker process per rank, as torchrun does, and gather the simulated report.

The values come from real torch-xla on the CPU; the time, memory and compilations from rank 0's
Ledger (all data-parallel ranks run the same graphs). Ranks beyond `max_procs` are not run as
processes (trnsim.xla.worker says how their values are stood in for); their collectives are timed.
"""
from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from trnsim import flags
from trnsim.errors import ConfigError, TrnsimError
from trnsim.plan import Cluster
from trnsim.xla.report import summarize

MAX_PROCS = 8  # default cap on rank processes: each holds its own torch-xla runtime (~0.5 GB)


class MissingExtraError(TrnsimError):
    """The framework path needs packages that are not installed."""

    exit_code = 2


class RankFailedError(TrnsimError):
    """A rank's script exited with an error."""


class LaunchInterrupted(TrnsimError):
    """The launcher was interrupted (Ctrl-C, SIGTERM): every rank was stopped; exit code 128 + the signal."""

    def __init__(self, signum: int, ranks: int):
        self.exit_code = 128 + signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}: stopped {ranks} rank"
                         f"{'s' if ranks != 1 else ''}")


class _Signal(Exception):
    def __init__(self, signum: int):
        self.signum = signum


STD = {0: (False, False), 1: (True, False), 2: (False, True), 3: (True, True)}  # torchrun's Std: (stdout, stderr)


def std_spec(option: str, spec: str, ranks: int) -> dict[int, int]:
    """torchrun's -r/-t value ("3", or per local rank "0:1,1:2") as {local rank: 0..3}."""
    from trnsim.errors import OptionError

    try:
        if ":" not in spec:
            value = int(spec)
            out = {r: value for r in range(ranks)}
        else:
            out = {r: 0 for r in range(ranks)}
            for part in spec.split(","):
                r, v = part.split(":")
                out[int(r)] = int(v)
    except ValueError:
        raise OptionError(option, f"{spec!r} is neither 0-3 nor LOCAL_RANK:0-3[,...] (1 stdout, 2 stderr, 3 both)") from None
    if any(v not in STD for v in out.values()):
        raise OptionError(option, f"{spec!r}: each value is 0 (none), 1 (stdout), 2 (stderr) or 3 (both)")
    return out


def require(*modules: str, extra: str = "torch") -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingExtraError(f"{', '.join(missing)} not installed: this command needs the '{extra}' extra "
                                f"(pip install 'trnsim[{extra}]')")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(script: str, args: list[str] = (), *, nproc_per_node: int | str = 1, nnodes: int = 1,
             instance: str = "trn1.32xlarge", lnc: int | None = None, max_procs: int = MAX_PROCS,
             batch_size: int | None = None, progress: bool = True, env: dict | None = None,
             log_dir: str | None = None, redirects: str = "0", tee: str = "0",
             local_ranks_filter: set[int] | None = None, run_id: str = "none", quiet_stdout: bool = False,
             trace: str | None = None) -> dict:
    """Run `script` on a simulated `nnodes` x `instance` with `nproc_per_node` ranks each; return the report.

    The ranks' output follows torchrun: `redirects` and `tee` (0 none, 1 stdout, 2 stderr, 3 both; or per
    local rank "0:1,1:2") send it to LOG_DIR/RUN_ID_*/attempt_0/RANK/{stdout,stderr}.log, `tee` to the console
    as well with a "[defaultN]:" prefix; `local_ranks_filter` silences the console output of the other ranks;
    `quiet_stdout` sends the ranks' stdout to stderr, so that stdout carries only the launcher's JSON;
    `trace` is a folder where every rank run writes its timeline (trnsim.xla.timeline)."""
    require("torch", "torch_xla")
    if not os.path.isfile(script):
        raise ConfigError(f"no such script: {script}")
    cluster = Cluster(instance, nodes=nnodes, lnc=lnc)
    if nproc_per_node == "auto":  # torchrun's "auto": every device of the node, here every (logical) NeuronCore
        nproc_per_node = cluster.ranks_per_node
    if not 1 <= nproc_per_node <= cluster.ranks_per_node:
        raise ConfigError(f"--nproc_per_node {nproc_per_node}: {cluster.system.name} has {cluster.ranks_per_node} "
                          f"NeuronCores at LNC {cluster.lnc} (1 to {cluster.ranks_per_node} ranks per instance)")
    world = nproc_per_node * nnodes
    procs = max(1, min(world, max_procs))
    streams = _Streams(procs, nproc_per_node, log_dir, std_spec("--redirects", redirects, procs),
                       std_spec("--tee", tee, procs), local_ranks_filter, run_id, quiet_stdout)
    out = tempfile.mkdtemp(prefix="trnsim-torchrun-")
    port = _free_port()
    workers = []
    start = time.perf_counter()
    for rank in range(procs):
        cfg = {"instance": cluster.system.name, "nodes": nnodes, "lnc": cluster.lnc, "world": world, "procs": procs,
               "rank": rank, "nproc_per_node": nproc_per_node, "out": out, "script": script,
               "progress": progress, "trace": os.path.abspath(trace) if trace else None}
        e = dict(os.environ, **(env or {}))
        e.update({"PJRT_DEVICE": "CPU", flags.XLA.name: json.dumps(cfg), "MASTER_ADDR": "127.0.0.1",
                  "MASTER_PORT": str(port), "RANK": str(rank), "WORLD_SIZE": str(procs),
                  "LOCAL_RANK": str(rank % nproc_per_node), "LOCAL_WORLD_SIZE": str(min(procs, nproc_per_node)),
                  "OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONWARNINGS": "ignore"})
        if rank == 0 or trace:  # the graphs a rank executes, for the rank that prices them
            e.update({"XLA_SAVE_TENSORS_FILE": os.path.join(out, f"graphs{rank or ''}.hlo"),
                      "XLA_SAVE_TENSORS_FMT": "hlo"})
        else:
            e.pop("XLA_SAVE_TENSORS_FILE", None)
        # a session of its own: the terminal's Ctrl-C reaches the launcher alone, which stops every rank
        workers.append(subprocess.Popen([sys.executable, "-m", "trnsim.xla.worker", script, *args], env=e,
                                        start_new_session=True, **streams.popen(rank)))
        streams.started(rank, workers[-1])
    try:
        codes, bad = _wait(workers)
    finally:
        streams.close()
    wall = time.perf_counter() - start
    path = os.path.join(out, "rank0.json")
    if not os.path.exists(path):
        raise RankFailedError(f"{script}: rank {bad} exited with status {codes[bad]} before any step was priced"
                              if bad is not None else f"{script}: rank 0 left no record")
    with open(path) as f:
        ledger = json.load(f)
    if ledger.get("error"):
        raise RankFailedError(ledger["error"].split(": ", 1)[1])
    if bad is not None:
        raise RankFailedError(f"{script}: rank {bad} exited with status {codes[bad]}")
    rep = summarize(ledger, cluster, world=world, procs=procs, script=script, wall_s=wall, batch_size=batch_size)
    if trace:
        rep["traces"] = [os.path.join(trace, f"rank{r}.trace.json") for r in range(procs)]
    return rep


def _wait(workers: list[subprocess.Popen]) -> tuple[list[int], int | None]:
    """Wait for every rank: (exit codes, the rank that failed first or None). When one fails, stop the others
    (they would wait on it forever); the one named is the first to fail by itself, not one stopped here.
    Ctrl-C, SIGTERM or SIGHUP to the launcher stops every rank (SIGTERM, then SIGKILL after a grace), as
    torchrun does."""
    def raise_signal(signum, _frame):
        raise _Signal(signum)

    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            previous[sig] = signal.signal(sig, raise_signal)
    try:
        while True:
            codes = [w.poll() for w in workers]
            failed = next((i for i, c in enumerate(codes) if c not in (None, 0)), None)
            if all(c is not None for c in codes):
                return codes, failed
            if failed is not None:
                _stop(workers)
                return [c if c is not None else w.returncode for c, w in zip(codes, workers)], failed
            time.sleep(0.1)
    except (KeyboardInterrupt, _Signal) as e:
        running = _stop(workers)
        raise LaunchInterrupted(getattr(e, "signum", signal.SIGINT), running) from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _stop(workers: list[subprocess.Popen], grace_s: float = 5.0) -> int:
    """SIGTERM every running rank, SIGKILL those still running after `grace_s`; the number stopped."""
    running = [w for w in workers if w.poll() is None]
    for w in running:
        w.terminate()
    deadline = time.monotonic() + grace_s
    for w in running:
        try:
            w.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            w.kill()
            w.wait()
    return len(running)


class _Streams:
    """Where each rank's stdout and stderr go: inherited, a log file, or a log file and the console."""

    def __init__(self, procs, nproc_per_node, log_dir, redirects, tee, only, run_id, quiet_stdout=False):
        self.local = [r % nproc_per_node for r in range(procs)]
        self.redirects, self.tee, self.only, self.quiet_stdout = redirects, tee, only, quiet_stdout
        self.files, self.threads, self.lock = [], [], threading.Lock()
        wanted = any(redirects.values()) or any(tee.values())
        self.folder = None
        if wanted:
            base = log_dir or tempfile.mkdtemp(prefix="torchelastic_")
            os.makedirs(base, exist_ok=True)
            self.folder = os.path.join(tempfile.mkdtemp(prefix=f"{run_id}_", dir=base), "attempt_0")

    def _mode(self, rank, which):
        local = self.local[rank]
        return STD[self.redirects.get(local, 0)][which], STD[self.tee.get(local, 0)][which]

    def popen(self, rank: int) -> dict:
        kw = {}
        for which, name in ((0, "stdout"), (1, "stderr")):
            redirect, tee = self._mode(rank, which)
            shown = self.only is None or self.local[rank] in self.only
            if tee:
                kw[name] = subprocess.PIPE
            elif redirect:
                kw[name] = self._file(rank, name)
            elif not shown:
                kw[name] = subprocess.DEVNULL
            elif name == "stdout" and self.quiet_stdout:
                kw[name] = 2  # the launcher's stderr
        return kw

    def _file(self, rank, name):
        folder = os.path.join(self.folder, str(self.local[rank]))
        os.makedirs(folder, exist_ok=True)
        f = open(os.path.join(folder, f"{name}.log"), "wb")
        self.files.append(f)
        return f

    def started(self, rank: int, proc: subprocess.Popen) -> None:
        for which, name in ((0, "stdout"), (1, "stderr")):
            pipe = getattr(proc, name)
            if pipe is None or not self._mode(rank, which)[1]:
                continue
            shown = self.only is None or self.local[rank] in self.only
            console = (sys.stdout if which == 0 and not self.quiet_stdout else sys.stderr) if shown else None
            t = threading.Thread(target=self._copy, args=(pipe, self._file(rank, name), console,
                                                          f"[default{self.local[rank]}]:"), daemon=True)
            t.start()
            self.threads.append(t)

    def _copy(self, pipe, file, console, header):
        for line in iter(pipe.readline, b""):
            file.write(line)
            file.flush()
            if console is not None:
                with self.lock:
                    console.write(header + line.decode(errors="replace"))
                    console.flush()
        pipe.close()

    def close(self) -> None:
        for t in self.threads:
            t.join(timeout=5)
        for f in self.files:
            f.close()
