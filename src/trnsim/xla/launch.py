"""`trnsim torchrun`: start one worker process per rank, as torchrun does, and gather the simulated report.

The values come from real torch-xla on the CPU; the time, memory and compilations from rank 0's
Ledger (all data-parallel ranks run the same graphs). Ranks beyond `max_procs` are not run as
processes (trnsim.xla.worker says how their values are stood in for); their collectives are timed.
"""
from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

from trnsim.errors import ConfigError, TrnsimError
from trnsim.plan import Cluster
from trnsim.xla.report import summarize

MAX_PROCS = 8  # default cap on rank processes: each holds its own torch-xla runtime (~0.5 GB)


class MissingExtraError(TrnsimError):
    """The framework path needs packages that are not installed."""

    exit_code = 2


class RankFailedError(TrnsimError):
    """A rank's script exited with an error."""


def require(*modules: str, extra: str = "torch") -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingExtraError(f"{', '.join(missing)} not installed: this command needs the '{extra}' extra "
                                f"(pip install 'trnsim[{extra}]')")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(script: str, args: list[str] = (), *, nproc_per_node: int = 1, nnodes: int = 1,
             instance: str = "trn1.32xlarge", lnc: int | None = None, max_procs: int = MAX_PROCS,
             batch_size: int | None = None, progress: bool = True, env: dict | None = None) -> dict:
    """Run `script` on a simulated `nnodes` x `instance` with `nproc_per_node` ranks each; return the report."""
    require("torch", "torch_xla")
    if not os.path.isfile(script):
        raise ConfigError(f"no such script: {script}")
    cluster = Cluster(instance, nodes=nnodes, lnc=lnc)
    if not 1 <= nproc_per_node <= cluster.ranks_per_node:
        raise ConfigError(f"--nproc_per_node {nproc_per_node}: {cluster.system.name} has {cluster.ranks_per_node} "
                          f"NeuronCores at LNC {cluster.lnc} (1 to {cluster.ranks_per_node} ranks per instance)")
    world = nproc_per_node * nnodes
    procs = max(1, min(world, max_procs))
    out = tempfile.mkdtemp(prefix="trnsim-torchrun-")
    port = _free_port()
    workers = []
    start = time.perf_counter()
    for rank in range(procs):
        cfg = {"instance": cluster.system.name, "nodes": nnodes, "lnc": cluster.lnc, "world": world, "procs": procs,
               "rank": rank, "nproc_per_node": nproc_per_node, "out": out, "script": script,
               "progress": progress}
        e = dict(os.environ, **(env or {}))
        e.update({"PJRT_DEVICE": "CPU", "TRNSIM_XLA": json.dumps(cfg), "MASTER_ADDR": "127.0.0.1",
                  "MASTER_PORT": str(port), "RANK": str(rank), "WORLD_SIZE": str(procs),
                  "LOCAL_RANK": str(rank % nproc_per_node), "LOCAL_WORLD_SIZE": str(min(procs, nproc_per_node)),
                  "OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONWARNINGS": "ignore"})
        if rank == 0:
            e.update({"XLA_SAVE_TENSORS_FILE": os.path.join(out, "graphs.hlo"), "XLA_SAVE_TENSORS_FMT": "hlo"})
        else:
            e.pop("XLA_SAVE_TENSORS_FILE", None)
        workers.append(subprocess.Popen([sys.executable, "-m", "trnsim.xla.worker", script, *args], env=e))
    codes = _wait(workers)
    wall = time.perf_counter() - start
    path = os.path.join(out, "rank0.json")
    if not os.path.exists(path):
        raise RankFailedError(f"{script}: rank {codes.index(next(c for c in codes if c))} exited with status "
                              f"{next(c for c in codes if c)} before any step was priced" if any(codes) else
                              f"{script}: rank 0 left no record")
    with open(path) as f:
        ledger = json.load(f)
    if ledger.get("error"):
        raise RankFailedError(ledger["error"].split(": ", 1)[1])
    if any(codes):
        bad = next(i for i, c in enumerate(codes) if c)
        raise RankFailedError(f"{script}: rank {bad} exited with status {codes[bad]}")
    return summarize(ledger, cluster, world=world, procs=procs, script=script, wall_s=wall, batch_size=batch_size)


def _wait(workers: list[subprocess.Popen]) -> list[int]:
    """Wait for every rank; when one fails, stop the others (they would wait on it forever)."""
    while True:
        codes = [w.poll() for w in workers]
        if all(c is not None for c in codes):
            return codes
        if any(c not in (None, 0) for c in codes):
            for w in workers:
                if w.poll() is None:
                    w.terminate()
            for w in workers:
                w.wait()
            return [c if c is not None else w.returncode for c, w in zip(codes, workers)]
        time.sleep(0.1)
